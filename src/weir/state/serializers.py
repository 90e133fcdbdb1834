"""Serializers for keys and values.

The default, :class:`JsonSerializer`, writes compact UTF-8 JSON, so a dashboard in any language can
read a count straight out of Redis or PostgreSQL. ``bytes`` are written as ``{"$bytes": "<base64>"}``
and tuples as lists. :class:`PickleSerializer` handles any Python object, but only when chosen
explicitly (``valueSerializerClass: "pickle"``). Typed serializers (``str``, ``int``, ``float``,
``bytes``) follow Storm's ``keyClass`` / ``valueClass`` and write the plain value.
"""

from __future__ import annotations

import base64
import json
import math
import pickle
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from weir.errors import SerializationError

__all__ = [
    "BytesSerializer",
    "FloatSerializer",
    "IntSerializer",
    "JsonSerializer",
    "PickleSerializer",
    "Serializer",
    "StrSerializer",
    "serializer_for",
]


@runtime_checkable
class Serializer(Protocol):
    """Turns an object into bytes and back."""

    def serialize(self, obj: Any) -> bytes:
        """Encode ``obj``; raise :class:`~weir.errors.SerializationError` if it cannot."""
        ...

    def deserialize(self, data: bytes) -> Any:
        """Decode bytes written by :meth:`serialize`."""
        ...


def _check_json(obj: Any, path: str) -> Any:
    """Convert ``obj`` to JSON-ready data, refusing anything that would not round-trip."""
    if obj is None or isinstance(obj, (bool, str, int)):
        return obj
    if isinstance(obj, float):
        if math.isnan(obj) or math.isinf(obj):
            msg = f"{path}: float {obj!r} has no JSON form"
            raise SerializationError(msg)
        return obj
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(obj)).decode("ascii")}
    if isinstance(obj, (list, tuple)):
        return [_check_json(x, f"{path}[{i}]") for i, x in enumerate(obj)]
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                msg = f"{path}: dict key {k!r} is a {type(k).__name__}; the JSON serializer needs str keys"
                raise SerializationError(msg)
            out[k] = _check_json(v, f"{path}.{k}")
        return out
    msg = f"{path}: value of type {type(obj).__module__}.{type(obj).__qualname__} is not serializable as JSON"
    raise SerializationError(msg)


def _revive(obj: Any) -> Any:
    if isinstance(obj, dict) and len(obj) == 1 and "$bytes" in obj:
        return base64.b64decode(obj["$bytes"])
    return obj


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
#: the encoder of flat lists of scalars: a NaN/infinity raises ValueError (then the checked path names it)
_FLAT_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_FLAT_TYPES = frozenset({int, str, float, bool, type(None)})
_DECODER = json.JSONDecoder(object_hook=_revive)
#: the decoder's C scanner (an instance attribute set by ``JSONDecoder.__init__``, absent from the stubs)
_SCAN: Callable[[str, int], tuple[Any, int]] = vars(_DECODER)["scan_once"]


class JsonSerializer(Serializer):
    """Compact, cross-language JSON (the default)."""

    name = "json"

    def serialize(self, obj: Any) -> bytes:
        """Encode ``obj`` as compact UTF-8 JSON."""
        t = type(obj)
        if t is int:
            return str(obj).encode()
        if t is str:
            # fast path: printable text without quotes or backslashes needs no escaping
            text: str = obj
            if text.isprintable() and '"' not in text and "\\" not in text:
                return b'"' + text.encode("utf-8", "surrogatepass") + b'"'
            return _ENCODER.encode(text).encode("utf-8", "surrogatepass")
        if t is list or t is tuple:
            # fast paths: a flat list of ints, None and plain text (a Trident cell such as
            # [txid, count, prev]) is joined directly; other flat lists of JSON scalars need no conversion
            parts = []
            for x in obj:
                tx = type(x)
                if tx is int:
                    parts.append(str(x))
                elif x is None:
                    parts.append("null")
                elif tx is str and x.isprintable() and '"' not in x and "\\" not in x:
                    parts.append('"' + x + '"')
                else:
                    break
            else:
                return ("[" + ",".join(parts) + "]").encode("utf-8", "surrogatepass")
            flat = _FLAT_TYPES
            for x in obj:
                if type(x) not in flat:
                    break
            else:
                try:
                    return _FLAT_ENCODER.encode(obj).encode("utf-8", "surrogatepass")
                except ValueError:
                    pass  # NaN or infinity: the checked path below names it
        return _ENCODER.encode(_check_json(obj, "value")).encode("utf-8", "surrogatepass")

    def deserialize(self, data: bytes) -> Any:
        """Decode JSON written by :meth:`serialize`."""
        try:
            if data[:1].isdigit() and data.isdigit():
                return int(data)
            return _DECODER.decode(bytes(data).decode("utf-8", "surrogatepass"))
        except (ValueError, UnicodeDecodeError) as exc:
            msg = f"stored data is not valid JSON ({exc}); was it written with another serializer?"
            raise SerializationError(msg) from exc

    def deserialize_text(self, text: str) -> Any:
        """Decode JSON already read as text (a store's ``TEXT`` column), as :meth:`deserialize` would."""
        try:
            try:
                obj, end = _SCAN(text, 0)  # the C scanner, without decode()'s Python layers
                if end == len(text):
                    return obj
            except StopIteration:
                pass
            return _DECODER.decode(text)  # surrounding whitespace, or the error message
        except ValueError as exc:
            msg = f"stored data is not valid JSON ({exc}); was it written with another serializer?"
            raise SerializationError(msg) from exc


