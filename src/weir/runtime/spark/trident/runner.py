"""Running a :class:`~weir.trident.TridentTopology` on weir's one engine.

``weir.submit(name, conf, trident_topology)`` goes through :class:`TridentDialect`, which makes the same
:class:`~weir.runtime.spark.runner.TopologyRun` a Storm topology gets: one Spark Structured
Streaming query whose ``foreachBatch`` asks the checkpoint coordinator for the batch's txid and
then runs :class:`TridentBatchRunner` on the batch's DataFrame.

Transactions: the coordinator stores ``PREPARING(n)``, the job runs (every state partition does
``begin_commit(n)`` … ``commit(n)`` inside its Spark task), then ``COMMITTING(n)`` and
``COMMITTED(n)``. Trident states need nothing from the commit phase — their exactly-once comes from
the txids stored with the values — so the coordinator's participants have no namespaces. A batch
whose job failed, or that a crash interrupted, is run again with the **same** txid; a batch
already ``COMMITTED`` is skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from weir.checkpoint.coordinator import JobOutcome, Participants, TaskFailure, checkpoint_namespace
from weir.checkpoint.stats import BatchStats
from weir.errors import FencedError, TopologyError, WeirError
from weir.runtime.spark.config import RuntimeConfig
from weir.runtime.spark.dialect import BatchRunner, Dialect, Prepared, register_dialect
from weir.runtime.spark.executor import ReportAccumulatorParam, outcome_of
from weir.runtime.spark.pacing import pacing_stream
from weir.runtime.spark.runner import master_for, picklable_or_raise, resolve_provider, spark_for
from weir.runtime.spark.spoutlog import SpoutDriver
from weir.runtime.spark.spouts import spout_streams, union_as_json
from weir.runtime.spark.trident._arrow import parse_failure
from weir.runtime.spark.trident.logged import logged_frame, storm_spout_driver
from weir.runtime.spark.trident.planner import BatchPlanner, RunContext, check_plan
from weir.state.factory import KeyValueStateProvider
from weir.topology.components import Spout
from weir.topology.context import TopologyContext
from weir.trident.guarantee import spout_type
from weir.trident.state.base import StateFactory as TridentStateFactory
from weir.trident.state.base import StateType
from weir.trident.topology import TridentTopology

__all__ = ["TridentBatchRunner", "TridentDialect", "TridentParticipants", "TridentPlan", "TridentSource"]

log = logging.getLogger("weir.trident")


class TridentSource(Spout):
    """The topology's spouts as the one streaming source of its query.

    One spout: its stream as it is. Several: their union, each row as ``(_weir_s spout index,
    _weir_v JSON of the row)``; :meth:`batch_for` unpacks one spout's typed rows per batch.
    """

    def __init__(self, topology: str, conf: Mapping[str, Any], spouts: list[tuple[str, Spout]]) -> None:
        self.topology = topology
        self.conf = dict(conf)
        self.spouts = spouts
        self.schemas: list[Any] = []

    @property
    def multi(self) -> bool:
        """Whether several spouts share the query."""
        return len(self.spouts) > 1

    def create_stream(self, spark: Any, context: TopologyContext) -> Any:
        """The spouts' streams (unioned as JSON rows when there are several)."""
        dfs = spout_streams(spark, self.topology, self.conf, self.spouts, kind="stream")
        self.schemas = [d.schema for d in dfs]
        if not self.multi:
            return dfs[0]
        return union_as_json(list(enumerate(dfs)), tag="_weir_s", value="_weir_v")

    def batch_for(self, batch: Any, index: int) -> Any:
        """Spout ``index``'s rows of a batch, with its own columns and types."""
        if not self.multi:
            return batch
        from pyspark.sql import functions as F  # noqa: N812

        rows = batch.where(F.col("_weir_s") == index)
        return rows.select(F.from_json(F.col("_weir_v"), self.schemas[index]).alias("_weir_r")).select("_weir_r.*")


class TridentParticipants(Participants):
    """The coordinator's participants for Trident: none — states commit inside their partitions."""

    def namespaces(self) -> list[str]:
        """No checkpointed namespaces."""
        return []

    def commit_all(self, txid: int, epoch: int, after_first: Any = None) -> None:
        """Nothing to commit: each state partition committed ``txid`` in its task."""

    def rollback_all(self, epoch: int, after_first: Any = None) -> None:
        """Nothing to roll back: a replay with the same txid makes the stored values exact."""


