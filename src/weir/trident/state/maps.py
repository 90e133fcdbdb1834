"""The three fault-tolerant map states over a :class:`~weir.trident.state.BackingMap`.

Each is a :class:`~weir.trident.state.MapState` that remembers the txid given to
``begin_commit`` and stores cells that make a replayed batch idempotent (seed 004):

===================== ============================== ==========================================
class                 stored cell                    a replay of the stored txid …
===================== ============================== ==========================================
OpaqueMap             OpaqueValue(txid, curr, prev)  … is recomputed from ``prev``
TransactionalMap      TransactionalValue(txid, val)  … is skipped (the value already has it)
NonTransactionalMap   the value                      … is applied again (no guarantee)
===================== ============================== ==========================================

Every ``multi_update`` / ``multi_get`` does at most one backing ``multi_get`` and every
``multi_update`` / ``multi_put`` at most one backing ``multi_put``, with duplicate keys folded.

Within one batch (between ``begin_commit`` and ``commit``) the opaque and transactional maps
remember the cells they wrote, as Storm's ``CachedBatchReadsMap`` does: a second update of a key in
the same batch builds on the first one's result instead of being taken for a replay.

Limits, inherited from Trident's design: a transactional map assumes one update per key per
batch (a replay skips every update of a key whose cell already has the batch's txid); an opaque map
recomputes only the keys a replay contains, so a key written by a failed attempt and missing from
the replay keeps that attempt's value.
"""

from __future__ import annotations

import contextlib
import functools
import gc
from abc import abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from weir.errors import ConfigError, SerializationError, StateError
from weir.trident.state.base import StateType
from weir.trident.state.map_state import (
    BackingMap,
    Key,
    KeyList,
    MapState,
    as_keys,
    check_backing,
    check_same_length,
)
from weir.trident.state.updaters import ReplaceUpdater, ValueUpdater
from weir.trident.state.values import OpaqueValue, TransactionalValue

__all__ = ["GC_PAUSE_KEYS", "NonTransactionalMap", "OpaqueMap", "TransactionalMap", "gc_paused"]

T = TypeVar("T")
C = TypeVar("C")
F = TypeVar("F", bound=Callable[..., Any])

#: keys in one call from which the cyclic garbage collector waits until the call returns
GC_PAUSE_KEYS = 2000


@contextlib.contextmanager
def gc_paused(n: int) -> Iterator[None]:
    """Pause the cyclic garbage collector for a bulk step over ``n`` keys (from :data:`GC_PAUSE_KEYS`).

    A bulk step builds a few objects per key (key tuples, updaters, cells, rows) that all live
    until it ends; with the collector on, each of them is scanned again by every collection the
    allocations trigger (about a quarter of the CPU of a 100k-key opaque update). They hold no
    reference cycles, so waiting loses nothing. The collector is switched back on when the step
    ends or raises, and left alone if it was already off.
    """
    if n < GC_PAUSE_KEYS or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _bulk(method: F) -> F:
    """Run ``method(self, keys, ...)`` under :func:`gc_paused` ``(len(keys))``."""

    @functools.wraps(method)
    def wrapper(self: Any, keys: Sequence[Any], *args: Any) -> Any:
        if not isinstance(keys, (list, tuple)) or len(keys) < GC_PAUSE_KEYS or not gc.isenabled():
            return method(self, keys, *args)
        with gc_paused(len(keys)):
            return method(self, keys, *args)

    return wrapper  # type: ignore[return-value]


def _check_txid(txid: object, op: str) -> int | None:
    if txid is None or (isinstance(txid, int) and not isinstance(txid, bool)):
        return txid
    msg = f"{op}: txid must be an int or None, got {txid!r} ({type(txid).__name__})"
    raise ConfigError(msg)


def _fetch(backing: BackingMap[Any], keys: list[Key]) -> list[Any]:
    vals = backing.multi_get(keys)
    if len(vals) != len(keys):
        msg = (
            f"backing map {backing!r} returned {len(vals)} values for {len(keys)} keys; "
            "multi_get must return one value (or None) per key, in key order"
        )
        raise StateError(msg)
    return list(vals)


