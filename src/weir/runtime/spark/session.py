"""Getting a SparkSession set up the way weir needs it.

When weir starts Spark itself (no SparkSession is active yet):

- Spark's and the JVM's start-up warnings are hidden unless ``WEIR_VERBOSE=1`` (``weir --verbose``);
- a Python worker that is slow to start on a loaded machine gets two minutes to connect back
  (``spark.python.authenticate.socketTimeout``, Spark's default is 15 s), unless set otherwise;
- JVM flags given as ``spark.driver.extraJavaOptions`` in ``weir.spark.conf`` reach the JVM and the
  start stays quiet (weir's log4j2 configuration is added after them unless they name their own).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Mapping
from typing import Any

from weir._redact import SPARK_REDACTION_REGEX, SPARK_STRING_REDACTION_REGEX

__all__ = [
    "QUIET_LOG4J2",
    "connect_master",
    "ensure_python_env",
    "get_spark",
    "is_connect",
    "remote_host",
    "remote_url",
    "session_url",
    "spark_jvm_exit",
    "stop_spark",
    "verbose",
]

#: the log4j2 configuration of a quiet driver: errors only, on stderr
QUIET_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
# PySpark counts as a shell: Spark sets the root level to that of the first class that logs (the
# gateway server; WARN when it has none configured) and says so
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
# failed batches and lost tasks reach the driver as Python errors that weir reports (and restarts
# after, when transient): Spark's own copies of them, with Java stack traces, are noise there
logger.streaming.name = org.apache.spark.sql.execution.streaming
logger.streaming.level = off
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = off
logger.tasks.name = org.apache.spark.scheduler.TaskSetManager
logger.tasks.level = off
logger.pyrunner.name = org.apache.spark.api.python.PythonRunner
logger.pyrunner.level = off
"""

#: Spark settings weir sets unless the topology's ``weir.spark.conf`` gives them (the 10 s wait for a
#: driver-side Python runner to connect back is fixed in Spark 4.x: supervision restarts after it)
TOLERANT_DEFAULTS = {"spark.python.authenticate.socketTimeout": "120s"}


def verbose() -> bool:
    """Whether Spark's own warnings are shown (``WEIR_VERBOSE=1``, ``weir --verbose``)."""
    return os.environ.get("WEIR_VERBOSE", "") not in ("", "0")


def ensure_python_env() -> None:
    """Point Spark's Python workers at this interpreter (else they start whatever python3 is on PATH)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if os.environ.get("WEIR_CRASH_AT"):
        # crash tests: executor-side crash points kill the driver's process group (PySpark's
        # daemon gives workers a group of their own)
        os.environ.setdefault("WEIR_CRASH_PGID", str(os.getpgid(0)))


def _quiet_log_config() -> str:
    digest = hashlib.sha256(QUIET_LOG4J2.encode()).hexdigest()[:12]
    path = os.path.join(tempfile.gettempdir(), f"weir-log4j2-quiet-{os.getuid()}-{digest}.properties")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(QUIET_LOG4J2)
        os.replace(tmp, path)
    return path


#: what the JVM prints on stderr before any logging is set up, and a quiet driver hides
_JVM_NOISE = ("WARNING: Using incubator modules",)


def _forward_stderr(stream: Any) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace")
        if not line.startswith(_JVM_NOISE):
            sys.stderr.write(line)
            sys.stderr.flush()


def _launch_quiet_gateway(master: str, app_name: str, settings: Mapping[str, str]) -> None:
    """Start Spark's JVM with its stderr passed through a filter that drops the JVM's start-up noise."""
    import threading

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf(loadDefaults=False).setMaster(master).setAppName(app_name)
    for k, v in settings.items():
        conf.set(k, v)
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    proc = gateway.proc
    threading.Thread(target=_forward_stderr, args=(proc.stderr,), name="weir-jvm-stderr", daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway)


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (a thin client: no ``sparkContext``, no ``_jvm``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect.")


def remote_url(conf_value: object = None) -> str | None:
    """The Spark Connect URL of a run: ``weir.spark.remote`` if given, else ``$SPARK_REMOTE``, else None.

    Refuses (ConfigError) anything but an ``sc://HOST[:PORT][/;params]`` URL.
    """
    from weir.errors import ConfigError

    url = conf_value if conf_value not in (None, "") else os.environ.get("SPARK_REMOTE") or None
    if url is None:
        return None
    source = "weir.spark.remote" if conf_value not in (None, "") else "$SPARK_REMOTE"
    if not isinstance(url, str) or not url.startswith("sc://") or len(url) <= len("sc://"):
        msg = f"{source} must be a Spark Connect URL such as sc://127.0.0.1:15002, got {url!r}"
        raise ConfigError(msg)
    return url


def session_url(spark: Any) -> str:
    """The ``sc://`` URL a Spark Connect session was made with (``sc://`` alone if it cannot be told)."""
    builder = getattr(getattr(spark, "client", None), "_builder", None)
    endpoint = getattr(builder, "endpoint", None)
    return f"sc://{endpoint}" if endpoint else "sc://"


