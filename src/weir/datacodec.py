"""A data-only binary encoding for weir's own records: decoding it never runs code.

Every value is one tag byte and a body. Scalars: ``n`` None, ``T``/``F`` booleans, ``i`` int
(decimal digits), ``f`` float (``repr``), ``s`` str (UTF-8), ``y`` bytes, ``D`` datetime and ``a``
date (ISO 8601), ``c`` Decimal. Containers hold their items as ``u32 length · encoded item``:
``t`` tuple, ``l`` list, ``d`` dict (key, value, key, value, ...), ``e`` set, ``z`` frozenset.
Equal values give equal bytes (dict items in insertion order, set members sorted by their encoding).

The tag ``p`` marks a pickle. Only :func:`encode` with ``allow_pickle=True`` writes it (for values a
user's own process hands to Spark, never for anything a store or a source holds), and only
:func:`decode` with ``allow_pickle=True`` reads it. Every reader of stored data decodes with the
default, so a pickle payload planted in a store raises :class:`~weir.errors.SerializationError`
naming the record, and nothing runs.

Example
-------
>>> decode(encode({"n": (1, "a", None)}), what="example")
{'n': (1, 'a', None)}
"""

from __future__ import annotations

import datetime as _dt
import decimal
import pickle
from typing import Any

from weir.errors import SerializationError

__all__ = ["PICKLE_PREFIXES", "DataCodecError", "decode", "encode", "looks_like_pickle"]

#: first bytes of a pickle of protocol 2 or newer, and the ``p`` tag of this encoding
PICKLE_PREFIXES = (b"\x80", b"p")

_SCALARS = (str, int, float, bool, bytes)
_CONTAINERS: dict[type, bytes] = {tuple: b"t", list: b"l", set: b"e", frozenset: b"z"}
_FROM_TAG: dict[bytes, type] = {b"t": tuple, b"l": list, b"e": set, b"z": frozenset}


class DataCodecError(SerializationError):
    """Data that is not in weir's data-only encoding (or holds a pickle where none is allowed)."""


def looks_like_pickle(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` starts like a pickle (protocol ≥ 2) — for clearer error messages."""
    return bytes(data[:1]) == b"\x80"


def encode(value: Any, *, allow_pickle: bool = False, what: str = "value") -> bytes:
    """Encode ``value``; without ``allow_pickle`` a non-data value raises :class:`DataCodecError`."""
    out = bytearray()
    _enc(value, out, allow_pickle, what)
    return bytes(out)


def _frame(out: bytearray, tag: bytes, items: list[bytes]) -> None:
    out += tag
    for b in items:
        out += len(b).to_bytes(4, "big")
        out += b


def _enc(value: Any, out: bytearray, allow_pickle: bool, what: str) -> None:
    t = type(value)
    if value is None:
        out += b"n"
    elif t is bool:
        out += b"T" if value else b"F"
    elif t is str:
        out += b"s" + value.encode("utf-8", "surrogatepass")
    elif t is int:
        out += b"i" + str(value).encode()
    elif t is float:
        out += b"f" + repr(value).encode()
    elif t is bytes or t is bytearray:  # Spark hands binary columns over as bytearray
        out += b"y" + value
    elif t is _dt.datetime:
        out += b"D" + value.isoformat().encode()
    elif t is _dt.date:
        out += b"a" + value.isoformat().encode()
    elif t is decimal.Decimal:
        out += b"c" + str(value).encode()
    elif t in _CONTAINERS:
        items = [encode(v, allow_pickle=allow_pickle, what=what) for v in value]
        _frame(out, _CONTAINERS[t], sorted(items) if t is set or t is frozenset else items)
    elif t is dict:
        pairs: list[bytes] = []
        for k, v in value.items():
            pairs.append(encode(k, allow_pickle=allow_pickle, what=what))
            pairs.append(encode(v, allow_pickle=allow_pickle, what=what))
        _frame(out, b"d", pairs)
    elif allow_pickle:
        try:
            out += b"p" + pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            msg = f"{what}: cannot encode a value of type {t.__qualname__}: {exc}"
            raise DataCodecError(msg) from exc
    else:
        msg = (
            f"{what}: a value of type {t.__qualname__} is not plain data; weir stores only None, bool, int, "
            "float, str, bytes, datetime, date, Decimal and tuples, lists, dicts and sets of them"
        )
        raise DataCodecError(msg)


def decode(data: bytes | bytearray | memoryview, *, allow_pickle: bool = False, what: str = "record") -> Any:
    """Decode what :func:`encode` wrote; a pickle (unless allowed) or damage raises :class:`DataCodecError`."""
    b = bytes(data)
    try:
        return _dec(b, allow_pickle, what)
    except DataCodecError:
        raise
    except (ValueError, IndexError, decimal.InvalidOperation, UnicodeDecodeError, RecursionError) as exc:
        msg = f"{what}: not weir's data encoding ({type(exc).__name__}: {exc}); first bytes {b[:20]!r}"
        raise DataCodecError(msg) from exc


def _items(b: bytes) -> list[bytes]:
    out = []
    i = 1
    while i < len(b):
        if i + 4 > len(b):
            msg = "truncated item length"
            raise ValueError(msg)
        n = int.from_bytes(b[i : i + 4], "big")
        if i + 4 + n > len(b):
            msg = "truncated item"
            raise ValueError(msg)
        out.append(b[i + 4 : i + 4 + n])
        i += 4 + n
    return out


def _dec(b: bytes, allow_pickle: bool, what: str) -> Any:  # noqa: PLR0911 - one branch per tag
    tag = b[:1]
    body = b[1:]
    if tag == b"n" and not body:
        return None
    if tag == b"T" and not body:
        return True
    if tag == b"F" and not body:
        return False
    if tag == b"s":
        return body.decode("utf-8", "surrogatepass")
    if tag == b"i":
        return int(body)
    if tag == b"f":
        return float(body)
    if tag == b"y":
        return body
    if tag == b"D":
        return _dt.datetime.fromisoformat(body.decode("ascii"))
    if tag == b"a":
        return _dt.date.fromisoformat(body.decode("ascii"))
    if tag == b"c":
        return decimal.Decimal(body.decode("ascii"))
    if tag in _FROM_TAG:
        return _FROM_TAG[tag](_dec(x, allow_pickle, what) for x in _items(b))
    if tag == b"d":
        parts = [_dec(x, allow_pickle, what) for x in _items(b)]
        if len(parts) % 2:
            msg = "a dict with an odd number of items"
            raise ValueError(msg)
        return dict(zip(parts[::2], parts[1::2], strict=True))
    if tag == b"p" or tag == b"\x80":
        if allow_pickle and tag == b"p":
            return pickle.loads(body)  # noqa: S301 - only for values the user's own process encoded
        msg = (
            f"{what} holds a pickle payload; weir never unpickles data read from a store or a source, so it "
            "was not loaded (nothing ran). Someone with write access to the store wrote it, or it was "
            "written by an older weir: inspect it with `weir state get`, restore the store from a backup, "
            "or delete the record"
        )
        raise DataCodecError(msg)
    msg = f"{what}: not weir's data encoding (unknown tag {tag!r}; first bytes {b[:20]!r})"
    raise DataCodecError(msg)
