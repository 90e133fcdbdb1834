"""Prometheus metrics of a running topology, served by the driver on ``weir.metrics.port``.

Every series carries a ``topology`` label. What is exported (``_total`` counters, ``_seconds``
histograms, as Prometheus names them):

==========================================  ===============================================================
``weir_batches_total{outcome}``             batches ``committed``, ``skipped`` (a replay of a committed
                                            txid) or ``failed`` (out of retries)
``weir_last_txid``                          the txid of the last batch processed
``weir_checkpoint_phase{weir_checkpoint_phase}``  1 for the coordinator's current phase (``PREPARING``,
                                            ``COMMITTING``, ``COMMITTED``), 0 for the others
``weir_batch_duration_seconds``             the batch's job (every task of every component)
``weir_commit_duration_seconds``            COMMITTING stored → every namespace committed → COMMITTED
``weir_tuples_total{component,direction}``  tuples ``in`` to and ``out`` of each component
``weir_failed_tuples_total{component}``     tuples a bolt failed (``collector.fail``)
``weir_task_failures_total{component}``     task attempts that failed (each rolls the batch back)
``weir_batch_retries_total``                batch attempts after the first
``weir_recoveries_total{action}``           recoveries at start (``rolled back`` / ``rolled forward``)
``weir_dead_letters_total``                 tuples routed to the dead-letter sink
``weir_state_keys_written_total{namespace}``  keys written per namespace (stateful bolts)
``weir_state_keys{namespace}``              keys per state namespace (counted when scraped)
``weir_source_lag_records{spout}``          records in the source after the last batch, for spouts
                                            that can tell (Redis Streams, NATS); absent = unknown
``weir_spark_input_rows_total``             Spark's ``numInputRows`` per progress event
``weir_spark_input_rows_per_second``        Spark's ``inputRowsPerSecond`` of the last batch
``weir_spark_processed_rows_per_second``    Spark's ``processedRowsPerSecond`` of the last batch
``weir_spark_trigger_duration_seconds``     Spark's ``durationMs.triggerExecution``
``weir_spark_batch_id``                     the last Spark batch id
==========================================  ===============================================================

Spark's own numbers come from a :class:`~pyspark.sql.streaming.StreamingQueryListener` on the
session; weir's from the coordinator (each stored history entry) and each batch's report.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from weir.checkpoint.coordinator import BatchReport
from weir.checkpoint.history import HistoryEntry
from weir.errors import ConfigError

__all__ = ["DURATION_BUCKETS", "TopologyMetrics"]

log = logging.getLogger("weir.metrics")

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
PHASES = ["COMMITTED", "PREPARING", "COMMITTING"]


class TopologyMetrics:
    """The metrics of one topology run, in their own registry (several runs per process are fine).

    Parameters
    ----------
    topology : the topology name (the ``topology`` label)
    spouts : ``(component id, spout)`` pairs, asked for their lag when scraped
    state_sizes : returns ``{namespace: keys}`` when scraped (None: no state)
    """

    def __init__(
        self,
        topology: str,
        spouts: Sequence[tuple[str, Any]] = (),
        state_sizes: Callable[[], dict[str, int]] | None = None,
    ) -> None:
        try:
            from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram
        except ImportError as exc:
            msg = (
                f"topology {topology!r}: weir.metrics.port needs the prometheus_client library; "
                "pip install 'weir[metrics]'"
            )
            raise ConfigError(msg) from exc
        self.topology = topology
        self.spouts = list(spouts)
        self.state_sizes = state_sizes
        self.registry = CollectorRegistry()
        r, t = self.registry, ["topology"]
        self.batches = Counter("weir_batches", "Batches by outcome", [*t, "outcome"], registry=r)
        self.last_txid = Gauge("weir_last_txid", "The txid of the last batch processed", t, registry=r)
        self.phase = Enum("weir_checkpoint_phase", "The coordinator's current phase", t, states=PHASES, registry=r)
        self.batch_seconds = Histogram(
            "weir_batch_duration_seconds", "Time of a batch's job", t, buckets=DURATION_BUCKETS, registry=r
        )
        self.commit_seconds = Histogram(
            "weir_commit_duration_seconds", "Time of a batch's commit", t, buckets=DURATION_BUCKETS, registry=r
        )
        self.tuples = Counter(
            "weir_tuples", "Tuples in to and out of each component", [*t, "component", "direction"], registry=r
        )
        self.failed_tuples = Counter("weir_failed_tuples", "Tuples a bolt failed", [*t, "component"], registry=r)
        self.task_failures = Counter("weir_task_failures", "Failed task attempts", [*t, "component"], registry=r)
        self.retries = Counter("weir_batch_retries", "Batch attempts after the first", t, registry=r)
        self.recoveries = Counter("weir_recoveries", "Recoveries at start", [*t, "action"], registry=r)
        self.dead_letters = Counter("weir_dead_letters", "Tuples routed to the dead-letter sink", t, registry=r)
        self.keys_written = Counter(
            "weir_state_keys_written", "Keys written per state namespace", [*t, "namespace"], registry=r
        )
        self.spark_rows = Counter("weir_spark_input_rows", "Spark's numInputRows", t, registry=r)
        self.spark_in_rate = Gauge(
            "weir_spark_input_rows_per_second", "Spark's inputRowsPerSecond of the last batch", t, registry=r
        )
        self.spark_done_rate = Gauge(
            "weir_spark_processed_rows_per_second", "Spark's processedRowsPerSecond of the last batch", t, registry=r
        )
        self.spark_trigger = Histogram(
            "weir_spark_trigger_duration_seconds",
            "Spark's triggerExecution time",
            t,
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.spark_batch = Gauge("weir_spark_batch_id", "The last Spark batch id", t, registry=r)
        self.registry.register(_ScrapeTime(self))
        self.phase.labels(topology).state("COMMITTED")
        self._failures_seen: dict[int, int] = {}
        self._end_offsets: list[Any] = []
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._listener: Any = None
        self._spark: Any = None
        self.port: int | None = None
        self.lock = threading.Lock()

    # ---- serving ---------------------------------------------------------------------------
    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` on ``host:port`` (0 = a free port) in a daemon thread; the bound port."""
        from prometheus_client import start_http_server

        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            msg = (
                f"topology {self.topology!r}: weir.metrics.port {port} on {host} cannot be bound ({exc.strerror}); "
                "choose a free port, or 0 for any"
            )
            raise ConfigError(msg) from exc
        self.port = int(self._server.server_port)
        log.info("topology %s: Prometheus metrics on http://%s:%d/metrics", self.topology, host, self.port)
        return self.port

    def attach(self, spark: Any, query_id: Callable[[], str | None]) -> None:
        """Listen to Spark's progress events of the topology's query (once per run)."""
        if self._listener is not None:
            return
        self._listener = _progress_listener(self.on_progress, query_id)
        self._spark = spark
        spark.streams.addListener(self._listener)

    def close(self) -> None:
        """Stop serving and listening."""
        if self._listener is not None and self._spark is not None:
            try:
                self._spark.streams.removeListener(self._listener)
            except Exception:  # noqa: BLE001 - the session may be gone already
                log.debug("removing the progress listener failed", exc_info=True)
            self._listener = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # ---- events ----------------------------------------------------------------------------
    def on_batch(self, report: BatchReport) -> None:
        """A batch ended (committed or skipped)."""
        t = self.topology
        with self.lock:
            self.last_txid.labels(t).set(report.txid)
            if report.skipped:
                self.batches.labels(t, "skipped").inc()
                return
            self.batches.labels(t, "committed").inc()
            self.retries.labels(t).inc(max(0, report.attempts - 1))
            self.batch_seconds.labels(t).observe(report.job_ms / 1000)
            self.commit_seconds.labels(t).observe(report.commit_ms / 1000)
            stats = report.stats or {}
            for comp, c in (stats.get("components") or {}).items():
                self.tuples.labels(t, comp, "in").inc(int(c.get("in", 0)))
                self.tuples.labels(t, comp, "out").inc(int(c.get("out", 0)))
                self.failed_tuples.labels(t, comp).inc(int(c.get("failed", 0)))
            for ns, n in (stats.get("keys_written") or {}).items():
                self.keys_written.labels(t, ns).inc(int(n))
            self.dead_letters.labels(t).inc(int(stats.get("dead_letters", 0)))

    def on_entry(self, entry: HistoryEntry) -> None:
        """The coordinator stored a history entry (a phase change)."""
        t = self.topology
        with self.lock:
            if entry.phases:
                phase = str(entry.phases[-1][0])
                self.phase.labels(t).state("COMMITTED" if phase == "ROLLED_BACK" else phase)
            if entry.kind == "recovery" and entry.status in ("rolled back", "rolled forward"):
                self.recoveries.labels(t, entry.status).inc()
            seen = self._failures_seen.get(entry.seq, 0)
            for f in entry.failures[seen:]:
                self.task_failures.labels(t, str(f.get("component"))).inc()
            self._failures_seen = {entry.seq: len(entry.failures)}
            if entry.status == "failed":
                self.batches.labels(t, "failed").inc()

    def on_progress(self, progress: Any) -> None:
        """A Spark progress event of the topology's query."""
        t = self.topology
        with self.lock:
            self.spark_rows.labels(t).inc(int(progress.numInputRows or 0))
            self.spark_in_rate.labels(t).set(float(progress.inputRowsPerSecond or 0.0))
            self.spark_done_rate.labels(t).set(float(progress.processedRowsPerSecond or 0.0))
            trigger = (progress.durationMs or {}).get("triggerExecution")
            if trigger is not None:
                self.spark_trigger.labels(t).observe(float(trigger) / 1000)
            self.spark_batch.labels(t).set(int(progress.batchId))
            ends = []
            for src in progress.sources or []:
                try:
                    ends.append(json.loads(src.endOffset) if src.endOffset else None)
                except (TypeError, ValueError):
                    ends.append(None)
            self._end_offsets = ends

    def source_lags(self) -> dict[str, int]:
        """``{spout: records behind}`` for the spouts that can tell."""
        ends = self._end_offsets
        if len(ends) != len(self.spouts):
            return {}
        out: dict[str, int] = {}
        for (cid, spout), end in zip(self.spouts, ends, strict=True):
            if end is None:
                continue
            try:
                lag = spout.source_lag(end)
            except Exception:  # noqa: BLE001 - a scrape never fails because a source is down
                log.debug("spout %s: source_lag failed", cid, exc_info=True)
                continue
            if lag is not None:
                out[cid] = int(lag)
        return out