class PickleSerializer(Serializer):
    """Python pickle: any picklable object, Python readers only. Opt-in."""

    name = "pickle"

    def serialize(self, obj: Any) -> bytes:
        """Pickle ``obj`` with the highest protocol."""
        try:
            return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            msg = f"value of type {type(obj).__qualname__} cannot be pickled: {exc}"
            raise SerializationError(msg) from exc

    def deserialize(self, data: bytes) -> Any:
        """Unpickle ``data``."""
        try:
            return pickle.loads(data)  # noqa: S301 - explicit opt-in
        except Exception as exc:
            msg = f"stored data cannot be unpickled: {exc}"
            raise SerializationError(msg) from exc


class StrSerializer(Serializer):
    """Plain UTF-8 text (``keyClass: "str"``)."""

    name = "str"

    def serialize(self, obj: Any) -> bytes:
        """Encode a ``str`` as UTF-8."""
        if not isinstance(obj, str):
            msg = f"expected str, got {type(obj).__qualname__}"
            raise SerializationError(msg)
        return obj.encode("utf-8")

    def deserialize(self, data: bytes) -> Any:
        """Decode UTF-8."""
        return bytes(data).decode("utf-8")


class IntSerializer(Serializer):
    """Decimal ASCII integers (``valueClass: "int"``): readable by anything, ``INCRBY``-compatible."""

    name = "int"

    def serialize(self, obj: Any) -> bytes:
        """Encode an ``int`` in decimal."""
        if type(obj) is not int:
            msg = f"expected int, got {type(obj).__qualname__}"
            raise SerializationError(msg)
        return str(obj).encode()

    def deserialize(self, data: bytes) -> Any:
        """Decode a decimal integer."""
        try:
            return int(data)
        except ValueError as exc:
            msg = f"stored data {bytes(data)[:40]!r} is not a decimal integer"
            raise SerializationError(msg) from exc


class FloatSerializer(Serializer):
    """Decimal floats (``valueClass: "float"``)."""

    name = "float"

    def serialize(self, obj: Any) -> bytes:
        """Encode a number as its ``repr``."""
        if not isinstance(obj, (int, float)) or isinstance(obj, bool):
            msg = f"expected float, got {type(obj).__qualname__}"
            raise SerializationError(msg)
        return repr(float(obj)).encode()

    def deserialize(self, data: bytes) -> Any:
        """Decode a float."""
        try:
            return float(data)
        except ValueError as exc:
            msg = f"stored data {bytes(data)[:40]!r} is not a float"
            raise SerializationError(msg) from exc


class BytesSerializer(Serializer):
    """Raw bytes, unchanged (``valueClass: "bytes"``)."""

    name = "bytes"

    def serialize(self, obj: Any) -> bytes:
        """Return ``obj`` as bytes."""
        if not isinstance(obj, (bytes, bytearray, memoryview)):
            msg = f"expected bytes, got {type(obj).__qualname__}"
            raise SerializationError(msg)
        return bytes(obj)

    def deserialize(self, data: bytes) -> Any:
        """Return the bytes."""
        return bytes(data)


_BY_NAME: dict[str, type] = {
    "json": JsonSerializer,
    "pickle": PickleSerializer,
    "str": StrSerializer,
    "string": StrSerializer,
    "java.lang.String": StrSerializer,
    "int": IntSerializer,
    "java.lang.Long": IntSerializer,
    "java.lang.Integer": IntSerializer,
    "float": FloatSerializer,
    "java.lang.Double": FloatSerializer,
    "bytes": BytesSerializer,
}


def serializer_for(spec: str | None, *, what: str) -> Serializer:
    """Resolve a serializer from a short name (``json``, ``pickle``, ``str``, …) or a dotted path.

    ``what`` names the configuration key for error messages.
    """
    from weir.errors import ConfigError

    if spec is None or spec == "":
        return JsonSerializer()
    if spec in _BY_NAME:
        return _BY_NAME[spec]()  # type: ignore[no-any-return]
    from weir._util import import_object, java_class_name

    if java_class_name(spec):
        msg = (
            f"{what}: {spec!r} is a Java class, not available in weir, which runs Python; use one of "
            f"{', '.join(sorted(_BY_NAME))} or a dotted path to a Python serializer"
        )
        raise ConfigError(msg)
    try:
        obj = import_object(spec)
    except ConfigError as exc:
        msg = f"{what}: {exc} (short names: {', '.join(sorted(_BY_NAME))})"
        raise ConfigError(msg) from exc
    # checked before anything is instantiated: a class name in a configuration is not a licence to
    # construct any importable object
    if not isinstance(obj, type) or Serializer not in obj.__mro__:
        has = (
            isinstance(obj, type)
            and callable(getattr(obj, "serialize", None))
            and callable(getattr(obj, "deserialize", None))
        )
        hint = "" if has else " (it has no serialize(obj) -> bytes and deserialize(bytes) methods)"
        msg = (
            f"{what}: {spec!r} is not a subclass of weir.state.Serializer{hint}; a serializer named by class "
            "must subclass weir.state.Serializer (class MySerializer(Serializer): ...), or use a short name: "
            f"{', '.join(sorted(_BY_NAME))}"
        )
        raise ConfigError(msg)
    try:
        inst = obj()
    except Exception as exc:
        msg = f"{what}: cannot create {spec!r}: {type(exc).__name__}: {exc}"
        raise ConfigError(msg) from exc
    return inst  # type: ignore[no-any-return]
