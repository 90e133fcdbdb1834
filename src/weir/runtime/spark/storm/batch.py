"""Driver side: run one micro-batch of a topology as one Spark job over RDDs.

Component *c* is a stage with ``parallelism(c)`` partitions; partition *i* is task *i*. A bolt's
input is the union of its subscriptions, each keyed by its grouping (fields: a stable hash of the
field values mod the parallelism; shuffle: round-robin from the producing partition; global: task 0;
all: every task; direct: the task the producer chose) and partitioned by that key. Every stage's
input of a shuffle-grouped bolt whose producer already has at most as many partitions stays narrow
(no shuffle: both components run in one Python pass). Task reports and dead letters travel in an
accumulator; only a component read by several consumers is persisted, and one action over the
terminal components runs the whole graph.

Tuples travel in blocks (runs of one task's emits on one stream: see
:func:`~weir.runtime.spark.storm.task.run_task_blocks`), and a shuffled chunk holds blocks of
values only. The Python functions of a run's components are made, pickled and sent to the JVM once
per run: a task reads its batch's txid and epoch from its Spark job's local property
(:data:`~weir.runtime.spark.executor.BATCH_PROPERTY`), and a batch builds its JVM RDDs directly
from those functions (PySpark's ``PythonRDD``, ``PairwiseRDD`` and ``PythonPartitioner``, as its own
``mapPartitions`` and ``partitionBy`` do), about 20 py4j calls for a word count's batch.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.rdd import RDD

from weir._util import HASH_CACHEABLE, stable_hash
from weir.checkpoint.coordinator import JobOutcome, TaskFailure
from weir.checkpoint.stats import BatchStats
from weir.runtime.spark.executor import (
    BATCH_PROPERTY,
    ReportAccumulatorParam,
    TaskReport,
    TaskSpec,
    batch_of_job,
    batch_property,
    outcome_of,
    send_reports,
)
from weir.runtime.spark.pacing import pacing_stream
from weir.runtime.spark.runner import BatchRunner
from weir.runtime.spark.session import is_connect
from weir.runtime.spark.spoutlog import SpoutDriver, logged_spout_task
from weir.runtime.spark.storm.connect import ConnectGraph
from weir.runtime.spark.storm.instances import LINEAGE_PROPERTY, Lineage, LineageTracker
from weir.runtime.spark.storm.task import TaskLoop, run_spout_task, task_loop
from weir.topology.builder import GroupingKind, Subscription, Topology
from weir.topology.punctuation import MarkRecord

__all__ = ["BatchJob", "key_for_grouping"]


def key_for_grouping(
    sub: Subscription, field_idx: list[int], n: int, producers: int = 1
) -> Callable[[int, Iterator[tuple[Any, ...]]], Iterator[tuple[int, list[tuple[Any, ...]]]]]:
    """A ``mapPartitionsWithIndex`` function routing a producer's output to consumer tasks (parallelism ``n``).

    It yields ``(task, chunk)`` pairs, a chunk being a list of input blocks of that consumer task
    (``(source, stream, [values, ...], source_task)``, see
    :func:`~weir.runtime.spark.storm.task.run_task_blocks`) holding up to ``_SHUFFLE_CHUNK`` tuples
    in their order: PySpark's shuffle then handles a few large values instead of one pair per
    tuple, and a tuple travels as its values only. A mark (``("P", ...)`` record) goes to every
    consumer task, in its place among the tuples, as a
    :class:`~weir.topology.punctuation.MarkRecord` saying that ``producers`` tasks send it.
    """
    kind = sub.grouping.kind
    source, stream = sub.source, sub.stream
    limit = _SHUFFLE_CHUNK
    one = field_idx[0] if len(field_idx) == 1 else -1

    def keyed(pidx: int, recs: Iterator[tuple[Any, ...]]) -> Iterator[tuple[int, list[tuple[Any, ...]]]]:
        rr = pidx
        cache: dict[Any, int] = {}  # key -> task: a batch repeats keys far more often than it has them
        chunks: list[list[tuple[Any, ...]]] = [[] for _ in range(n)]
        runs: list[list[Any] | None] = [None] * n  # the open block of each consumer task
        sizes = [0] * n
        run_task = -1  # the producing task of the open blocks

        def close(t: int) -> Iterator[tuple[int, list[tuple[Any, ...]]]]:
            yield t, chunks[t]
            chunks[t] = []
            runs[t] = None
            sizes[t] = 0

        for r in recs:
            tag = r[0]
            if r[1] != stream:
                continue
            if tag == "B":
                batch = r[2]
            elif tag == "T":
                batch = (r[2],)
            else:
                if tag == "P":  # punctuation: to every consumer task, in order
                    mark = (source, stream, MarkRecord(r[2], producers), r[3])
                    for t in range(n):
                        chunks[t].append(mark)
                        runs[t] = None
                        sizes[t] += 1
                        if sizes[t] >= limit:
                            yield from close(t)
                continue
            if r[3] != run_task:
                run_task = r[3]
                runs = [None] * n
            if kind is GroupingKind.FIELDS:
                for vals in batch:
                    if one >= 0 and type(key := vals[one]) in HASH_CACHEABLE:
                        k = cache.get(key)
                        if k is None:
                            if len(cache) > 200_000:
                                cache.clear()
                            k = cache[key] = stable_hash(key) % n
                    else:  # tuples, floats, bools...: equal-but-different values must not share a cache slot
                        k = stable_hash(vals[one] if one >= 0 else tuple(vals[i] for i in field_idx)) % n
                    run = runs[k]
                    if run is None:
                        run = runs[k] = []
                        chunks[k].append((source, stream, run, run_task))
                    run.append(vals)
                    sizes[k] += 1
                    if sizes[k] >= limit:
                        yield from close(k)
                continue
            for vals in batch:
                if kind is GroupingKind.GLOBAL:
                    targets: Any = (0,)
                elif kind is GroupingKind.ALL:
                    targets = range(n)
                elif kind is GroupingKind.DIRECT:
                    targets = (((r[4] if tag == "T" and r[4] is not None else 0) % n),)
                else:  # shuffle, none, local_or_shuffle
                    targets = (rr % n,)
                    rr += 1
                for k in targets:
                    run = runs[k]
                    if run is None:
                        run = runs[k] = []
                        chunks[k].append((source, stream, run, run_task))
                    run.append(vals)
                    sizes[k] += 1
                    if sizes[k] >= limit:
                        yield from close(k)
        for t, chunk in enumerate(chunks):
            if chunk:
                yield t, chunk

    return keyed


_SHUFFLE_CHUNK = 2048  # tuples per shuffled value


_NARROW = (GroupingKind.SHUFFLE, GroupingKind.NONE, GroupingKind.LOCAL_OR_SHUFFLE)


@dataclass(frozen=True)
class _Chain:
    """Python functions to run, pipelined in one Python pass, over a JVM RDD (a PySpark ``PipelinedRDD``).

    ``key`` names the composed function in the run's cache: the functions of a run's components
    read their batch from the job (:func:`~weir.runtime.spark.executor.batch_of_job`), so each
    composed function is pickled and sent to the JVM once per run, not once per batch.
    """

    rdd: Any  # the (Scala) RDD it reads
    deserializer: Any  # how the Python side reads that RDD's records
    key: tuple[Any, ...]
    funcs: tuple[Callable[[int, Iterator[Any]], Iterator[Any]], ...] = ()

    def then(self, part: Any, func: Callable[[int, Iterator[Any]], Iterator[Any]]) -> _Chain:
        return _Chain(self.rdd, self.deserializer, (*self.key, part), (*self.funcs, func))


def _compose(funcs: tuple[Callable[[int, Iterator[Any]], Iterator[Any]], ...]) -> Callable[..., Iterator[Any]]:
    def run(pidx: int, it: Iterator[Any]) -> Iterator[Any]:
        for f in funcs:
            it = f(pidx, it)
        return it

    return run


def _drain(pidx: int, it: Iterator[Any]) -> Iterator[Any]:
    """The end of a terminal component: run it, send nothing back."""
    for _ in it:
        pass
    return iter(())


def _shuffle_out(pidx: int, it: Iterator[tuple[int, list[Any]]]) -> Iterator[bytes]:
    """``(task, chunk)`` pairs as PySpark's shuffle frames: the task (a long), then the pickled chunk."""
    from pyspark.serializers import CPickleSerializer, pack_long

    dumps = CPickleSerializer().dumps
    for task, chunk in it:
        yield pack_long(task)
        yield dumps(chunk)