class _TxidMap(MapState[T], Generic[T, C]):
    """Shared machinery: current txid, the cells written in this batch, one get / one put."""

    state_type: StateType

    def __init__(self, backing: BackingMap[C]) -> None:
        check_backing(backing, type(self).__name__)
        self._backing = backing
        self._curr_txid: int | None = None
        self._written: dict[Key, C] = {}
        self._expire_upto: int | None = None

    @property
    def backing(self) -> BackingMap[C]:
        """The wrapped backing map."""
        return self._backing

    @property
    def current_txid(self) -> int | None:
        """Txid of the open batch, ``None`` outside ``begin_commit`` … ``commit``."""
        return self._curr_txid

    def begin_commit(self, txid: int | None) -> None:
        """Start the updates of batch ``txid`` (a replay begins again with the same txid)."""
        self._curr_txid = _check_txid(txid, f"{type(self).__name__}.begin_commit")
        self._written.clear()

    def expire_through(self, txid: int | None) -> None:
        """Treat stored cells last written at or before ``txid`` as absent (``None``: nothing expires).

        weir's TTL for Trident map states (``weir.state.ttl.ms``) sets it per batch to the greatest
        txid whose batch time plus the TTL is not after the open batch's time.
        """
        self._expire_upto = _check_txid(txid, f"{type(self).__name__}.expire_through")

    @staticmethod
    def _cell_txid(cell: C) -> int | None:
        """The txid that wrote ``cell``."""
        return getattr(cell, "curr_txid", getattr(cell, "txid", None))

    def commit(self, txid: int | None) -> None:
        """End the updates of batch ``txid``.

        Raises
        ------
        StateError
            If a different batch is open.
        """
        txid = _check_txid(txid, f"{type(self).__name__}.commit")
        if self._curr_txid is not None and txid != self._curr_txid:
            msg = (
                f"{type(self).__name__}.commit({txid}) but the open batch is txid {self._curr_txid}; "
                "call commit with the txid given to begin_commit"
            )
            raise StateError(msg)
        self._curr_txid = None
        self._written.clear()

    # -- helpers ---------------------------------------------------------------------------
    @abstractmethod
    def _coerce(self, stored: Any, key: Key) -> C | None:
        """``stored`` as a cell (``None`` stays ``None``); raises SerializationError otherwise."""

    def _load(self, keys: list[Key]) -> dict[Key, tuple[C | None, bool]]:
        """Cell of each distinct key and whether this batch wrote it; one backing read for the rest."""
        loaded: dict[Key, tuple[C | None, bool]] = {}
        misses: list[Key] = KeyList()
        for key in keys:
            if key in loaded:
                continue
            if key in self._written:
                loaded[key] = (self._written[key], True)
            else:
                loaded[key] = (None, False)
                misses.append(key)
        if misses:
            upto = self._expire_upto
            for key, stored in zip(misses, _fetch(self._backing, misses), strict=True):
                cell = self._coerce(stored, key)
                if upto is not None and cell is not None and (self._cell_txid(cell) or 0) <= upto:
                    cell = None  # expired: as if never written (an opaque prev becomes None too)
                loaded[key] = (cell, False)
        return loaded

    def _store(self, cells: dict[Key, C]) -> None:
        if cells:
            self._backing.multi_put(KeyList(cells), list(cells.values()))
            self._written.update(cells)