def remote_host(url: str) -> str:
    """The host of an ``sc://HOST[:PORT][/;params]`` URL."""
    rest = url[len("sc://") :].split("/", 1)[0].split(";", 1)[0]
    if rest.startswith("["):  # [IPv6]:port
        return rest[1:].split("]", 1)[0]
    return rest.rsplit(":", 1)[0] if ":" in rest else rest


#: the ``spark.master`` of each Connect session's server (see :func:`connect_master`)
_SERVER_MASTERS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def connect_master(spark: Any, url: str) -> str:
    """The master a Connect server runs on, as seen from this machine.

    The server's ``spark.master`` when the server is on this machine (a loopback host), so a local
    server counts as local mode; otherwise ``"<url> (spark.master <m>)"``, never local: files on this
    machine (an SQLite store, a checkpoint directory) are not the server's.
    """
    master = _SERVER_MASTERS.get(spark)
    if master is None:
        try:
            master = str(spark.conf.get("spark.master"))
        except Exception:  # noqa: BLE001 - a server that hides its master is treated as remote
            master = "unknown"
        else:  # a session's server keeps its master: asked once per session (a Config round trip)
            _SERVER_MASTERS[spark] = master
    if remote_host(url) in ("127.0.0.1", "localhost", "::1"):
        return master
    return f"{url} (spark.master {master})"


def _get_connect_spark(url: str, app_name: str, extra: Mapping[str, Any] | None) -> Any:
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError as exc:
        from weir.errors import ConfigError

        msg = (
            f"Spark Connect URL {url!r} given, but PySpark's Connect client cannot be imported ({exc}); "
            "install weir[connect] (grpcio, grpcio-status, googleapis-common-protos, zstandard)"
        )
        raise ConfigError(msg) from exc
    # as PySpark's own builder does for a remote session: from now on this process's
    # pyspark.sql.functions, Column and Observation are Spark Connect's
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    active = ConnectSession.getActiveSession()
    if active is not None:
        return active
    spark = ConnectSession.builder.remote(url).appName(app_name).getOrCreate()
    settings = {"spark.sql.shuffle.partitions": "4", **{k: str(v) for k, v in (extra or {}).items()}}
    for k, v in settings.items():
        try:
            spark.conf.set(k, v)
        except Exception as exc:
            from weir.errors import ConfigError

            spark.stop()  # the session this call made: not left active with half its settings
            msg = (
                f"weir.spark.conf: Spark Connect server {url} refuses {k}={v!r} for this session "
                f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); a server-wide "
                "setting is given when the server starts (spark-submit --conf), not by the client"
            )
            raise ConfigError(msg) from exc
    return spark


