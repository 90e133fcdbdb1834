"""Running a topology: one Spark Structured Streaming query whose ``foreachBatch`` drives the coordinator.

``weir.submit(name, conf, topology)`` validates everything at submit time and returns a
:class:`TopologyRun`; ``start()`` runs it continuously (trigger = checkpoint interval),
``process_available()`` processes what the sources have now and stops (``Trigger.AvailableNow``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark import cloudpickle

from weir._util import import_object
from weir.checkpoint.coordinator import BatchReport, CheckpointStore, Coordinator, JobOutcome, retry_batch
from weir.checkpoint.history import CheckpointHistory
from weir.checkpoint.rescale import Rescaler
from weir.errors import ConfigError, FencedError, SparkDiedError, TopologyError, WeirError
from weir.runtime.spark.config import RuntimeConfig
from weir.runtime.spark.session import (
    connect_master,
    ensure_python_env,
    get_spark,
    is_connect,
    session_url,
    spark_jvm_exit,
)
from weir.runtime.spark.spouts import spout_streams, union_as_json
from weir.runtime.spark.statecheck import check_store_against_spark, read_batch_offsets
from weir.runtime.spark.supervision import RestartPolicy, StopRequested, Supervisor
from weir.state.base import StateProvider
from weir.state.config import ProviderConfig, parse_provider_config
from weir.state.factory import KeyValueStateProvider, StateFactory, open_backend
from weir.topology.context import TopologyContext

if TYPE_CHECKING:
    from weir.runtime.spark.metrics import TopologyMetrics

__all__ = ["BatchRunner", "RunStatus", "TopologyRun", "check_local_store", "make_coordinator"]

log = logging.getLogger("weir.runtime")

#: how Spark reports two queries writing one checkpoint (HDFSMetadataLog, across processes or not)
_CONCURRENT_CHECKPOINT = (
    "ConcurrentModificationException",
    "Multiple streaming queries are concurrently using",
    "Concurrent update to the log",
    "is already active",
    # both drivers creating a new checkpoint: the second rename of its `metadata` file fails
    "FileAlreadyExistsException: Rename destination",
    # Spark 4: this query planned batch 0 on an empty offset log, then found the other driver's batch 0 there
    "STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY",
)


def is_checkpoint_conflict(exc: BaseException) -> bool:
    """Whether a failed query (or query start) is the symptom of another driver writing the same Spark checkpoint."""
    text = str(exc)
    return any(m in text for m in _CONCURRENT_CHECKPOINT)


#: times the newest driver starts its query again while an older one still writes the checkpoint
_CONFLICT_RESTARTS = 5
#: batches kept in :attr:`RunStatus.recent`
RECENT_BATCHES = 8


# how Spark words a checkpoint written by a different query (other sources, other schema)
_CHECKPOINT_CLASH = re.compile(
    r"number of sources|sources in the checkpoint|offset log|incompatible|schema of the", re.IGNORECASE
)
#: how py4j reports a JVM it can no longer reach
_PY4J_LOST = re.compile(
    r"Py4JNetworkError|Py4JError|Connection refused|ConnectionRefusedError|Answer from Java side is empty"
)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return str(signum)


#: the file in a Spark checkpoint directory that says which topology's spouts wrote it
CHECKPOINT_MARKER = "weir-topology.json"


class BatchRunner(ABC):
    """Runs one micro-batch's tasks and reports (the Storm RDD job, the Trident plan)."""

    @abstractmethod
    def run(self, batch: Any, spout_id: str | None, txid: int, epoch: int | None) -> JobOutcome:
        """Run every task of the batch; report failures in the outcome instead of raising them."""

    def wants_dataframe(self) -> bool:
        """The input kind: the batch's DataFrame (True) or its RDD of rows (False, the default)."""
        return False

    def punctuates(self) -> bool:
        """Whether punctuation marks flow (IBM Streams operators or punctuating spouts); default no."""
        return False

    def run_final(self, batch: Any, spout_id: str | None, txid: int, epoch: int | None) -> JobOutcome:
        """Run the final-mark transaction of a finite run (only called when :meth:`punctuates`)."""
        msg = f"{type(self).__name__} carries no punctuation"
        raise NotImplementedError(msg)

    def create_stream(self, spout_id: str, spout: Any, spark: Any, context: TopologyContext) -> Any:
        """The streaming DataFrame of spout ``spout_id``; the default asks the spout itself."""
        return spout.create_stream(spark, context)

    def after_batch(self, txid: int, skipped: bool) -> None:  # noqa: B027 - optional hook
        """Batch ``txid`` is COMMITTED (``skipped``: a replay of a committed one); default: nothing."""

    def abandoned(self) -> None:  # noqa: B027 - optional hook
        """A batch failed every attempt and the query stops; default: nothing."""

    def use_report_sink(self, sink: Any) -> None:  # noqa: B027 - optional hook
        """Over Spark Connect: where the run's tasks send their reports (instead of an accumulator)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """The topology stopped; default: nothing."""


@dataclass
class RunStatus:
    """A snapshot of a running topology (``run.status()``)."""

    topology: str
    state: str
    query_id: str | None = None
    last_txid: int | None = None
    batches: int = 0
    skipped: int = 0
    retries: int = 0
    restarts: int = 0
    tuples_in: int = 0
    tuples_per_s: float = 0.0
    last_batch_tuples: int = 0
    last_job_ms: float = 0.0
    last_commit_ms: float = 0.0
    dead_letters: int = 0
    elapsed_s: float = 0.0
    error: str | None = None
    components: dict[str, dict[str, Any]] = field(default_factory=dict)
    state_sizes: dict[str, int] = field(default_factory=dict)
    #: the last batches, newest last: ``{"n", "txid", "tuples", "job_ms", "commit_ms", "attempts", "skipped", "at"}``
    #: (``n`` counts the batches of this run, skipped replays included)
    recent: list[dict[str, Any]] = field(default_factory=list)
    #: where Prometheus metrics are served (``weir.metrics.port``), else None
    metrics_url: str | None = None


def check_local_store(kind: str, master: str, topology: str) -> None:
    """Refuse a single-machine store (``sqlite``, ``memory``) outside local mode."""
    if kind == "memory":
        from weir.runtime.spark.ephemeral import refuse_on_cluster

        refuse_on_cluster(topology, "the 'memory' state provider", master)
        return
    if kind == "sqlite" and not master.startswith("local"):
        msg = (
            f"topology {topology!r}: the 'sqlite' state provider is a file on one machine, but Spark master "
            f"{master!r} runs executors elsewhere; use redis or postgres (topology.state.provider) for a cluster"
        )
        raise ConfigError(msg)


def make_coordinator(
    name: str,
    conf: Mapping[str, Any],
    provider: StateProvider,
    participants: Any,
    parallelism: Mapping[str, int],
    rc: RuntimeConfig,
    master: str,
    shape: Mapping[str, Any] | None = None,
    spouts: list[tuple[str, Any]] | None = None,
    rescaler: Rescaler | None = None,
) -> Coordinator:
    """A started coordinator whose record lives in the topology's store.

    With a custom ``StateProvider`` the record goes to ``weir.coordinator.url`` (any built-in
    durable store), by default ``<weir.state.dir>/state.db`` — which only local mode can use.
    The store is cross-checked against Spark's checkpoint here, before anything runs
    (:func:`~weir.runtime.spark.statecheck.check_store_against_spark`); where the checkpoint is
    missing and the ``spouts`` can resume from the store's offsets, those are kept in
    ``coordinator.resume_offsets`` for the query to start from.
    It keeps the last ``weir.history.size`` transactions as history beside its record, with the
    topology's ``shape`` (components and groupings) for ``weir ui``.
    """
    if isinstance(provider, KeyValueStateProvider):
        if rc.coordinator_url and rc.coordinator_url != provider.config.url:
            msg = (
                f"topology {name!r}: weir.coordinator.url is for custom state providers; the built-in "
                f"{provider.config.provider!r} provider keeps the coordinator record with the state "
                "(remove weir.coordinator.url)"
            )
            raise ConfigError(msg)
        backend = provider.backend
    elif rc.coordinator_url:
        cfg = parse_provider_config({"topology.state.provider.config": {"url": rc.coordinator_url}})
        if cfg.provider == "sqlite" and not master.startswith("local"):
            msg = (
                f"topology {name!r}: weir.coordinator.url {rc.coordinator_url!r} is a file on one machine, but "
                f"Spark master {master!r} runs executors elsewhere; use redis or postgres for the record"
            )
            raise ConfigError(msg)
        backend = open_backend(cfg)
    else:
        if not master.startswith("local"):
            msg = (
                f"topology {name!r}: the state provider {type(provider).__qualname__} is a custom "
                f"StateProvider, so the coordinator record needs a store of its own; Spark master {master!r} "
                "cannot use the default <weir.state.dir>/state.db (a file on one machine): set "
                "weir.coordinator.url to a redis://, redis+cluster:// or postgresql:// URL"
            )
            raise ConfigError(msg)
        backend = open_backend(parse_provider_config({"weir.state.dir": rc.state_dir}))
    store = CheckpointStore(backend, name)
    coord = Coordinator(
        name,
        store,
        participants,
        parallelism,
        max_retries=rc.max_retries,
        history=CheckpointHistory(backend, store.namespace, rc.history_size),
        shape=shape,
        rescaler=rescaler,
        clock=None if rc.batch_clock is None else import_object(rc.batch_clock),
    )
    coord.start()
    # Storm's in-memory provider is a run-scoped store: losing its state on a restart is its
    # contract (warned about at submit), not a loss to stop for
    configured = rc.provider.provider if rc.provider is not None else None
    run_scoped = conf.get("topology.state.provider") is not None and configured == "memory"
    coord.accept_state_loss = rc.accept_state_loss or run_scoped
    coord.resume_offsets = check_store_against_spark(
        coord, rc.checkpoint_location, accept=coord.accept_state_loss, spouts=spouts
    )
    return coord


def resolve_provider(
    name: str, conf: Mapping[str, Any], master: str, parsed: ProviderConfig | None = None
) -> StateProvider:
    """The topology's state provider, validated (and connected once) at submit time.

    ``parsed`` is ``conf``'s provider configuration as :class:`RuntimeConfig` parsed it (``None``:
    it did not parse, and parsing it again raises the error).
    """
    provider = StateFactory.provider_for(parsed if parsed is not None else parse_provider_config(conf))
    if isinstance(provider, KeyValueStateProvider):
        check_local_store(provider.config.provider, master, name)
        if provider.config.provider == "memory":
            provider = _run_scoped(name, provider)
        provider.validate()
        from weir.state.changelog import check_supported

        check_supported(provider.backend, conf, name)  # weir.state.changelog.retain: refused where not kept
    return provider


def _run_scoped(name: str, provider: KeyValueStateProvider) -> KeyValueStateProvider:
    """Storm's in-memory provider on Spark local mode: a SQLite file that lives for this run only."""
    from weir.runtime.spark.ephemeral import run_scoped_dir, warn_not_durable
    from weir.state.config import ProviderConfig

    path = run_scoped_dir(name)
    options = {k: v for k, v in provider.config.options.items() if k not in ("url", "name")}
    options["url"] = f"sqlite:///{path}/state.db"
    warn_not_durable(name, "the 'memory' state provider", path)
    return KeyValueStateProvider(ProviderConfig("sqlite", options))


