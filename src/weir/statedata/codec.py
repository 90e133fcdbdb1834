"""How state read as data is decoded: the topology's serializers (never pickle), then compact JSON text."""

from __future__ import annotations

import base64
import json
from typing import Any

from weir.errors import ConfigError
from weir.state.serializers import PickleSerializer, Serializer, serializer_for

__all__ = ["serializer", "to_json"]


def _plain(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(obj)).decode("ascii")}
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    msg = f"a value of type {type(obj).__qualname__} has no JSON form"
    raise TypeError(msg)


def to_json(obj: Any) -> str:
    """Compact JSON text of a decoded key or value (bytes as ``{"$bytes": base64}``, tuples as lists)."""
    return json.dumps(obj, default=_plain, ensure_ascii=False, separators=(",", ":"))


def serializer(spec: str | None, what: str) -> Serializer:
    """The serializer named ``spec`` (default JSON); ``pickle`` is refused: nothing read is unpickled."""
    ser = serializer_for(spec, what=what)
    if isinstance(ser, PickleSerializer):
        msg = (
            f"{what}: 'pickle' values are never unpickled by weir's readers (anyone who can write the store "
            "could run code in them); read them with the topology's own code, or store JSON"
        )
        raise ConfigError(msg)
    return ser
