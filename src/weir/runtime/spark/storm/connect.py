"""Driver side over Spark Connect: one micro-batch of a topology as DataFrame stages, not RDDs.

Spark Connect has no ``SparkContext``: no RDDs, no accumulators, no job-local properties. The
same task code runs (:mod:`weir.runtime.spark.storm.task`: a spout's, a bolt's, a windowed
bolt's loop), with only the plumbing between stages changed:

* each stage is one ``mapInArrow`` whose Python function runs a chain of components in one pass
  (a spout, then every bolt that reads it without a shuffle), partition *i* being task *i*;
* the spout's stage reads the batch without an exchange: the batch coalesced to at most the
  spout's *n* tasks, then one partition of presence rows (one per task), and a union concatenates
  partitions, so ``TaskContext.partitionId()`` tells each partition's task (:func:`_spout_tasks`) and every task
  runs once, with or without rows (as the classic job's spout task *i* reads the batch RDD's
  partition *i*); when the stage's chain does nothing without input (plain stateless bolts), the
  batch coalesced to at most *n* partitions alone, with its own columns (the sparse layout: no
  projection, no Python task without rows of the batch; tasks past the last partition report idle,
  :meth:`ConnectGraph._idle`, and a batch of no partition at all, where nothing ran, runs again in
  the first layout);
* a grouping is a ``repartitionById(n, "task")`` exchange over the producer's rows, each row
  ``(dest, task, kind, payload)`` a pickled chunk of input blocks for consumer task ``task``
  (made by the classic job's :func:`~weir.runtime.spark.storm.batch.key_for_grouping`, so
  fields / shuffle / all / global / direct route exactly as there), so partition *i* of the
  consumer stage is task *i* again; task 0 of the producer also sends each consumer task a
  presence row (kind ``"N"``), so every consumer task runs (and reports) without input and the
  exchange reads the producer's stage alone (no union with presence rows made by the server);
* a task's report (with its dead letters) is a row of kind ``"R"`` (its JSON text) that every later
  stage passes on, and the batch's one action collects the terminal stages' rows: the reports of
  every task come back with the job, as data;
* the txid, the driver's epoch and the lineage of kept bolt instances are constants of each batch's
  functions (a Connect client sends a stage's function with its plan anyway), set for the task
  before its loop runs (:func:`~weir.runtime.spark.storm.instances.given_lineage`);
* a component read by several consumers is persisted for the batch, as in the classic job;
* IBM Streams operators run as any bolt (their task loop is the same function): state handlers,
  consistent regions and checkpoints need nothing of a ``SparkContext``.

What it cannot do is refused at submit (:func:`connect_refusal`).
"""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Callable, Iterator
from itertools import chain
from typing import Any

from weir.runtime.spark.executor import TaskReport, TaskSpec, collect_reports
from weir.runtime.spark.spoutlog import logged_spout_task
from weir.runtime.spark.storm.instances import Lineage, given_lineage
from weir.runtime.spark.storm.task import TaskLoop, run_bolt_blocks, run_spout_task
from weir.topology.builder import GroupingKind, Topology

__all__ = ["SCHEMA", "ConnectGraph", "connect_refusal"]

#: every stage's output: a chunk of input blocks for task ``task`` of the input ``dest``, or a report
SCHEMA = "dest string, task int, kind string, payload binary"
_COLUMNS = ["dest", "task", "kind", "payload"]
#: the columns of the spout stage's input: the batch's row (a struct), its spout task, whether it is real
ROW_COLUMN, TASK_COLUMN, REAL_COLUMN = "__weir_row", "__weir_task", "__weir_real"
_ROWS = 256  # rows per output record batch

_NARROW = (GroupingKind.SHUFFLE, GroupingKind.NONE, GroupingKind.LOCAL_OR_SHUFFLE)

Func = Callable[[int, Iterator[Any]], Iterator[Any]]


