"""Running a :class:`~weir.trident.TridentTopology` on weir's one engine.

``weir.submit(name, conf, trident_topology)`` goes through :class:`TridentDialect`, which makes the same
:class:`~weir.runtime.spark.runner.TopologyRun` a Storm topology gets: one Spark Structured
Streaming query whose ``foreachBatch`` asks the checkpoint coordinator for the batch's txid and
then runs :class:`TridentBatchRunner` on the batch's DataFrame.

Transactions: the coordinator stores ``PREPARING(n)``, the job runs (every state partition does
``begin_commit(n)`` … ``commit(n)`` inside its Spark task), then ``COMMITTING(n)`` and
``COMMITTED(n)``. Trident states need nothing from the commit phase — their exactly-once comes from
the txids stored with the values — so the coordinator's participants have no namespaces (with
``weir.state.ttl.ms`` the commit phase deletes expired cells, :class:`TridentParticipants`). A batch
whose job failed, or that a crash interrupted, is run again with the **same** txid; a batch
already ``COMMITTED`` is skipped.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from weir.checkpoint.coordinator import JobOutcome, Participants, TaskFailure, checkpoint_namespace
from weir.checkpoint.stats import BatchStats
from weir.drpc.store import Answer, jsonable
from weir.errors import ConfigError, FencedError, TopologyError, WeirError
from weir.runtime.spark.config import RuntimeConfig
from weir.runtime.spark.dialect import BatchRunner, Dialect, Prepared, register_dialect
from weir.runtime.spark.executor import ReportAccumulatorParam, outcome_of
from weir.runtime.spark.pacing import pacing_stream
from weir.runtime.spark.runner import master_for, picklable_or_raise, resolve_provider, spark_for
from weir.runtime.spark.spoutlog import SpoutDriver
from weir.runtime.spark.spouts import spout_streams, union_as_json
from weir.runtime.spark.trident._arrow import parse_failure
from weir.runtime.spark.trident.drpc import DrpcDriver, DrpcFunction, DrpcOptions
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

#: the column of the DRPC pacing source in a paced topology's batches (never a row of its own)
_TICK = "_weir_tick"


class TridentSource(Spout):
    """The topology's spouts as the one streaming source of its query.

    One spout: its stream as it is. Several: their union, each row as ``(_weir_s spout index,
    _weir_v JSON of the row)``; :meth:`batch_for` unpacks one spout's typed rows per batch.
    """

    def __init__(
        self, topology: str, conf: Mapping[str, Any], spouts: list[tuple[str, Spout]], *, paced: bool = False
    ) -> None:
        self.topology = topology
        self.conf = dict(conf)
        self.spouts = spouts
        self.schemas: list[Any] = []
        #: a topology with DRPC streams runs a batch every trigger interval, new spout data or not
        #: (its requests wait in the store): a pacing source that never has a row is unioned in
        self.paced = paced

    @property
    def multi(self) -> bool:
        """Whether several spouts share the query."""
        return len(self.spouts) > 1

    def create_stream(self, spark: Any, context: TopologyContext) -> Any:
        """The spouts' streams (unioned as JSON rows when there are several)."""
        dfs = spout_streams(spark, self.topology, self.conf, self.spouts, kind="stream") if self.spouts else []
        self.schemas = [d.schema for d in dfs]
        if not dfs:
            out = None
        elif not self.multi:
            out = dfs[0]
        else:
            out = union_as_json(list(enumerate(dfs)), tag="_weir_s", value="_weir_v")
        if not self.paced:
            return out
        from pyspark.sql import functions as F  # noqa: N812

        ticks = pacing_stream(spark, TopologyContext(self.topology, "$drpc", 0, 1, self.conf))
        ticks = ticks.select(F.col("tick").alias(_TICK))
        return ticks if out is None else out.unionByName(ticks, allowMissingColumns=True)

    def batch_for(self, batch: Any, index: int) -> Any:
        """Spout ``index``'s rows of a batch, with its own columns and types."""
        if not self.multi:
            return batch.drop(_TICK) if self.paced else batch
        from pyspark.sql import functions as F  # noqa: N812

        rows = batch.where(F.col("_weir_s") == index)
        return rows.select(F.from_json(F.col("_weir_v"), self.schemas[index]).alias("_weir_r")).select("_weir_r.*")