class _RunPlan:
    """What a run's batches share on the JVM: classes, partitioners, and each composed Python function."""

    def __init__(self, sc: Any) -> None:
        from pyspark.serializers import AutoBatchedSerializer, CPickleSerializer, NoOpSerializer

        self.sc = sc
        python = sc._jvm.org.apache.spark.api.python
        self.PythonRDD = python.PythonRDD
        self.PairwiseRDD = python.PairwiseRDD
        self.PythonPartitioner = python.PythonPartitioner
        self.partitioners: dict[int, Any] = {}
        self.functions: dict[tuple[Any, ...], Any] = {}
        self.raw = NoOpSerializer()
        self.pickled = CPickleSerializer()
        self.batched = AutoBatchedSerializer(CPickleSerializer())
        self.storage_level: Any = None

    def materialize(self, chain: _Chain, serializer: Any) -> Any:
        """The (Scala) ``PythonRDD`` running ``chain``; its output written with ``serializer``."""
        from pyspark.core.rdd import _wrap_function

        key = (*chain.key, type(serializer).__name__)
        func = self.functions.get(key)
        profiler = None
        if func is None:
            run = _compose(chain.funcs) if len(chain.funcs) != 1 else chain.funcs[0]
            sc = self.sc
            if sc.profiler_collector and sc._conf.get("spark.python.profile", "false") == "true":
                profiler = sc.profiler_collector.new_profiler(sc)  # one per function: it sums the run's batches
            func = self.functions[key] = _wrap_function(sc, run, chain.deserializer, serializer, profiler)
        rdd = self.PythonRDD(chain.rdd, func, False, False)
        if profiler is not None:
            self.sc.profiler_collector.add_profiler(rdd.id(), profiler)
        return rdd

    def partitioner(self, n: int) -> Any:
        p = self.partitioners.get(n)
        if p is None:
            p = self.partitioners[n] = self.PythonPartitioner(n, 0)
        return p

    def persist(self, rdd: Any) -> Any:
        if self.storage_level is None:
            self.storage_level = self.sc._getJavaStorageLevel(StorageLevel.MEMORY_AND_DISK)
        return rdd.persist(self.storage_level)