def connect_refusal(topology: Topology) -> str | None:
    """Why ``topology``'s components cannot run over Spark Connect (None: they can).

    Spouts, bolts, windowed bolts and IBM Streams operators run there (their state handlers,
    consistent regions and checkpoints run in the task loop, the hand-off between Python workers is
    a file of the server's machine, and the driver's side of a region is the coordinator's, in this
    process). Refused: a spout that sends window marks, whose marks are positions among the rows of
    one Spark partition of the batch, each partition a spout task of its own on classic Spark; the
    Connect stages coalesce a batch of more partitions than the spout has tasks, so one task would
    read the marks of several partitions.
    """
    from weir.topology.components import Spout

    for c in topology.components.values():
        obj = c.obj
        if isinstance(obj, Spout) and (
            obj.window_mark_each_batch or type(obj).is_window_mark is not Spout.is_window_mark
        ):
            return (
                f"spout {c.id!r} sends window marks (window_mark_each_batch or is_window_mark), which are "
                "positions among the rows of one Spark partition of the batch; the Connect stages coalesce a "
                "batch of more partitions than the spout has tasks (one task reads several partitions) and "
                "do not keep that order. The final mark "
                "(process_available(final=True)) and Streams operators run over Connect"
            )
    return None


# ---- executor side -------------------------------------------------------------------------------


def _out_batch(dest: list[str], task: list[int], kind: list[str], payload: list[bytes]) -> Any:
    import pyarrow as pa

    return pa.RecordBatch.from_arrays(
        [
            pa.array(dest, pa.string()),
            pa.array(task, pa.int32()),
            pa.array(kind, pa.string()),
            pa.array(payload, pa.binary()),
        ],  # fmt: skip
        names=["dest", "task", "kind", "payload"],
    )


def _batch_rows(batches: Iterator[Any], mixed: bool, where: str) -> Iterator[Any]:
    """The rows of the batch DataFrame as PySpark ``Row`` objects (what ``df.rdd`` gives a classic spout).

    Each input row is ``(row, task, real)`` (:data:`ROW_COLUMN`, :data:`TASK_COLUMN`,
    :data:`REAL_COLUMN`): the batch's row as a struct, and whether it is one of the batch. ``mixed``:
    the partition may hold its task's presence row too (one spout task: the batch and the presence
    row in one partition); else a presence row among the batch's rows means the layout is broken.
    """
    from pyspark.sql import Row

    make: Any = None
    for rb in batches:
        row = rb.column(0)
        if make is None:
            make = Row(*[f.name for f in row.type])
        real = rb.column(2).to_pylist()
        if not mixed and not all(real):
            raise RuntimeError(_broken_layout(where, "a presence row among the batch's rows"))
        for is_real, *vals in zip(real, *_pylists(row.flatten()), strict=True):
            if is_real:
                yield make(*vals)


def _plain_rows(batches: Iterator[Any]) -> Iterator[Any]:
    """The rows of the batch DataFrame as ``Row`` objects, its record batches having its own columns.

    The sparse layout's input (:meth:`ConnectGraph._spread`): the batch coalesced, nothing added,
    every row one of the batch.
    """
    from pyspark.sql import Row

    make: Any = None
    for rb in batches:
        if make is None:
            make = Row(*rb.schema.names)
        for vals in zip(*_pylists(rb.columns), strict=True):
            yield make(*vals)


def _pylists(columns: list[Any]) -> list[list[Any]]:
    """Each Arrow column as a Python list, its zoned timestamps as naive local times (as classic rows have)."""
    import datetime

    cols = [c.to_pylist() for c in columns]
    for i, c in enumerate(cols):
        if c and getattr(columns[i].type, "tz", None):
            cols[i] = [v.astimezone().replace(tzinfo=None) if isinstance(v, datetime.datetime) else v for v in c]
    return cols


def _broken_layout(where: str, what: str) -> str:
    return (
        f"{where}: the spout stage's partitions are not the batch's partitions followed by one presence "
        f"row per task ({what}); weir's Connect stages need Spark to concatenate the partitions of a union "
        "and to keep coalesce narrow: turn off anything that re-plans them (adaptive execution is off "
        "for these jobs)"
    )


