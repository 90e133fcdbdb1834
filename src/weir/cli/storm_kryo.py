"""Read the bytes Apache Storm's ``DefaultStateSerializer`` (Kryo 5) writes, without running Java.

Storm's stateful bolts keep their ``KeyValueState`` through ``DefaultStateEncoder``: a key is
``kryo.writeClassAndObject(key)``; a value is ``writeClassAndObject(Optional.of(bytes))`` where
``bytes`` is ``writeClassAndObject(value)`` (``Optional.empty()`` is a deleted key's tombstone).
Kryo runs with registration not required and references off, so what it writes is a small,
closed grammar that this module reads — it never executes or unpickles anything:

* a class: varint ``0`` = null, ``1`` = a class by name (varint name id, then the name the first
  time it occurs in this object), ``n ≥ 2`` = registered class ``n - 2``: 0 ``int``, 1 ``String``,
  2 ``float``, 3 ``boolean``, 4 ``byte``, 5 ``char``, 6 ``short``, 7 ``long``, 8 ``double``,
  9 ``Optional`` (Storm registers it in every state serializer);
* ``Integer`` / ``Long``: zig-zag varints; ``Double`` / ``Float``: little-endian IEEE bits;
  ``Boolean``: one byte; ``String``: ASCII with the last byte's high bit set, or a flagged varint
  char count + 1 followed by Kryo's UTF-8 of UTF-16 units; ``byte[]``: varint length + 1, bytes;
* ``ArrayList``, ``LinkedList``, ``HashSet``, ``LinkedHashSet``, ``TreeSet`` (natural order) and
  the other ``java.util`` collections: flagged varint "all one class" + length + 1, then the
  elements (one class written once, or each with its class); ``HashMap``, ``LinkedHashMap``,
  ``TreeMap`` (natural order), ``ConcurrentHashMap``: varint size + 1, then class-and-object keys
  and values.

Anything else — a user class written field by field, a custom registration
(``topology.state.kryo.register``, ``keyClass``/``valueClass``), a custom comparator — raises
:class:`KryoUnsupported`, naming what was found, so the caller can refuse or skip that row.

Apache Storm 1.1.0 and earlier stored the same bytes Base64-encoded (seed 003's migration note):
:func:`storm_bytes` undoes that form.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from typing import Any

__all__ = ["TOMBSTONE", "KryoUnsupported", "decode_object", "decode_state_value", "storm_bytes"]

#: the value Storm's ``DefaultStateEncoder`` writes for a deleted key: ``Optional.empty()``
TOMBSTONE = b"\x0b\x00"

_BASE64 = re.compile(rb"\A(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?\Z")

_LISTS = {"java.util.ArrayList", "java.util.LinkedList", "java.util.Vector", "java.util.ArrayDeque"}
_SETS = {"java.util.HashSet", "java.util.LinkedHashSet", "java.util.concurrent.CopyOnWriteArraySet"}
_MAPS = {
    "java.util.HashMap",
    "java.util.LinkedHashMap",
    "java.util.Hashtable",
    "java.util.concurrent.ConcurrentHashMap",
}
_SORTED = {"java.util.TreeSet": "set", "java.util.TreeMap": "map", "java.util.concurrent.ConcurrentSkipListMap": "map"}

_INT, _STRING, _FLOAT, _BOOLEAN, _BYTE, _CHAR, _SHORT, _LONG, _DOUBLE, _OPTIONAL = range(10)
_NAMES = ["Integer", "String", "Float", "Boolean", "Byte", "Character", "Short", "Long", "Double", "Optional"]


class KryoUnsupported(ValueError):
    """The bytes hold something this reader does not decode (named in the message)."""


class _Reader:
    """One top-level Kryo object: its bytes, a position and the class names met so far."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.names: dict[int, str] = {}

    def byte(self) -> int:
        if self.pos >= len(self.data):
            msg = f"the bytes end early (at offset {self.pos} of {len(self.data)})"
            raise KryoUnsupported(msg)
        b = self.data[self.pos]
        self.pos += 1
        return b

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            msg = f"the bytes end early (need {n} at offset {self.pos} of {len(self.data)})"
            raise KryoUnsupported(msg)
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def varint(self, *, positive: bool = True, limit: int = 5) -> int:
        result = 0
        for i in range(limit):
            b = self.byte()
            if i == 8:  # a varlong's ninth byte carries 8 bits
                result |= b << 56
                break
            result |= (b & 0x7F) << (7 * i)
            if not b & 0x80:
                break
        return result if positive else (result >> 1) ^ -(result & 1)

    def varint_flag(self) -> tuple[bool, int]:
        b = self.byte()
        flag = bool(b & 0x80)
        result = b & 0x3F
        if b & 0x40:
            shift = 6
            for _ in range(4):
                b = self.byte()
                result |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
        return flag, result

    def string(self) -> str | None:
        b = self.data[self.pos] if self.pos < len(self.data) else self.byte()
        if not b & 0x80:  # ASCII, the last byte flagged
            start = self.pos
            while not self.byte() & 0x80:
                pass
            raw = bytearray(self.data[start : self.pos])
            raw[-1] &= 0x7F
            return raw.decode("ascii")
        _, n = self.varint_flag()
        if n == 0:
            return None
        units: list[int] = []
        for _ in range(n - 1):
            c = self.byte()
            if c >> 4 in (12, 13):
                c = ((c & 0x1F) << 6) | (self.byte() & 0x3F)
            elif c >> 4 == 14:
                c = ((c & 0x0F) << 12) | ((self.byte() & 0x3F) << 6) | (self.byte() & 0x3F)
            units.append(c)
        return struct.pack(f"<{len(units)}H", *units).decode("utf-16-le", "surrogatepass")

    def klass(self) -> int | str | None:
        """A registered class id (0..9), a class name, or None (a null object)."""
        n = self.varint()
        if n == 0:
            return None
        if n == 1:
            name_id = self.varint()
            if name_id in self.names:
                return self.names[name_id]
            name = self.string()
            if name is None:
                msg = f"a null class name at offset {self.pos}"
                raise KryoUnsupported(msg)
            self.names[name_id] = name
            return name
        rid = n - 2
        if rid > _OPTIONAL:
            msg = (
                f"a class registered with Kryo id {rid}: a registration of the topology "
                "(topology.state.kryo.register, keyClass/valueClass), which only its Java class can read"
            )
            raise KryoUnsupported(msg)
        return rid

    def object(self) -> Any:
        return self.body(self.klass())

    def body(self, cls: int | str | None) -> Any:
        if cls is None:
            return None
        if isinstance(cls, int):
            return self._registered(cls)
        if cls == "[B":
            n = self.varint()
            return None if n == 0 else self.take(n - 1)
        if cls in _LISTS:
            return self._collection(cls, list)
        if cls in _SETS:
            return self._collection(cls, set)
        if cls in _MAPS:
            return self._map(cls)
        if cls in _SORTED:
            return self._collection(cls, set) if _SORTED[cls] == "set" else self._map(cls)
        msg = f"an object of class {cls} (written field by field by Kryo; only its Java class can read it)"
        raise KryoUnsupported(msg)

    def _registered(self, rid: int) -> Any:
        if rid == _STRING:
            return self.string()
        if rid in (_INT, _LONG, _SHORT):
            if rid == _SHORT:
                return struct.unpack("<h", self.take(2))[0]
            return self.varint(positive=False, limit=5 if rid == _INT else 9)
        if rid == _DOUBLE:
            return struct.unpack("<d", self.take(8))[0]
        if rid == _FLOAT:
            return struct.unpack("<f", self.take(4))[0]
        if rid == _BOOLEAN:
            return self.byte() == 1
        if rid == _BYTE:
            return struct.unpack("<b", self.take(1))[0]
        if rid == _CHAR:
            return chr(struct.unpack("<H", self.take(2))[0])
        return _Optional(self.object())

    def _header(self, cls: str) -> None:
        # a sorted collection's header (written after its length): its comparator, null for natural order
        if cls in _SORTED and self.klass() is not None:
            msg = f"a {cls} with its own comparator"
            raise KryoUnsupported(msg)

    def _element(self, cls: int | str, can_be_null: bool) -> Any:
        # String, byte[], collections and maps accept null themselves; the boxed numbers get a marker
        if can_be_null and isinstance(cls, int) and cls != _STRING and self.byte() == 0:
            return None
        return self.body(cls)

    def _collection(self, cls: str, kind: type) -> Any:
        same, n = self.varint_flag()
        if n == 0:
            return None
        self._header(cls)
        items: list[Any] = []
        if n > 1:
            if same:
                elem = self.klass()
                if elem is None:
                    items = [None] * (n - 1)
                else:
                    nulls = self.byte() == 1
                    items = [self._element(elem, nulls) for _ in range(n - 1)]
            else:
                items = [self.object() for _ in range(n - 1)]
        if kind is list:
            return items
        try:
            return set(items)
        except TypeError as exc:
            msg = f"a {cls} whose elements Python cannot hold in a set ({exc})"
            raise KryoUnsupported(msg) from exc

    def _map(self, cls: str) -> dict[Any, Any] | None:
        n = self.varint()
        if n == 0:
            return None
        self._header(cls)
        out: dict[Any, Any] = {}
        for _ in range(n - 1):
            k = self.object()
            try:
                out[k] = self.object()
            except TypeError as exc:
                msg = f"a {cls} with a key Python cannot use as a dict key ({type(k).__name__})"
                raise KryoUnsupported(msg) from exc
        return out