class TridentParticipants(Participants):
    """The coordinator's participants for Trident: none — states commit inside their partitions.

    With ``weir.state.ttl.ms``, the commit of ``txid`` sweeps the cells expired at ``txid``
    (:class:`~weir.runtime.spark.trident.ttl.TtlSweep`); recovery of ``COMMITTING(n)`` runs it again.
    """

    def __init__(self, sweep: Any = None) -> None:
        self.sweep = sweep

    def namespaces(self) -> list[str]:
        """No checkpointed namespaces."""
        return []

    def commit_all(self, txid: int, epoch: int, after_first: Any = None) -> None:
        """Each state partition committed ``txid`` in its task; the TTL sweep deletes what expired at it."""
        if self.sweep is not None:
            self.sweep.commit(txid)

    def rollback_all(self, epoch: int, after_first: Any = None) -> None:
        """Nothing to roll back: a replay with the same txid makes the stored values exact."""


class TridentBatchRunner(BatchRunner):
    """Runs one batch of a Trident topology (the ``BatchRunner`` of its :class:`TopologyRun`)."""

    def __init__(
        self, ctx: RunContext, spout_driver: SpoutDriver | None = None, drpc: DrpcDriver | None = None
    ) -> None:
        self.ctx = ctx
        #: the request log and answers of the topology's DRPC streams
        self.drpc = drpc
        #: per txid run but not yet COMMITTED, the answers of its DRPC requests
        self._answers: dict[int, dict[str, dict[str, Answer]]] = {}
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
        requests = self.drpc.take(txid) if self.drpc is not None else {}
        if self._acc is None:
            self._acc = batch.sparkSession.sparkContext.accumulator([], ReportAccumulatorParam())
        acc = self._acc
        acc.value = []  # a failed job's tasks send nothing (Spark drops their updates); reports name their txid
        shared = None
        if self.ctx.source.multi:
            from pyspark import StorageLevel

            shared = batch = batch.persist(StorageLevel.MEMORY_AND_DISK)
        planner = BatchPlanner(self.ctx, batch, txid, epoch, acc)
        planner.requests = {f: [(r.rid, r.args) for r in reqs] for f, reqs in requests.items()}
        try:
            if self.ctx.ttls:  # this batch's expiry cutoffs, from its recorded time (weir.state.ttl.ms)
                from weir.runtime.spark.trident.ttl import record_batch_time

                planner.expiry = record_batch_time(
                    self.ctx.ttl_provider,
                    checkpoint_namespace(self.ctx.topology),
                    self.ctx.topology,
                    txid,
                    epoch,
                    self.ctx.ttls,
                    None if self.ctx.ttl_sweep is None else self.ctx.ttl_sweep.maps,
                )
            planner.run()
            answers = {f: self._drpc_answers(planner, f, reqs, txid) for f, reqs in requests.items()}
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
        if self.drpc is not None:
            self._answers = {txid: answers}  # after_batch(txid) publishes them once COMMITTED
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
            return pacing_stream(spark, context, self.spout_driver.more_file)
        return spout.create_stream(spark, context)

    def after_batch(self, txid: int, skipped: bool) -> None:
        """Batch ``txid`` is COMMITTED: a Storm spout acks its tuples, and its log entries are pruned.

        The answers of the batch's DRPC requests are written (a failure to write them is logged:
        the requests stay in the request log and the next batch answers them).
        """
        if self.spout_driver is not None:
            self.spout_driver.committed(txid)
        answers = self._answers.pop(txid, None)
        if self.drpc is not None and answers is not None and not skipped:
            try:
                self.drpc.answered(txid, answers)
            except WeirError as exc:
                log.warning("topology %s, txid %s: DRPC answers not written (%s); the next batch answers them",
                            self.ctx.topology, txid, exc)  # fmt: skip

    def _drpc_answers(self, planner: BatchPlanner, function: str, reqs: list[Any], txid: int) -> dict[str, Answer]:
        """The answers of ``function``'s requests in this batch; a failing job is re-run request by request."""
        try:
            rows = planner.run_drpc(function)
        except Exception as exc:
            if isinstance(exc, FencedError):
                raise
            if len(reqs) > 1:  # find the request(s) that fail: each alone
                out: dict[str, Answer] = {}
                for r in reqs:
                    alone = BatchPlanner(self.ctx, planner.batch, txid, planner.epoch, planner.acc)
                    alone.requests = {function: [(r.rid, r.args)]}
                    out.update(self._drpc_answers(alone, function, [r], txid))
                return out
            error = self._drpc_error(exc, txid)
            return {r.rid: Answer("failed", error=error, txid=txid, deadline_ms=r.deadline_ms) for r in reqs}
        by_rid: dict[str, list[list[Any]]] = {r.rid: [] for r in reqs}
        for rid, values in rows:
            if rid in by_rid:
                by_rid[rid].append(jsonable(values))
        return {
            r.rid: Answer("ok", sorted(by_rid[r.rid], key=_sort_key), txid=txid, deadline_ms=r.deadline_ms)
            for r in reqs
        }

    def _drpc_error(self, exc: BaseException, txid: int) -> str:
        if isinstance(exc, WeirError):
            return f"{type(exc).__name__}: {exc}"
        info = parse_failure(str(exc))
        if info is None:
            return f"the Spark job failed: {_short(str(exc))}"
        if info.fenced:
            msg = f"topology {self.ctx.topology!r}, txid {txid}: {info.error}"
            raise FencedError(msg) from exc
        return f"component {info.component!r}, task {info.task}: {info.error}"

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