def _spout_tasks(
    batches: Iterator[Any], n: int, where: str, p: int, sparse: bool = False
) -> list[tuple[int, Iterator[Any]]]:
    """The spout tasks partition ``p`` of the spout stage's input runs, each with its record batches.

    The input (:meth:`ConnectGraph._spread`) is the batch coalesced to at most ``n`` partitions,
    ``k`` of them, followed by one partition holding a presence row for each of the ``n`` tasks (a
    union concatenates its children's partitions): batch partition ``p`` is task ``p`` (empty or
    not), and the presence partition (``p == k``) runs, without rows, every task ``j >= k`` that
    no batch partition ran. Every task runs exactly once. With one task the two are one partition.

    ``sparse``: the input is the batch coalesced to at most ``n`` partitions alone
    (:meth:`ConnectGraph._spread`): partition ``p`` is task ``p``, and tasks past the last
    partition do not run (their chain does nothing without input).
    """
    first = next((rb for rb in batches if rb.num_rows), None)
    if n == 1 or sparse:
        if not 0 <= p < n:
            raise RuntimeError(_broken_layout(where, f"partition {p} of the spout stage, with {n} spout tasks"))
        return [(p, chain((first,), batches) if first is not None else iter(()))]
    if first is not None and not first.column(2)[0].as_py():  # the presence partition
        ids: list[int] = []
        for rb in chain((first,), batches):
            if any(rb.column(2).to_pylist()):
                raise RuntimeError(_broken_layout(where, f"partition {p} holds presence rows and rows of the batch"))
            ids += rb.column(1).to_pylist()
        if sorted(ids) != list(range(n)) or p > n:
            raise RuntimeError(_broken_layout(where, f"partition {p} holds the presence rows of tasks {sorted(ids)}"))
        return [(j, iter(())) for j in range(p, n)]
    if not 0 <= p < n:  # a batch partition past the coalesced ones
        raise RuntimeError(_broken_layout(where, f"partition {p} of the batch, with {n} spout tasks"))
    return [(p, chain((first,), batches) if first is not None else iter(()))]


def _chunk_blocks(batches: Iterator[Any], passed: list[bytes]) -> Iterator[Any]:
    """The input blocks of the chunk rows of a consumer task; report rows are kept in ``passed``."""
    loads = pickle.loads
    for rb in batches:
        kinds = rb.column(2).to_pylist()
        payloads = rb.column(3).to_pylist()
        for k, p in zip(kinds, payloads, strict=True):
            if k == "C":
                yield from loads(p)
            elif k == "R":
                passed.append(p)


def _logged_rows(batches: Iterator[Any], passed: list[bytes]) -> Iterator[Any]:
    """A Storm spout task's part of the spout log (one row: the pickled list of its records)."""
    for rb in batches:
        for p in rb.column(3).to_pylist():
            yield pickle.loads(p)


def _task_of(first: Any, column: int, where: str) -> int:
    """The task of a stage's partition: every row names it (a partition of a union has another index)."""
    import pyarrow.compute as pc

    bounds = pc.min_max(first.column(column)).as_py()
    if bounds["min"] != bounds["max"]:
        msg = (
            f"{where}: one Spark partition holds rows of tasks {bounds['min']} and {bounds['max']}; weir's "
            "Connect stages need one task per partition (repartitionById): turn off anything that coalesces "
            "shuffle partitions of explicit repartitions"
        )
        raise RuntimeError(msg)
    return int(bounds["min"])