def get_spark(master: str, app_name: str, extra: Mapping[str, Any] | None = None, *, remote: str | None = None) -> Any:
    """The active SparkSession, or a new one on ``master`` with the UI off and few shuffle partitions.

    With ``remote`` (an ``sc://`` URL), a Spark Connect session on that server instead (its
    session-level settings from ``extra``); nothing on that path touches a JVM of this process.
    """
    if remote is not None:
        return _get_connect_spark(remote, app_name, extra)
    # a classic run: PySpark's Connect mode flag, set by a Connect session made earlier in this process
    # (or inherited from a parent that made one), would make this builder ask for a Connect URL
    os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    ensure_python_env()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    settings = {**TOLERANT_DEFAULTS, **{k: str(v) for k, v in (extra or {}).items()}}
    user_opts = settings.get("spark.driver.extraJavaOptions", "")
    if not verbose() and "log4j2.configurationFile" not in user_opts and "SPARK_CONF_DIR" not in os.environ:
        # read by the JVM at launch (PySpark passes the builder's settings to spark-submit); JVM flags
        # the user gives there (e.g. -XX:TieredStopAtLevel=1 -XX:+UseSerialGC) are kept before it
        quiet = f"-Dlog4j2.configurationFile=file:{_quiet_log_config()}"
        settings["spark.driver.extraJavaOptions"] = f"{user_opts} {quiet}".strip()
        _launch_quiet_gateway(master, app_name, settings)
    b = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .config("spark.python.worker.reuse", "true")
        .config("spark.ui.showConsoleProgress", "false")
        # hide credentials on the UI's environment page and in event logs: Kafka/NATS/store secrets
        # by key, and the userinfo of any URL inside a value
        .config("spark.redaction.regex", SPARK_REDACTION_REGEX)
        .config("spark.redaction.string.regex", SPARK_STRING_REDACTION_REGEX)
    )
    for k, v in settings.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _spark_children() -> list[int]:
    """Pids of this process's children that run Spark (the JVM launched by spark-submit)."""
    me = os.getpid()
    out: list[int] = []
    try:
        entries = [d for d in os.listdir("/proc") if d.isdigit()]
    except OSError:  # pragma: no cover - not Linux
        return out
    for d in entries:
        try:
            with open(f"/proc/{d}/stat", encoding="utf-8", errors="replace") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            if ppid != me:
                continue
            with open(f"/proc/{d}/cmdline", "rb") as fh:
                if b"spark" in fh.read():
                    out.append(int(d))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _drop_py4j_send_errors(record: logging.LogRecord) -> bool:
    """A root-logger filter: py4j's report of a command the stopped JVM did not answer is not the user's."""
    return not (record.name == "root" and record.getMessage() == "Exception while sending command.")


def spark_jvm_exit(wait_s: float = 0.0) -> tuple[int, int] | None:
    """``(pid, exit status)`` of the Spark JVM this process launched, once it has ended; else None.

    A negative status is the signal that ended it (``-9``: SIGKILL). ``wait_s`` waits that long for
    a JVM that is on its way out (its socket closed a moment before the process is reaped). None as
    well when Spark runs in a JVM this process did not start (``PYSPARK_GATEWAY_PORT``).
    """
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None) if gateway is not None else None
    if proc is None:
        return None
    try:
        code = proc.wait(wait_s) if wait_s > 0 else proc.poll()
    except subprocess.TimeoutExpired:
        return None
    return None if code is None else (proc.pid, code)


def stop_spark() -> None:
    """Stop the SparkSession of this process, and its JVM, whatever state start-up reached.

    Interrupted while Spark starts, PySpark has no handle on the JVM yet, which would outlive this
    process: the JVM child this process started is then ended by its pid.
    """
    import signal
    import time

    from pyspark import SparkContext

    if "pyspark.sql.connect.session" in sys.modules:  # a Connect client: end its session on the server
        connect = sys.modules["pyspark.sql.connect.session"].SparkSession.getActiveSession()
        if connect is not None:
            with contextlib.suppress(Exception):
                connect.stop()
    sc = SparkContext._active_spark_context
    try:
        if sc is not None:
            sc.stop()
    except Exception:  # noqa: BLE001, S110 - stopping on the way out; the JVM is killed below anyway
        pass
    gateway = SparkContext._gateway
    client = getattr(gateway, "_gateway_client", None)
    if client is not None:
        # py4j would tell the JVM about every Java object Python collects from now on, and log an
        # "Exception while sending command." traceback for each one the exiting JVM cannot answer
        client.is_connected = False
    logging.getLogger().addFilter(_drop_py4j_send_errors)
    proc: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None) if gateway is not None else None
    if proc is not None and proc.poll() is None:
        try:
            proc.stdin.close() if proc.stdin else None  # the gateway exits when its stdin closes
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
    SparkContext._gateway = None
    SparkContext._jvm = None
    children = _spark_children()
    for pid in children:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while children and time.monotonic() < deadline:
        children = [pid for pid in children if pid in _spark_children()]
        time.sleep(0.1)
    for pid in children:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