class TridentBatchRunner(BatchRunner):
    """Runs one batch of a Trident topology (the ``BatchRunner`` of its :class:`TopologyRun`)."""

    def __init__(self, ctx: RunContext, spout_driver: SpoutDriver | None = None) -> None:
        self.ctx = ctx
        #: the spout log of a Storm spout (``next_tuple``) the topology reads, run on the driver
        self.spout_driver = spout_driver
        self.last_stats = BatchStats()
        self._aqe_off = False
        #: one accumulator per run: the stages (and their UDFs) are made once and carry it (over Spark
        #: Connect: the run's relay sink, see weir.runtime.spark.connect)
        self._acc: Any = None

    def wants_dataframe(self) -> bool:
        """The batch's DataFrame: the plan runs in Spark SQL."""
        return True

    def use_report_sink(self, sink: Any) -> None:
        """Over Spark Connect: the stages send their reports to ``sink`` (no accumulators there)."""
        self._acc = sink

    def run(self, batch: Any, spout_id: str | None, txid: int, epoch: int | None) -> JobOutcome:
        """Plan and run every operation of the batch; report failures instead of raising them."""
        from pyspark.sql import DataFrame

        if not isinstance(batch, DataFrame):
            msg = "the Trident runner needs the batch's DataFrame (TopologyRun passes it when wants_dataframe())"
            raise TopologyError(msg, topology=self.ctx.topology)
        t0 = time.perf_counter()
        if not self._aqe_off:
            # the batch's session is the query's own clone (never the user's): weir places rows in
            # state partitions itself, and adaptive execution would only coalesce those stages
            # into fewer tasks and split every batch into one job per shuffle (measured: 5-7 % slower)
            batch.sparkSession.conf.set("spark.sql.adaptive.enabled", "false")
            self._aqe_off = True
        if self.spout_driver is not None:  # a Storm spout: the batch is its logged tuples, not the pacing rows
            parts, failures = self.spout_driver.batch(txid)
            if not failures:
                logged = parts[self.spout_driver.spout_ids[0]]
                batch, failures = logged_frame(batch.sparkSession, self.ctx.topology, self.spout_driver, logged, txid)
            if failures:
                return JobOutcome(failures=failures)
        if self._acc is None:
            self._acc = batch.sparkSession.sparkContext.accumulator([], ReportAccumulatorParam())
        acc = self._acc
        acc.value = []  # a failed job's tasks send nothing (Spark drops their updates); reports name their txid
        shared = None
        if self.ctx.source.multi:
            from pyspark import StorageLevel

            shared = batch = batch.persist(StorageLevel.MEMORY_AND_DISK)
        planner = BatchPlanner(self.ctx, batch, txid, epoch, acc)
        try:
            planner.run()
        except WeirError as exc:
            if isinstance(exc, FencedError):
                raise
            return JobOutcome(failures=[TaskFailure("<driver>", -1, f"{type(exc).__name__}: {exc}", "")])
        except Exception as exc:
            return JobOutcome(failures=[self._failure(exc, txid)])
        finally:
            planner.release()
            if shared is not None:
                shared.unpersist(blocking=False)
        reports = [r for r in acc.value if r.txid == txid]
        job_ms = (time.perf_counter() - t0) * 1000
        stats = BatchStats.of(reports, tuples_in=planner.tuples_in(reports), dead_letters=0, job_ms=job_ms)
        self.last_stats = stats
        if any(not r.ok for r in reports):  # a stage that feeds no state update ended its task and reported
            try:
                return outcome_of(reports, (), stats.as_dict())[0]
            except FencedError as exc:
                msg = f"topology {self.ctx.topology!r}, {exc}"
                raise FencedError(msg) from exc
        return JobOutcome(stats=stats.as_dict())

    def create_stream(self, spout_id: str, spout: Any, spark: Any, context: TopologyContext) -> Any:
        """A Storm spout's batches are paced (its tuples come from the spout log); else the spouts' streams."""
        if self.spout_driver is not None:
            return pacing_stream(spark, context)
        return spout.create_stream(spark, context)

    def after_batch(self, txid: int, skipped: bool) -> None:
        """Batch ``txid`` is COMMITTED: a Storm spout acks its tuples, and its log entries are pruned."""
        if self.spout_driver is not None:
            self.spout_driver.committed(txid)

    def abandoned(self) -> None:
        """A batch failed every attempt: a Storm spout fails its tuples and is closed."""
        if self.spout_driver is not None:
            self.spout_driver.abandoned()

    def close(self) -> None:
        """The topology stopped: close a Storm spout's tasks."""
        if self.spout_driver is not None:
            self.spout_driver.close()

    def _failure(self, exc: BaseException, txid: int) -> TaskFailure:
        text = str(exc)
        info = parse_failure(text)
        if info is None:
            return TaskFailure("<spark>", -1, f"the Spark job failed: {_short(text)}", text[-4000:])
        if info.fenced:
            msg = f"topology {self.ctx.topology!r}, txid {txid}: {info.error}"
            raise FencedError(msg) from exc
        return info.failure()