@dataclass
class BatchJob(BatchRunner):
    """Builds and runs the RDD graph of one batch for a topology."""

    topology: Topology
    specs: dict[str, TaskSpec]
    on_dead_letters: Callable[[int, list[dict[str, Any]]], None] | None = None
    last_stats: BatchStats = field(default_factory=BatchStats)
    #: the Storm spouts (``next_tuple``) of the topology, run on the driver with their spout log
    spout_driver: SpoutDriver | None = None

    def __post_init__(self) -> None:
        #: marks may flow (IBM Streams operators or punctuating spouts): tasks align their input
        self.punctuation = topology_punctuates(self.topology)
        for spec in self.specs.values():
            spec.punctuation = self.punctuation
        #: each bolt's task loop, chosen once (not per task): a bolt's, a windowed bolt's or an operator's
        self.loops: dict[str, TaskLoop] = {
            c.id: task_loop(c.obj) for c in self.topology.components.values() if not c.is_spout
        }
        self._plan: _RunPlan | None = None
        #: one accumulator per run: every component's function is made once and carries it
        self._acc: Any = None
        #: which kept bolt instances may continue into a batch (see :mod:`.instances`)
        self._lineage = LineageTracker()
        #: the session is Spark Connect's (seen by :meth:`create_stream`): batches come as DataFrames
        self._connect = False

    def punctuates(self) -> bool:
        """Whether marks flow in this topology (Streams operators or punctuating spouts)."""
        return self.punctuation

    def wants_dataframe(self) -> bool:
        """Over Spark Connect the batch's DataFrame (there is no RDD); classic PySpark: its RDD of rows."""
        return self._connect

    def run_final(self, batch: Any, spout_id: str | None, txid: int, epoch: int | None) -> JobOutcome:
        """The final-mark transaction: every spout task sends a final mark, nothing else."""
        return self.run(batch, spout_id, txid, epoch, final=True)

    def run(
        self, batch_rdd: RDD[Any], spout_id: str | None, txid: int, epoch: int | None, *, final: bool = False
    ) -> JobOutcome:
        """Run every component over ``batch_rdd`` (rows of the spout stream); collect reports.

        ``final``: every spout task ends its part with a final mark (the end of a finite run).
        """
        t0 = time.perf_counter()
        connect = is_connect(batch_rdd)
        if not connect:
            sc = batch_rdd.context
            if self._plan is None or self._plan.sc is not sc:
                self._plan = _RunPlan(sc)
                self._acc = sc.accumulator([], ReportAccumulatorParam())
            plan, acc = self._plan, self._acc
        logged: dict[str, list[list[tuple[Any, ...]]]] = {}
        if self.spout_driver is not None:
            logged, spout_failures = self.spout_driver.batch(txid)
            if spout_failures:
                return JobOutcome(failures=spout_failures)
        lineage = self._lineage.next()
        if connect:  # Spark Connect: DataFrame stages, reports as rows (see .connect)
            try:
                graph = ConnectGraph(
                    self.topology, self.specs, self.loops, txid, epoch, lineage, final, key_for_grouping, _as_block
                )
                reports = graph.run(batch_rdd, spout_id, logged)
            except Exception as exc:
                self._lineage.finished(txid, lineage, ok=False)
                return JobOutcome(
                    failures=[TaskFailure("<spark>", -1, f"the Spark job failed: {_short(exc)}", str(exc)[-4000:])]
                )
            return self._outcome(reports, txid, lineage, t0)
        acc.value = []  # a failed job's tasks send nothing (Spark drops their updates); reports name their txid
        outs: dict[str, tuple[_Chain, int]] = {}  # component -> (its output, its partitions)
        persisted: list[Any] = []
        topo = self.topology
        try:
            batch = _Chain(batch_rdd._jrdd.rdd(), batch_rdd._jrdd_deserializer, ("batch",))
            batch_parts = -1
            for cid in topo.order:
                comp = topo.components[cid]
                if cid in logged:
                    out = (self._logged_chain(sc, logged[cid], cid, acc, final), comp.parallelism)
                elif comp.is_spout:
                    if batch_parts < 0:
                        batch_parts = batch.rdd.getNumPartitions()
                    out = (self._spout_chain(batch, spout_id, cid, acc, final), batch_parts)
                else:
                    out = self._bolt_chain(comp, outs, acc)
                if len(topo.consumers(cid)) > 1:  # read by several: computed once, kept for the batch
                    rdd = plan.persist(plan.materialize(out[0], plan.batched))
                    persisted.append(rdd)
                    out = (_Chain(rdd, plan.batched, ("persisted", cid)), out[1])
                outs[cid] = out
            terminals = [plan.materialize(outs[c][0].then("drain", _drain), plan.raw)
                         for c in topo.order if not topo.consumers(c)]  # fmt: skip
            job = terminals[0]
            for other in terminals[1:]:
                job = job.union(other)
            sc.setLocalProperty(BATCH_PROPERTY, batch_property(txid, epoch))
            sc.setLocalProperty(LINEAGE_PROPERTY, lineage.to_property())
            try:
                job.count()
            finally:
                sc.setLocalProperty(BATCH_PROPERTY, None)
                sc.setLocalProperty(LINEAGE_PROPERTY, None)
            sent: list[TaskReport] = [r for r in acc.value if r.txid == txid]
        except Exception as exc:  # a worker died, OOM, ...: the whole job failed
            self._lineage.finished(txid, lineage, ok=False)
            return JobOutcome(
                failures=[TaskFailure("<spark>", -1, f"the Spark job failed: {_short(exc)}", str(exc)[-4000:])]
            )
        finally:
            for r in persisted:
                r.unpersist(False)
        return self._outcome(sent, txid, lineage, t0)

    def _outcome(self, sent: list[TaskReport], txid: int, lineage: Lineage, t0: float) -> JobOutcome:
        """The batch's outcome from the reports its tasks sent (either plumbing)."""
        outcome, reports = outcome_of(sent, self._expected_tasks(), {})
        self._lineage.finished(txid, lineage, ok=outcome.ok)
        dead = [d for r in reports for d in r.dead_letters]
        comps = self.topology.components
        stats = BatchStats.of(
            reports,
            tuples_in=sum(r.n_in for r in reports if comps[r.component].is_spout),
            dead_letters=len(dead),
            job_ms=(time.perf_counter() - t0) * 1000,
        )
        self.last_stats = stats
        outcome.stats = stats.as_dict()
        if outcome.ok and dead and self.on_dead_letters is not None:
            self.on_dead_letters(txid, dead)
        return outcome

    def _bolt_chain(self, comp: Any, outs: dict[str, tuple[_Chain, int]], acc: Any) -> tuple[_Chain, int]:
        topo = self.topology
        plan = self._plan
        assert plan is not None
        n = comp.parallelism
        cid = comp.id
        spec = self.specs[cid]

        def run_part(
            pidx: int, it: Iterator[Any], _spec: TaskSpec = spec, _cid: str = cid, _loop: TaskLoop = self.loops[cid]
        ) -> Iterator[Any]:
            txid, epoch = batch_of_job(f"component {_cid!r}")
            return send_reports(acc, _loop(_spec, pidx, txid, epoch, it))

        if len(comp.inputs) == 1 and comp.inputs[0].grouping.kind in _NARROW:
            sub = comp.inputs[0]
            src, parts = outs[sub.source]
            if parts == n:  # each producer task feeds the consumer task of its index: no shuffle
                stream, source = sub.stream, sub.source

                def narrow(pidx: int, it: Iterator[Any], _s: str = stream, _c: str = source) -> Iterator[Any]:
                    return (_as_block(_c, r) for r in it if r[1] == _s)

                return src.then(("narrow", cid, source, stream), narrow).then(("run", cid), run_part), n
        pairs = None
        for i, sub in enumerate(comp.inputs):
            src, producers = outs[sub.source]
            src_fields = topo.components[sub.source].outputs[sub.stream]
            idx = [src_fields.field_index(f) for f in sub.grouping.fields]
            keyed = src.then(("keyed", cid, i, producers), key_for_grouping(sub, idx, n, producers))
            part = plan.PairwiseRDD(plan.materialize(keyed.then("out", _shuffle_out), plan.raw)).asJavaPairRDD()
            pairs = part if pairs is None else pairs.union(part)
        assert pairs is not None
        shuffled = plan.PythonRDD.valueOfPair(pairs.partitionBy(plan.partitioner(n))).rdd()
        return _Chain(shuffled, plan.pickled, ("shuffled", cid), (_chunks,)).then(("run", cid), run_part), n

    def _expected_tasks(self) -> list[tuple[str, int]]:
        """Every (bolt, task) that must report (a spout's partitions vary with its source)."""
        return [(cid, t) for cid, c in self.topology.components.items() if not c.is_spout for t in range(c.parallelism)]

    def _logged_chain(self, sc: Any, parts: list[list[tuple[Any, ...]]], cid: str, acc: Any, final: bool) -> _Chain:
        """A Storm spout's tuples of the batch, one partition per spout task (from the spout log)."""
        rdd = sc.parallelize(parts, len(parts))
        spec = self.specs[cid]

        def run(pidx: int, it: Iterator[Any], _s: TaskSpec = spec, _c: str = cid) -> Iterator[Any]:
            txid, _epoch = batch_of_job(f"spout {_c!r}")
            return send_reports(acc, logged_spout_task(_s, pidx, txid, it, final=final))

        return _Chain(rdd._jrdd.rdd(), rdd._jrdd_deserializer, ("logged", cid)).then(("spout", cid, final), run)

    def create_stream(self, spout_id: str, spout: Any, spark: Any, context: Any) -> Any:
        """A Storm spout's batches are paced by :func:`~weir.runtime.spark.pacing.pacing_stream`."""
        self._connect = is_connect(spark)
        if self.spout_driver is not None and spout_id in self.spout_driver.spout_ids:
            return pacing_stream(spark, context, self.spout_driver.more_file)
        return spout.create_stream(spark, context)

    def after_batch(self, txid: int, skipped: bool) -> None:
        """The batch ``txid`` is committed (or was, for a skipped replay): the spouts ack its tuples."""
        if self.spout_driver is not None:
            self.spout_driver.committed(txid)

    def abandoned(self) -> None:
        """A batch failed every attempt: the spouts fail its tuples and are closed."""
        if self.spout_driver is not None:
            self.spout_driver.abandoned()

    def close(self) -> None:
        """The topology stops: close the spout tasks."""
        if self.spout_driver is not None:
            self.spout_driver.close()

    def _spout_chain(self, batch: _Chain, spout_id: str | None, cid: str, acc: Any, final: bool) -> _Chain:
        spec = self.specs[cid]
        if spout_id is None:  # several spouts share the batch: rows are (spout id, json values)
            import json

            def pick(pidx: int, it: Iterator[Any], _c: str = cid, _s: TaskSpec = spec) -> Iterator[Any]:
                txid, _epoch = batch_of_job(f"spout {_c!r}")
                rows = (list(json.loads(r[1]).values()) for r in it if r[0] == _c)
                return send_reports(acc, run_spout_task(_s, pidx, txid, rows, final=final))

            return batch.then(("spout", cid, final), pick)

        def conv(pidx: int, it: Iterator[Any], _s: TaskSpec = spec, _c: str = cid) -> Iterator[Any]:
            txid, _epoch = batch_of_job(f"spout {_c!r}")
            return send_reports(acc, run_spout_task(_s, pidx, txid, it, final=final))

        return batch.then(("spout", cid, final), conv)


