"""Schema evolution of stored state: what an encoding is, and which changes of it a restart may make.

The **encoding** of a stateful component's namespaces is its key and value serializer (Storm's
``keySerializerClass``/``keyClass``, ``valueSerializerClass``/``valueClass``; default ``json``) and
the value type it declares with ``weir.state.value.type`` (default ``any``). A type is
``"any"``, ``"int"``, ``"float"``, ``"str"``, ``"bool"``, ``"bytes"``, or a record
``{"record": {field: type, or {"type": type, "default": value}}}``.

Rules (:func:`check_change`), each with its id for error messages:

* **S1** the key serializer and the value serializer may not change (stored bytes would not decode);
  rewrite the values first with ``weir state convert``;
* **K1** the declared key type may not change (keys are routed to tasks and found by their bytes);
* **V1** a value type may stay the same, or become ``any``;
* **V2** ``int`` may widen to ``float`` (every stored int reads as the same float); no other scalar
  change is allowed (``float`` → ``int`` would lose the fraction, ``str`` ↔ numbers would not decode);
* **R1** a record may gain a field only with a ``default`` (stored records lack it);
* **R2** a record may not lose a field (the code that wrote it may still be needed to read old values);
* **R3** a field's type follows V1/V2 recursively; a scalar may not become a record or back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from weir.errors import ConfigError

__all__ = ["SCALARS", "VALUE_TYPE_KEY", "Encoding", "EvolutionError", "check_change", "conforms", "parse_type"]

SCALARS = ("any", "int", "float", "str", "bool", "bytes")
VALUE_TYPE_KEY = "weir.state.value.type"


class EvolutionError(ConfigError):
    """A restart changes a namespace's encoding in a way the rules do not allow."""


def parse_type(spec: Any, where: str) -> Any:
    """Validate a type spec (a JSON string is parsed); the normalised spec."""
    if isinstance(spec, str) and spec.strip().startswith("{"):
        try:
            spec = json.loads(spec)
        except ValueError as exc:
            msg = f"{where}: {spec!r} is not valid JSON ({exc})"
            raise ConfigError(msg) from exc
    if spec is None:
        return "any"
    if isinstance(spec, str):
        if spec not in SCALARS:
            msg = f"{where}: unknown type {spec!r}; use one of {', '.join(SCALARS)} or {{'record': {{...}}}}"
            raise ConfigError(msg)
        return spec
    if isinstance(spec, Mapping) and set(spec) == {"record"} and isinstance(spec["record"], Mapping):
        fields: dict[str, Any] = {}
        for name, f in spec["record"].items():
            if isinstance(f, Mapping) and "type" in f:
                fields[str(name)] = {
                    "type": parse_type(f["type"], f"{where}.{name}"),
                    **({"default": f["default"]} if "default" in f else {}),
                }
            else:
                fields[str(name)] = {"type": parse_type(f, f"{where}.{name}")}
        return {"record": fields}
    msg = f"{where}: a type is one of {', '.join(SCALARS)} or {{'record': {{field: type}}}}, got {spec!r}"
    raise ConfigError(msg)


@dataclass(frozen=True)
class Encoding:
    """How a component's namespaces store keys and values."""

    key_serializer: str = "json"
    value_serializer: str = "json"
    key_type: Any = "any"
    value_type: Any = "any"

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return {
            "key_serializer": self.key_serializer,
            "value_serializer": self.value_serializer,
            "key_type": self.key_type,
            "value_type": self.value_type,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Encoding:
        """Parse the stored form."""
        return cls(
            str(d.get("key_serializer", "json")),
            str(d.get("value_serializer", "json")),
            d.get("key_type", "any"),
            d.get("value_type", "any"),
        )


def _show(t: Any) -> str:
    return json.dumps(t, sort_keys=True) if not isinstance(t, str) else t


def _type_change(old: Any, new: Any, path: str) -> str | None:
    """Why ``old`` → ``new`` is not allowed (the rule and what), or None."""
    if old == new or new == "any":
        return None
    if isinstance(old, str) and isinstance(new, str):
        if old == "int" and new == "float":
            return None
        return f"rule V2: {path} may not change from {old} to {new} (only int may widen to float)"
    if isinstance(old, str) or isinstance(new, str):
        return f"rule R3: {path} may not change from {_show(old)} to {_show(new)} (a scalar and a record)"
    of, nf = old["record"], new["record"]
    for name in of:
        if name not in nf:
            return f"rule R2: {path} may not lose field {name!r}"
    for name, f in nf.items():
        if name not in of:
            if "default" not in f:
                return f"rule R1: {path} gains field {name!r} without a default (stored records lack it)"
            continue
        why = _type_change(of[name]["type"], f["type"], f"{path}.{name}")
        if why is not None:
            return why
    return None


def check_change(old: Encoding, new: Encoding, where: str) -> None:
    """Raise :class:`EvolutionError` naming ``where``, both encodings and the rule, when not allowed."""
    why: str | None = None
    if old.key_serializer != new.key_serializer:
        why = f"rule S1: the key serializer may not change ({old.key_serializer} -> {new.key_serializer})"
    elif old.value_serializer != new.value_serializer:
        why = (
            f"rule S1: the value serializer may not change ({old.value_serializer} -> {new.value_serializer}); "
            "rewrite the stored values first with `weir state convert`"
        )
    elif old.key_type != new.key_type:
        why = f"rule K1: the key type may not change ({_show(old.key_type)} -> {_show(new.key_type)})"
    else:
        why = _type_change(old.value_type, new.value_type, "the value")
        if why is not None:
            why += "; rewrite the stored values with `weir state convert --value-type ...`"
    if why is not None:
        msg = (
            f"{where}: stored with {_show(old.to_json())}, now {_show(new.to_json())}: {why} "
            "(the rules: docs/state.md, 'Schema evolution')"
        )
        raise EvolutionError(msg)


def conforms(value: Any, spec: Any) -> bool:
    """Whether ``value`` (decoded) is of type ``spec`` (a record may hold fields it does not declare)."""
    if spec == "any":
        return True
    if spec == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if spec == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if spec == "str":
        return isinstance(value, str)
    if spec == "bool":
        return isinstance(value, bool)
    if spec == "bytes":
        return isinstance(value, (bytes, bytearray))
    if isinstance(spec, Mapping) and isinstance(value, Mapping):
        return all(name in value and conforms(value[name], f["type"]) for name, f in spec["record"].items())
    return False
