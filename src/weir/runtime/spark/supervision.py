"""Supervision: restart a topology's streaming query after a transient failure, as Storm's supervisor does.

A topology is one Spark Structured Streaming query. When that query ends with an error, the
:class:`Supervisor` (a driver-side thread per run) decides:

- **transient** — a Python worker that failed to start or connect back, a lost executor, a store,
  broker or socket that was unreachable for a while, a source's
  :class:`~weir.errors.TransientSourceError` — also while the query is first built, when the spouts
  compute their initial offsets, and a Storm spout's in ``open``/``next_tuple`` once the batch
  has failed every attempt — or a store call past its bound
  (:class:`~weir.errors.StoreUnavailableError`, raised on the driver or in a task; see
  :func:`transient_reason`): wait
  ``weir.restart.backoff.ms`` (doubled after each consecutive restart, at most
  :data:`MAX_BACKOFF_MS`), restart the coordinator (a new epoch; recovery finishes or undoes the
  transaction in flight, exactly as after a crash), run the full start-up check of the store against
  Spark's checkpoint and what this driver last wrote (a store that lost data while the topology ran
  stops it with :class:`~weir.errors.StateLossError`), and start the query on the same Spark checkpoint,
  which replays the batch that failed with the same txid. Each restart is logged and counted in
  ``status().restarts``. After ``weir.restart.max`` consecutive restarts without a committed batch
  in between, the run stops with the last error.
- **permanent** — the user's code failing the same txid past ``weir.batch.max.retries``, bad
  configuration, fencing by a newer driver, lost state (:class:`~weir.errors.StateLossError`), a
  trimmed source range, anything not known to be
  transient: the run stops at once with that (named) error.

A stop requested with :meth:`Supervisor.request_stop` (``weir run`` on Ctrl-C) ends the query at a
batch boundary: the batch in flight finishes and commits, the next one is not started.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from weir.errors import (
    ConfigError,
    FencedError,
    SourceError,
    StateLossError,
    StoreUnavailableError,
    TopologyError,
    WeirError,
)

__all__ = ["MAX_BACKOFF_MS", "RestartPolicy", "StopRequested", "Supervisor", "transient_reason"]

log = logging.getLogger("weir.runtime")

#: the longest wait between two restarts, whatever ``weir.restart.backoff.ms`` and the count give
MAX_BACKOFF_MS = 60_000


@dataclass(frozen=True)
class RestartPolicy:
    """When and how often a failed query is restarted.

    Attributes
    ----------
    max_restarts : ``weir.restart.max`` (default 5): consecutive restarts without a committed batch in
        between; 0 turns supervision off
    backoff_ms : ``weir.restart.backoff.ms`` (default 1000): the wait before the first restart, doubled
        for each further consecutive one, capped at :data:`MAX_BACKOFF_MS`
    """

    max_restarts: int = 5
    backoff_ms: int = 1000

    def delay_s(self, consecutive: int) -> float:
        """The wait before restart number ``consecutive`` (1-based) of a row."""
        factor: int = 2 ** max(0, consecutive - 1)
        return min(self.backoff_ms * factor, MAX_BACKOFF_MS) / 1000


class StopRequested(WeirError):
    """Raised by a batch that starts after a stop was requested: ends the query before it processes."""


# Failures of the machinery rather than of the topology, as Spark, py4j and the clients word them.
_TRANSIENT_TEXT = re.compile(
    r"failed to connect back|Python worker exited unexpectedly|Python worker .*(?:crashed|killed)"
    r"|ExecutorLostFailure|Executor heartbeat timed out|Connection refused|Connection reset"
    r"|Broken pipe|SocketTimeoutException|EOFException|Error \d+ connecting to|Timeout connecting to"
    r"|redis\.exceptions\.(?:ConnectionError|TimeoutError|BusyLoadingError)"
    r"|psycopg\.OperationalError|ConnectionRefusedError|ConnectionResetError|nats\.errors\.(?:NoServers|Timeout)"
    r"|TransientSourceError",
    re.IGNORECASE,
)
#: a task's failure report when its store call ran past its bound (executor.py: "<type> in <where>: ...")
_TASK_STORE_UNAVAILABLE = re.compile(r"\bStoreUnavailableError in ")
#: a Storm spout task whose source stayed unreachable through every attempt (spoutlog.py's failure text)
_SPOUT_SOURCE_UNAVAILABLE = re.compile(r"\bTransientSourceError in next_tuple of spout ")
_TRANSIENT_TYPES = {
    "ConnectionError",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "BrokenPipeError",
    "TimeoutError",
    "BusyLoadingError",
    "OperationalError",
    "Py4JNetworkError",
    "NoServersError",
}


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in out and len(out) < 20:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def transient_reason(exc: BaseException) -> str | None:
    """Why ``exc`` is a transient failure worth a restart, or None when it is permanent."""
    chain = _chain(exc)
    for e in chain:
        if isinstance(e, SourceError) and e.retriable:  # the one mechanism sources use: TransientSourceError
            return f"{type(e).__name__}: {_first_line(e)}"
        # a store that did not answer within its bound, on the driver or in a task (whose report names it)
        if isinstance(e, StoreUnavailableError) or (
            isinstance(e, TopologyError) and _TASK_STORE_UNAVAILABLE.search(str(e))
        ):
            return f"the store did not answer ({_first_line(e)})"
        if isinstance(e, TopologyError) and _SPOUT_SOURCE_UNAVAILABLE.search(str(e)):
            return f"a spout's source did not answer ({_first_line(e)})"
        if isinstance(e, (FencedError, StateLossError, ConfigError, SourceError, StopRequested)):
            return None
        if isinstance(e, TopologyError) and e.component not in (None, "<spark>"):
            return None  # the user's component failed the same txid past weir.batch.max.retries
    for e in chain:
        if type(e).__name__ in _TRANSIENT_TYPES:
            return f"{type(e).__name__}: {_first_line(e)}"
    for e in chain:
        text = str(e) + ((e.remote_traceback or "") if isinstance(e, TopologyError) else "")
        m = _TRANSIENT_TEXT.search(text)
        if m:
            return f"{m.group(0)} ({_first_line(e)})"
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


class Supervisor:
    """Watches one run's query on a driver-side thread and restarts it after transient failures.

    Parameters
    ----------
    topology : the topology's name (for logs and errors)
    policy : the restart policy
    launch : starts the query (``restart=True`` for a restart: coordinator and query anew)
    query : returns the current query
    original_error : returns the Python exception a failing batch raised, if any
    on_restart : called with the reason before each restart (counts it in the status)
    classify : optional first look at a failure: an exception to stop with for good, a reason to
        start the query again at once (not counted against the policy: another driver briefly
        holding the Spark checkpoint), or None to classify it as usual
    """

    def __init__(
        self,
        topology: str,
        policy: RestartPolicy,
        launch: Callable[[bool], None],
        query: Callable[[], Any],
        original_error: Callable[[], BaseException | None],
        on_restart: Callable[[str], None],
        *,
        classify: Callable[[BaseException], BaseException | str | None] | None = None,
    ) -> None:
        self.topology = topology
        self.policy = policy
        self._launch = launch
        self._query = query
        self._original_error = original_error
        self._on_restart = on_restart
        self._classify = classify
        self._done = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.consecutive = 0

    def start(self) -> None:
        """Launch the query and watch it."""
        self._done.clear()
        self._stopping.clear()
        self.error = None
        self.consecutive = 0
        self._launch_classified()
        self._thread = threading.Thread(target=self._watch, name=f"weir-supervisor-{self.topology}", daemon=True)
        self._thread.start()

    def progressed(self) -> None:
        """A batch committed: the next failure starts a new row of restarts."""
        self.consecutive = 0

    @property
    def stopping(self) -> bool:
        """Whether a stop was requested."""
        return self._stopping.is_set()

    def stop(self) -> None:
        """Stop supervising: the query's end is final."""
        self._stopping.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the run to end for good; True when it has."""
        return self._done.wait(timeout)

    @property
    def done(self) -> bool:
        """Whether the run has ended for good."""
        return self._done.is_set()

    def _watch(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # noqa: BLE001 - reported to whoever awaits the run
            self.error = exc
        finally:
            self._done.set()

    def _loop(self) -> None:
        while True:
            failure = self._await_query()
            if failure is None or self._stopping.is_set():
                return
            verdict = self._classify(failure) if self._classify is not None else None
            if isinstance(verdict, BaseException):
                self.error = verdict
                return
            if isinstance(verdict, str):
                log.warning("topology %s: %s; starting the query again", self.topology, verdict)
                if self._stopping.wait(1.0):
                    return
                self._launch_classified()
                continue
            reason = transient_reason(failure)
            if reason is None:
                self.error = failure
                return
            while True:
                if self.consecutive >= self.policy.max_restarts:
                    log.error(
                        "topology %s: giving up after %d consecutive restarts (weir.restart.max=%d)",
                        self.topology,
                        self.consecutive,
                        self.policy.max_restarts,
                    )
                    self.error = failure
                    return
                delay = self._count_restart("transient failure (%s); restart", reason)
                if self._stopping.wait(delay):
                    return
                self._on_restart(reason)
                try:
                    self._launch(True)
                    break
                except Exception as exc:  # noqa: BLE001 - classified like a query failure
                    reason = transient_reason(exc)
                    failure = exc
                    if reason is None:
                        self.error = exc
                        return

    def _count_restart(self, what: str, reason: str) -> float:
        """Count one more consecutive restart, log it (``what`` % ``reason``), return its back-off in seconds."""
        self.consecutive += 1
        delay = self.policy.delay_s(self.consecutive)
        log.warning(
            "topology %s: " + what + " %d of at most %d in %.1f s",
            self.topology,
            reason,
            self.consecutive,
            self.policy.max_restarts,
            delay,
        )
        return delay

    def _launch_classified(self) -> None:
        """Start the query; a start refused because another driver holds the checkpoint is retried.

        Two drivers started together race for Spark's checkpoint files (``metadata``, the offset
        log) before either runs a batch, so ``start()`` itself can fail the way a running query
        does: ``classify`` decides (retry while this driver holds the newest epoch, or stop with
        its error), anything else is raised as is.
        """
        while True:
            try:
                self._launch(False)
                return
            except Exception as exc:
                verdict = self._classify(exc) if self._classify is not None else None
                if isinstance(verdict, BaseException):
                    raise verdict from exc
                if not isinstance(verdict, str):
                    # a source briefly unavailable while the query is built (its initial offset)
                    # (over Spark Connect the start launches the server's foreachBatch worker, which
                    # may miss Spark's fixed 10 s to connect back on a loaded machine)
                    retry = isinstance(exc, SourceError) or "failed to connect back" in str(exc)
                    reason = transient_reason(exc) if retry else None
                    if reason is None or self.consecutive >= self.policy.max_restarts:
                        raise
                    delay = self._count_restart("transient failure at start (%s); try", reason)
                    if self._stopping.wait(delay):
                        raise
                    continue
                log.warning("topology %s: %s; starting the query again", self.topology, verdict)
                if self._stopping.wait(1.0):
                    raise

    def _await_query(self) -> BaseException | None:
        """Wait for the current query to end: None when it ended normally, else the error."""
        q = self._query()
        try:
            q.awaitTermination()
        except Exception as exc:  # noqa: BLE001 - StreamingQueryException and friends
            original = self._original_error()
            if isinstance(original, StopRequested):
                return None
            return original if original is not None else exc
        return None
