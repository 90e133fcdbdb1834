"""Running a topology's batches from a Spark Connect client.

Over Spark Connect the ``foreachBatch`` function of a streaming query runs in a Python worker of
the *server*. weir keeps the coordinator, supervision, status and metrics in the client (where
``weir.submit`` ran) and makes the server-side function a relay (:class:`BatchRelayFunction`):
for micro-batch *b* it sends the batch's DataFrame reference (the server caches it under an id in
the query's session) to the client's :class:`ConnectRelay`, which opens that DataFrame in its own
Connect session and runs the batch exactly as on classic PySpark; the relay answers when the batch
is done (or failed), and only then does ``foreachBatch`` return, so Spark commits the batch's
offsets after weir committed the batch's state, as on classic PySpark.

Task reports come back the same way, as data: a stage's :class:`RelayReports` (the run's stand-in
for a ``SparkContext`` accumulator) sends each task's
:class:`~weir.runtime.spark.executor.TaskReport` as text (:meth:`TaskReport.to_text`, JSON: nothing
is unpickled) to the client before the task ends, and the client keeps them for the batch.

The relay listens on a loopback port with a random token: the server (its ``foreachBatch`` worker
and its executors) must run on this machine. A server elsewhere is refused at submit
(:func:`check_reachable`).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import socket
import socketserver
import threading
from collections.abc import Callable
from typing import Any

from weir._connect_relay import BatchRelayFunction, RelayReports
from weir.errors import ConfigError

__all__ = [
    "BatchRelayFunction",
    "ConnectRelay",
    "RelayReports",
    "check_reachable",
    "map_in_arrow_known",
    "start_with_shared_workers",
]

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def check_reachable(topology: str, url: str) -> None:
    """Refuse a Connect server that is not on this machine (its workers could not reach the relay)."""
    from weir.runtime.spark.session import remote_host

    host = remote_host(url)
    if host not in _LOOPBACK:
        msg = (
            f"topology {topology!r}: the Spark Connect server {url} is not on this machine; weir's coordinator "
            "runs in this process and the server's foreachBatch worker and tasks reach it on a loopback port, "
            "so only a server on this machine (sc://127.0.0.1:PORT or sc://localhost:PORT) is supported. "
            "Run weir on the server's machine, or use a classic Spark master (weir.spark.master)"
        )
        raise ConfigError(msg)


def map_in_arrow_known(df: Any, fn: Callable[..., Any], columns: list[str], schema: Any) -> Any:
    """``df.mapInArrow(fn, schema)`` over Spark Connect without asking the server for ``df``'s columns.

    PySpark's Connect client sends an ``AnalyzePlan`` RPC for ``df.columns`` on every
    ``mapInArrow`` whose input has no cached schema (a ``select``, a ``repartition``, a source);
    the caller knows them (``columns``, in order), and the result's ``schema`` (a ``StructType``)
    is cached on it, so nothing asks for that later either. The function is pickled into the plan
    when an action sends it, as with ``mapInArrow``. ``columns`` may be empty: Spark's
    ``MapInArrow`` hands the function every column of its input whatever the function's arguments,
    so a stage reading the whole of an input whose columns the caller does not know sends none.
    """
    from pyspark.sql.connect.dataframe import DataFrame
    from pyspark.sql.connect.plan import MapPartitions
    from pyspark.sql.connect.udf import UserDefinedFunction
    from pyspark.util import PythonEvalType

    udf = UserDefinedFunction(fn, returnType=schema, evalType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF)
    plan = MapPartitions(child=df._plan, function=udf, cols=columns, is_barrier=False, profile=None)
    out = DataFrame(plan, session=df._session)
    out._cached_schema = schema
    return out


#: The SQL setting that gives a Connect session its own Python workers (Spark's artifact isolation).
ISOLATION = "spark.sql.artifact.isolation.enabled"

_STARTING = threading.Lock()


def start_with_shared_workers(spark: Any, start: Callable[[], Any]) -> Any:
    """Start a streaming query whose session reuses the server's Python workers across queries.

    The Connect server runs each streaming query in a clone of the client's session, and a session
    with artifact isolation on (the server's default) gets Python workers of its own, keyed by the
    session: every query's first batch would start new workers (seconds each on a busy machine).
    The clone copies the client session's settings when the query starts, so the setting is turned
    off for the start only and put back at once: this query's batches (and every later query's)
    share one set of workers, and the client's own session keeps its setting. weir uploads no
    artifacts (the server runs on this machine and imports weir and the topology's code there),
    so nothing a query needs lives in a per-session artifact directory; a run that adds Python files
    to the session sets ``weir.connect.share.workers: false`` and keeps the isolation.
    """
    with _STARTING:  # two runs starting at once must not take each other's "false" for the setting to restore
        try:
            before = spark.conf.get(ISOLATION)
            spark.conf.set(ISOLATION, "false")
        except Exception:  # noqa: BLE001 - a server that refuses the setting: the query starts isolated
            return start()
        try:
            return start()
        finally:
            with contextlib.suppress(Exception):  # the session has gone: nothing to put back
                spark.conf.set(ISOLATION, before)


class ConnectRelay:
    """The client's end: runs the batches the server hands over and collects task reports."""

    def __init__(self, url: str, topology: str, on_batch: Callable[[Any, int], None]) -> None:
        self.url = url
        self.topology = topology
        self.on_batch = on_batch
        self.token = secrets.token_hex(16)
        self.lock = threading.Lock()
        self.reports: list[Any] = []
        self._sessions: dict[str, Any] = {}
        relay = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline()
                try:
                    msg = json.loads(line)
                except ValueError:
                    return
                if not isinstance(msg, dict) or not secrets.compare_digest(str(msg.get("t", "")), relay.token):
                    return
                answer = relay._handle(msg)
                self.wfile.write(json.dumps(answer).encode() + b"\n")

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self.addr: tuple[str, int] = ("127.0.0.1", int(self._server.server_address[1]))
        # a short poll: close() waits for the serving loop to notice, and a run's end waits for close()
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="weir-connect-relay", daemon=True
        )
        self._thread.start()

    def function(self) -> BatchRelayFunction:
        """The ``foreachBatch`` function to give the query."""
        return BatchRelayFunction(self.addr, self.token, self.topology)

    def report_sink(self) -> RelayReports:
        """A task-report sink for this run's stages."""
        return RelayReports(self, self.addr, self.token)

    def _session(self, session_id: str) -> Any:
        found = self._sessions.get(session_id)
        if found is None:
            from pyspark.sql.connect.session import SparkSession as ConnectSession

            # the URL form the server's own foreachBatch worker uses for the query's cloned session
            base = self.url if "/;" in self.url else self.url.rstrip("/") + "/"  # sc://host:port/;params
            found = ConnectSession.builder.remote(f"{base};session_id={session_id}").create()
            self._sessions = {session_id: found}  # the query's session: one per query run
        return found

    def _handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        kind = msg.get("k")
        if kind == "reports":
            from weir.runtime.spark.executor import TaskReport

            got = [TaskReport.from_text(str(t)) for t in msg.get("r") or []]
            with self.lock:
                self.reports.extend(r for r in got if r is not None)
            return {"ok": True}
        if kind == "batch":
            try:
                spark = self._session(str(msg["s"]))
                df = spark._create_remote_dataframe(str(msg["df"]))
                self.on_batch(df, int(msg["b"]))
            except BaseException as exc:  # noqa: BLE001 - the server's foreachBatch raises it
                text = f"{type(exc).__name__}: {exc}"
                return {"ok": False, "error": text}
            return {"ok": True}
        return {"ok": False, "error": f"unknown request {kind!r}"}

    def close(self) -> None:
        """Stop listening (a batch in flight fails on the server); close the query's session clients.

        Closing a client closes its channel only (the query's session on the server ends with the
        query). A client left open would, at this process's exit, send PySpark's clean-up command to
        the server, and retry it for minutes when the server has gone away first.
        """
        stopper = threading.Thread(target=self._server.shutdown, name="weir-connect-relay-stop", daemon=True)
        stopper.start()
        while stopper.is_alive():  # the serving loop sees the request between waits: a connection ends its wait
            with contextlib.suppress(OSError):
                socket.create_connection(self.addr, timeout=1).close()
            stopper.join(0.005)
        self._server.server_close()
        sessions, self._sessions = self._sessions, {}
        for session in sessions.values():
            with contextlib.suppress(Exception):
                session.client.close()