def _chunks(pidx: int, it: Iterator[list[Any]]) -> Iterator[Any]:
    """The input blocks of the chunks a consumer task received from the shuffle."""
    for chunk in it:
        yield from chunk


def _as_block(source: str, r: tuple[Any, ...]) -> tuple[Any, ...]:
    """The input block of a producer's output record ``r`` read without a shuffle (one producer task)."""
    tag = r[0]
    if tag == "B":
        return (source, r[1], r[2], r[3])
    if tag == "T":
        return (source, r[1], [r[2]], r[3])
    return (source, r[1], MarkRecord(r[2], 1), r[3])


def topology_punctuates(topology: Topology) -> bool:
    """Whether marks may flow in ``topology``: it has IBM Streams operators or punctuating spouts."""
    from weir.streams.operator import Operator
    from weir.topology.components import Spout

    for c in topology.components.values():
        obj = c.obj
        if isinstance(obj, Operator):
            return True
        if isinstance(obj, Spout) and (
            obj.window_mark_each_batch or type(obj).is_window_mark is not Spout.is_window_mark
        ):
            return True
    return False


_PY_ERROR = re.compile(r"^(?!org\.|java\.|scala\.|py4j\.)[A-Za-z_][\w.]*(?:Error|Exception): .+$", re.M)


def _short(exc: BaseException) -> str:
    text = str(exc)
    if "Traceback (most recent call last)" in text:  # a Python worker failed: its last error line says why
        found = _PY_ERROR.findall(text)
        if found:
            return str(found[-1])[:500]
    for marker in ("PythonException:", "Exception:"):
        i = text.find(marker)
        if i >= 0:
            return text[i : i + 500].strip()
    return text[:500]