def _sort_key(values: list[Any]) -> str:
    return json.dumps(values, sort_keys=True, default=str)


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


def _drpc_driver(
    name: str, conf: Mapping[str, Any], topology: TridentTopology, provider: Any, storm_spout: bool
) -> DrpcDriver | None:
    """The DRPC request log of a topology with ``new_drpc_stream`` s (None without); refusals at submit."""
    functions = topology.drpc_functions()
    if not functions:
        return None
    first = f"drpc:{functions[0]}"
    if storm_spout:
        msg = (
            f"topology {name!r}: a Trident topology over a Storm spout (next_tuple) cannot serve DRPC yet (its "
            "batches are paced by the spout log); serve the DRPC stream from a topology with Spark-source spouts"
        )
        raise TopologyError(msg, topology=name, component=first)
    if not isinstance(provider, KeyValueStateProvider):
        msg = (
            f"topology {name!r}: DRPC requests and answers travel through the topology's key-value store, but "
            f"topology.state.provider is the custom {type(provider).__name__}; use sqlite, redis or postgres"
        )
        raise TopologyError(msg, topology=name, component=first)
    fns = []
    nodes = topology.nodes
    for fn in functions:
        ends = [n for n in nodes if n.drpc == fn and not any(n in m.parents for m in nodes)]
        if len(ends) != 1:
            msg = (
                f"topology {name!r}: DRPC stream {fn!r} ends in {len(ends)} operations "
                f"({', '.join(n.name for n in ends)}); its answer is the tuples of one last operation, so give it one"
            )
            raise TopologyError(msg, topology=name, component=f"drpc:{fn}")
        end = ends[0]
        single = end.kind == "agg" and bool(end.params.get("drpc_global")) and len(end.visible) == 1
        fns.append(DrpcFunction(fn, end.visible, single))
    return DrpcDriver(name, fns, provider.backend, DrpcOptions.from_conf(conf))


@dataclass
class TridentPlan(Prepared):
    """A Trident topology checked at submit time: its plan's run context."""

    topology: TridentTopology | None = None
    ctx: RunContext | None = None
    #: the spout log of the topology's Storm spout, if it reads one
    spout_driver: SpoutDriver | None = None
    #: the request log of the topology's DRPC streams, if it has any
    drpc: DrpcDriver | None = None


