"""Executor side of the state operations: routing to state partitions, and the per-partition work.

Routing (:class:`RouteStage`) adds two columns: ``_weir_p``, the state partition — a stable hash
of the key's Python values (:func:`weir._util.stable_hash`), so a key lands in the same partition
in every batch, after every restart, whatever Spark type its column has — and ``_weir_q``, an int
whose Spark hash puts the row in Spark partition ``_weir_p`` (see :func:`spark_routing_values`).
After ``repartition(n, "_weir_q")`` each Spark task holds exactly one state partition.

Per state partition with tuples (a partition without tuples is not touched):

- :class:`PersistAggStage` — ``make_state(conf, p, n)``, ``begin_commit(txid)``, one
  ``multi_update`` (or ``update`` of a ``Snapshottable`` for a global aggregate), ``commit(txid)``,
  and emit ``(key..., new value)``;
- :class:`QueryStage` — ``make_state``, one ``batch_retrieve``, ``execute`` per tuple;
- :class:`PersistStage` — ``make_state``, ``begin_commit``, one ``update_state``, ``commit``.

For a stream that reads an **opaque** spout, :class:`PersistAggStage` first records the keys it is
about to write (the *journal*, in the coordinator's namespace, fenced by the driver's epoch). When a
batch attempt fails after writing some keys and its replay (same txid) no longer contains them,
the driver passes those keys back as *touches*: they are updated with their own value, which makes
an opaque cell fall back to its value before the txid — so the state holds exactly what was
committed, even when the replayed batch differs.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from weir import datacodec as _data
from weir._faults import crash_point
from weir._util import HASH_CACHEABLE, stable_hash
from weir.errors import StateError, TopologyError
from weir.runtime.spark.trident._arrow import build_array, concat, py_columns, rows_of, take_column, to_batch
from weir.runtime.spark.trident.tasks import StageBase, _cleanup, _prepare
from weir.trident.fields import FieldSpec, encode_any
from weir.trident.state.maps import gc_paused
from weir.trident.tuple import TridentCollector, tuple_class

__all__ = [
    "GLOBAL_KEY",
    "JournalSpec",
    "PersistAggStage",
    "PersistStage",
    "QueryStage",
    "RouteStage",
    "as_snapshottable",
    "decode_journal",
    "journal_key",
    "read_touches",
    "spark_key_hash",
    "spark_partitions_of",
    "spark_routing_values",
]

#: the key of a global (ungrouped) aggregate in a map state that is not ``Snapshottable`` itself
GLOBAL_KEY = ("$weir-trident-global$",)

_M = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def _mix(h1: int, word: int) -> int:
    """One 4-byte block of Murmur3 x86_32 (``mixK1`` then ``mixH1``)."""
    k1 = (word * 0xCC9E2D51) & _M
    k1 = (_rotl(k1, 15) * 0x1B873593) & _M
    h1 = _rotl(h1 ^ k1, 13)
    return (h1 * 5 + 0xE6546B64) & _M


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _M
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _M
    h1 ^= h1 >> 16
    return h1


def _signed(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


def spark_long_hash(i: int, seed: int = 42) -> int:
    """Spark's ``hash()`` of a ``bigint`` value (Murmur3 x86_32 ``hashLong``)."""
    v = i & 0xFFFFFFFFFFFFFFFF
    h1 = _mix(_mix(seed & _M, v & _M), v >> 32)
    return _signed(_fmix(h1, 8))


def spark_string_hash(s: str, seed: int = 42) -> int:
    """Spark's ``hash()`` of a ``string`` value: Murmur3 x86_32 over its UTF-8 bytes.

    Spark's variant (``hashUnsafeBytes``): the bytes after the last whole 4-byte block are mixed in
    one by one, as signed bytes.
    """
    data = s.encode("utf-8", "surrogatepass")
    n = len(data)
    aligned = n - n % 4
    h1 = seed & _M
    for word in struct.unpack_from(f"<{aligned // 4}I", data):
        h1 = _mix(h1, word)
    for b in data[aligned:]:
        h1 = _mix(h1, (b - 256 if b > 127 else b) & _M)
    return _signed(_fmix(h1, n))