class _Optional:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, set):
        return frozenset(value)
    return value


def decode_object(data: bytes) -> Any:
    """The object of ``writeClassAndObject`` bytes: a Storm state key, or a value's inner bytes.

    Java ``String`` → ``str``; ``Integer``, ``Long``, ``Short``, ``Byte`` → ``int``; ``Double``,
    ``Float`` → ``float``; ``Boolean`` → ``bool``; ``Character`` → ``str``; ``byte[]`` → ``bytes``;
    lists → ``list``; sets → ``set``; maps → ``dict``. :class:`KryoUnsupported` for anything else,
    or for bytes left over after the object.
    """
    r = _Reader(bytes(data))
    obj = r.object()
    if isinstance(obj, _Optional):
        msg = "an Optional where a key or a value was expected"
        raise KryoUnsupported(msg)
    if r.pos != len(r.data):
        msg = f"{len(r.data) - r.pos} bytes after the object (read {r.pos} of {len(r.data)})"
        raise KryoUnsupported(msg)
    return obj


def decode_state_value(data: bytes) -> tuple[bool, Any]:
    """``(present, value)`` of a value ``DefaultStateEncoder`` wrote; ``(False, None)`` for a tombstone."""
    r = _Reader(bytes(data))
    outer = r.object()
    if not isinstance(outer, _Optional):
        msg = (
            f"a {type(outer).__name__} where Storm's DefaultStateEncoder writes Optional<byte[]> "
            "(a valueSerializerClass of the topology's own?)"
        )
        raise KryoUnsupported(msg)
    if r.pos != len(r.data):
        msg = f"{len(r.data) - r.pos} bytes after the Optional (read {r.pos} of {len(r.data)})"
        raise KryoUnsupported(msg)
    if outer.value is None:
        return False, None
    if not isinstance(outer.value, bytes):
        msg = f"Optional of {type(outer.value).__name__} where Storm writes Optional<byte[]>"
        raise KryoUnsupported(msg)
    return True, decode_object(outer.value)


def storm_bytes(stored: bytes) -> tuple[bytes, bool]:
    """``(binary, was_base64)``: the Kryo bytes of a stored field or value.

    Storm ≥ 1.1.1 stores Kryo's bytes as they are; their first byte is a class id (below 0x20).
    Storm ≤ 1.1.0 stored them Base64-encoded, which is ASCII text: that form is decoded here.
    """
    data = bytes(stored)
    if data and data[0] >= 0x20 and _BASE64.match(data):
        try:
            return base64.b64decode(data, validate=True), True
        except binascii.Error:
            pass
    return data, False


def hashable(value: Any) -> Any:
    """``value`` with lists as tuples and sets as frozensets (a decoded key usable in a dict)."""
    return _hashable(value)