def _stage_function(
    base: str,
    funcs: tuple[Func, ...],
    outputs: tuple[tuple[str, Func], ...],
    lineage: Lineage,
    where: str,
    spread: int = 0,
    presence: tuple[tuple[str, int], ...] = (),
    sparse: bool = False,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function of one stage: its input, its chain of components, its outputs.

    ``base``: what the input rows are (``"batch"``, ``"chunks"`` or ``"logged"``); ``funcs`` the
    chain (each ``(task, records) -> records``, reports as ``("R", ...)`` / ``("D", ...)`` records);
    ``outputs`` the keyed routes ``(dest, key function)`` of the consumers reading this stage
    through an exchange (none: a terminal stage, only reports leave it); ``spread`` the spout
    tasks a ``"batch"`` stage runs (:func:`_spout_tasks`, ``sparse``: in the sparse layout);
    ``presence`` the ``(dest, tasks)`` of each consumer, to which task 0 sends one presence row per
    task (:func:`_run_task`).
    """

    def stage(batches: Iterator[Any]) -> Iterator[Any]:
        batches = iter(batches)
        passed: list[bytes] = []
        runs: list[tuple[int, Iterator[Any]]]
        if base == "batch":
            from pyspark import TaskContext

            ctx = TaskContext.get()
            found = _spout_tasks(batches, spread, where, ctx.partitionId() if ctx is not None else -1, sparse)
            runs = [(t, _plain_rows(b) if sparse else _batch_rows(b, spread == 1, where)) for t, b in found]
        else:
            first = next((rb for rb in batches if rb.num_rows), None)
            if first is None:  # a task always has a row (see ConnectGraph): this is no task's partition
                return
            batches = chain((first,), batches)
            runs = [
                (
                    _task_of(first, 1, where),
                    _logged_rows(batches, passed) if base == "logged" else _chunk_blocks(batches, passed),
                )
            ]
        for i, (pidx, it) in enumerate(runs):
            fs, outs = (funcs, outputs) if i == 0 else _fresh(funcs, outputs)
            yield from _run_task(pidx, it, fs, outs, lineage, passed, presence)

    return stage


def _fresh(funcs: tuple[Func, ...], outputs: tuple[tuple[str, Func], ...]) -> Any:
    """A copy of a stage's chain for one more task in the same partition (tasks never share a component).

    Each Spark task unpickles its own chain, so each has its own component objects; a partition
    that runs several tasks (the spout stage's presence partition) copies it for each one after the
    first the same way (weir's own functions, pickled in this process).
    """
    from pyspark import cloudpickle

    return cloudpickle.loads(cloudpickle.dumps((funcs, outputs)))


def _run_task(
    pidx: int,
    it: Iterator[Any],
    funcs: tuple[Func, ...],
    outputs: tuple[tuple[str, Func], ...],
    lineage: Lineage,
    passed: list[bytes],
    presence: tuple[tuple[str, int], ...] = (),
) -> Iterator[Any]:
    """Run task ``pidx`` of a stage's chain over its input ``it``: its output rows, then the reports.

    Task 0 ends with one presence row (kind ``"N"``, no payload) for every task of every consumer
    in ``presence`` (``(dest, tasks)``): each consumer task then has a row in the exchange, and
    runs, even when no producer task sent it a tuple. A stage runs its task 0 exactly once (the
    spout stage's layout, a logged spout's one row per task, these presence rows), so each
    consumer task gets one from each producer it reads.
    """
    reports: list[TaskReport] = []
    for f in funcs:  # each component's reports leave the chain where it ends
        it = f(pidx, it)
        if getattr(f, "_component", False):
            it = collect_reports(reports, it)
    dest: list[str] = []
    task: list[int] = []
    kind: list[str] = []
    payload: list[bytes] = []
    dumps = pickle.dumps
    given_lineage(lineage)
    try:
        if not outputs:
            for _ in it:
                pass
        else:
            routed: tuple[tuple[str, Iterator[Any]], ...]
            if len(outputs) == 1:
                routed = ((outputs[0][0], outputs[0][1](pidx, it)),)
            else:  # several routes read the same records
                records = list(it)
                routed = tuple((d, key(pidx, iter(records))) for d, key in outputs)
            for d, pairs in routed:
                for t, chunk in pairs:
                    dest.append(d)
                    task.append(t)
                    kind.append("C")
                    payload.append(dumps(chunk, pickle.HIGHEST_PROTOCOL))
                    if len(dest) >= _ROWS:
                        yield _out_batch(dest, task, kind, payload)
                        dest, task, kind, payload = [], [], [], []
    finally:
        given_lineage(None)
    for text in passed:
        dest.append("*")
        task.append(0)
        kind.append("R")
        payload.append(text)
    passed.clear()
    if pidx == 0:
        for d, n in presence:
            for t in range(n):
                dest.append(d)
                task.append(t)
                kind.append("N")
                payload.append(b"")
    for r in reports:
        dest.append("*")
        task.append(0)
        kind.append("R")
        payload.append(r.to_text().encode())
    if dest:
        yield _out_batch(dest, task, kind, payload)


def _bolt_func(spec: TaskSpec, loop: TaskLoop, txid: int, epoch: int | None) -> Func:
    def run(pidx: int, it: Iterator[Any]) -> Iterator[Any]:
        return loop(spec, pidx, txid, epoch, it)

    run._component = True  # type: ignore[attr-defined]
    return run


def _spout_func(spec: TaskSpec, cid: str, txid: int, final: bool, shared: bool) -> Func:
    def run(pidx: int, it: Iterator[Any]) -> Iterator[Any]:
        if shared:  # several spouts share the batch: rows are (spout id, json values)
            import json

            it = (list(json.loads(r[1]).values()) for r in it if r[0] == cid)
        return run_spout_task(spec, pidx, txid, it, final=final)

    run._component = True  # type: ignore[attr-defined]
    return run


def _logged_func(spec: TaskSpec, txid: int, final: bool) -> Func:
    def run(pidx: int, it: Iterator[Any]) -> Iterator[Any]:
        return logged_spout_task(spec, pidx, txid, it, final=final)

    run._component = True  # type: ignore[attr-defined]
    return run


def _narrow_func(source: str, stream: str, as_block: Callable[[str, Any], Any]) -> Func:
    def narrow(pidx: int, it: Iterator[Any]) -> Iterator[Any]:
        return (as_block(source, r) for r in it if r[1] == stream)

    return narrow


# ---- driver side ---------------------------------------------------------------------------------


class _Pending:
    """A stage not yet made: its input DataFrame, what its rows are, its chain, its partitions (-1: unknown)."""

    def __init__(
        self, df: Any, base: str, funcs: tuple[Func, ...], parts: int, last: str, chain: tuple[str, ...] = ()
    ) -> None:
        self.last = last  # the last component of the chain (for messages)
        self.chain = chain or (last,)  # every component of the chain, in order
        self.df = df
        self.base = base
        self.funcs = funcs
        self.parts = parts
        self.made: Any = None  # the stage's DataFrame, once made

    def then(self, f: Func, cid: str) -> _Pending:
        chain = self.chain if self.chain[-1] == cid else (*self.chain, cid)
        return _Pending(self.df, self.base, (*self.funcs, f), self.parts, cid, chain)


class ConnectGraph:
    """Builds and runs the DataFrame stages of one batch; returns the reports its tasks sent."""

    def __init__(
        self,
        topology: Topology,
        specs: dict[str, TaskSpec],
        loops: dict[str, TaskLoop],
        txid: int,
        epoch: int | None,
        lineage: Lineage,
        final: bool,
        key_for: Callable[..., Func],
        as_block: Callable[[str, Any], Any],
    ) -> None:
        """One batch's graph.

        ``key_for`` routes a producer's records to consumer tasks and ``as_block`` reads one without
        a shuffle: the classic job's (:func:`~weir.runtime.spark.storm.batch.key_for_grouping`), so
        both route alike.
        """
        self.key_for = key_for
        self.as_block = as_block
        self.topology = topology
        self.specs = specs
        self.loops = loops
        self.txid = txid
        self.epoch = epoch
        self.lineage = lineage
        self.final = final
        self.persisted: list[Any] = []
        #: spout stages in the sparse layout: (their chain, spout first; their tasks)
        self.sparse: list[tuple[tuple[str, ...], int]] = []
        self._sparse_allowed = True

    def run(
        self,
        batch: Any,
        spout_id: str | None,
        logged: dict[str, list[list[tuple[Any, ...]]]],
    ) -> list[TaskReport]:
        """Run every component over the batch DataFrame ``batch``; the reports of every task.

        A spout stage in the sparse layout (:meth:`_spread`) over a batch of no Spark partition
        runs no task, so no task of the job runs (each later task learns which task it is from its
        rows, and has none): nothing ran, and the batch runs again with every spout stage in the
        layout where every task runs.
        """
        table = self._run_job(batch, spout_id, logged, sparse=True)
        if self.sparse and table.num_rows == 0:  # the batch had no partition: no task ran
            self.sparse = []
            table = self._run_job(batch, spout_id, logged, sparse=False)
        reports = []
        for kind, payload in zip(table.column("kind").to_pylist(), table.column("payload").to_pylist(), strict=True):
            if kind == "R":
                rep = TaskReport.from_text(bytes(payload).decode())
                if rep is not None and rep.txid == self.txid:
                    reports.append(rep)
        return reports + self._idle(reports)

    def _run_job(
        self, batch: Any, spout_id: str | None, logged: dict[str, list[list[tuple[Any, ...]]]], sparse: bool
    ) -> Any:
        try:
            return _fetch(self.job(batch, spout_id, logged, sparse=sparse))
        finally:
            for df in self.persisted:
                with contextlib.suppress(Exception):  # the session is gone: nothing is cached any more
                    df.unpersist()
            self.persisted = []

    def _idle(self, reports: list[TaskReport]) -> list[TaskReport]:
        """The reports of the tasks a sparse spout stage did not run: no input, so nothing to do.

        In the sparse layout (:meth:`_spread`) the stage has ``m`` partitions, tasks ``0..m-1``,
        fewer than its ``n`` tasks when the batch has fewer than ``n`` partitions; its chain (the
        spout and stateless bolts without ticks) does nothing without input, so tasks ``m..n-1``
        count as run, idle. Only when the spout's reports are exactly tasks ``0..m-1``
        (the layout's); anything else is left to the check of missing reports.
        """
        idle: list[TaskReport] = []
        for comps, n in self.sparse:
            ran = {r.task for r in reports if r.component == comps[0]}
            m = len(ran)
            if not ran or ran != set(range(m)):
                continue
            for cid in comps:
                have = {r.task for r in reports if r.component == cid}
                idle += [TaskReport(cid, t, self.txid, extra={"idle": True}) for t in range(m, n) if t not in have]
        return idle

    def job(
        self, batch: Any, spout_id: str | None, logged: dict[str, list[list[tuple[Any, ...]]]], sparse: bool = True
    ) -> Any:
        """The batch's one DataFrame (not run): every stage over ``batch``, the terminal stages' rows.

        A component read by several consumers is persisted (:attr:`persisted`): :meth:`run`
        unpersists it after the job. ``sparse``: a spout stage whose chain does nothing without
        input may leave tasks unrun (:meth:`_spread`; they are in :attr:`sparse`), when every row
        of the job comes from ``batch`` (no Storm spout's logged tuples): then a batch of no
        partition runs no task at all, which :meth:`run` sees.
        """
        self._sparse_allowed = sparse and not logged
        from pyspark.sql import functions as sf

        topo = self.topology
        spark = batch.sparkSession
        _adaptive_off(spark)
        fused = self._fused(set(logged))
        # exchanges each producer feeds: (consumer, input index, its subscription)
        routes: dict[str, list[tuple[str, int, Any]]] = {c: [] for c in topo.order}
        for cid in topo.order:
            comp = topo.components[cid]
            if comp.is_spout or cid in fused:
                continue
            for i, sub in enumerate(comp.inputs):
                routes[sub.source].append((cid, i, sub))
        outs: dict[str, _Pending] = {}
        for cid in topo.order:
            comp = topo.components[cid]
            spec = self.specs[cid]
            if cid in logged:
                parts = logged[cid]
                rows = [("", i, "L", pickle.dumps(p, pickle.HIGHEST_PROTOCOL)) for i, p in enumerate(parts)]
                df = spark.createDataFrame(rows, _output_schema()).repartitionById(len(parts), "task")
                func = _logged_func(spec, self.txid, self.final)
                outs[cid] = _Pending(df, "logged", (func,), len(parts), cid)
            elif comp.is_spout:
                narrow = [fused[c.id] for c, _ in topo.consumers(cid) if c.id in fused]
                # its partitions: those of the bolt reading it without a shuffle, else its widest consumer's
                n = narrow[0] if narrow else max([c.parallelism for c, _ in topo.consumers(cid)] or [1])
                func = _spout_func(spec, cid, self.txid, self.final, spout_id is None)
                outs[cid] = _Pending(batch, "batch", (func,), n, cid)  # spread when its chain is known
            elif cid in fused:
                sub = comp.inputs[0]
                outs[cid] = (
                    outs[sub.source]
                    .then(_narrow_func(sub.source, sub.stream, self.as_block), cid)
                    .then(_bolt_func(spec, self.loops[cid], self.txid, self.epoch), cid)
                )
            else:
                inputs = []
                for src in dict.fromkeys(sub.source for sub in comp.inputs):
                    made = self._made(outs[src], routes[src])
                    if len({c for c, _, _ in routes[src]}) > 1:  # persisted, read by several consumers
                        made = made.where(sf.col("dest").startswith(f"{cid}\x00") | (sf.col("kind") == "R"))
                    inputs.append(made)
                df = inputs[0]
                for other in inputs[1:]:
                    df = df.unionByName(other)
                n = comp.parallelism
                df = df.repartitionById(n, "task")  # the producers' task 0 sent each task a presence row
                func = _bolt_func(spec, self.loops[cid], self.txid, self.epoch)
                outs[cid] = _Pending(df, "chunks", (func,), n, cid)
        terminals = [self._made(outs[c], []) for c in topo.order if not topo.consumers(c)]
        job = terminals[0]
        for other in terminals[1:]:
            job = job.unionByName(other)
        return job

    @staticmethod
    def _spread(batch: Any, n: int, sparse: bool = False) -> Any:
        """The batch's rows as ``n`` spout tasks without an exchange; every task has a partition.

        The batch coalesced to at most ``n`` partitions (narrow: partition *i* of the batch is task *i*
        when it has at most ``n``, as the classic job's spout task *i* reads the batch RDD's partition
        *i*), followed by one partition of ``n`` presence rows, one per task: a union concatenates its
        children's partitions, so the stage tells which task a partition is from its index
        (:func:`_spout_tasks`): the presence partition runs the tasks no partition of the batch ran. With
        one task both go to one partition. The batch's columns travel as
        one struct: the stage needs neither their names nor their types (no schema round trip to
        the server per batch).

        ``sparse`` (a chain that does nothing without input, :meth:`_sparse_ok`): the batch
        coalesced to at most ``n`` partitions alone, no union and no projection (the stage reads
        the batch's own columns, :func:`_plain_rows`): a batch of ``n`` partitions or more is ``n``
        Python tasks and no more. Partition *p* is task *p*; the tasks past the last
        partition had no input (:meth:`_idle`); task 0 sends the consumers' presence rows, and a
        batch of no partition, with no task 0, runs nothing (:meth:`run` runs it again in the
        first layout).
        """
        from pyspark.sql import functions as sf
        from pyspark.sql.types import IntegerType

        if sparse:
            return batch.coalesce(n)
        rows = batch.select(
            sf.struct("*").alias(ROW_COLUMN),
            sf.lit(None).cast(IntegerType()).alias(TASK_COLUMN),
            sf.lit(True).alias(REAL_COLUMN),
        )
        tasks = batch.sparkSession.range(0, n, 1, 1).select(
            sf.lit(None).alias(ROW_COLUMN),
            sf.col("id").cast(IntegerType()).alias(TASK_COLUMN),
            sf.lit(False).alias(REAL_COLUMN),
        )
        if n == 1:
            return rows.unionByName(tasks).coalesce(1)
        return rows.coalesce(n).unionByName(tasks)

    def _sparse_ok(self, chain: tuple[str, ...]) -> bool:
        """Whether the spout stage running ``chain`` (spout first) may leave tasks without input unrun.

        Its bolts must do nothing observable without input: plain bolts (not stateful, windowed or
        Streams operators), without tick tuples or marks, and the batch is not the final mark's.
        """
        if self.final:
            return False
        for cid in chain[1:]:
            spec = self.specs[cid]
            if self.loops[cid] is not run_bolt_blocks or spec.stateful or spec.ticks is not None or spec.punctuation:
                return False
        return not self.specs[chain[0]].punctuation

    def _fused(self, logged: set[str]) -> dict[str, int]:
        """Bolts run in their producer's stage (one shuffle-grouped input from a producer with one consumer).

        A spout's batch is spread over the partitions of the bolt it feeds; a Storm spout (``logged``)
        has one partition per task, as has a bolt.
        """
        topo = self.topology
        fused: dict[str, int] = {}
        for cid in topo.order:
            comp = topo.components[cid]
            if comp.is_spout or len(comp.inputs) != 1 or comp.inputs[0].grouping.kind not in _NARROW:
                continue
            src = comp.inputs[0].source
            if len(topo.consumers(src)) != 1:
                continue
            producer = topo.components[src]
            if producer.is_spout and (src not in logged or producer.parallelism == comp.parallelism):
                fused[cid] = comp.parallelism
            elif src in fused and fused[src] == comp.parallelism:
                fused[cid] = comp.parallelism
            elif not producer.is_spout and src not in fused and producer.parallelism == comp.parallelism:
                fused[cid] = comp.parallelism
        return fused

    def _made(self, pending: _Pending, routes: list[tuple[str, int, Any]]) -> Any:
        """The DataFrame of the stage ``pending`` with the exchanges ``routes`` (made once per batch)."""
        if pending.made is not None:
            return pending.made
        topo = self.topology
        producers = pending.parts if pending.parts > 0 else 1
        outputs = []
        presence: dict[str, tuple[str, int]] = {}  # per consumer (not per input): its first input's dest
        for cid, i, sub in routes:
            n = topo.components[cid].parallelism
            src_fields = topo.components[sub.source].outputs[sub.stream]
            idx = [src_fields.field_index(f) for f in sub.grouping.fields]
            outputs.append((f"{cid}\x00{i}", self.key_for(sub, idx, n, producers)))
            presence.setdefault(cid, (f"{cid}\x00{i}", n))
        where = f"topology {self.specs[pending.last].topology!r}, stage of component {pending.last!r}, txid {self.txid}"
        source, sparse = pending.df, False
        if pending.base == "batch":
            sparse = self._sparse_allowed and pending.parts >= 1 and self._sparse_ok(pending.chain)
            source = self._spread(pending.df, pending.parts, sparse)
            if sparse:
                self.sparse.append((pending.chain, pending.parts))
        fn = _stage_function(
            pending.base,
            pending.funcs,
            tuple(outputs),
            self.lineage,
            where,
            pending.parts,
            tuple(presence.values()),
            sparse,
        )
        if pending.base != "batch":
            columns = _COLUMNS
        else:  # the sparse layout's input is the batch's own columns: MapInArrow reads all of them
            columns = [] if sparse else [ROW_COLUMN, TASK_COLUMN, REAL_COLUMN]
        df = _map_in_arrow(source, fn, columns)
        if len({c for c, _, _ in routes}) > 1:
            df = df.persist()
            self.persisted.append(df)
        pending.made = df
        return df


_ADAPTIVE_OFF: Any = None  # the last session whose adaptive execution weir turned off


def _adaptive_off(spark: Any) -> None:
    """Turn adaptive query execution off in ``spark`` (once per session: one Config RPC).

    The stages place rows in tasks themselves (``repartitionById``), so adaptive execution has
    nothing to coalesce or re-plan; it only splits each batch into one Spark job per exchange
    (three jobs for a word count's batch instead of one) and could coalesce partitions of
    different tasks, which :func:`_task_of` refuses. Over Connect the batch's session is the
    streaming query's own (the relay's), as the Trident runner assumes when it does the same.
    """
    global _ADAPTIVE_OFF
    if spark is not _ADAPTIVE_OFF:
        spark.conf.set("spark.sql.adaptive.enabled", "false")
        _ADAPTIVE_OFF = spark


def _fetch(job: Any) -> Any:
    """The rows of ``job`` (a Connect DataFrame) as an Arrow table: one ``ExecutePlan``, nothing else.

    ``collect()`` asks the server for a setting (``spark.sql.execution.pyspark.binaryAsBytes``) on
    every call, one more round trip per batch, and builds ``Row`` objects the caller reads two
    columns of.
    """
    table, _ = job._to_table()
    return table


def _output_schema() -> Any:
    from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

    global _OUTPUT
    if _OUTPUT is None:
        _OUTPUT = StructType(
            [
                StructField("dest", StringType()),
                StructField("task", IntegerType()),
                StructField("kind", StringType()),
                StructField("payload", BinaryType()),
            ]
        )
    return _OUTPUT


_OUTPUT: Any = None


def _map_in_arrow(df: Any, fn: Callable[[Iterator[Any]], Iterator[Any]], columns: list[str]) -> Any:
    """``df.mapInArrow(fn, SCHEMA)`` without the round trips PySpark's Connect client makes for it.

    On every call it asks the server to parse the schema string and for ``df``'s columns, which the
    caller knows (``columns``); the result's schema is known too, so nothing asks for it later.
    """
    from weir.runtime.spark.connect import map_in_arrow_known

    return map_in_arrow_known(df, fn, columns, _output_schema())
