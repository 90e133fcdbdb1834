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

Each store's adapter lives in that store's folder, next to the plumbing it shares with Storm's
backend: ``weir/connectors/sqlite/maps.py``, ``weir/connectors/redis/maps.py``, … (see :mod:`weir.state`).

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

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from weir.connectors.hbase.maps import HBaseBackingMap, HBaseMapState, HBaseMapStore
    from weir.connectors.memcached.maps import MemcachedBackingMap, MemcachedMapState, MemcachedMapStore
    from weir.connectors.postgres.maps import PostgresBackingMap, PostgresMapState, PostgresMapStore
    from weir.connectors.redis.maps import RedisBackingMap, RedisMapState, RedisMapStore
    from weir.connectors.sqlite.maps import SqliteBackingMap, SqliteMapState, SqliteMapStore

# The store adapters live in their store's folder (weir/state/<store>/maps.py) next to that store's
# plumbing; they import this package's _factory, so they are loaded on first use (no import cycle).
_STORE_OF = {"HBase": "hbase", "Memcached": "memcached", "Postgres": "postgres", "Redis": "redis", "Sqlite": "sqlite"}


def __getattr__(name: str) -> Any:
    for prefix, store in _STORE_OF.items():
        if name.startswith(prefix) and name.removeprefix(prefix) in ("BackingMap", "MapState", "MapStore"):
            import importlib

            value = getattr(importlib.import_module(f"weir.connectors.{store}.maps"), name)
            globals()[name] = value
            return value
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


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
]