class TopologyRun:
    """A submitted topology: start it, process what is available, watch it, stop it."""

    def __init__(
        self,
        name: str,
        conf: Mapping[str, Any],
        rc: RuntimeConfig,
        spark: Any,
        spouts: list[tuple[str, Any]],
        runner: BatchRunner,
        coordinator: Coordinator | None,
        *,
        provider: StateProvider | None = None,
        state_namespaces: list[str] | None = None,
    ) -> None:
        self.name = name
        self.conf = dict(conf)
        self.rc = rc
        self.spark = spark
        self.spouts = spouts
        self.runner = runner
        self.coordinator = coordinator
        self.provider = provider
        self.state_namespaces = state_namespaces or []
        self.query: Any = None
        self._qid: str | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._trigger: dict[str, Any] = {}  # the trigger of the last start (a restart reuses it)
        self._conflict_restarts = 0
        self._status = RunStatus(topology=name, state="submitted")
        self._t0 = 0.0
        self._lock = threading.Lock()
        self._in_batch = False
        self._stop_requested = False
        self._final_after = False  # start(final=True): await_termination sends the final mark
        self._checkpoint_existed = os.path.isdir(os.path.join(rc.checkpoint_location, "offsets"))
        self._claim_checkpoint()
        self._supervisor = Supervisor(
            name,
            RestartPolicy(rc.restart_max, rc.restart_backoff_ms),
            self._launch,
            lambda: self.query,
            lambda: self._error,
            self._on_restart,
            classify=self._classify_failure,
        )
        self.metrics: TopologyMetrics | None = None
        if rc.metrics_port is not None:
            self._serve_metrics()
        #: over Spark Connect: the client's end of the server's foreachBatch (see weir.runtime.spark.connect)
        self._relay: Any = None

    def _serve_metrics(self) -> None:
        from weir.runtime.spark.metrics import TopologyMetrics

        sizes = self._state_sizes if isinstance(self.provider, KeyValueStateProvider) else None
        self.metrics = TopologyMetrics(self.name, self.spouts, state_sizes=sizes)
        assert self.rc.metrics_port is not None
        port = self.metrics.serve(self.rc.metrics_port, self.rc.metrics_host)
        host = "127.0.0.1" if self.rc.metrics_host in ("0.0.0.0", "") else self.rc.metrics_host  # noqa: S104
        self._status.metrics_url = f"http://{host}:{port}/metrics"
        if self.coordinator is not None:
            self.coordinator.observers.append(self.metrics.on_entry)

    def _state_sizes(self) -> dict[str, int]:
        assert isinstance(self.provider, KeyValueStateProvider)
        b = self.provider.backend
        return {ns: b.count(ns) for ns in self.state_namespaces}

    def _claim_checkpoint(self) -> None:
        """Refuse a Spark checkpoint that another topology of the same name wrote (submit time).

        Spark would fail on it with a Java stack trace, or worse, silently skip input it believes was
        read. The checkpoint directory holds a small JSON file naming the spouts that wrote it.
        """
        loc = self.rc.checkpoint_location
        if "://" in loc and not loc.startswith("file:"):
            return  # a remote file system: Spark's own checks apply
        path = loc.removeprefix("file://").removeprefix("file:")
        marker = os.path.join(path, CHECKPOINT_MARKER)
        mine = [[cid, f"{type(sp).__module__}.{type(sp).__qualname__}"] for cid, sp in self.spouts]
        if os.path.exists(marker):
            try:
                with open(marker, encoding="utf-8") as fh:
                    theirs = json.load(fh).get("spouts")
            except (OSError, ValueError, AttributeError):
                theirs = None
            if theirs is not None and theirs != mine:

                def show(spouts: Any) -> str:
                    return ", ".join(f"{c} ({k.rsplit('.', 1)[-1]})" for c, k in spouts)

                msg = (
                    f"topology {self.name!r}: Spark's checkpoint {path} was written by another topology of this "
                    f"name (spouts {show(theirs)}; this one has {show(mine)}); give this one its own name "
                    "(weir run --name NAME, or weir.submit(NAME, ...)) or set weir.spark.checkpoint.location"
                )
                raise ConfigError(msg)
            return
        os.makedirs(path, exist_ok=True)
        tmp = f"{marker}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"topology": self.name, "spouts": mine}, fh)
        os.replace(tmp, marker)

    # ---- the stream ----------------------------------------------------------------------
    def _build(self, trigger: dict[str, Any]) -> None:
        if self.query is not None and self.query.isActive:
            msg = f"topology {self.name!r} is already running (query {self._qid})"
            raise TopologyError(msg, topology=self.name)
        resume = self.coordinator.resume_offsets if self.coordinator is not None else None
        dfs = spout_streams(
            self.spark, self.name, self.conf, self.spouts, resume=resume, create=self.runner.create_stream
        )
        if len(dfs) == 1:
            self._spout_id: str | None = self.spouts[0][0]
            df = dfs[0]
        else:
            self._spout_id = None
            parts = [(cid, d) for (cid, _), d in zip(self.spouts, dfs, strict=True)]
            df = union_as_json(parts, tag="c", value="v", options={"ignoreNullFields": "false"})
        on_batch: Any = self._on_batch
        if is_connect(self.spark):
            if self._relay is None:
                from weir.runtime.spark.connect import ConnectRelay

                self._relay = ConnectRelay(self.rc.remote or session_url(self.spark), self.name, self._on_batch)
                self.runner.use_report_sink(self._relay.report_sink())
            on_batch = self._relay.function()
        writer = (
            df.writeStream.foreachBatch(on_batch)
            .option("checkpointLocation", self.rc.checkpoint_location)
            .trigger(**trigger)
        )
        self._ready.clear()
        self._error = None
        self._t0 = time.time()
        self._status.state = "running"
        if self.rc.metrics_port is not None:
            if self.metrics is None or self.metrics.port is None:
                self._serve_metrics()
            assert self.metrics is not None
            self.metrics.attach(self.spark, lambda: self._qid)
        if is_connect(self.spark) and self.rc.connect_share_workers:
            from weir.runtime.spark.connect import start_with_shared_workers

            self.query = start_with_shared_workers(self.spark, writer.start)
        else:
            self.query = writer.start()
        self._qid = str(self.query.id)
        self._status.query_id = self._qid
        self._ready.set()

    def _launch(self, restart: bool) -> None:
        """Start the query; a restart (after a transient failure) also restarts the coordinator.

        The coordinator takes a new epoch, so tasks of the failed query still running are fenced,
        and its first batch recovers the transaction in flight exactly as after a crash.
        """
        if restart and self.coordinator is not None:
            coord = self.coordinator
            coord.start()  # a store that lost what this driver wrote is a StateLossError here
            coord.resume_offsets = check_store_against_spark(
                coord, self.rc.checkpoint_location, accept=coord.accept_state_loss, spouts=self.spouts
            )
        self._build(self._trigger)

    def _on_restart(self, reason: str) -> None:
        with self._lock:
            self._status.restarts += 1
            self._status.state = "restarting"

    def _on_batch(self, df: Any, batch_id: int) -> None:
        with self._lock:
            if self._stop_requested:
                # a stop was requested while the previous batch ran: end before touching anything
                # (Spark has not committed this batch's offsets; the next start replays it)
                self._error = StopRequested(f"topology {self.name!r}: stopped before batch {batch_id}")
                raise self._error
            self._in_batch = True
        try:
            self._run_batch(df, batch_id)
        finally:
            with self._lock:
                self._in_batch = False
                stop = self._stop_requested
            if stop:
                threading.Thread(target=self._stop_query, daemon=True).start()

    def _run_batch(self, df: Any, batch_id: int) -> None:
        try:
            if not self._ready.wait(120):
                msg = f"topology {self.name!r}: the streaming query did not start"
                raise TopologyError(msg, topology=self.name)
            assert self._qid is not None
            # a runner that wants the DataFrame (Trident) plans the batch in Spark SQL itself
            rdd = df if self.runner.wants_dataframe() else df.rdd
            if self.coordinator is not None:
                report = self.coordinator.run_batch(
                    self._qid,
                    batch_id,
                    lambda txid, epoch, attempt: self.runner.run(rdd, self._spout_id, txid, epoch),
                    offsets=self._end_offsets(batch_id),
                )
            else:
                report = self._stateless(rdd, batch_id)
            self.runner.after_batch(report.txid, report.skipped)
            self._record(report)
            if not report.skipped:
                self._supervisor.progressed()
        except BaseException as exc:
            self._error = exc
            self._status.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self.runner.abandoned()
            raise

    def _end_offsets(self, batch_id: int) -> dict[str, Any] | None:
        """The end offsets of the batch's ReplayableSpout spouts, from Spark's offset log (None: not known).

        Kept with the batch's txid in the coordinator record, so a start without this Spark
        checkpoint resumes the spouts from there. Spark lists a batch's sources in the order of the
        query plan, which is the order of the spouts (their streams are unioned in that order).
        """
        from weir.sources.replayable import ReplayableSpout

        if not any(isinstance(sp, ReplayableSpout) for _, sp in self.spouts):
            return None
        planned = read_batch_offsets(self.rc.checkpoint_location, batch_id)
        if planned is None or len(planned) != len(self.spouts):
            return None
        return {
            cid: off
            for (cid, sp), off in zip(self.spouts, planned, strict=True)
            if isinstance(sp, ReplayableSpout) and isinstance(off, dict)
        }

    def _stateless(self, rdd: Any, batch_id: int) -> BatchReport:
        """A batch of a topology without state: the coordinator's retry loop, with nothing to store or roll back."""
        txid = batch_id + 1
        report = BatchReport(txid=txid)
        runner, spout_id = self.runner, self._spout_id
        retry_batch(
            self.name,
            txid,
            self.rc.max_retries,
            report,
            lambda attempt: runner.run(rdd, spout_id, txid, None),
            rolled_back=False,
        )
        return report

    def _record(self, report: BatchReport) -> None:
        if self.metrics is not None:
            self.metrics.on_batch(report)
        with self._lock:
            s = self._status
            s.last_txid = report.txid
            s.recent = [
                *s.recent[-(RECENT_BATCHES - 1) :],
                {
                    "n": s.batches + s.skipped + 1,
                    "txid": report.txid,
                    "tuples": int(report.stats.get("tuples_in", 0)),
                    "job_ms": report.job_ms,
                    "commit_ms": report.commit_ms,
                    "attempts": report.attempts,
                    "skipped": report.skipped,
                    "at": time.time(),
                },
            ]
            if report.skipped:
                s.skipped += 1
                return
            s.batches += 1
            s.retries += max(0, report.attempts - 1)
            n = int(report.stats.get("tuples_in", 0))
            s.tuples_in += n
            s.last_batch_tuples = n
            s.last_job_ms = report.job_ms
            s.last_commit_ms = report.commit_ms
            total_ms = report.job_ms + report.commit_ms
            s.tuples_per_s = n / (total_ms / 1000) if total_ms > 0 else 0.0
            s.dead_letters += int(report.stats.get("dead_letters", 0))
            for comp, c in report.stats.get("components", {}).items():
                agg = s.components.setdefault(comp, {"in": 0, "out": 0, "failed": 0})
                for k in ("in", "out", "failed"):
                    agg[k] += c.get(k, 0)
                for k, v in c.items():  # task-batches, kept instances, Streams restores (docs/storm-on-spark.md)
                    if k == "tasks" or k == "kept" or k.startswith("restore_"):
                        agg[k] = agg.get(k, 0) + int(v)

    # ---- control -------------------------------------------------------------------------
    def start(self, *, available_now: bool = False, final: bool = False) -> TopologyRun:
        """Run continuously, one micro-batch per checkpoint interval, supervised (see :meth:`status`).

        With ``available_now`` process what the sources have now and then stop, in the background
        (:meth:`process_available` does the same and waits); with ``final`` too, the run ends with a
        final mark, sent by :meth:`await_termination` (see :meth:`process_available`).
        """
        ms = self.rc.interval_ms
        if final:
            self._check_final(available_now)
        self._final_after = final
        if available_now:
            self._run({"availableNow": True})
        else:
            self._run({"processingTime": f"{ms} milliseconds"} if ms > 0 else {"processingTime": "0 seconds"})
        return self

    def process_available(self, timeout: float | None = None, *, final: bool = False) -> RunStatus:
        """Process everything the sources have now (``Trigger.AvailableNow``), then stop.

        With ``final`` the run is the end of a finite input: once Spark's batches are done, one more
        transaction sends a final mark from every spout (IBM Streams' final punctuation), which every
        operator receives and forwards (a window operator flushes its open window). The topology must
        have Streams operators or punctuating spouts.
        """
        self.start(available_now=True, final=final)
        self.await_termination(timeout)
        return self.status()

    def _check_final(self, available_now: bool) -> None:
        if not available_now:
            msg = f"topology {self.name!r}: a final mark ends a finite run: start(available_now=True, final=True)"
            raise ConfigError(msg)
        if not self.runner.punctuates():
            msg = (
                f"topology {self.name!r}: a final mark (final=True, --final) is received only by IBM Streams "
                "operators (weir.streams.Operator) or punctuating spouts; this topology has none"
            )
            raise ConfigError(msg)

    def _final_transaction(self) -> None:
        """Run the final mark as a transaction after Spark's last batch (see :meth:`process_available`)."""
        from weir.runtime.spark.statecheck import read_spark_log

        runner = self.runner
        if is_connect(self.spark):  # no SparkContext: an empty batch DataFrame of the client's session
            rdd = self.spark.range(0)
        else:
            rdd = self.spark.sparkContext.parallelize([], 1)
        spout_id = getattr(self, "_spout_id", self.spouts[0][0] if len(self.spouts) == 1 else None)

        def job(txid: int, epoch: int | None, attempt: int) -> JobOutcome:
            return runner.run_final(rdd, spout_id, txid, epoch)

        if self.coordinator is None:
            txid = (self._status.last_txid or 0) + 1
            report = BatchReport(txid=txid)
            final = job  # the final mark of a run without state: the same retry loop as every batch
            retry_batch(
                self.name,
                txid,
                self.rc.max_retries,
                report,
                lambda attempt: final(txid, None, attempt),
                rolled_back=False,
            )
            self._record(report)
            return
        spark_log = read_spark_log(self.rc.checkpoint_location)
        last = spark_log.last_commit if spark_log is not None else None
        qid = self._qid or (spark_log.query_id if spark_log is not None else None) or "final"
        report = self.coordinator.run_batch(qid, (last if last is not None else -1) + 1, job, rebase=1)
        self._record(report)

    def _run(self, trigger: dict[str, Any]) -> None:
        if self.query is not None and self.query.isActive:
            msg = f"topology {self.name!r} is already running (query {self._qid})"
            raise TopologyError(msg, topology=self.name)
        self._trigger = trigger
        self._stop_requested = False
        self._supervisor.start()

    def _newer_epoch(self) -> int | None:
        """The stored epoch when a newer driver has taken this topology over, else None."""
        coord = self.coordinator
        if coord is None or coord.epoch is None:
            return None
        try:
            stored = coord.store.backend.txids(coord.store.namespace).epoch
        except WeirError:
            return None
        return stored if stored > coord.epoch else None

    def _checkpoint_conflict(self, exc: BaseException) -> BaseException | None:
        """The error to raise for a query stopped by another driver writing the same Spark checkpoint.

        A :class:`FencedError` when a newer driver took over; None to start the query again (this
        driver holds the newest epoch, so the other one is being fenced and will stop).
        """
        if not is_checkpoint_conflict(exc):
            return None
        newer = self._newer_epoch()
        where = f"Spark checkpoint {self.rc.checkpoint_location}"
        if newer is not None or self.coordinator is None:
            mine = self.coordinator.epoch if self.coordinator is not None else None
            msg = (
                f"topology {self.name!r}: another driver is running this topology"
                + (f" (epoch {newer}, this driver's is {mine})" if newer is not None else "")
                + f" and writes the same {where}; this driver stops and commits nothing. Stop the other "
                "driver first to run this one, or give this run another topology name"
            )
            return FencedError(msg)
        if self._conflict_restarts >= _CONFLICT_RESTARTS:
            msg = (
                f"topology {self.name!r}: another Spark query keeps writing the {where} although this "
                f"driver holds the newest epoch ({self.coordinator.epoch}); stop the other query"
            )
            return FencedError(msg)
        return None

    def _classify_failure(self, exc: BaseException) -> BaseException | str | None:
        """The supervisor's first look at a failed query: another driver on the same Spark checkpoint.

        A :class:`FencedError` (stop for good) when a newer driver took this topology over; a reason
        to start the query again when this driver holds the newest epoch (the other one is being
        fenced and will stop); None for any other failure.
        """
        died = self._jvm_died(exc)
        if died is not None:
            return died
        if not is_checkpoint_conflict(exc):
            return None
        conflict = self._checkpoint_conflict(exc)
        if conflict is not None:
            return conflict
        self._conflict_restarts += 1
        return f"another driver still writes the Spark checkpoint ({self._conflict_restarts}/{_CONFLICT_RESTARTS})"

    def _jvm_died(self, exc: BaseException) -> SparkDiedError | None:
        """A named error when Spark's JVM is gone: no restart can reach it from this process."""
        ended = spark_jvm_exit(wait_s=0.5 if _PY4J_LOST.search(f"{type(exc).__name__}: {exc}") else 0.0)
        if ended is None:
            return None
        pid, code = ended
        how = f"was killed by signal {_signal_name(-code)}" if code < 0 else f"exited with status {code}"
        rec = self.coordinator.record if self.coordinator is not None else None
        committed = rec.last_committed if rec is not None else "unknown"
        msg = (
            f"topology {self.name!r}: Spark's JVM died (pid {pid} {how}); the run stops without a restart, "
            f"since a restart from this process cannot reach it. The store holds every committed batch (last "
            f"committed txid {committed}); start the topology again (weir run / weir.submit) and recovery "
            "finishes or undoes the transaction in flight. If the JVM ran out of memory, raise "
            "spark.driver.memory (weir.spark.conf)"
        )
        log.error("%s", msg)
        return SparkDiedError(msg)

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait for the run to end; re-raise the error that stopped it (a :class:`WeirError`).

        Transient failures do not end it: the query is restarted (``weir.restart.max``,
        ``weir.restart.backoff.ms``) and this keeps waiting.
        """
        if self.query is None:
            self.start()
        done = self._supervisor.wait(timeout)
        if done:
            self.runner.close()
            if self._relay is not None:
                self._relay.close()
                self._relay = None
            err = self._supervisor.error
            self._status.state = "stopped" if err is None else "failed"
            if err is not None:
                self._status.error = str(err).splitlines()[0] if str(err) else type(err).__name__
                raise self._final_error(err)
            if self._final_after and not self._stop_requested:
                self._final_after = False
                self._final_transaction()
        return done

    def _final_error(self, err: BaseException) -> BaseException:
        if isinstance(err, WeirError):
            return err
        text = str(err)
        first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
        if self._checkpoint_existed and _CHECKPOINT_CLASH.search(text):
            msg = (
                f"topology {self.name!r}: Spark's checkpoint {self.rc.checkpoint_location} belongs to another "
                f"query with this name ({first[:200]}); give this topology its own name (--name / "
                "weir.submit(name, ...)), or weir.spark.checkpoint.location"
            )
            return ConfigError(msg)
        msg = f"topology {self.name!r}: the streaming query failed: {text[:2000]}"
        exc = TopologyError(msg, topology=self.name)
        exc.__cause__ = err
        return exc

    def request_stop(self) -> None:
        """Stop at the next batch boundary: the batch in flight finishes and commits, no new one starts."""
        with self._lock:
            self._stop_requested = True
            busy = self._in_batch
        self._supervisor.stop()
        if not busy:
            threading.Thread(target=self._stop_query, daemon=True).start()

    def _stop_query(self) -> None:
        if self.query is not None and self.query.isActive:
            try:
                self.query.stop()
            except Exception as exc:  # Ctrl-C: the JVM's own shutdown hook may have stopped Spark first
                if "stopped SparkContext" not in str(exc):
                    raise

    def stop(self) -> None:
        """Stop the query now (a batch in flight is interrupted and rolled back on the next start).

        The metrics endpoint (``weir.metrics.port``) stops too.
        """
        self._supervisor.stop()
        self._stop_query()
        self.runner.close()
        if self._relay is not None:
            self._relay.close()
            self._relay = None
        self._status.state = "stopped"
        if self.metrics is not None:
            self.metrics.close()
            self.metrics.port = None

    def status(self, *, sizes: bool = False) -> RunStatus:
        """Last txid, batches, tuples/s, commit ms; with ``sizes`` also key counts per namespace."""
        with self._lock:
            s = RunStatus(**{k: v for k, v in self._status.__dict__.items()})
            s.components = {k: dict(v) for k, v in self._status.components.items()}
            s.recent = [dict(r) for r in self._status.recent]
        s.elapsed_s = time.time() - self._t0 if self._t0 else 0.0
        # the supervisor first: over Spark Connect isActive is a round trip to the server
        if self.query is not None and not self._supervisor.done and self.query.isActive:
            s.state = "running"
        if sizes and isinstance(self.provider, KeyValueStateProvider):
            b = self.provider.backend
            s.state_sizes = {ns: b.count(ns) for ns in self.state_namespaces}
        return s


def picklable_or_raise(name: str, cid: str, obj: Any) -> bytes:
    """Check at submit time that a component can be shipped to executors."""
    ensure_python_env()
    try:
        return bytes(cloudpickle.dumps(obj))
    except Exception as exc:
        msg = (
            f"topology {name!r}, component {cid!r}: {type(obj).__name__} cannot be pickled for the executors "
            f"({type(exc).__name__}: {exc}); create connections, locks and files in prepare(), not in __init__"
        )
        raise TopologyError(msg, topology=name, component=cid) from exc


def master_for(rc: RuntimeConfig, spark: Any) -> str:
    """The Spark master a run will use, known before Spark starts (checks run before it)."""
    from pyspark.sql import SparkSession

    if spark is None and rc.remote is not None:  # a Connect client: the server's master (connecting is cheap)
        spark = get_spark(rc.master, f"weir-{rc.topology}", rc.spark_conf, remote=rc.remote)
    if spark is None:
        spark = SparkSession.getActiveSession()
    if spark is not None and is_connect(spark):
        return connect_master(spark, rc.remote or session_url(spark))
    return rc.master if spark is None else str(spark.sparkContext.master)


def spark_for(rc: RuntimeConfig, spark: Any) -> tuple[Any, str]:
    """The session to use and its master URL (starts Spark when none is running)."""
    if spark is None:
        spark = get_spark(rc.master, f"weir-{rc.topology}", rc.spark_conf, remote=rc.remote)
    if is_connect(spark):
        return spark, connect_master(spark, rc.remote or session_url(spark))
    return spark, str(spark.sparkContext.master)


def ship_user_modules(objs: list[Any]) -> None:
    """Pickle the classes of user modules that executors cannot import by value.

    A module imported from a script's directory (``python examples/redis_wordcount.py`` importing
    ``wordcount``) is on the driver's ``sys.path`` only; Spark's Python workers would fail with
    ``No module named ...``. Modules installed in the environment (and weir, pyspark) are left to
    be imported by name.
    """
    import sys
    import sysconfig

    installed = {os.path.realpath(p) for p in {sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib")}}
    for obj in objs:
        mod = sys.modules.get(type(obj).__module__)
        f = getattr(mod, "__file__", None)
        if mod is None or f is None or mod.__name__ == "__main__" or mod.__name__.split(".")[0] in ("weir", "pyspark"):
            continue
        real = os.path.realpath(f)
        if any(real.startswith(p + os.sep) for p in installed):
            continue
        cloudpickle.register_pickle_by_value(mod)
