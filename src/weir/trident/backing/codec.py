"""How backing maps write keys and cells: compact JSON that any client can read.

- A **key** (the tuple of a group's grouping values) is written as the JSON array of its values,
  e.g. ``("man", 3)`` → ``["man",3]``. The encoding is deterministic (compact separators, no
  whitespace), so the same key always gives the same stored key, in every process.
- A **cell** is what a map state stores under a key: an :class:`~weir.trident.state.OpaqueValue`
  is written in its list form ``[curr_txid, curr, prev]``, a
  :class:`~weir.trident.state.TransactionalValue` as ``[txid, val]``, and a non-transactional
  value as itself. Reading turns the list form back into the cell object.

JSON is the one of :class:`weir.state.JsonSerializer`: ``bytes`` become ``{"$bytes": "<base64>"}``,
tuples become lists, and NaN, infinities and non-JSON objects are refused with a
:class:`~weir.errors.SerializationError` that names the key and the store.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from weir.errors import SerializationError
from weir.state.serializers import JsonSerializer
from weir.trident.state import Key, OpaqueValue, StateType, TransactionalValue

__all__ = [
    "chunked",
    "decode_cell",
    "decode_json",
    "encode_cell",
    "encode_cell_text",
    "encode_json",
    "encode_key",
    "to_cell",
    "to_stored",
]

_JSON = JsonSerializer()

_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_surrogates(text: str) -> str:
    """JSON text with each lone surrogate written as a JSON unicode escape (valid UTF-8, same JSON value).

    Such a character can only stand inside a JSON string literal, where the escape means the same
    thing; every JSON decoder (Python's included) reads it back as the same character.
    """
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


_CELL_FORM = {
    StateType.OPAQUE: "OpaqueValue cells (or their [curr_txid, curr, prev] list form)",
    StateType.TRANSACTIONAL: "TransactionalValue cells (or their [txid, val] list form)",
}


def encode_json(obj: Any, *, what: str) -> bytes:
    """Compact UTF-8 JSON of ``obj``; :class:`SerializationError` naming ``what`` if impossible."""
    try:
        return _JSON.serialize(obj)
    except SerializationError as exc:
        msg = f"{what}: {exc}"
        raise SerializationError(msg) from exc


def decode_json(data: bytes | str, *, what: str) -> Any:
    """Decode JSON written by :func:`encode_json`."""
    try:
        if isinstance(data, str):
            return _JSON.deserialize_text(data)
        return _JSON.deserialize(data)
    except SerializationError as exc:
        msg = f"{what}: {exc}"
        raise SerializationError(msg) from exc


def encode_key(key: Key, *, where: str) -> str:
    """The stored form of ``key``: the compact JSON array of its values.

    Raises
    ------
    SerializationError
        If a value of the key has no JSON form (e.g. a ``set`` or a ``datetime``).
    """
    if len(key) == 1:  # the usual key: one grouping value (the same bytes as the general path)
        v = key[0]
        t = type(v)
        if t is str and v.isprintable() and '"' not in v and "\\" not in v:
            return f'["{v}"]'
        if t is int:
            return f"[{v}]"
    try:
        data = _JSON.serialize(list(key))
    except SerializationError as exc:
        msg = (
            f"{where}: key {key!r} cannot be stored ({exc}); grouping values of a Trident map key "
            "must be str, int, float, bool, None, bytes or lists of those"
        )
        raise SerializationError(msg) from exc
    # a lone surrogate (from a decoded byte string, say) is not UTF-8: stores that keep text refuse
    # it, so it is written as its JSON escape, the same stored key in every process
    return _escape_surrogates(data.decode("utf-8", "surrogatepass"))


def to_stored(cell: Any, state_type: StateType, key: Key, *, where: str) -> Any:
    """``cell`` in the plain (JSON-ready) form stored for a map of ``state_type``.

    Opaque and transactional cells become their ``to_list()`` form (a list in that form is
    accepted as is); non-transactional values and ``None`` are stored unchanged.

    Raises
    ------
    SerializationError
        If an opaque/transactional store is given something that is not such a cell.
    """
    if cell is None or state_type is StateType.NON_TRANSACTIONAL:
        return cell
    if state_type is StateType.OPAQUE:
        if isinstance(cell, OpaqueValue):
            return cell.to_list()
        if isinstance(cell, (list, tuple)) and len(cell) == 3:
            return OpaqueValue.from_list(cell).to_list()
    elif isinstance(cell, TransactionalValue):
        return cell.to_list()
    elif isinstance(cell, (list, tuple)) and len(cell) == 2:
        return TransactionalValue.from_list(cell).to_list()
    msg = (
        f"{where}: key {key!r}: cannot store {cell!r} ({type(cell).__name__}) in a "
        f"{state_type.value} backing map, which holds {_CELL_FORM[state_type]}; build the map state "
        "of the same type over it (OpaqueMap for opaque, TransactionalMap for transactional)"
    )
    raise SerializationError(msg)


def to_cell(stored: Any, state_type: StateType, key: Key, *, where: str) -> Any:
    """The cell object of a stored plain form (inverse of :func:`to_stored`).

    Raises
    ------
    SerializationError
        If the stored data is not a cell of ``state_type`` (the store was written by another kind
        of map, or by another program).
    """
    if stored is None or state_type is StateType.NON_TRANSACTIONAL:
        return stored
    try:
        if isinstance(stored, list):
            if state_type is StateType.OPAQUE:
                return OpaqueValue.from_list(stored)
            return TransactionalValue.from_list(stored)
    except SerializationError as exc:
        msg = f"{where}: key {key!r}: {exc}; was it written by another kind of map state?"
        raise SerializationError(msg) from exc
    msg = (
        f"{where}: key {key!r}: stored data {stored!r} is not one of the {_CELL_FORM[state_type]} a "
        f"{state_type.value} map stores; was it written by another kind of map state? Give each map "
        "state its own table / key prefix"
    )
    raise SerializationError(msg)


def encode_cell(cell: Any, state_type: StateType, key: Key, *, where: str) -> bytes:
    """JSON bytes of ``cell`` as stored by a map of ``state_type``."""
    try:
        return _JSON.serialize(to_stored(cell, state_type, key, where=where))
    except SerializationError as exc:
        msg = f"{where}: value of key {key!r}: {exc}"
        raise SerializationError(msg) from exc


def _scalar_text(x: Any) -> str | None:
    """The JSON text of an int, ``None`` or plain printable str; ``None`` for anything else."""
    t = type(x)
    if t is int:
        return str(x)
    if x is None:
        return "null"
    if t is str and x.isprintable() and '"' not in x and "\\" not in x:
        return f'"{x}"'
    return None


def encode_cell_text(cell: Any, state_type: StateType, key: Key, *, where: str) -> str:
    """:func:`encode_cell` as text (what a ``TEXT`` column stores).

    The usual cells — an :class:`~weir.trident.state.OpaqueValue` or
    :class:`~weir.trident.state.TransactionalValue` of ints, ``None`` or plain text — are written
    directly; the text is the same as :func:`encode_cell` gives, for every cell.
    """
    t = type(cell)
    if t is OpaqueValue and state_type is StateType.OPAQUE:
        txid = cell.curr_txid
        if txid is None or type(txid) is int:
            curr, prev = _scalar_text(cell.curr), _scalar_text(cell.prev)
            if curr is not None and prev is not None:
                return f"[{'null' if txid is None else txid},{curr},{prev}]"
    elif t is TransactionalValue and state_type is StateType.TRANSACTIONAL:
        txid = cell.txid
        if txid is None or type(txid) is int:
            val = _scalar_text(cell.val)
            if val is not None:
                return f"[{'null' if txid is None else txid},{val}]"
    return encode_cell(cell, state_type, key, where=where).decode("utf-8", "surrogatepass")


def decode_cell(data: bytes | str | None, state_type: StateType, key: Key, *, where: str) -> Any:
    """The cell decoded from stored JSON (``None`` when ``data`` is ``None``)."""
    if data is None:
        return None
    try:
        stored = _JSON.deserialize_text(data) if isinstance(data, str) else _JSON.deserialize(data)
    except SerializationError as exc:
        msg = f"{where}: value of key {key!r}: {exc}"
        raise SerializationError(msg) from exc
    if type(stored) is list:  # the usual cells, read without the checks' layers
        n = len(stored)
        if n == 3 and state_type is StateType.OPAQUE:
            t = stored[0]
            if t is None or type(t) is int:
                return OpaqueValue(t, stored[1], stored[2])
        elif n == 2 and state_type is StateType.TRANSACTIONAL:
            t = stored[0]
            if t is None or type(t) is int:
                return TransactionalValue(t, stored[1])
    return to_cell(stored, state_type, key, where=where)


def chunked(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """``items`` cut into consecutive slices of at most ``size``."""
    return [items[i : i + size] for i in range(0, len(items), size)]