#: Spark SQL types whose ``hash()`` weir computes in Python (``spark_key_hash``)
SPARK_HASHED_TYPES = frozenset({"string", "int", "bigint"})


def spark_key_hash(key: tuple[Any, ...], kinds: list[str]) -> int:
    """Spark's ``hash(c1, c2, ...)`` of a key whose columns have the Spark types ``kinds``.

    Each column's hash seeds the next; a null column leaves the seed as it is. A value that cannot
    be of its column's type (a query key of the wrong type) hashes by its text: no stored key has it.
    """
    h = 42
    for v, kind in zip(key, kinds, strict=True):
        if v is None:
            continue
        if kind == "string" or type(v) is not int:
            h = spark_string_hash(v if isinstance(v, str) else repr(v), h)
        elif kind == "int" and -(1 << 31) <= v < (1 << 31):
            h = spark_int_hash(v, h)
        else:
            h = spark_long_hash(v, h)
    return h


def spark_int_hash(i: int, seed: int = 42) -> int:
    """Spark's ``hash()`` of an ``int`` column value (Murmur3 x86_32 ``hashInt``, seed 42)."""
    k1 = ((i & _M) * 0xCC9E2D51) & _M
    k1 = (_rotl(k1, 15) * 0x1B873593) & _M
    h1 = _rotl((seed & _M) ^ k1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & _M
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _M
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _M
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def spark_routing_values(n: int) -> list[int]:
    """For each partition ``p < n``, an int ``q`` with ``pmod(hash(q), n) == p`` in Spark SQL.

    ``repartition(n, col)`` sends a row to partition ``pmod(hash(col), n)``; routing by these
    values makes the Spark partition equal the state partition.
    """
    out: dict[int, int] = {}
    q = 0
    while len(out) < n:
        p = spark_int_hash(q) % n
        out.setdefault(p, q)
        q += 1
    return [out[p] for p in range(n)]


#: per parallelism, the state partition of keys seen before in this process (keys repeat batch after batch)
_PARTITIONS: dict[int, dict[tuple[Any, ...], int]] = {}
_PARTITION_CACHE_LIMIT = 500_000


#: per (parallelism, key types), the Spark-hash partition of keys seen before in this process
_SPARK_PARTITIONS: dict[tuple[int, tuple[str, ...]], dict[tuple[Any, ...], int]] = {}


def spark_partitions_of(keys: list[tuple[Any, ...]], kinds: list[str], n: int) -> list[int]:
    """``pmod(hash(key...), n)``: the partition Spark's hash partitioning into ``n`` gives each key."""
    cache = _SPARK_PARTITIONS.setdefault((n, tuple(kinds)), {})
    if len(cache) > _PARTITION_CACHE_LIMIT:
        cache.clear()
    out = []
    get = cache.get
    for k in keys:
        cacheable = all(type(v) in HASH_CACHEABLE for v in k)
        p = get(k) if cacheable else None
        if p is None:
            p = spark_key_hash(k, kinds) % n
            if cacheable:
                cache[k] = p
        out.append(p)
    return out


def partitions_of(keys: list[tuple[Any, ...]], n: int) -> list[int]:
    """``stable_hash(key) % n`` of every key (one-value keys of str/int/bytes remembered per process)."""
    cache = _PARTITIONS.setdefault(n, {})
    if len(cache) > _PARTITION_CACHE_LIMIT:
        cache.clear()
    out = []
    get = cache.get
    for k in keys:
        if len(k) == 1 and type(k[0]) in HASH_CACHEABLE:
            p = get(k)
            if p is None:
                p = cache[k] = stable_hash(k) % n
        else:  # (True,) == (1,) == (1.0,) would share a slot but may not share a hash
            p = stable_hash(k) % n
        out.append(p)
    return out


def as_snapshottable(state: Any, what: str) -> Any:
    """``state`` if it is ``Snapshottable``; a map state wrapped in ``SnapshottableMap(GLOBAL_KEY)``."""
    from weir.trident.state import SnapshottableMap

    if all(callable(getattr(state, m, None)) for m in ("get", "update", "set")):
        return state
    if callable(getattr(state, "multi_update", None)):
        return SnapshottableMap(state, GLOBAL_KEY)
    msg = f"{what}: a global persistent_aggregate needs a Snapshottable or MapState state, got {state!r}"
    raise TopologyError(msg)


def _map_state(state: Any, what: str) -> Any:
    if not callable(getattr(state, "multi_update", None)):
        msg = f"{what}: persistent_aggregate on a grouped stream needs a MapState (multi_update), got {state!r}"
        raise TopologyError(msg)
    return state


class _KeepUpdater:
    """Update a key with its own value (what a *touch* does)."""

    __slots__ = ()

    def update(self, stored: Any) -> Any:
        return stored


#: the version prefix of a journal row (data-only :mod:`weir.datacodec` encoding follows)
JOURNAL_V1 = b"WJ1:"


# ---- the journal ------------------------------------------------------------------------------
@dataclass(frozen=True)
class JournalSpec:
    """Where a state's journal lives: the coordinator's store and namespace, and the driver's epoch."""

    provider: Any
    namespace: str
    state_id: str
    epoch: int | None

    def write(self, partition: int, txid: int, keys: list[tuple[Any, ...]]) -> None:
        """Record that batch ``txid`` is about to write ``keys`` of ``partition`` (epoch-fenced)."""
        what = f"Trident journal of state {self.state_id!r} partition {partition}, txid {txid}"
        try:
            data = JOURNAL_V1 + _data.encode((txid, [tuple(k) for k in keys]), what=what)
        except _data.DataCodecError as exc:
            msg = (
                f"{exc}. The journal of an opaque persistent_aggregate records its group keys as plain data; "
                "group by fields with plain values"
            )
            raise StateError(msg) from exc
        rows = {journal_key(self.state_id, partition): data}
        if self.epoch is None:
            self.provider.backend.write_direct(self.namespace, rows, None)
        else:  # exactly the coordinator's epoch: an emptied store is a StateLossError, never re-claimed
            self.provider.backend.write_owned(self.namespace, rows, self.epoch)


def decode_journal(raw: bytes, namespace: str, key: bytes) -> tuple[int, list[Any]]:
    """Parse a journal row: ``WJ1`` + data (or the unversioned rows of older weir versions).

    Only weir's data-only encoding is read: a pickle payload or anything else raises
    :class:`~weir.errors.SerializationError` naming the namespace and key, and nothing is executed.
    """
    what = f"namespace {namespace!r}, key {key.decode(errors='replace')!r} (a Trident journal record)"
    body = raw[len(JOURNAL_V1) :] if raw.startswith(JOURNAL_V1) else raw  # older rows: same encoding
    value = _data.decode(body, what=what)
    if (
        not isinstance(value, tuple)
        or len(value) != 2
        or type(value[0]) is not int
        or not isinstance(value[1], list)
        or not all(isinstance(k, tuple) for k in value[1])
    ):
        msg = f"{what}: expected (txid, [key tuples]), got {type(value).__name__}; weir did not write it"
        raise _data.DataCodecError(msg)
    return value[0], value[1]


def journal_key(state_id: str, partition: int) -> bytes:
    """The journal row of one state partition."""
    return f"trident-journal/{state_id}/{partition}".encode()


def read_touches(provider: Any, namespace: str, state_id: str, n: int, txid: int) -> dict[int, list[tuple[Any, ...]]]:
    """Keys an earlier attempt of ``txid`` wrote, per partition (driver side, one read)."""
    rows = provider.backend.get_many(namespace, [journal_key(state_id, p) for p in range(n)])
    out: dict[int, list[tuple[Any, ...]]] = {}
    for p, raw in enumerate(rows):
        if raw is None:
            continue
        t, keys = decode_journal(raw, namespace, journal_key(state_id, p))
        if t == txid and keys:
            out[p] = [tuple(k) for k in keys]
    return out


# ---- routing ----------------------------------------------------------------------------------
@dataclass
class RouteStage(StageBase):
    """Add ``_weir_p`` / ``_weir_q`` to every row (``how``: ``key``, ``round_robin``, ``broadcast``).

    With ``combine_agg`` set, rows are first pre-aggregated per key in the task (a combiner's
    ``init`` + ``combine``), and the output is ``key..., _weir_v, _weir_p, _weir_q``.
    """

    how: str = "key"
    n: int = 1
    key_idx: list[int] = field(default_factory=list)
    combine_agg: Any = None
    in_idx: list[int] = field(default_factory=list)
    in_names: list[str] = field(default_factory=list)
    #: with ``how`` ``spark``: the state's key types, partitions being Spark's hash partitioning
    key_kinds: list[str] = field(default_factory=list)

    def run(self, task: int, batches: Iterator[pa.RecordBatch], counts: list[int]) -> Iterator[pa.RecordBatch]:
        """Route the task's rows."""
        n, qs = self.n, spark_routing_values(self.n)
        schema = self.out_schema()
        if self.combine_agg is not None:
            yield from self._combine(batches, counts, qs, schema)
            return
        rr = task
        for batch in batches:
            rows = batch.num_rows
            counts[0] += rows
            if rows == 0:
                continue
            if self.how in ("key", "spark"):
                keys = rows_of(py_columns(batch, self.key_idx, self.in_fields), rows)
                ps = partitions_of(keys, n) if self.how == "key" else spark_partitions_of(keys, self.key_kinds, n)
                src = None  # every row once, in order
            elif self.how == "broadcast":
                src = [i for i in range(rows) for _ in range(n)]
                ps = [p for _ in range(rows) for p in range(n)]
            else:  # round robin (also "single": n == 1)
                ps = [(rr + i) % n for i in range(rows)]
                rr += rows
                src = None
            if src is None:
                arrays = [
                    col if col.type == schema.field(c).type else col.cast(schema.field(c).type)
                    for c, col in enumerate(batch.columns)
                ]
            else:
                idx = pa.array(src, type=pa.int64())
                arrays = [take_column(batch.column(c), idx, schema.field(c).type) for c in range(batch.num_columns)]
            arrays.append(pa.array(ps, type=pa.int32()))
            arrays.append(pa.array([qs[p] for p in ps], type=pa.int32()))
            counts[1] += len(ps)
            yield to_batch(arrays, schema)

    def _combine(
        self, batches: Iterator[pa.RecordBatch], counts: list[int], qs: list[int], schema: pa.Schema
    ) -> Iterator[pa.RecordBatch]:
        agg = self.combine_agg
        cls = tuple_class(tuple(self.in_names))
        table = concat(batches)
        if table is None or table.num_rows == 0:
            return
        rows = table.num_rows
        counts[0] += rows
        keys = rows_of(py_columns(table, self.key_idx, self.in_fields), rows)
        tuples = rows_of(py_columns(table, self.in_idx, self.in_fields), rows)
        partial: dict[tuple[Any, ...], list[Any]] = {}  # key -> [first row, value]
        for i, (k, t) in enumerate(zip(keys, tuples, strict=True)):
            v = agg.init(cls(t))
            slot = partial.get(k)
            if slot is None:
                partial[k] = [i, v]
            else:
                slot[1] = agg.combine(slot[1], v)
        src = [s[0] for s in partial.values()]
        ps = partitions_of(list(partial), self.n) if self.how == "key" else [0] * len(src)
        idx = pa.array(src, type=pa.int64())
        arrays = [take_column(table.column(c), idx, schema.field(j).type) for j, c in enumerate(self.key_idx)]
        arrays.append(pa.array([encode_any(s[1]) for s in partial.values()], type=pa.binary()))
        arrays.append(pa.array(ps, type=pa.int32()))
        arrays.append(pa.array([qs[p] for p in ps], type=pa.int32()))
        counts[1] += len(src)
        yield to_batch(arrays, schema)


# ---- per state partition ----------------------------------------------------------------------
@dataclass
class _StateStage(StageBase):
    factory: Any = None
    n: int = 1
    state_id: str = ""
    p_idx: int = -1
    #: ``weir.state.ttl.ms``: cells last written at or before this txid read as absent (None: none expire)
    expire_upto: int | None = None

    def _partitions(self, table: pa.Table | None, task: int) -> dict[int, list[int]]:
        """Row numbers per state partition.

        From column ``p_idx``; with ``p_idx`` -1 all rows are in partition ``task`` (Spark's hash
        partitioning put each key in its state partition).
        """
        out: dict[int, list[int]] = {}
        if table is None:
            return out
        if self.p_idx < 0:
            return {task: list(range(table.num_rows))} if table.num_rows else {}
        for i, p in enumerate(table.column(self.p_idx).to_pylist()):
            out.setdefault(int(p), []).append(i)
        return out

    def _make_state(self, p: int) -> Any:
        try:
            state = self.factory.make_state(self.conf, p, self.n)
        except Exception as exc:
            msg = f"state {self.state_id!r}: {self.factory!r}.make_state(conf, {p}, {self.n}) failed: {exc}"
            raise StateError(msg) from exc
        if self.expire_upto is not None:
            state.expire_through(self.expire_upto)
        return state


@dataclass
class PersistAggStage(_StateStage):
    """The state update of ``persistent_aggregate`` for each state partition in this task.

    ``mode`` ``combiner``: rows carry the batch's partial value per key in ``value_idx`` (several
    rows of a key are combined first); ``reducer``: rows are the key's tuples (``in_idx``).
    ``key_idx`` empty means a global aggregate (one partition, a ``Snapshottable``).
    """

    mode: str = "combiner"
    agg: Any = None
    key_idx: list[int] = field(default_factory=list)
    value_idx: int = -1
    in_idx: list[int] = field(default_factory=list)
    in_names: list[str] = field(default_factory=list)
    count_idx: int = -1
    journal: JournalSpec | None = None
    touches: dict[int, list[tuple[Any, ...]]] = field(default_factory=dict)
    #: with ``p_idx`` -1: the key types of a state partitioned by Spark's hash (checked per task)
    key_kinds: list[str] = field(default_factory=list)

    def bind(self, txid: int, epoch: int | None) -> None:
        """Take the batch's txid; the journal is fenced by the driver's ``epoch``."""
        super().bind(txid, epoch)
        if self.journal is not None:
            self.journal = replace(self.journal, epoch=epoch)

    def run(self, task: int, batches: Iterator[pa.RecordBatch], counts: list[int]) -> Iterator[pa.RecordBatch]:
        """Update each state partition of the task once."""
        table = concat(batches)
        parts = self._partitions(table, task)
        if self.p_idx < 0 and table is not None and table.num_rows:
            self._check_spark_partition(task, table)
        if self.touches:
            self.touches = self._touches_now()
        if task in self.touches and task not in parts:
            parts[task] = []
        if table is not None:
            counts[0] += table.num_rows
        schema = self.out_schema()
        for p in sorted(parts):
            with gc_paused(len(parts[p])):  # the keys' objects live until the partition is written
                out = self._one(p, parts[p], table, schema)
            if out is not None:
                counts[1] += out.num_rows
                yield out

    def _touches_now(self) -> dict[int, list[tuple[Any, ...]]]:
        """The touched keys per partition *as this run places keys*.

        The journal recorded them under the partitioning of the failed attempt; placing them again
        keeps each key in the one task that also updates it (after an upgrade that changed how keys
        are placed, or another parallelism), so no two tasks ever write one key.
        """
        keys = [k for ks in self.touches.values() for k in ks]
        if self.p_idx < 0:
            ps = spark_partitions_of(keys, self.key_kinds, self.n)
        else:
            ps = partitions_of(keys, self.n)
        out: dict[int, list[tuple[Any, ...]]] = {}
        for k, p in zip(keys, ps, strict=True):
            out.setdefault(p, []).append(k)
        return out

    def _check_spark_partition(self, task: int, table: pa.Table) -> None:
        """Fail unless this task's keys are Spark partition ``task``'s of ``n`` (its first and last key).

        Spark reads a task's shuffle partitions in order, so if adaptive execution had coalesced
        several into one task, the first or the last key would belong to another partition.
        """
        ends = table.take(pa.array([0, table.num_rows - 1], type=pa.int64()))
        keys = rows_of(py_columns(ends, self.key_idx, self.in_fields), 2)
        found = spark_partitions_of(keys, self.key_kinds, self.n)
        if found != [task, task]:
            msg = (
                f"state {self.state_id!r}: Spark task {task} holds keys of state partitions {sorted(set(found))} "
                f"of {self.n}; the batch's shuffle must keep its {self.n} hash partitions "
                "(spark.sql.adaptive.enabled must be false in the batch's session, as weir sets it)"
            )
            raise StateError(msg)

    def _groups(
        self, rows: list[int], table: pa.Table | None
    ) -> tuple[dict[tuple[Any, ...], Any], dict[tuple[Any, ...], int]]:
        """Per key: the combined partial (combiner) or the list of tuples (reducer); and a source row."""
        values: dict[tuple[Any, ...], Any] = {}
        first: dict[tuple[Any, ...], int] = {}
        if not rows or table is None:
            return values, first
        sub = table.take(pa.array(rows, type=pa.int64()))
        m = sub.num_rows
        keys = rows_of(py_columns(sub, self.key_idx, self.in_fields), m) if self.key_idx else [()] * m
        if self.mode == "combiner":
            vals = py_columns(sub, [self.value_idx], self.in_fields)[0]
            live = py_columns(sub, [self.count_idx], self.in_fields)[0] if self.count_idx >= 0 else None
            for j, (k, v) in enumerate(zip(keys, vals, strict=True)):
                if live is not None and not live[j]:
                    continue  # a global SQL aggregate of an empty batch
                if k in values:
                    values[k] = self.agg.combine(values[k], v)
                else:
                    values[k] = v
                    first[k] = rows[j]
        else:
            cls = tuple_class(tuple(self.in_names))
            tuples = rows_of(py_columns(sub, self.in_idx, self.in_fields), m)
            for j, (k, t) in enumerate(zip(keys, tuples, strict=True)):
                if k not in values:
                    values[k] = []
                    first[k] = rows[j]
                values[k].append(cls(t))
        return values, first

    def _updater_class(self) -> Any:
        """``(agg, value) -> ValueUpdater`` of this mode."""
        from weir.trident.state import CombinerValueUpdater, ReducerValueUpdater

        return CombinerValueUpdater if self.mode == "combiner" else ReducerValueUpdater

    def _one(self, p: int, rows: list[int], table: pa.Table | None, schema: pa.Schema) -> pa.RecordBatch | None:
        values, first = self._groups(rows, table)
        touched = [k for k in self.touches.get(p, []) if k not in values]
        if not values and not touched:
            return None  # no tuples for this partition: no begin_commit / commit
        txid = self.batch_txid
        what = f"state {self.state_id!r} partition {p}"
        keys = list(values)
        if self.journal is not None:
            self.journal.write(p, txid, [*keys, *touched])
        state = self._make_state(p)
        state.begin_commit(txid)
        make = self._updater_class()
        agg = self.agg
        updaters = [make(agg, values[k]) for k in keys] + [_KeepUpdater() for _ in touched]
        if self.key_idx:
            new_vals = _map_state(state, what).multi_update([list(k) for k in [*keys, *touched]], updaters)
            if len(new_vals) != len(updaters):
                msg = f"{what}: multi_update returned {len(new_vals)} values for {len(updaters)} keys"
                raise StateError(msg)
            new_vals = list(new_vals)[: len(keys)]
        else:
            snap = as_snapshottable(state, what)
            new_vals = [snap.update(updaters[0])] if keys else []
            if touched and not keys:
                snap.update(_KeepUpdater())
        crash_point("trident_after_multi_update", txid, task=p, topology=self.topology)
        state.commit(txid)
        crash_point("trident_after_partition_commit", txid, task=p, topology=self.topology)
        if not keys:
            return None
        arrays: list[Any] = []
        if self.key_idx:
            assert table is not None
            idx = pa.array([first[k] for k in keys], type=pa.int64())
            arrays.extend(take_column(table.column(c), idx, schema.field(j).type) for j, c in enumerate(self.key_idx))
        off = len(self.key_idx)
        f = self.out_fields[off]
        arrays.append(build_array(new_vals, f, schema.field(off).type, what))
        return to_batch(arrays, schema)


@dataclass
class _TupleStateStage(_StateStage):
    """A state stage that hands a user object (query function, updater) the tuples of each state partition."""

    in_idx: list[int] = field(default_factory=list)
    in_names: list[str] = field(default_factory=list)

    def _tuples_by_partition(
        self, task: int, batches: Iterator[pa.RecordBatch], counts: list[int], op: Any
    ) -> Iterator[tuple[int, pa.Table, list[Any]]]:
        """``prepare`` ``op``; per state partition of the task, sorted: ``(p, its rows, their tuples)``; ``cleanup``."""
        table = concat(batches)
        parts = self._partitions(table, task)
        if table is None or not parts:
            return
        counts[0] += table.num_rows
        cls = tuple_class(tuple(self.in_names))
        _prepare(op, self.conf, self.context(task, self.n))
        for p in sorted(parts):
            sub = table.take(pa.array(parts[p], type=pa.int64()))
            yield p, sub, [cls(r) for r in rows_of(py_columns(sub, self.in_idx, self.in_fields), sub.num_rows)]
        _cleanup(op)


@dataclass
class QueryStage(_TupleStateStage):
    """``state_query``: one ``batch_retrieve`` per state partition, then ``execute`` per tuple."""

    qf: Any = None
    keep: int = 0  # the first ``keep`` input columns are the stream's fields (then _weir_p, _weir_q)
    new_fields: list[FieldSpec] = field(default_factory=list)
    snapshot: bool = False  # a global state: hand the query a Snapshottable

    def run(self, task: int, batches: Iterator[pa.RecordBatch], counts: list[int]) -> Iterator[pa.RecordBatch]:
        """Query each state partition of the task."""
        qf = self.qf
        schema = self.out_schema()
        what = f"{self.component} ({type(qf).__name__})"
        n_new = len(self.new_fields)
        for p, sub, tuples in self._tuples_by_partition(task, batches, counts, qf):
            state = self._make_state(p)
            if self.snapshot:
                state = as_snapshottable(state, what)
            results = list(qf.batch_retrieve(state, tuples))
            if len(results) != len(tuples):
                msg = (
                    f"{what}: batch_retrieve returned {len(results)} results for {len(tuples)} tuples; "
                    "return one result per tuple, in order"
                )
                raise TopologyError(msg)
            coll = TridentCollector(n_new, what)
            src: list[int] = []
            new_cols: list[list[Any]] = [[] for _ in range(n_new)]
            for i, (t, res) in enumerate(zip(tuples, results, strict=True)):
                qf.execute(t, res, coll)
                for vals in coll.take():
                    src.append(i)
                    for j in range(n_new):
                        new_cols[j].append(vals[j])
            if not src:
                continue
            idx = pa.array(src, type=pa.int64())
            arrays: list[Any] = [take_column(sub.column(c), idx, schema.field(c).type) for c in range(self.keep)]
            for j, f in enumerate(self.new_fields):
                arrays.append(build_array(new_cols[j], f, schema.field(self.keep + j).type, what))
            counts[1] += len(src)
            yield to_batch(arrays, schema)


@dataclass
class PersistStage(_TupleStateStage):
    """``partition_persist``: ``begin_commit``, one ``update_state`` with the partition's tuples, ``commit``."""

    updater: Any = None

    def run(self, task: int, batches: Iterator[pa.RecordBatch], counts: list[int]) -> Iterator[pa.RecordBatch]:
        """Update each state partition of the task once."""
        up = self.updater
        schema = self.out_schema()
        what = f"{self.component} ({type(up).__name__})"
        n_out = len(self.out_fields)
        txid = self.batch_txid
        for p, _, tuples in self._tuples_by_partition(task, batches, counts, up):
            coll = TridentCollector(n_out, what)
            state = self._make_state(p)
            state.begin_commit(txid)
            up.update_state(state, tuples, coll)
            crash_point("trident_after_multi_update", txid, task=p, topology=self.topology)
            state.commit(txid)
            crash_point("trident_after_partition_commit", txid, task=p, topology=self.topology)
            emitted = coll.take()
            if not emitted or not n_out:
                continue
            cols = list(zip(*emitted, strict=True))
            arrays = [build_array(list(cols[j]), f, schema.field(j).type, what) for j, f in enumerate(self.out_fields)]
            counts[1] += len(emitted)
            yield to_batch(arrays, schema)


def conf_dict(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A plain, picklable copy of the topology configuration for ``make_state``."""
    return dict(conf)