class OpaqueMap(_TxidMap[T, OpaqueValue[T]]):
    """Opaque-transactional map state: stores ``OpaqueValue(txid, curr, prev)`` cells.

    Exactly-once with transactional and with opaque spouts: a replay of the stored txid is
    recomputed from ``prev``, so whatever an earlier attempt of the batch wrote is discarded.

    Examples
    --------
    >>> from weir.trident.state import MemoryBackingMap, CombinerValueUpdater
    >>> class Sum:
    ...     def combine(self, a, b): return a + b
    >>> m = OpaqueMap.build(MemoryBackingMap())
    >>> m.begin_commit(1); m.multi_update([["dog"]], [CombinerValueUpdater(Sum(), 2)]); m.commit(1)
    [2]
    >>> m.begin_commit(2); m.multi_update([["dog"]], [CombinerValueUpdater(Sum(), 5)])
    [7]
    >>> m.begin_commit(2); m.multi_update([["dog"]], [CombinerValueUpdater(Sum(), 1)]); m.commit(2)
    [3]
    """

    state_type = StateType.OPAQUE

    @classmethod
    def build(cls, backing: BackingMap[OpaqueValue[Any]]) -> OpaqueMap[Any]:
        """An opaque map state over ``backing``."""
        return cls(backing)

    def _coerce(self, stored: Any, key: Key) -> OpaqueValue[T] | None:
        if stored is None or isinstance(stored, OpaqueValue):
            return stored
        if isinstance(stored, (list, tuple)):
            try:
                return OpaqueValue.from_list(stored)
            except SerializationError as exc:
                msg = f"OpaqueMap key {key!r}: {exc}"
                raise SerializationError(msg) from exc
        msg = (
            f"OpaqueMap key {key!r}: the backing map returned {stored!r} ({type(stored).__name__}); "
            "an opaque map stores OpaqueValue cells (or their [curr_txid, curr, prev] list form). "
            "Was this store written by a transactional or non-transactional map?"
        )
        raise SerializationError(msg)

    def _base(self, cell: OpaqueValue[T], cached: bool, key: Key) -> T | None:
        """The value the open batch builds on."""
        if cached:
            return cell.curr
        try:
            return cell.get(self._curr_txid)
        except StateError as exc:
            msg = f"OpaqueMap key {key!r}: {exc}"
            raise StateError(msg) from exc

    @_bulk
    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[T | None]:
        """Values as the open batch sees them (before its own earlier attempts), else current."""
        ks = as_keys(keys)
        loaded = self._load(ks)
        out: list[T | None] = []
        for key in ks:
            cell, cached = loaded[key]
            out.append(None if cell is None else self._base(cell, cached, key))
        return out

    @_bulk
    def multi_update(self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater[T]]) -> list[T | None]:
        """Update from the stored value (``prev`` on a replay); one backing get, one backing put."""
        ks = as_keys(keys)
        check_same_length(ks, updaters, what="updaters", op="OpaqueMap.multi_update")
        work = self._load(ks)
        changed: dict[Key, OpaqueValue[T]] = {}
        out: list[T | None] = []
        txid = self._curr_txid
        for key, updater in zip(ks, updaters, strict=True):
            cell, cached = work[key]
            if cell is None:
                new_val = updater.update(None)
                new_cell: OpaqueValue[T] = OpaqueValue(txid, new_val)
            else:
                new_val = updater.update(self._base(cell, cached, key))
                # _base already checked the order, so update cannot raise here
                new_cell = cell.update(txid, new_val)
            work[key] = (new_cell, True)
            changed[key] = new_cell
            out.append(new_val)
        self._store(changed)
        return out

    @_bulk
    def multi_put(self, keys: Sequence[Sequence[Any]], vals: Sequence[T | None]) -> None:
        """Set values; a replay of the stored txid keeps ``prev`` so it can be replayed again."""
        check_same_length(keys, vals, what="values", op="OpaqueMap.multi_put")
        self.multi_update(keys, [ReplaceUpdater(v) for v in vals])


class TransactionalMap(_TxidMap[T, TransactionalValue[T]]):
    """Transactional map state: stores ``TransactionalValue(txid, val)`` cells.

    Exactly-once with transactional spouts only (a batch never changes on replay): an update of a
    key whose cell already carries the open batch's txid is skipped.
    """

    state_type = StateType.TRANSACTIONAL

    @classmethod
    def build(cls, backing: BackingMap[TransactionalValue[Any]]) -> TransactionalMap[Any]:
        """A transactional map state over ``backing``."""
        return cls(backing)

    def _coerce(self, stored: Any, key: Key) -> TransactionalValue[T] | None:
        if stored is None or isinstance(stored, TransactionalValue):
            return stored
        if isinstance(stored, (list, tuple)):
            try:
                return TransactionalValue.from_list(stored)
            except SerializationError as exc:
                msg = f"TransactionalMap key {key!r}: {exc}"
                raise SerializationError(msg) from exc
        msg = (
            f"TransactionalMap key {key!r}: the backing map returned {stored!r} "
            f"({type(stored).__name__}); a transactional map stores TransactionalValue cells "
            "(or their [txid, val] list form). Was this store written by another kind of map?"
        )
        raise SerializationError(msg)

    @_bulk
    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[T | None]:
        """Stored values."""
        ks = as_keys(keys)
        loaded = self._load(ks)
        out: list[T | None] = []
        for key in ks:
            cell = loaded[key][0]
            out.append(None if cell is None else cell.val)
        return out

    @_bulk
    def multi_update(self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater[T]]) -> list[T | None]:
        """Update, skipping keys whose cell already has the open batch's txid.

        Raises
        ------
        StateError
            If a cell carries a txid greater than the open batch's (the store is ahead of this
            run; applying the batch would count it twice or out of order).
        """
        ks = as_keys(keys)
        check_same_length(ks, updaters, what="updaters", op="TransactionalMap.multi_update")
        work = self._load(ks)
        changed: dict[Key, TransactionalValue[T]] = {}
        out: list[T | None] = []
        txid = self._curr_txid
        for key, updater in zip(ks, updaters, strict=True):
            cell, cached = work[key]
            if cell is None:
                new_cell: TransactionalValue[T] = TransactionalValue(txid, updater.update(None))
            elif cached or txid is None or cell.txid is None or cell.txid < txid:
                new_cell = TransactionalValue(txid, updater.update(cell.val))
            elif cell.txid == txid:
                out.append(cell.val)  # this batch is already in the value
                continue
            else:
                msg = (
                    f"TransactionalMap key {key!r}: batch txid {txid} is behind the stored txid "
                    f"{cell.txid}: the store already holds a newer batch. Another run or topology "
                    "writes to the same state, or txids were reused; give it its own state."
                )
                raise StateError(msg)
            work[key] = (new_cell, True)
            changed[key] = new_cell
            out.append(new_cell.val)
        self._store(changed)
        return out

    @_bulk
    def multi_put(self, keys: Sequence[Sequence[Any]], vals: Sequence[T | None]) -> None:
        """Set values, stamped with the open batch's txid (unconditionally, as Storm does)."""
        ks = as_keys(keys)
        check_same_length(ks, vals, what="values", op="TransactionalMap.multi_put")
        txid = self._curr_txid
        self._store({key: TransactionalValue(txid, val) for key, val in zip(ks, vals, strict=True)})


