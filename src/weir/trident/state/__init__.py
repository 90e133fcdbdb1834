"""Trident state: exactly-once map states, value cells and the state SPI (seed 004).

The pieces, bottom up:

- :class:`State` / :class:`StateFactory` / :class:`StateType` — the SPI: ``begin_commit(txid)`` →
  updates → ``commit(txid)``; a factory makes the state of one partition.
- :class:`BackingMap` — what a store implements (``multi_get`` / ``multi_put`` of stored cells);
  :class:`CachedMap` puts an LRU cache in front of one, :class:`MemoryBackingMap` keeps a dict.
- :class:`OpaqueMap`, :class:`TransactionalMap`, :class:`NonTransactionalMap` — the
  :class:`MapState` implementations that store :class:`OpaqueValue` / :class:`TransactionalValue`
  cells / plain values and make replayed batches idempotent.
- :class:`SnapshottableMap` — a :class:`Snapshottable` global value under a fixed key.
- :class:`MemoryMapState` — Storm's in-memory map state and its ``Factory``.
- :class:`ValueUpdater` and :class:`CombinerValueUpdater` — how ``multi_update`` changes a value.

Examples
--------
>>> from weir.trident.state import CachedMap, CombinerValueUpdater, MemoryBackingMap, OpaqueMap
>>> class Sum:
...     def combine(self, a, b): return a + b
>>> counts = OpaqueMap.build(CachedMap(MemoryBackingMap(), 1000))
>>> counts.begin_commit(7)
>>> counts.multi_update([["man"], ["dog"]], [CombinerValueUpdater(Sum(), 2), CombinerValueUpdater(Sum(), 1)])
[2, 1]
>>> counts.commit(7)
"""

from weir.trident.state.base import State, StateFactory, StateType, is_exactly_once
from weir.trident.state.cached import CachedMap
from weir.trident.state.map_state import (
    BackingMap,
    Key,
    MapState,
    ReadOnlyMapState,
    RemovableMapState,
    Snapshottable,
    as_key,
    as_keys,
)
from weir.trident.state.maps import NonTransactionalMap, OpaqueMap, TransactionalMap
from weir.trident.state.memory import MemoryBackingMap, MemoryMapState
from weir.trident.state.snapshottable import SnapshottableMap
from weir.trident.state.updaters import (
    CombinerValueUpdater,
    ReducerValueUpdater,
    ReplaceUpdater,
    SupportsCombine,
    SupportsReduce,
    ValueUpdater,
)
from weir.trident.state.values import OpaqueValue, TransactionalValue

__all__ = [
    "BackingMap",
    "CachedMap",
    "CombinerValueUpdater",
    "Key",
    "MapState",
    "MemoryBackingMap",
    "MemoryMapState",
    "NonTransactionalMap",
    "OpaqueMap",
    "OpaqueValue",
    "ReadOnlyMapState",
    "ReducerValueUpdater",
    "RemovableMapState",
    "ReplaceUpdater",
    "Snapshottable",
    "SnapshottableMap",
    "State",
    "StateFactory",
    "StateType",
    "SupportsCombine",
    "SupportsReduce",
    "TransactionalMap",
    "TransactionalValue",
    "ValueUpdater",
    "as_key",
    "as_keys",
    "is_exactly_once",
]
