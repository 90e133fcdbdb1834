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
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pyspark import cloudpickle

from weir.checkpoint.coordinator import BatchReport, CheckpointStore, Coordinator, JobOutcome
from weir.errors import ConfigError, TopologyError, WeirError
from weir.runtime.spark.config import RuntimeConfig
from weir.runtime.spark.session import ensure_python_env, get_spark
from weir.runtime.spark.supervision import RestartPolicy, StopRequested, Supervisor
from weir.state.base import StateProvider
from weir.state.config import parse_provider_config
from weir.state.factory import KeyValueStateProvider, StateFactory, open_backend
from weir.topology.context import TopologyContext

__all__ = ["BatchRunner", "RunStatus", "TopologyRun", "check_local_store", "make_coordinator"]

log = logging.getLogger("weir.runtime")


# how Spark words a checkpoint written by a different query (other sources, other schema)
_CHECKPOINT_CLASH = re.compile(
    r"number of sources|sources in the checkpoint|offset log|incompatible|schema of the", re.IGNORECASE
)
#: the file in a Spark checkpoint directory that says which topology's spouts wrote it
CHECKPOINT_MARKER = "weir-topology.json"


class BatchRunner(Protocol):
    """What runs a batch's tasks (Storm topology, Trident stream, ...)."""

    def run(self, batch_rdd: Any, spout_id: str | None, txid: int, epoch: int | None) -> JobOutcome:
        """Run every task of the batch and report."""
        ...


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


def check_local_store(kind: str, master: str, topology: str) -> None:
    """Refuse a single-machine store outside local mode, and ``memory`` on Spark at all."""
    if kind == "memory":
        msg = (
            f"topology {topology!r}: the 'memory' state provider keeps state inside one Python process, but Spark "
            "runs tasks in separate Python worker processes; use 'sqlite' (the embedded default) or a server "
            "(redis, postgres). For tests without Spark use weir.testing."
        )
        raise ConfigError(msg)
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
) -> Coordinator:
    """A started coordinator whose record lives in the topology's store (sqlite for custom providers)."""
    if isinstance(provider, KeyValueStateProvider):
        backend = provider.backend
    else:
        check_local_store("sqlite", master, name)
        backend = open_backend(parse_provider_config({"weir.state.dir": rc.state_dir}))
    coord = Coordinator(
        name, CheckpointStore(backend, name), participants, parallelism, max_retries=rc.max_retries
    )
    coord.start()
    return coord