def _short(text: str) -> str:
    for marker in ("PythonException:", "SparkRuntimeException:", "Exception:"):
        i = text.find(marker)
        if i >= 0:
            return text[i : i + 500].strip()
    return text[:500]


#: plan nodes that read or write a Trident state
_STATE_KINDS = frozenset({"persist_agg", "partition_persist", "state_query"})


def trident_shape(nodes: list[Any]) -> dict[str, Any]:
    """The plan as the JSON-ready graph ``weir ui`` draws (the shape a Storm topology stores).

    Each plan node is a component (spouts as spouts, state operations marked stateful); an edge is
    ``partition`` where the node repartitions its input and ``local`` where it runs in the same stage.
    """
    comps = []
    for n in nodes:
        grouping = "partition" if n.kind in ("partition", "agg", "persist_agg") else "local"
        comps.append(
            {
                "id": n.name,
                "kind": "spout" if n.kind == "spout" else "bolt",
                "class": n.kind,
                "parallelism": n.parallelism or 1,
                "stateful": n.kind in _STATE_KINDS,
                "inputs": [
                    {"source": p.name, "stream": "default", "grouping": grouping, "fields": []} for p in n.parents
                ],
                "outputs": {"default": list(n.names)},
            }
        )
    return {"dialect": "trident", "components": comps, "namespaces": []}


def _memory_states(name: str, topology: TridentTopology, master: str) -> dict[str, Any]:
    """``MemoryMapState.Factory()`` states on Spark local mode: SQLite factories in a run-scoped store.

    Storm's semantics (the state lives for the run, lost on restart) without a dict per process;
    refused on a cluster master. Returns the factory to use per state id.
    """
    from weir.runtime.spark.ephemeral import refuse_on_cluster, run_scoped_dir, warn_not_durable
    from weir.trident.backing import SqliteMapState
    from weir.trident.state.memory import MemoryMapState

    memory = [(st.state_id, st.factory) for st in topology.states if isinstance(st.factory, MemoryMapState.Factory)]
    if not memory:
        return {}
    for state_id, _ in memory:
        refuse_on_cluster(name, f"state {state_id!r} (MemoryMapState.Factory)", master)
    path = run_scoped_dir(name)
    warn_not_durable(name, "MemoryMapState.Factory() of state(s) " + ", ".join(repr(s) for s, _ in memory), path)
    out: dict[str, Any] = {}
    for i, (state_id, factory) in enumerate(memory):
        out[state_id] = SqliteMapState.factory(factory.state_type, f"{path}/memory.db", table=f"memory_map_{i}")
    return out


def _check_picklable(name: str, topology: TridentTopology) -> None:
    for node in topology.nodes:
        for key in ("op", "agg", "qf", "updater"):
            obj = node.params.get(key)
            if obj is not None:
                picklable_or_raise(name, node.name, obj)
    for st in topology.states:
        picklable_or_raise(name, st.state_id, st.factory)


def _journal_states(topology: TridentTopology) -> frozenset[str]:
    """States that need the journal: a persistent_aggregate fed by an opaque spout."""
    out = set()
    for node in topology.nodes:
        if node.kind != "persist_agg":
            continue
        if any(spout_type(s.params["spout"]) is StateType.OPAQUE for s in node.spouts()):
            out.add(node.params["state"].state_id)
    return frozenset(out)


@dataclass
class TridentPlan(Prepared):
    """A Trident topology checked at submit time: its plan's run context."""

    topology: TridentTopology | None = None
    ctx: RunContext | None = None
    #: the spout log of the topology's Storm spout, if it reads one
    spout_driver: SpoutDriver | None = None


