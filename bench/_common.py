"""Shared helpers of the benchmarks: servers on free loopback ports, timing, results.

Servers are started from the installed binaries (never the system Redis on 6379) and stopped by
pid; a PostgreSQL database is created fresh on the local server and dropped afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results"
PG_ADMIN_DSN = os.environ.get("WEIR_BENCH_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


class Unavailable(RuntimeError):
    """A server needed by a benchmark cannot be started (missing binary, no PostgreSQL)."""


# ---- Spark -------------------------------------------------------------------------------------
def local_spark(app: str, conf: dict[str, str] | None = None) -> Any:
    """The benchmark's one ``local[2]`` SparkSession (UI off, 2 shuffle partitions, reused workers)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    b = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.python.worker.reuse", "true")
    )
    for k, v in (conf or {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def event_log_conf(directory: str) -> dict[str, str]:
    """Spark settings writing a plain (uncompressed, single-file) event log into ``directory``."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": str(Path(directory).resolve()),
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
    }


# ---- timing ------------------------------------------------------------------------------------
def timed(fn: Callable[[], Any]) -> float:
    """Seconds ``fn()`` takes."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def median(values: list[float]) -> float:
    """The median of ``values``."""
    return statistics.median(values)


def cpu_snapshot(exclude: tuple[str, ...] = ("kafka.Kafka", "redis-server", "nats-server")) -> dict[int, float]:
    """CPU seconds (user + system, with reaped children's) per process of this process's tree, servers left out.

    Processes whose command line contains an ``exclude`` string are left out with their subtrees
    (the brokers a benchmark starts). Linux only (``/proc``); empty elsewhere.
    """
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return {}
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        rest = text[text.rfind(")") + 2 :].split()
        stats[pid] = rest
        children.setdefault(int(rest[1]), []).append(pid)
    out: dict[int, float] = {}
    todo = [os.getpid()]
    while todo:
        pid = todo.pop()
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if pid in stats and not any(x in cmd for x in exclude):
            out[pid] = sum(int(v) for v in stats[pid][11:15]) / tick
            todo.extend(children.get(pid, []))
    return out


def cpu_since(before: dict[int, float]) -> float:
    """CPU seconds this process's tree (servers left out) used since ``before`` (a :func:`cpu_snapshot`).

    A process that exited counts through the parent that reaped it (its ``cutime``): the Spark
    JVM's total includes its finished Python workers. Approximate: a process that existed at
    ``before`` and was reaped since counts its whole life; one reaped outside the tree is lost.
    """
    return sum(v - before.get(pid, 0.0) for pid, v in cpu_snapshot().items())


# ---- results -----------------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "loadavg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }


def write_results(name: str, data: dict[str, Any], out: str | None = None) -> Path:
    """Write ``bench/results/<name>.json`` (or ``out``, a ``--out`` path) and return its path."""
    path = Path(out) if out else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    return path


# ---- servers -----------------------------------------------------------------------------------
def free_port(offset_free: int = 0) -> int:
    """A free loopback port (``port + offset_free`` free too, for Redis' cluster bus)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if not offset_free:
            return port
        if port + offset_free > 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + offset_free))
            except OSError:
                continue
        return port
    raise Unavailable("no free loopback port")


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise Unavailable(f"{name} is not installed")
    return path


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _wait(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise Unavailable(f"timed out waiting for {what}")
        time.sleep(0.05)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _start_redis(port: int, workdir: Path, *extra: str) -> subprocess.Popen[bytes]:
    workdir.mkdir(parents=True, exist_ok=True)
    cmd = [_binary("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir),
           "--save", "", "--appendonly", "no", "--daemonize", "no", *extra]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait(lambda: _ping(port), f"redis-server on port {port}")
    except BaseException:
        _stop(proc)
        raise
    return proc


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """A standalone ``redis-server``; yields its URL."""
    workdir = Path(tempfile.mkdtemp(prefix="weir-bench-redis-"))
    port = free_port()
    proc = _start_redis(port, workdir)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        _stop(proc)
        shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def redis_cluster(masters: int = 3) -> Iterator[str]:
    """A ``masters``-node Redis Cluster (no replicas); yields its ``redis+cluster://`` URL."""
    workdir = Path(tempfile.mkdtemp(prefix="weir-bench-cluster-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        ports = []
        for i in range(masters):
            port = free_port(10000)
            ports.append(port)
            node = workdir / f"node{i}"
            procs.append(
                _start_redis(
                    port,
                    node,
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    str(node / "nodes.conf"),
                    "--cluster-node-timeout",
                    "5000",
                )  # fmt: skip
            )
        addrs = [f"127.0.0.1:{p}" for p in ports]
        done = subprocess.run(
            [_binary("redis-cli"), "--cluster", "create", *addrs, "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            raise Unavailable(f"redis-cli --cluster create failed: {done.stdout.decode()[-500:]}")

        def ready() -> bool:
            for p in ports:
                out = subprocess.run(
                    [_binary("redis-cli"), "-p", str(p), "cluster", "info"], capture_output=True, check=False
                ).stdout
                if b"cluster_state:ok" not in out or f"cluster_known_nodes:{masters}".encode() not in out:
                    return False
            return True

        _wait(ready, "cluster_state:ok", timeout=30)
        yield "redis+cluster://" + ",".join(addrs)
    finally:
        for proc in procs:
            _stop(proc)
        shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh database ``weir_bench_<random>`` on the local server, dropped afterwards."""
    try:
        import psycopg
    except ImportError as exc:
        raise Unavailable("psycopg is not installed") from exc
    name = f"weir_bench_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(PG_ADMIN_DSN, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        raise Unavailable(f"PostgreSQL is not reachable at {PG_ADMIN_DSN}") from exc
    base = PG_ADMIN_DSN.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        from weir.state.factory import close_backends

        close_backends()
        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


@contextlib.contextmanager
def sqlite_file() -> Iterator[str]:
    """A new SQLite store in a temporary directory."""
    workdir = Path(tempfile.mkdtemp(prefix="weir-bench-sqlite-"))
    try:
        yield f"sqlite:///{workdir / 'state.db'}"
    finally:
        from weir.state.factory import close_backends

        close_backends()
        shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def memory_store() -> Iterator[str]:
    """A process-local memory store."""
    yield f"memory://bench-{uuid.uuid4().hex[:8]}"
