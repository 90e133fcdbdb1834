"""Executor side of the stream operations: ``mapInArrow`` functions for user code and aggregators.

Each stage is a picklable object called with an iterator of Arrow record batches (one Spark
partition = one task) and yielding record batches of its output schema. User operations get
:class:`~weir.trident.tuple.TridentTuple` s of their input fields; ``prepare`` runs before the
first tuple of the task and ``cleanup`` after the last.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from weir.errors import TopologyError
from weir.runtime.spark.executor import batch_of_job
from weir.runtime.spark.trident._arrow import (
    arrow_schema,
    build_array,
    concat,
    fail,
    failure_report,
    partition_id,
    py_columns,
    report,
    rows_of,
    take_column,
    to_batch,
)
from weir.trident.fields import FieldSpec
from weir.trident.operation import Filter, Operation, OperationContext
from weir.trident.tuple import SingleFieldCollector, TridentCollector, tuple_class

__all__ = ["AggStage", "OpStage"]


@dataclass
class StageBase:
    """What every stage knows: where it runs and what flows in.

    ``stops_job``: whether a failure must stop the batch's Spark job — true for a stage whose output
    reaches a state update in the same job (a partial input would be committed), so its failure
    can only reach the driver in the error's text. Any other stage ends its task and sends the
    failure as a :class:`~weir.runtime.spark.executor.TaskReport` in the accumulator, like a task of
    the Storm dialect.
    """

    topology: str
    component: str
    #: the batch's txid; ``None`` for a stage planned once per run, which reads its batch's txid (and
    #: the driver's epoch) from the Spark job's local property :data:`BATCH_PROPERTY` when it runs
    txid: int | None
    conf: Mapping[str, Any]
    in_fields: list[FieldSpec]
    out_fields: list[FieldSpec]
    acc: Any = None
    stops_job: bool = True
    epoch: int | None = None
    _schema: Any = field(default=None, init=False, repr=False)

    def out_schema(self) -> pa.Schema:
        """The Arrow schema of the output (computed once per task)."""
        if self._schema is None:
            self._schema = arrow_schema(self.out_fields)
        return self._schema

    @property
    def batch_txid(self) -> int:
        """The txid of the batch being run (set at planning or by :meth:`bind` when the task starts)."""
        txid = self.txid
        if txid is None:
            msg = (
                f"topology {self.topology!r}, component {self.component!r}: the stage runs outside a batch "
                "(no txid bound); this is a weir bug, please report it"
            )
            raise TopologyError(msg, topology=self.topology, component=self.component)
        return txid

    def context(self, task: int, n: int | None = None) -> OperationContext:
        """The operation context of task ``task``."""
        return OperationContext(self.topology, self.component, task, n, self.batch_txid, self.conf)

    def bind(self, txid: int, epoch: int | None) -> None:
        """Take the batch's ``txid`` and the driver's ``epoch`` (in the task's copy of a run-wide stage)."""
        self.txid = txid
        self.epoch = epoch

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task = partition_id()
        t0 = time.perf_counter()
        if self.txid is None:
            self.bind(*batch_of_job(self.component))
        txid = self.batch_txid
        counts = [0, 0]
        try:
            yield from self.run(task, batches, counts)
        except Exception as exc:
            if self.stops_job or self.acc is None:
                raise fail(self.component, task, txid, exc) from exc
            self.acc.add([failure_report(self.component, task, txid, exc, counts[0], counts[1])])
            return
        report(self.acc, self.component, task, txid, counts[0], counts[1], (time.perf_counter() - t0) * 1000)

    def run(self, task: int, batches: Iterator[pa.RecordBatch], counts: list[int]) -> Iterator[pa.RecordBatch]:
        """The stage's work; ``counts`` = [tuples in, tuples out]."""
        raise NotImplementedError


def _prepare(op: Any, conf: Mapping[str, Any], ctx: OperationContext) -> None:
    if isinstance(op, Operation):
        op.prepare(conf, ctx)


def _cleanup(op: Any) -> None:
    if isinstance(op, Operation):
        op.cleanup()


@dataclass
class OpStage(StageBase):
    """``each`` (function or filter), ``map``, ``flat_map``, ``peek`` and a spout's ``to_values``.

    ``in_idx`` are the columns the operation reads (its tuple's fields ``in_names``). A function
    keeps every input column and appends ``new_fields``; ``map`` / ``flat_map`` / ``to_values``
    output only their values (``out_fields``).
    """

    kind: str = "function"
    op: Any = None
    in_idx: list[int] = field(default_factory=list)
    in_names: list[str] = field(default_factory=list)
    new_fields: list[FieldSpec] = field(default_factory=list)
    #: a function's input columns passed on to its output (``None``: all of them)
    keep_idx: list[int] | None = None

    def _call(self) -> Any:
        op, kind = self.op, self.kind
        if kind == "function":
            return op.execute
        if kind == "filter":
            return op.is_keep if isinstance(op, Filter) else op  # a Filter, or a callable (checked at build)
        if kind in ("map", "flat_map"):
            return op if callable(op) else op.execute  # a callable or an object with execute (checked at build)
        if kind == "peek":
            return op if callable(op) else op.accept
        return op.to_values

    def run(self, task: int, batches: Iterator[pa.RecordBatch], counts: list[int]) -> Iterator[pa.RecordBatch]:
        """Apply the operation to every tuple of the task."""
        _prepare(self.op, self.conf, self.context(task))
        call = self._call()
        cls = tuple_class(tuple(self.in_names))
        schema = self.out_schema()
        kind = self.kind
        n_new = len(self.new_fields) if kind == "function" else len(self.out_fields)
        what = f"{self.component} ({type(self.op).__name__})"
        for batch in batches:
            n = batch.num_rows
            counts[0] += n
            if n == 0:
                continue
            rows = rows_of(py_columns(batch, self.in_idx, self.in_fields), n)
            if kind == "filter":
                mask = [bool(call(cls(r))) for r in rows]
                out = batch.filter(pa.array(mask, type=pa.bool_()))
                if out.schema != schema:
                    out = to_batch([out.column(i).cast(schema.field(i).type) for i in range(out.num_columns)], schema)
                counts[1] += out.num_rows
                if out.num_rows:
                    yield out
                continue
            if kind == "peek":
                for r in rows:
                    call(cls(r))
                counts[1] += n
                yield (
                    batch
                    if batch.schema == schema
                    else to_batch(
                        [batch.column(i).cast(schema.field(i).type) for i in range(batch.num_columns)], schema
                    )
                )
                continue
            if kind == "function":
                coll = SingleFieldCollector(what) if n_new == 1 else TridentCollector(n_new, what)
                src, new_cols = _run_function(call, cls, rows, coll, n_new, self.keep_idx != [])
            else:
                src, new_cols = _run_values(call, cls, rows, kind, n_new, what)
            if not src:
                continue
            counts[1] += len(src)
            arrays: list[Any] = []
            if kind == "function":
                keep = range(batch.num_columns) if self.keep_idx is None else self.keep_idx
                if keep:
                    idx = pa.array(src, type=pa.int64())
                    arrays.extend(take_column(batch.column(c), idx, schema.field(j).type) for j, c in enumerate(keep))
                off = len(keep)
                for j, f in enumerate(self.new_fields):
                    arrays.append(build_array(new_cols[j], f, schema.field(off + j).type, what))
            else:
                for j, f in enumerate(self.out_fields):
                    arrays.append(build_array(new_cols[j], f, schema.field(j).type, what))
            yield to_batch(arrays, schema)
        _cleanup(self.op)


def _run_function(
    call: Any, cls: Any, rows: list[tuple[Any, ...]], coll: TridentCollector, n_new: int, track: bool
) -> tuple[list[int], list[list[Any]]]:
    """``execute`` every row; the emitted values per new field and (if ``track``) each one's input row."""
    src: list[int] = []
    out = coll.out
    if track:
        mark = 0
        for i, r in enumerate(rows):
            call(cls(r), coll)
            m = len(out)
            if m != mark:
                src.extend([i] * (m - mark))
                mark = m
    else:
        for r in rows:
            call(cls(r), coll)
    emitted = coll.take()
    if not track:
        src = [0] * len(emitted)  # only counted: no input column is passed on
    if isinstance(coll, SingleFieldCollector):
        return src, [emitted]
    cols = [list(c) for c in zip(*emitted, strict=True)] if emitted else [[] for _ in range(n_new)]
    return src, cols


def _run_values(
    call: Any, cls: Any, rows: list[tuple[Any, ...]], kind: str, n_new: int, what: str
) -> tuple[list[int], list[list[Any]]]:
    """``map`` / ``flat_map`` / ``to_values`` over every row: each output's input row and its values per field."""
    src: list[int] = []
    new_cols: list[list[Any]] = [[] for _ in range(n_new)]
    for i, r in enumerate(rows):
        if kind == "map":
            emitted = [_values(call(cls(r)), n_new, what)]
        elif kind == "flat_map":
            emitted = [_values(v, n_new, what) for v in call(cls(r))]
        else:  # to_values (a spout's record parser)
            emitted = [_values(call(r), n_new, what)]
        for vals in emitted:
            src.append(i)
            for j in range(n_new):
                new_cols[j].append(vals[j])
    return src, new_cols


def _values(v: Any, n: int, what: str) -> tuple[Any, ...]:
    from weir.errors import TopologyError

    vals = tuple(v) if isinstance(v, (list, tuple)) else (v,) if n == 1 else None
    if vals is None or len(vals) != n:
        msg = f"{what}: returned {v!r:.100}, expected {n} value(s) (a list or tuple, or a bare value for one field)"
        raise TopologyError(msg)
    return vals


@dataclass
class AggStage(StageBase):
    """Python aggregation of a partition, per group (``key_idx``) or as a whole.

    ``mode``:

    - ``partial`` — combiner: ``init`` each tuple and ``combine`` per key; emits key + partial
      (an any-field ``_weir_v``);
    - ``combine`` — combiner: ``combine`` the partials in column ``value_idx`` per key;
    - ``combiner`` — combiner over raw tuples (``init`` + ``combine``) in one step;
    - ``reducer`` — ``init()`` then ``reduce`` every tuple of the key;
    - ``aggregator`` — ``init`` / ``aggregate`` / ``complete`` per key.

    With ``emit_if_empty`` (a global aggregation of the whole batch in one task), a task without
    tuples still emits ``zero()`` / ``init()`` / what ``init`` + ``complete`` emit.
    """

    mode: str = "combiner"
    agg: Any = None
    key_idx: list[int] = field(default_factory=list)
    in_idx: list[int] = field(default_factory=list)
    in_names: list[str] = field(default_factory=list)
    value_idx: int = -1
    emit_if_empty: bool = False

    def run(self, task: int, batches: Iterator[pa.RecordBatch], counts: list[int]) -> Iterator[pa.RecordBatch]:
        """Aggregate the task's tuples and emit the results."""
        table = concat(batches)
        n = 0 if table is None else table.num_rows
        counts[0] += n
        if n == 0 and not (self.emit_if_empty and not self.key_idx):
            return
        agg, mode = self.agg, self.mode
        what = f"{self.component} ({type(agg).__name__})"
        n_out = len(self.out_fields) - len(self.key_idx)
        keys = rows_of(py_columns(table, self.key_idx, self.in_fields), n) if table is not None else []
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, k in enumerate(keys):
            groups.setdefault(k, []).append(i)
        if not groups and self.emit_if_empty:
            groups[()] = []
        if mode == "combine":
            vals = py_columns(table, [self.value_idx], self.in_fields)[0] if table is not None else []
            tuples: list[Any] = []
        else:
            vals = []
            cls = tuple_class(tuple(self.in_names))
            tuples = [cls(r) for r in rows_of(py_columns(table, self.in_idx, self.in_fields), n)] if n else []
        if mode == "aggregator":
            _prepare(agg, self.conf, self.context(task))
        src: list[int] = []  # the row whose key columns each output row copies (-1: none)
        out_cols: list[list[Any]] = [[] for _ in range(n_out)]
        coll = TridentCollector(n_out, what)
        for rows in groups.values():
            results: list[tuple[Any, ...]]
            if mode in ("partial", "combiner"):
                acc_v = agg.zero() if not rows else None
                for i in rows:
                    v = agg.init(tuples[i])
                    acc_v = v if acc_v is None else agg.combine(acc_v, v)
                results = [(acc_v,)]
            elif mode == "combine":
                acc_v = None
                for i in rows:
                    v = vals[i]
                    acc_v = v if acc_v is None else agg.combine(acc_v, v)
                results = [(agg.zero() if acc_v is None else acc_v,)]
            elif mode == "reducer":
                cur = agg.init()
                for i in rows:
                    cur = agg.reduce(cur, tuples[i])
                results = [(cur,)]
            else:
                state = agg.init(self.txid, coll)
                for i in rows:
                    ret = agg.aggregate(state, tuples[i], coll)
                    if ret is not None:
                        state = ret
                agg.complete(state, coll)
                results = coll.take()
            first = rows[0] if rows else -1
            for vals_out in results:
                src.append(first)
                for j in range(n_out):
                    out_cols[j].append(vals_out[j])
        if mode == "aggregator":
            _cleanup(agg)
        if not src:
            return
        counts[1] += len(src)
        schema = self.out_schema()
        arrays: list[Any] = []
        if self.key_idx:
            assert table is not None
            idx = pa.array(src, type=pa.int64())
            arrays.extend(take_column(table.column(c), idx, schema.field(j).type) for j, c in enumerate(self.key_idx))
        off = len(self.key_idx)
        for j in range(n_out):
            f = self.out_fields[off + j]
            arrays.append(build_array(out_cols[j], f, schema.field(off + j).type, what))
        yield to_batch(arrays, schema)