class TridentDialect(Dialect):
    """``TridentTopology`` on the engine: each micro-batch one Trident batch, planned in Spark SQL."""

    name = "trident"

    def accepts(self, topology: object) -> bool:
        """A :class:`~weir.trident.TridentTopology`."""
        return isinstance(topology, TridentTopology)

    def connect_refusal(self, name: str, topology: Any, rc: RuntimeConfig) -> str | None:
        """What of a Trident topology cannot run over Spark Connect (None: all of it runs there).

        Over Connect (:mod:`weir.runtime.spark.connect`) the server's ``foreachBatch`` is relayed to
        this process, where the coordinator runs; each stage is pickled into the batch's plan with
        the batch's txid and epoch bound (no job-local property), and task reports come back as JSON
        through the relay (no accumulator). Refused: ``weir.metrics.port`` (it listens to Spark's
        progress events in the driver, which is the server's) and a Storm spout (``next_tuple``),
        whose spout log over Connect has no SIGKILL crash test yet.
        """
        from weir.runtime.spark.connect import check_reachable

        if rc.remote is not None:
            check_reachable(name, rc.remote)
        if rc.metrics_port is not None:
            return "weir.metrics.port listens to Spark's progress events in the driver, which is the server's"
        for node in topology.spout_nodes():
            if node.params["spout"].is_storm_spout():
                return (
                    f"Trident stream {node.name!r} reads a Storm spout (next_tuple), whose spout log is not yet "
                    "verified over Spark Connect (no SIGKILL crash test there); use a replayable spout (files, "
                    "Kafka, Redis Streams, NATS JetStream, a ReplayableSpout) or run on classic PySpark"
                )
        return None

    def prepare(self, name: str, conf: Mapping[str, Any], topology: Any, rc: RuntimeConfig, spark: Any) -> TridentPlan:
        """Validate ``topology`` and plan its batches (not started yet).

        Checked before Spark runs anything: configuration keys, the plan, seed 004's spout × state
        table (:mod:`weir.trident.guarantee`), process-local states, picklability of every operation
        and state factory, and the store of the coordinator record (``topology.state.provider``).
        """
        nodes = topology.nodes
        check_plan(nodes)
        topology.check_guarantees(inexact_allowed=rc.allow_inexact)
        _check_picklable(name, topology)
        names = [s.state_id for s in topology.states]
        if len(set(names)) != len(names):
            msg = f"topology {name!r}: two states share a name ({sorted(names)}); name() them differently"
            raise TopologyError(msg, topology=name)
        for spout in (n.params["spout"] for n in topology.spout_nodes()):
            spout.validate()  # submit-time checks of the sources (brokers reachable, topics exist)
        for state in topology.states:
            if isinstance(state.factory, TridentStateFactory):  # submit-time checks of the sinks (broker limits)
                state.factory.check_submit(conf)
        master = master_for(rc, spark)
        factories = _memory_states(name, topology, master)
        # before Spark starts: a typo fails in about a second
        provider = resolve_provider(name, conf, master, rc.provider)
        driver = storm_spout_driver(
            name, conf, [(n.name, n.params["spout"], n.parallelism) for n in topology.spout_nodes()], provider, rc
        )
        spark_session, master = spark_for(rc, spark)
        journal = _journal_states(topology)
        if journal and not isinstance(provider, KeyValueStateProvider):
            log.warning(
                "topology %s: the state provider is not a key-value store, so opaque replays are not journaled",
                name,
            )
            journal = frozenset()
        spouts = [(n.name, n.params["spout"]) for n in nodes if n.kind == "spout"]
        source = TridentSource(name, conf, spouts)
        ctx = RunContext(
            topology=name,
            conf=dict(conf),
            nodes=nodes,
            source=source,
            provider=provider if journal else None,
            journal_namespace=checkpoint_namespace(name),
            journal_states=journal,
            factories=factories,
        )
        return TridentPlan(
            name, conf, rc, spark_session, master, provider, topology=topology, ctx=ctx, spout_driver=driver
        )

    def spouts(self, plan: Prepared) -> list[tuple[str, Any]]:
        """One source: the topology's spouts as one stream (:class:`TridentSource`)."""
        assert isinstance(plan, TridentPlan) and plan.ctx is not None
        return [("$trident", plan.ctx.source)]

    def batch_runner(self, plan: Prepared) -> BatchRunner:
        """The planner of a batch."""
        assert isinstance(plan, TridentPlan) and plan.ctx is not None
        return TridentBatchRunner(plan.ctx, plan.spout_driver)

    def participants(self, plan: Prepared) -> Participants | None:
        """:class:`TridentParticipants`: the coordinator only numbers the batches."""
        return TridentParticipants()

    def shape(self, plan: Prepared, namespaces: list[str]) -> Mapping[str, Any] | None:
        """The plan as a graph (see :func:`trident_shape`)."""
        assert isinstance(plan, TridentPlan) and plan.topology is not None
        return trident_shape(plan.topology.nodes)


register_dialect(TridentDialect())