class TridentDialect(Dialect):
    """``TridentTopology`` on the engine: each micro-batch one Trident batch, planned in Spark SQL."""

    name = "trident"
    state_keys = frozenset({"weir.state.value.type", "weir.state.ttl.ms"})

    def accepts(self, topology: object) -> bool:
        """A :class:`~weir.trident.TridentTopology`."""
        return isinstance(topology, TridentTopology)

    def connect_refusal(self, name: str, topology: Any, rc: RuntimeConfig) -> str | None:
        """What of a Trident topology cannot run over Spark Connect (None: all of it runs there).

        Over Connect (:mod:`weir.runtime.spark.connect`) the server's ``foreachBatch`` is relayed to
        this process, where the coordinator runs; each stage is pickled into the batch's plan with
        the batch's txid and epoch bound (no job-local property), and task reports come back as JSON
        through the relay (no accumulator); ``weir.metrics.port`` serves from this process (Spark's
        progress events reach it through a client-side listener); DRPC streams run there too (their
        requests are a DataFrame the client makes, their answers the client's coordinator writes), and
        so do Storm spouts (``next_tuple``: the spout's thread and its log are the client's, each batch
        a DataFrame the client makes from the log). Nothing of a Trident topology is refused there but
        a server on another machine.
        """
        from weir.runtime.spark.connect import check_reachable

        if rc.remote is not None:
            check_reachable(name, rc.remote)
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
        from weir.runtime.spark.trident.ttl import resolve_ttls

        ttls = resolve_ttls(name, conf, topology)
        master = master_for(rc, spark)
        factories = _memory_states(name, topology, master)
        # before Spark starts: a typo fails in about a second
        provider = resolve_provider(name, conf, master, rc.provider)
        if ttls and not isinstance(provider, KeyValueStateProvider):
            msg = (
                f"topology {name!r}: weir.state.ttl.ms needs the coordinator's store (topology.state.provider) to be "
                f"a weir key-value store (sqlite, redis, postgres), not {type(provider).__name__}"
            )
            raise ConfigError(msg)
        driver = storm_spout_driver(
            name, conf, [(n.name, n.params["spout"], n.parallelism) for n in topology.spout_nodes()], provider, rc
        )
        drpc = _drpc_driver(name, conf, topology, provider, driver is not None)
        if drpc is not None:  # before Spark starts: a function another topology serves fails in a second
            drpc.register()
        spark_session, master = spark_for(rc, spark)
        journal = _journal_states(topology)
        if journal and not isinstance(provider, KeyValueStateProvider):
            log.warning(
                "topology %s: the state provider is not a key-value store, so opaque replays are not journaled",
                name,
            )
            journal = frozenset()
        sweep = None
        if ttls:  # the commit-time sweep; a store that keeps an index of cells by txid writes it from now on
            from weir.runtime.spark.trident.ttl import TtlSweep

            by_id = {s.state_id: s.factory for s in topology.states}
            for sid in ttls:
                factory = factories.get(sid, by_id[sid])
                indexed = factory.store.with_expiry_index()
                if indexed is not factory.store:
                    factories[sid] = replace(factory, store=indexed)
            sweep = TtlSweep.of(name, conf, provider, ttls, {sid: factories.get(sid, by_id[sid]) for sid in ttls})
            sweep.prepare()
        spouts = [(n.name, n.params["spout"]) for n in nodes if n.kind == "spout"]
        source = TridentSource(name, conf, spouts, paced=drpc is not None)
        ctx = RunContext(
            topology=name,
            conf=dict(conf),
            nodes=nodes,
            source=source,
            provider=provider if journal else None,
            journal_namespace=checkpoint_namespace(name),
            journal_states=journal,
            factories=factories,
            ttls=ttls,
            ttl_provider=provider if ttls else None,
            ttl_sweep=sweep,
        )
        return TridentPlan(
            name, conf, rc, spark_session, master, provider, topology=topology, ctx=ctx, spout_driver=driver, drpc=drpc
        )

    def spouts(self, plan: Prepared) -> list[tuple[str, Any]]:
        """One source: the topology's spouts as one stream (:class:`TridentSource`)."""
        assert isinstance(plan, TridentPlan) and plan.ctx is not None
        return [("$trident", plan.ctx.source)]

    def batch_runner(self, plan: Prepared) -> BatchRunner:
        """The planner of a batch."""
        assert isinstance(plan, TridentPlan) and plan.ctx is not None
        return TridentBatchRunner(plan.ctx, plan.spout_driver, plan.drpc)

    def participants(self, plan: Prepared) -> Participants | None:
        """:class:`TridentParticipants`: the coordinator numbers the batches (and commits sweep expired cells)."""
        assert isinstance(plan, TridentPlan) and plan.ctx is not None
        return TridentParticipants(plan.ctx.ttl_sweep)

    def shape(self, plan: Prepared, namespaces: list[str]) -> Mapping[str, Any] | None:
        """The plan as a graph (see :func:`trident_shape`)."""
        assert isinstance(plan, TridentPlan) and plan.topology is not None
        return trident_shape(plan.topology.nodes)

    def encodings(self, plan: Prepared) -> Mapping[str, Any]:
        """``trident:<state>`` → the encoding of each of weir's map states (:mod:`.encoding`)."""
        from weir.runtime.spark.trident.encoding import check_map_encodings, trident_encodings

        assert isinstance(plan, TridentPlan) and plan.topology is not None
        if not isinstance(plan.provider, KeyValueStateProvider):  # no store of weir's to record them in
            return {}
        encodings = trident_encodings(plan.name, plan.conf, plan.topology)
        # checked here first, so that a refusal names the state as well as its map state
        check_map_encodings(plan.provider.backend, plan.name, plan.topology, encodings)
        return encodings

    def check_initial_state(self, plan: Prepared, initial: Mapping[str, Any]) -> bool:
        """Map states named in ``initial`` (see :mod:`weir.runtime.spark.trident.bootstrap`), checked now."""
        from weir.runtime.spark.trident.bootstrap import resolve_initial_states

        assert isinstance(plan, TridentPlan) and plan.topology is not None and plan.ctx is not None
        resolve_initial_states(plan.name, plan.topology, initial, plan.ctx.factories, plan.provider)
        return True

    def seed_initial_state(self, plan: Prepared, coordinator: Any, initial: Mapping[str, Any] | None) -> None:
        """Finish an interrupted load of a map state, then load ``initial`` into the map states it names."""
        from weir.runtime.spark.bootstrap import rows_of
        from weir.runtime.spark.trident.bootstrap import (
            finish_trident_bootstrap,
            load_trident_state,
            resolve_initial_states,
        )
        from weir.runtime.spark.trident.convert import finish_trident_convert
        from weir.trident.backing.factory import MapStateFactory

        assert isinstance(plan, TridentPlan) and plan.topology is not None and plan.ctx is not None
        if not isinstance(plan.provider, KeyValueStateProvider) or coordinator.epoch is None:
            return
        backend = coordinator.store.backend
        factories = {s.state_id: s.factory for s in plan.topology.states}
        finish_trident_bootstrap(backend, plan.name, coordinator.epoch, factories)
        by_map = {
            str(f.store.catalog_name()): f
            for f in factories.values()
            if isinstance(f, MapStateFactory) and f.store.catalog_name() is not None
        }
        finish_trident_convert(backend, plan.name, coordinator.epoch, by_map)
        if not initial:
            return
        targets = resolve_initial_states(plan.name, plan.topology, initial, plan.ctx.factories, plan.provider)
        for given, data in initial.items():
            sid, factory = targets[given]
            where = f"topology {plan.name!r}, state {sid!r}: initial_state"
            load_trident_state(backend, plan.name, sid, factory, rows_of(data, where), coordinator.epoch)


register_dialect(TridentDialect())