def resolve_provider(name: str, conf: Mapping[str, Any], master: str) -> StateProvider:
    """The topology's state provider, validated (and connected once) at submit time."""
    provider = StateFactory.get_provider(conf)
    if isinstance(provider, KeyValueStateProvider):
        check_local_store(provider.config.provider, master, name)
        provider.validate()
    return provider


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
        self._status = RunStatus(topology=name, state="submitted")
        self._t0 = 0.0
        self._lock = threading.Lock()
        self._trigger: dict[str, Any] = {}
        self._in_batch = False
        self._stop_requested = False
        self._checkpoint_existed = os.path.isdir(os.path.join(rc.checkpoint_location, "offsets"))
        self._claim_checkpoint()
        self._supervisor = Supervisor(
            name,
            RestartPolicy(rc.restart_max, rc.restart_backoff_ms),
            self._launch,
            lambda: self.query,
            lambda: self._error,
            self._on_restart,
        )

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
        from pyspark.sql import functions as F  # noqa: N812

        dfs = []
        for cid, spout in self.spouts:
            ctx = TopologyContext(self.name, cid, 0, 1, self.conf)
            try:
                dfs.append((cid, spout.create_stream(self.spark, ctx)))
            except WeirError:
                raise
            except Exception as exc:
                msg = f"topology {self.name!r}, spout {cid!r}: cannot create its stream: {exc}"
                raise TopologyError(msg, topology=self.name, component=cid) from exc
        if len(dfs) == 1:
            self._spout_id: str | None = dfs[0][0]
            df = dfs[0][1]
        else:
            self._spout_id = None
            # a JSON object per row keeps each column's type (an array would cast them to one type)
            parts = [
                d.select(
                    F.lit(cid).alias("c"),
                    F.to_json(F.struct(*[d[c] for c in d.columns]), {"ignoreNullFields": "false"}).alias("v"),
                )
                for cid, d in dfs
            ]
            df = parts[0]
            for p in parts[1:]:
                df = df.unionByName(p)
        writer = (
            df.writeStream.foreachBatch(self._on_batch)
            .option("checkpointLocation", self.rc.checkpoint_location)
            .trigger(**trigger)
        )
        self._ready.clear()
        self._error = None
        self._t0 = time.time()
        self._status.state = "running"
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
            self.coordinator.start()
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
            # a runner with ``wants_dataframe`` (Trident) plans the batch in Spark SQL itself
            rdd = df if getattr(self.runner, "wants_dataframe", False) else df.rdd
            if self.coordinator is not None:
                report = self.coordinator.run_batch(
                    self._qid,
                    batch_id,
                    lambda txid, epoch, attempt: self.runner.run(rdd, self._spout_id, txid, epoch),
                )
            else:
                report = self._stateless(rdd, batch_id)
            self._record(report)
            if not report.skipped:
                self._supervisor.progressed()
        except BaseException as exc:
            self._error = exc
            self._status.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise

    def _stateless(self, rdd: Any, batch_id: int) -> BatchReport:
        txid = batch_id + 1
        report = BatchReport(txid=txid)
        for attempt in range(self.rc.max_retries + 1):
            report.attempts = attempt + 1
            t0 = time.perf_counter()
            outcome = self.runner.run(rdd, self._spout_id, txid, None)
            report.job_ms = (time.perf_counter() - t0) * 1000
            report.stats = outcome.stats
            if outcome.ok:
                return report
        first = outcome.failures[0]
        msg = (
            f"topology {self.name!r}: component {first.component!r} task {first.task} failed batch {txid} "
            f"{self.rc.max_retries + 1} times: {first.error}"
        )
        raise TopologyError(
            msg,
            topology=self.name,
            component=first.component,
            task=first.task,
            txid=txid,
            remote_traceback=first.traceback or None,
        )

    def _record(self, report: BatchReport) -> None:
        with self._lock:
            s = self._status
            s.last_txid = report.txid
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

    # ---- control -------------------------------------------------------------------------
    def start(self, *, available_now: bool = False) -> TopologyRun:
        """Run continuously, one micro-batch per checkpoint interval, supervised (see :meth:`status`).

        With ``available_now`` process what the sources have now and then stop, in the background
        (:meth:`process_available` does the same and waits).
        """
        ms = self.rc.interval_ms
        if available_now:
            self._run({"availableNow": True})
        else:
            self._run({"processingTime": f"{ms} milliseconds"} if ms > 0 else {"processingTime": "0 seconds"})
        return self

    def process_available(self, timeout: float | None = None) -> RunStatus:
        """Process everything the sources have now (``Trigger.AvailableNow``), then stop."""
        self._run({"availableNow": True})
        self.await_termination(timeout)
        return self.status()

    def _run(self, trigger: dict[str, Any]) -> None:
        if self.query is not None and self.query.isActive:
            msg = f"topology {self.name!r} is already running (query {self._qid})"
            raise TopologyError(msg, topology=self.name)
        self._trigger = trigger
        self._stop_requested = False
        self._supervisor.start()

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait for the run to end; re-raise the error that stopped it (a :class:`WeirError`).

        Transient failures do not end it: the query is restarted (``weir.restart.max``,
        ``weir.restart.backoff.ms``) and this keeps waiting.
        """
        if self.query is None:
            self.start()
        done = self._supervisor.wait(timeout)
        if done:
            err = self._supervisor.error
            self._status.state = "stopped" if err is None else "failed"
            if err is not None:
                self._status.error = str(err).splitlines()[0] if str(err) else type(err).__name__
                raise self._final_error(err)
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
            self.query.stop()

    def stop(self) -> None:
        """Stop the query now (a batch in flight is interrupted and rolled back on the next start)."""
        self._supervisor.stop()
        self._stop_query()
        self._status.state = "stopped"

    def status(self, *, sizes: bool = False) -> RunStatus:
        """Last txid, batches, tuples/s, commit ms; with ``sizes`` also key counts per namespace."""
        with self._lock:
            s = RunStatus(**{k: v for k, v in self._status.__dict__.items()})
            s.components = {k: dict(v) for k, v in self._status.components.items()}
        s.elapsed_s = time.time() - self._t0 if self._t0 else 0.0
        if self.query is not None and self.query.isActive and not self._supervisor.done:
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

    if spark is None:
        spark = SparkSession.getActiveSession()
    return rc.master if spark is None else str(spark.sparkContext.master)


def spark_for(rc: RuntimeConfig, spark: Any) -> tuple[Any, str]:
    """The session to use and its master URL (starts Spark when none is running)."""
    if spark is None:
        spark = get_spark(rc.master, f"weir-{rc.topology}", rc.spark_conf)
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
