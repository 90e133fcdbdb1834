"""Durable backing maps for Trident map states, with picklable factories (seed 004).

Each store offers ``opaque(...)``, ``transactional(...)`` and ``non_transactional(...)``, which return
a :class:`MapStateFactory` — a Trident :class:`~weir.trident.state.StateFactory` that pickles to
Spark executors (it carries options only; each process opens its own connection on first use).
``make_state(conf, partition_index, num_partitions)`` returns the map state of that type over the
store: an :class:`~weir.trident.state.OpaqueMap`, :class:`~weir.trident.state.TransactionalMap` or
:class:`~weir.trident.state.NonTransactionalMap` that is also
:class:`~weir.trident.state.Snapshottable`, behind a :class:`~weir.trident.state.CachedMap` when
``cache_size`` is given.

=========================== ================================================================
store                       layout
=========================== ================================================================
:class:`SqliteMapState`     embedded default: one table ``(k TEXT PRIMARY KEY, v TEXT)`` per
                            map state, JSON keys and cells; each ``multi_put`` one transaction
:class:`RedisMapState`      Redis and Redis Cluster: string ``<prefix><JSON key>`` = JSON cell;
                            ``MGET`` / ``MSET`` (per slot in a cluster)
:class:`MemcachedMapState`  Storm's ``MemcachedState``: items ``<prefix><JSON key>`` (hashed when
                            not memcached-safe); ``get_many`` / ``set_many``
:class:`PostgresMapState`   a typed table people query with SQL:
                            ``word TEXT PRIMARY KEY, value BIGINT, txid BIGINT, prev BIGINT``
:class:`HBaseMapState`      a pre-created HBase table: row ``<prefix><JSON key>``, JSON cell in
                            column ``<family>:c``; one multi-get / one batched put per batch
=========================== ================================================================

Each store's adapter lives in that store's connector, next to the plumbing it shares with Storm's
backend: ``weir/connectors/sqlite/maps.py``, ``weir/connectors/redis/maps.py``, … (see
:mod:`weir.connectors`). The store classes named above are offered here by their connectors'
registry descriptors (:mod:`weir.state.registry`); this package imports no connector.

Examples
--------
>>> import os, tempfile
>>> from weir.trident.backing import SqliteMapState
>>> from weir.trident.state import CombinerValueUpdater
>>> class Sum:
...     def combine(self, a, b): return a + b
>>> factory = SqliteMapState.opaque(os.path.join(tempfile.mkdtemp(), "t.db"), table="word_counts")
>>> state = factory.make_state({}, 0, 1)
>>> state.begin_commit(1)
>>> state.multi_update([["man"], ["dog"]], [CombinerValueUpdater(Sum(), 2), CombinerValueUpdater(Sum(), 1)])
[2, 1]
>>> state.commit(1)
"""

from typing import Any

from weir.state import registry
from weir.state.connections import close_connections
from weir.trident.backing.factory import (
    DEFAULT_GLOBAL_KEY,
    MapStateFactory,
    MapStateFamily,
    MapStore,
    SnapshottableNonTransactionalMap,
    SnapshottableOpaqueMap,
    SnapshottableTransactionalMap,
)


def __getattr__(name: str) -> Any:
    # each store's adapter lives in its connector (weir/connectors/<store>/maps.py), which offers its
    # names here through its registry descriptor (this package imports no connector); a store added
    # later is imported from its connector, weir.connectors.<store>
    value = registry.exported(__name__, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "DEFAULT_GLOBAL_KEY",
    "HBaseBackingMap",
    "HBaseMapState",
    "HBaseMapStore",
    "MapStateFactory",
    "MapStateFamily",
    "MapStore",
    "MemcachedBackingMap",
    "MemcachedMapState",
    "MemcachedMapStore",
    "PostgresBackingMap",
    "PostgresMapState",
    "PostgresMapStore",
    "RedisBackingMap",
    "RedisMapState",
    "RedisMapStore",
    "SnapshottableNonTransactionalMap",
    "SnapshottableOpaqueMap",
    "SnapshottableTransactionalMap",
    "SqliteBackingMap",
    "SqliteMapState",
    "SqliteMapStore",
    "close_connections",
]  # the store names (strings, not imports) are the paths users and the docs import them by