class NonTransactionalMap(MapState[T]):
    """Non-transactional map state: stores the values themselves; a replay is applied again.

    ``begin_commit`` / ``commit`` only record the txid. Use it with non-transactional spouts, or
    where at-least-once updates are acceptable.
    """

    state_type = StateType.NON_TRANSACTIONAL

    def __init__(self, backing: BackingMap[T]) -> None:
        check_backing(backing, type(self).__name__)
        self._backing = backing
        self._curr_txid: int | None = None

    @classmethod
    def build(cls, backing: BackingMap[Any]) -> NonTransactionalMap[Any]:
        """A non-transactional map state over ``backing``."""
        return cls(backing)

    @property
    def backing(self) -> BackingMap[T]:
        """The wrapped backing map."""
        return self._backing

    @property
    def current_txid(self) -> int | None:
        """Txid of the open batch, ``None`` outside ``begin_commit`` … ``commit``."""
        return self._curr_txid

    def begin_commit(self, txid: int | None) -> None:
        """Record the open batch's txid."""
        self._curr_txid = _check_txid(txid, "NonTransactionalMap.begin_commit")

    def commit(self, txid: int | None) -> None:
        """Forget the open batch's txid."""
        _check_txid(txid, "NonTransactionalMap.commit")
        self._curr_txid = None

    def _get_distinct(self, ks: list[Key]) -> dict[Key, T | None]:
        distinct = list(dict.fromkeys(ks))
        if not distinct:
            return {}
        return dict(zip(distinct, _fetch(self._backing, distinct), strict=True))

    @_bulk
    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[T | None]:
        """Stored values."""
        ks = as_keys(keys)
        loaded = self._get_distinct(ks)
        return [loaded[key] for key in ks]

    @_bulk
    def multi_update(self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater[T]]) -> list[T | None]:
        """Read, update and write back every key (one backing get, one backing put)."""
        ks = as_keys(keys)
        check_same_length(ks, updaters, what="updaters", op="NonTransactionalMap.multi_update")
        work = self._get_distinct(ks)
        out: list[T | None] = []
        for key, updater in zip(ks, updaters, strict=True):
            work[key] = updater.update(work[key])
            out.append(work[key])
        if work:
            self._backing.multi_put(list(work), list(work.values()))
        return out

    @_bulk
    def multi_put(self, keys: Sequence[Sequence[Any]], vals: Sequence[T | None]) -> None:
        """Store values (for a key listed twice, the last one wins)."""
        ks = as_keys(keys)
        check_same_length(ks, vals, what="values", op="NonTransactionalMap.multi_put")
        cells = dict(zip(ks, vals, strict=True))
        if cells:
            self._backing.multi_put(KeyList(cells), list(cells.values()))