class _ScrapeTime:
    """Series computed when Prometheus scrapes: state keys per namespace and source lag."""

    def __init__(self, metrics: TopologyMetrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        m = self.metrics
        if m.state_sizes is not None:
            keys = GaugeMetricFamily("weir_state_keys", "Keys per state namespace", labels=["topology", "namespace"])
            try:
                sizes = m.state_sizes()
            except Exception:  # noqa: BLE001 - the store may be unreachable for a moment
                log.debug("counting state keys failed", exc_info=True)
                sizes = {}
            for ns, n in sorted(sizes.items()):
                keys.add_metric([m.topology, ns], n)
            yield keys
        lag = GaugeMetricFamily(
            "weir_source_lag_records", "Records in the source after the last batch", labels=["topology", "spout"]
        )
        for cid, n in sorted(m.source_lags().items()):
            lag.add_metric([m.topology, cid], n)
        yield lag


def _progress_listener(sink: Callable[[Any], None], query_id: Callable[[], str | None]) -> Any:
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class ProgressListener(StreamingQueryListener):  # type: ignore[misc]
        """Forwards the progress events of one query."""

        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's name
            pass

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            progress = event.progress
            if str(progress.id) == query_id():
                try:
                    sink(progress)
                except Exception:  # noqa: BLE001 - a listener must not break Spark's event bus
                    log.warning("metrics: a progress event could not be recorded", exc_info=True)

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            pass

    return ProgressListener()
