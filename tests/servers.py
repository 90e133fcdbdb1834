"""Real servers for tests, started from the installed binaries on free loopback ports.

Every server runs in its own temporary directory, listens on 127.0.0.1 only (never the system
Redis on 6379), is waited for with a bounded poll and is stopped by its pid. When a binary or the
local PostgreSQL server is missing, :func:`require_binary` / :func:`require_service` skip the test —
or fail it when ``WEIR_REQUIRE_SERVICES=1`` (CI).

Example
-------
>>> with RedisServer() as redis:                       # doctest: +SKIP
...     url = redis.url                                # redis://127.0.0.1:PORT/0
...     redis.kill_and_restart()                       # SIGKILL, start again on the same port
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes  # imported here: _set_pdeathsig may run as another user, who cannot read this Python's files
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "DURABLE_PROVIDERS",
    "HBASE_VERSION",
    "PROVIDERS",
    "KafkaBroker",
    "KafkaCluster",
    "HBaseServer",
    "Memcached",
    "NatsServer",
    "PostgresDatabase",
    "PostgresServer",
    "RedisCluster",
    "RedisReplyError",
    "RedisServer",
    "ServerProcess",
    "SparkConnectServer",
    "free_port",
    "hbase_lib_dir",
    "fresh_postgres_database",
    "redis_command",
    "require_binary",
    "require_service",
    "services_required",
    "wait_until",
]

PROVIDERS = ("memory", "sqlite", "redis", "redis-cluster", "postgres", "hbase")
"""Store set-ups the ``provider_url`` fixture (tests/conftest.py) knows; parametrise it ``indirect``."""

DURABLE_PROVIDERS = ("sqlite", "redis", "redis-cluster", "postgres", "hbase")
"""The set-ups whose data outlives the writing process (``memory`` is process-local by design)."""

POSTGRES_ADMIN_DSN = os.environ.get("WEIR_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
"""Where the test PostgreSQL server is (trust auth); a fresh database is created on it per run."""


# ---- requirements ----------------------------------------------------------------------------
def services_required() -> bool:
    """True when ``WEIR_REQUIRE_SERVICES=1``: a missing server fails instead of skipping."""
    return os.environ.get("WEIR_REQUIRE_SERVICES", "").strip().lower() in ("1", "true", "yes")


def require_service(available: bool, what: str) -> None:
    """Skip (or, with ``WEIR_REQUIRE_SERVICES=1``, fail) when ``available`` is false."""
    if available:
        return
    if services_required():
        pytest.fail(f"{what} (WEIR_REQUIRE_SERVICES=1: a missing service is a failure)", pytrace=False)
    pytest.skip(what)


def require_binary(name: str) -> str:
    """Absolute path of the binary ``name``; skip or fail the test when it is not installed."""
    path = shutil.which(name)
    require_service(path is not None, f"binary {name!r} is not installed (not on PATH)")
    assert path is not None
    return path


# ---- small helpers ---------------------------------------------------------------------------
def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def stable_port() -> int:
    """A free loopback port below the kernel's ephemeral range (``ip_local_port_range``).

    No outgoing connection can take it as its source port: a port from ``free_port`` can be taken
    by another process's client socket before a slow server binds it, and while the server is down
    for a restart, a client retrying ``connect`` to it may get that very port as its source port
    and connect to itself (TCP simultaneous open), so the server cannot bind it again.
    """
    low = 32768
    with contextlib.suppress(OSError, ValueError, IndexError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.Random(uuid.uuid4().int)
    for _ in range(500):
        port = rng.randrange(max(1024, low - 12000), low)
        if _port_free(port):
            return port
    return free_port()


def free_port(*, also_free: Sequence[int] = ()) -> int:
    """A free loopback TCP port; ``also_free`` are offsets that must be free too (Redis' bus: 10000)."""
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if port + max(also_free, default=0) > 65535:
            continue
        if all(_port_free(port + off) for off in also_free):
            return port
    msg = "no free loopback port found"
    raise RuntimeError(msg)


def wait_until(
    check: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    interval: float = 0.02,
    alive: Callable[[], str | None] | None = None,
) -> None:
    """Poll ``check`` until it is true, at most ``timeout`` seconds (backing off up to 0.2 s).

    ``alive`` returns an error text when the thing waited for has died, to stop early.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except OSError:
            pass
        if alive is not None:
            dead = alive()
            if dead:
                msg = f"{what}: {dead}"
                raise RuntimeError(msg)
        if time.monotonic() > deadline:
            msg = f"timed out after {timeout:.0f}s waiting for {what}"
            raise TimeoutError(msg)
        time.sleep(interval)
        interval = min(interval * 1.5, 0.2)


class RedisReplyError(RuntimeError):
    """An error reply (``-ERR ...``, ``-LOADING ...``) from a Redis server."""


def _encode_resp(args: Sequence[str | bytes | int]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def _read_resp(f: Any) -> Any:
    line = f.readline()
    if not line:
        msg = "connection closed"
        raise ConnectionError(msg)
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RedisReplyError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read_resp(f) for _ in range(n)]
    msg = f"unexpected RESP reply {line!r}"
    raise RuntimeError(msg)


def redis_command(port: int, *args: str | bytes | int, timeout: float = 5.0) -> Any:
    """Send one command to the Redis server on ``127.0.0.1:port`` and return the decoded reply.

    A tiny RESP client, so fixtures do not depend on the code under test or on redis-py.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(_encode_resp(args))
        with s.makefile("rb") as f:
            return _read_resp(f)


# ---- process handling ------------------------------------------------------------------------
_LIVE: weakref.WeakSet[ServerProcess] = weakref.WeakSet()


def _set_pdeathsig() -> None:  # pragma: no cover - runs in the child
    """Have Linux kill the server if the test process dies without cleaning up."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class ServerProcess:
    """A server child process, with its log file, stopped by pid."""

    name = "server"
    #: signal of a graceful :meth:`stop`
    stop_signal: int = signal.SIGTERM

    def __init__(self, workdir: str | os.PathLike[str] | None = None) -> None:
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"weir-{self.name}-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / f"{self.name}.log"

    # subclasses
    def command(self) -> list[str]:
        """The command line that starts the server."""
        raise NotImplementedError

    def ready(self) -> bool:
        """True once the server answers."""
        raise NotImplementedError

    startup_timeout = 20.0

    def popen_user(self) -> str | None:
        """The user the server runs as (None: this process's user)."""
        return None

    @property
    def pid(self) -> int | None:
        """Pid of the running server, if any."""
        return None if self.proc is None else self.proc.pid

    def running(self) -> bool:
        """Whether the process is alive."""
        return self.proc is not None and self.proc.poll() is None

    def _dead(self) -> str | None:
        if self.proc is not None and self.proc.poll() is not None:
            return f"{self.name} exited with code {self.proc.returncode}; log:\n{self.log_tail()}"
        return None

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the server's log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def start(self) -> ServerProcess:
        """Start the server and wait until it answers."""
        if self.running():
            return self
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(),
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_set_pdeathsig,
                user=self.popen_user(),
            )
        _LIVE.add(self)
        try:
            wait_until(self.ready, timeout=self.startup_timeout, what=f"{self.name} to start", alive=self._dead)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Signal the server by pid (``stop_signal``), then SIGKILL it after ``timeout`` seconds."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, self.stop_signal)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout)
        _LIVE.discard(self)

    def kill(self) -> None:
        """SIGKILL the server by pid (a crash), and reap it."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        _LIVE.discard(self)

    def kill_and_restart(self) -> None:
        """SIGKILL the server, then start it again with the same port and directory."""
        self.kill()
        self.start()

    def close(self) -> None:
        """Stop the server and remove its directory if we created it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


@atexit.register
def _stop_leftovers() -> None:
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.stop(timeout=5)


# ---- Redis -----------------------------------------------------------------------------------
class RedisServer(ServerProcess):
    """``redis-server`` on a free loopback port, no persistence (``--save '' --appendonly no``).

    Parameters
    ----------
    appendonly:
        Turn on the AOF (fsync always), for tests that want data to survive :meth:`kill_and_restart`.
    extra_args:
        More ``--option value`` arguments.
    """

    name = "redis"

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        appendonly: bool = False,
        extra_args: Sequence[str] = (),
    ) -> None:
        super().__init__(workdir)
        self.binary = require_binary("redis-server")
        self.port = port or free_port(also_free=(10000,))
        self.appendonly = appendonly
        self.extra_args = list(extra_args)

    def command(self) -> list[str]:
        """``redis-server`` bound to 127.0.0.1:port in the work directory."""
        cmd = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.workdir),
            "--daemonize", "no",
            "--save", "",
            "--logfile", "",
            "--protected-mode", "yes",
        ]  # fmt: skip
        if self.appendonly:
            cmd += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            cmd += ["--appendonly", "no"]
        return cmd + self.extra_args

    def ready(self) -> bool:
        """PING answers PONG (not ``-LOADING`` while the AOF is replayed)."""
        try:
            return bool(redis_command(self.port, "PING", timeout=1) == "PONG")
        except RedisReplyError:
            return False

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def command_reply(self, *args: str | bytes | int) -> Any:
        """Run one Redis command on this server."""
        return redis_command(self.port, *args)

    def flushall(self) -> None:
        """Delete every key of every database."""
        self.command_reply("FLUSHALL")


class RedisCluster:
    """Three ``redis-server --cluster-enabled yes`` masters joined by ``redis-cli --cluster create``."""

    def __init__(self, masters: int = 3, workdir: str | os.PathLike[str] | None = None) -> None:
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="weir-redis-cluster-"))
        self.redis_cli = require_binary("redis-cli")
        self.nodes: list[RedisServer] = []
        for i in range(masters):
            port = free_port(also_free=(10000,))
            node_dir = self.workdir / f"node{i}"
            self.nodes.append(
                RedisServer(
                    node_dir,
                    port=port,
                    extra_args=[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        str(node_dir / "nodes.conf"),
                        "--cluster-node-timeout",
                        "5000",
                    ],
                )  # fmt: skip
            )

    @property
    def ports(self) -> list[int]:
        """The masters' ports."""
        return [n.port for n in self.nodes]

    @property
    def addresses(self) -> list[str]:
        """``127.0.0.1:PORT`` of every master."""
        return [f"127.0.0.1:{p}" for p in self.ports]

    @property
    def url(self) -> str:
        """``redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3``."""
        return "redis+cluster://" + ",".join(self.addresses)

    def _state_ok(self) -> bool:
        for port in self.ports:
            info = redis_command(port, "CLUSTER", "INFO", timeout=1)
            if b"cluster_state:ok" not in info:
                return False
            # every node must also know all masters, or MOVED replies point nowhere yet
            if b"cluster_known_nodes:%d" % len(self.nodes) not in info:
                return False
        return True

    def start(self) -> RedisCluster:
        """Start the nodes, create the cluster and wait for ``cluster_state:ok`` on every node."""
        try:
            for node in self.nodes:
                node.start()
            done = subprocess.run(
                [self.redis_cli, "--cluster", "create", *self.addresses,
                 "--cluster-replicas", "0", "--cluster-yes"],
                capture_output=True,
                timeout=60,
                check=False,
            )  # fmt: skip
            if done.returncode != 0:
                msg = f"redis-cli --cluster create failed:\n{done.stdout.decode()}\n{done.stderr.decode()}"
                raise RuntimeError(msg)
            wait_until(self._state_ok, timeout=30, what="redis cluster_state:ok on every node")
        except BaseException:
            self.stop()
            raise
        return self

    def flushall(self) -> None:
        """Delete every key on every master."""
        for port in self.ports:
            redis_command(port, "FLUSHALL")

    def stop(self) -> None:
        """Stop every node by pid."""
        for node in self.nodes:
            node.stop()

    def close(self) -> None:
        """Stop every node and remove the directory if we created it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> RedisCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- Memcached -------------------------------------------------------------------------------
class Memcached(ServerProcess):
    """``memcached -l 127.0.0.1 -p PORT -U 0`` (TCP only)."""

    name = "memcached"
    stop_signal = signal.SIGKILL  # nothing to persist; SIGTERM costs a second of shutdown

    def __init__(self, workdir: str | os.PathLike[str] | None = None, *, port: int | None = None) -> None:
        super().__init__(workdir)
        self.binary = require_binary("memcached")
        self.port = port or free_port()

    def command(self) -> list[str]:
        """The memcached command line (``-u`` is needed when the tests run as root)."""
        cmd = [self.binary, "-l", "127.0.0.1", "-p", str(self.port), "-U", "0"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd += ["-u", "root"]
        return cmd

    def ready(self) -> bool:
        """``version`` answers ``VERSION …``."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
            s.sendall(b"version\r\n")
            return s.recv(64).startswith(b"VERSION")

    @property
    def address(self) -> tuple[str, int]:
        """``("127.0.0.1", PORT)``."""
        return ("127.0.0.1", self.port)

    @property
    def url(self) -> str:
        """``memcached://127.0.0.1:PORT``."""
        return f"memcached://127.0.0.1:{self.port}"


# ---- RabbitMQ --------------------------------------------------------------------------------
class RabbitMQServer(ServerProcess):
    """Debian's ``rabbitmq-server`` on a free loopback port, as its own node.

    Its own node name, mnesia and log directories, no plugins, and its own ``epmd`` on a free port
    (stopped with the broker), so it never touches a system RabbitMQ or another test's node.
    ``guest``/``guest`` may connect from loopback. Messages published persistent to a durable
    queue survive :meth:`kill_and_restart`.
    """

    name = "rabbitmq"
    startup_timeout = 180.0  # an Erlang VM booting on a loaded machine

    def __init__(self, workdir: str | os.PathLike[str] | None = None) -> None:
        super().__init__(workdir)
        script = "/usr/lib/rabbitmq/bin/rabbitmq-server"  # the wrapper in /usr/sbin switches user
        require_service(os.path.exists(script), "rabbitmq-server is not installed (apt-get install rabbitmq-server)")
        self.script = script
        # below the ephemeral range: a spout reconnecting while the node restarts cannot self-connect
        # to its port (which left a killed node unable to listen again), nor can another client take it
        self.port = stable_port()
        self.dist_port = stable_port()
        self.epmd_port = stable_port()
        self.node = f"weir{self.port}@localhost"
        (self.workdir / "enabled_plugins").write_text("[].\n")

    @property
    def url(self) -> str:
        """The AMQP URL of the broker (guest on the default vhost)."""
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def command(self) -> list[str]:
        """``rabbitmq-server`` with its environment (``env`` keeps the test's own untouched)."""
        w = self.workdir
        env = {
            "HOME": str(w),  # the Erlang cookie
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "ERL_EPMD_PORT": str(self.epmd_port),
            "RABBITMQ_MNESIA_BASE": str(w / "mnesia"),
            "RABBITMQ_LOG_BASE": str(w / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(w / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(w / "rabbitmq"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(w / "advanced.config"),
            "RABBITMQ_CONF_ENV_FILE": str(w / "rabbitmq-env.conf"),
        }
        return ["env", *(f"{k}={v}" for k, v in env.items()), self.script]

    def ready(self) -> bool:
        """The broker accepts an AMQP connection."""
        import pika

        try:
            pika.BlockingConnection(pika.URLParameters(self.url + "?connection_attempts=1&socket_timeout=2")).close()
        except Exception:
            return False
        return True

    def _kill_group(self, sig: int) -> None:
        proc = self.proc
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)  # the script, the Erlang VM and its port programs

    def _stop_epmd(self) -> None:
        epmd = shutil.which("epmd")
        if epmd is not None:
            env = {**os.environ, "ERL_EPMD_PORT": str(self.epmd_port)}
            subprocess.run([epmd, "-kill"], env=env, capture_output=True, check=False, timeout=30)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the node's whole process group, then its epmd."""
        self._kill_group(signal.SIGTERM)
        super().stop(timeout)
        self._stop_epmd()

    def kill(self) -> None:
        """SIGKILL the node (a crash); its epmd stays for the restart."""
        self._kill_group(signal.SIGKILL)
        super().kill()


# ---- NATS ------------------------------------------------------------------------------------
class NatsServer(ServerProcess):
    """``nats-server -js -a 127.0.0.1 -p PORT -sd DIR``; JetStream data survives a restart."""

    name = "nats"

    def __init__(self, workdir: str | os.PathLike[str] | None = None, *, port: int | None = None) -> None:
        super().__init__(workdir)
        self.binary = require_binary("nats-server")
        self.port = port or free_port()
        self.store_dir = self.workdir / "jetstream"

    def command(self) -> list[str]:
        """The nats-server command line with JetStream on."""
        return [self.binary, "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", str(self.store_dir)]

    def ready(self) -> bool:
        """The server greets with an ``INFO`` line announcing JetStream."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
            greeting = s.recv(4096)
        return greeting.startswith(b"INFO ") and b'"jetstream":true' in greeting

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:PORT``."""
        return f"nats://127.0.0.1:{self.port}"

    def restart(self) -> None:
        """Stop gracefully and start again on the same port and store directory."""
        self.stop()
        self.start()


# ---- PostgreSQL ------------------------------------------------------------------------------
def _pg_connect(dsn: str) -> Any:
    try:
        import psycopg
    except ImportError:
        require_service(False, "psycopg is not installed (pip install 'weir[postgres]')")
        raise
    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        require_service(False, f"PostgreSQL is not reachable at {dsn}: {exc}".strip())
        raise


class PostgresDatabase:
    """A fresh database ``weir_test_<random>`` on the local server; :meth:`drop` removes it."""

    def __init__(self, admin_dsn: str = POSTGRES_ADMIN_DSN) -> None:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        self.admin_dsn = admin_dsn
        self.name = f"weir_test_{uuid.uuid4().hex[:12]}"
        with _pg_connect(admin_dsn) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        parts = conninfo_to_dict(make_conninfo(admin_dsn))
        user = parts.get("user", "postgres")
        host = parts.get("host", "127.0.0.1")
        port = parts.get("port", "5432")
        password = parts.get("password")
        auth = f"{user}:{password}" if password else str(user)
        self.url = f"postgresql://{auth}@{host}:{port}/{self.name}"
        self.dropped = False

    def truncate_all(self) -> None:
        """Empty every table of the database (all user schemas); close the store's connections first."""
        with _pg_connect(self.url) as conn:
            rows = conn.execute(
                "SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) FROM pg_tables "
                "WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
            ).fetchall()
            if rows:
                conn.execute("TRUNCATE " + ", ".join(r[0] for r in rows))

    def terminate_connections(self) -> int:
        """Kill every connection to the database (as a server restart would); return how many."""
        with _pg_connect(self.admin_dsn) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (self.name,),
            ).fetchall()
        return len(rows)

    def drop(self) -> None:
        """Terminate every connection to the database, then drop it (idempotent)."""
        if self.dropped:
            return
        self.terminate_connections()
        with _pg_connect(self.admin_dsn) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}"')
        self.dropped = True


class PostgresServer(ServerProcess):
    """A private PostgreSQL cluster (``initdb`` + ``postgres``) on a free loopback port, trust auth.

    For fault tests that stop, freeze or kill the server: :meth:`freeze` SIGSTOPs every process of
    the server (a paused VM: open connections hang too), :meth:`freeze_postmaster` only the
    postmaster (open connections keep working, new ones hang), :meth:`thaw` SIGCONTs them, and
    :meth:`kill_and_restart` SIGKILLs the postmaster and its backends and starts again on the same
    data directory (crash recovery replays the WAL). Run as root, the server runs as ``postgres``.
    """

    name = "postgres"
    stop_signal = signal.SIGINT  # "fast" shutdown: open connections are ended
    startup_timeout = 60.0

    def __init__(self, workdir: str | os.PathLike[str] | None = None, *, port: int | None = None) -> None:
        super().__init__(workdir)
        self.bin_dir = self._find_bin_dir()
        self.port = port or free_port()
        self.data_dir = self.workdir / "data"
        self._user = "postgres" if os.geteuid() == 0 else None
        if self._user is not None:
            shutil.chown(self.workdir, self._user, self._user)
            self.log_path.touch()
            shutil.chown(self.log_path, self._user, self._user)

    @staticmethod
    def _find_bin_dir() -> Path:
        found = shutil.which("pg_config")
        if found:
            out = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
            if out and (Path(out) / "initdb").exists():
                return Path(out)
        for cand in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
            if (cand / "initdb").exists():
                return cand
        require_service(False, "PostgreSQL's initdb and postgres binaries are not installed")
        raise AssertionError  # pragma: no cover - require_service does not return

    def popen_user(self) -> str | None:
        """``postgres`` when this process runs as root (the server refuses to run as root)."""
        return self._user

    def start(self) -> ServerProcess:
        """Make the cluster on first use (``initdb``), then start the server."""
        if not (self.data_dir / "PG_VERSION").exists():
            done = subprocess.run(
                [str(self.bin_dir / "initdb"), "-D", str(self.data_dir), "-U", "postgres", "--auth=trust",
                 "-E", "UTF8", "--no-sync", "--no-instructions"],
                check=False, capture_output=True, text=True, user=self._user,
            )  # fmt: skip
            if done.returncode != 0:
                msg = f"initdb failed in {self.data_dir} (its user must be able to reach it): {done.stderr[-2000:]}"
                raise RuntimeError(msg)
        return super().start()

    def command(self) -> list[str]:
        """``postgres`` on 127.0.0.1:port, its socket in the work directory."""
        return [
            str(self.bin_dir / "postgres"), "-D", str(self.data_dir), "-p", str(self.port),
            "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.workdir}",
            "-c", "fsync=off", "-c", "max_connections=50",
        ]  # fmt: skip

    def ready(self) -> bool:
        """A connection is accepted and answers."""
        import psycopg

        try:
            with psycopg.connect(self.url, connect_timeout=2, autocommit=True) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    @property
    def url(self) -> str:
        """``postgresql://postgres@127.0.0.1:PORT/postgres``."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def server_pids(self) -> list[int]:
        """The postmaster's pid and its children's (each backend is in its own process group)."""
        if self.proc is None:
            return []
        master = self.proc.pid
        pids = [master]
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat", encoding="utf-8", errors="replace") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == master:
                pids.append(int(d))
        return pids

    def _group(self, sig: int) -> None:
        for pid in self.server_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def freeze(self) -> None:
        """SIGSTOP every process of the server (postmaster and backends): nothing answers."""
        self._group(signal.SIGSTOP)

    def freeze_postmaster(self) -> None:
        """SIGSTOP the postmaster only: open connections answer, new ones are never accepted."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT every process of the server."""
        self._group(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend (a crash), and reap the postmaster."""
        pids = self.server_pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        super().kill()
        pid_file = self.data_dir / "postmaster.pid"
        with contextlib.suppress(OSError):
            pid_file.unlink()

    def stop(self, timeout: float = 10.0) -> None:
        """Thaw, then stop the server (fast shutdown), then SIGKILL what is left of its group."""
        pids = self.server_pids()
        self.thaw()
        super().stop(timeout)
        for pid in pids[1:]:  # backends the fast shutdown left (none, normally)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def fresh_postgres_database(admin_dsn: str = POSTGRES_ADMIN_DSN) -> tuple[str, Callable[[], None]]:
    """Create ``weir_test_<random>`` on the local server; return its URL and a function that drops it.

    Skips (or fails with ``WEIR_REQUIRE_SERVICES=1``) when the server is not reachable.
    """
    db = PostgresDatabase(admin_dsn)
    return db.url, db.drop


# ---- Apache Kafka (KRaft) --------------------------------------------------------------------
KAFKA_POM = Path(__file__).resolve().parents[1] / ".ci" / "kafka" / "pom.xml"
KAFKA_SETUP = Path(__file__).resolve().parents[1] / ".ci" / "setup.d" / "20-kafka.sh"


def kafka_version() -> str:
    """The pinned Kafka release (``<kafka.version>`` of ``.ci/kafka/pom.xml``)."""
    import re

    m = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", KAFKA_POM.read_text())
    assert m is not None, f"no <kafka.version> in {KAFKA_POM}"
    return m.group(1)


def kafka_jars() -> Path:
    """The directory of Kafka's broker jars, fetched by ``.ci/setup.d/20-kafka.sh`` (run here if needed).

    Outside CI a missing cache is filled the same way (``mvn``); a failure skips the test, or fails
    it with ``WEIR_REQUIRE_SERVICES=1``.
    """
    cache = Path(os.environ.get("WEIR_CACHE") or Path.home() / ".cache" / "weir")
    jars = cache / f"kafka-{kafka_version()}"
    if not (jars / ".complete").exists() and shutil.which("mvn") and shutil.which("bash"):
        script = (
            f'apt_install() {{ echo "install $* by hand" >&2; return 1; }}; '
            f"ROOT={KAFKA_POM.parents[2]}; . {KAFKA_SETUP}"
        )
        subprocess.run(["bash", "-c", script], check=False, capture_output=True, timeout=900)
    require_service((jars / ".complete").exists(), f"Kafka's jars are not in {jars} (run bash {KAFKA_SETUP})")
    require_binary("java")
    return jars


def _kafka_cluster_id() -> str:
    """A random KRaft cluster id (Kafka's ``Uuid``: 16 bytes, base64url without padding, no leading '-')."""
    import base64

    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


#: small JVMs and few threads: brokers share a 2-core machine with Spark
KAFKA_JVM = [
    "-Xms64m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xss512k",
    "-Djava.awt.headless=true",
]


class KafkaBroker(ServerProcess):
    """One KRaft node (broker and controller) from Kafka's jars: ``java -cp <jars>/* kafka.Kafka``.

    The data directory is formatted once (``kafka.tools.StorageTool format``) and survives
    :meth:`kill`/:meth:`start`, so a SIGKILLed broker recovers its log like a real one.
    """

    name = "kafka"
    startup_timeout = 120.0

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        *,
        node_id: int = 1,
        port: int | None = None,
        controller_port: int | None = None,
        voters: str | None = None,
        cluster_id: str | None = None,
        replication: int = 1,
        expected_brokers: int = 1,
    ) -> None:
        super().__init__(workdir)
        self.log_path = self.workdir / f"{self.name}-{node_id}.log"
        self.jars = kafka_jars()
        self.node_id = node_id
        self.port = port or free_port()
        self.controller_port = controller_port or free_port()
        self.voters = voters or f"{node_id}@127.0.0.1:{self.controller_port}"
        self.cluster_id = cluster_id or _kafka_cluster_id()
        self.replication = replication
        self.expected_brokers = expected_brokers
        self.data_dir = self.workdir / "data"
        self.config_path = self.workdir / "server.properties"

    def _java(self, main: str, *args: str) -> list[str]:
        log_conf = self.workdir / "log4j2.properties"
        if not log_conf.exists():  # warnings and errors into the node's log file (Kafka is silent without one)
            log_conf.write_text(
                "rootLogger.level = WARN\nrootLogger.appenderRef.out.ref = OUT\nappender.out.type = Console\n"
                "appender.out.name = OUT\nappender.out.layout.type = PatternLayout\n"
                "appender.out.layout.pattern = [%d] %p %m (%c)%n\nlogger.kafka.name = kafka.server.KafkaServer\n"
                "logger.kafka.level = INFO\n"
            )
        return [
            shutil.which("java") or "java",
            *KAFKA_JVM,
            f"-Dlog4j2.configurationFile={log_conf}",
            "-cp",
            f"{self.jars}/*",
            main,
            *args,
        ]

    def write_config(self) -> None:
        """``server.properties``: loopback listeners, small thread pools, replication as configured."""
        rf, isr = self.replication, min(2, self.replication)
        props = {
            "process.roles": "broker,controller",
            "node.id": self.node_id,
            "controller.quorum.voters": self.voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": self.data_dir,
            "num.partitions": 1,
            "default.replication.factor": rf,
            "min.insync.replicas": isr,
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": 3,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": isr,
            "transaction.state.log.num.partitions": 3,
            "group.initial.rebalance.delay.ms": 0,
            "num.network.threads": 1,
            "num.io.threads": 2,
            "background.threads": 2,
            "num.replica.fetchers": 1,
            "num.recovery.threads.per.data.dir": 1,
            "log.cleaner.threads": 1,
            "log.cleaner.dedupe.buffer.size": 4 * 1024 * 1024,
            "replica.lag.time.max.ms": 10000,
            "auto.create.topics.enable": "false",
            "delete.topic.enable": "true",
        }
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def format_command(self) -> list[str]:
        """The command that formats the data directory for this node."""
        return self._java("kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(self.config_path))

    def format(self) -> None:
        """Write the config and format the data directory (once)."""
        self.write_config()
        if (self.data_dir / "meta.properties").exists():
            return
        res = subprocess.run(self.format_command(), capture_output=True, text=True, timeout=300, check=False)
        if res.returncode != 0:
            msg = f"kafka storage format failed ({res.returncode}): {res.stdout[-2000:]} {res.stderr[-2000:]}"
            raise RuntimeError(msg)

    def command(self) -> list[str]:
        """The broker command line."""
        return self._java("kafka.Kafka", str(self.config_path))

    def start(self) -> KafkaBroker:
        """Format if needed, then start the node and wait until it answers metadata requests."""
        self.format()
        super().start()
        return self

    def ready(self) -> bool:
        """The node answers a metadata request listing the expected brokers."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=1):
            pass
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 2000})
        try:
            md = admin.list_topics(timeout=3)
        except Exception:
            return False
        return len(md.brokers) >= self.expected_brokers

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    def restart(self) -> None:
        """Stop gracefully and start again on the same ports and data."""
        self.stop(timeout=30)
        self.start()


class KafkaCluster:
    """Three KRaft nodes (each broker and controller) with replication factor 3, ``min.insync.replicas=2``.

    :meth:`broker` finds a node by id; :meth:`leader_of` asks who leads a partition.
    """

    def __init__(self, nodes: int = 3, workdir: str | os.PathLike[str] | None = None) -> None:
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="weir-kafka-cluster-"))
        ports = [(free_port(), free_port()) for _ in range(nodes)]
        voters = ",".join(f"{i + 1}@127.0.0.1:{c}" for i, (_, c) in enumerate(ports))
        cid = _kafka_cluster_id()
        self.brokers = [
            KafkaBroker(
                self.workdir / f"node{i + 1}",
                node_id=i + 1,
                port=p,
                controller_port=c,
                voters=voters,
                cluster_id=cid,
                replication=min(3, nodes),
                expected_brokers=nodes,
            )
            for i, (p, c) in enumerate(ports)
        ]

    @property
    def bootstrap(self) -> str:
        """Every node's ``host:port``, comma separated."""
        return ",".join(b.bootstrap for b in self.brokers)

    def broker(self, node_id: int) -> KafkaBroker:
        """The node with ``node_id``."""
        return next(b for b in self.brokers if b.node_id == node_id)

    def leader_of(self, topic: str, partition: int = 0) -> int:
        """The node id leading ``topic``'s ``partition`` now."""
        from confluent_kafka.admin import AdminClient

        md = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(topic, timeout=30)
        return int(md.topics[topic].partitions[partition].leader)

    def start(self) -> KafkaCluster:
        """Format every node (in parallel), start them all, wait until each sees all brokers."""
        procs = []
        for b in self.brokers:
            b.write_config()
            if not (b.data_dir / "meta.properties").exists():
                procs.append(subprocess.Popen(b.format_command(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        for p in procs:
            _, err = p.communicate(timeout=300)
            if p.returncode != 0:
                msg = f"kafka storage format failed: {err.decode(errors='replace')[-2000:]}"
                raise RuntimeError(msg)
        for b in self.brokers:  # a node waits for the quorum: start all, then wait
            b.format()
            with open(b.log_path, "ab") as log:
                b.proc = subprocess.Popen(
                    b.command(),
                    cwd=b.workdir,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_set_pdeathsig,
                )
            _LIVE.add(b)
        for b in self.brokers:
            wait_until(b.ready, timeout=b.startup_timeout, what=f"kafka node {b.node_id} to start", alive=b._dead)
        return self

    def close(self) -> None:
        """Stop every node and remove the directory if we created it.

        Every node is signalled first, then each is awaited: stopped one after another, the last
        node has no controller quorum left for its controlled shutdown and waited out the whole
        ``timeout`` before its SIGKILL (25 s to close a 3-node cluster; signalled together, 5 s).
        """
        for b in self.brokers:
            if b.proc is not None and b.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(b.proc.pid, b.stop_signal)
        for b in self.brokers:
            b.stop(timeout=20)
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- HBase -----------------------------------------------------------------------------------
HBASE_VERSION = os.environ.get("WEIR_HBASE_VERSION", "2.6.1")
"""The HBase release whose Maven Central jars ``.ci/setup.d/30-hbase.sh`` puts in the cache."""

_JAVA17_OPENS = [
    "-XX:+IgnoreUnrecognizedVMOptions",
    "--add-modules", "jdk.unsupported",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
]  # fmt: skip
"""What HBase's own ``bin/hbase`` adds on Java 17 (HBase reflects into the JDK's internals)."""


def hbase_lib_dir(*, fetch: bool = True) -> Path | None:
    """The cached HBase jars; fetched with ``.ci/setup.d/30-hbase.sh`` when missing and ``fetch``."""
    lib = Path(os.environ.get("WEIR_CACHE", Path.home() / ".cache" / "weir")) / f"hbase-{HBASE_VERSION}" / "lib"
    if not (lib / ".complete").exists() and fetch and shutil.which("mvn"):
        script = Path(__file__).resolve().parents[1] / ".ci" / "setup.d" / "30-hbase.sh"
        subprocess.run(["bash", str(script)], check=False, timeout=1200, capture_output=True)
    return lib if (lib / ".complete").exists() else None


class _HBaseJvm(ServerProcess):
    """One JVM of the HBase set-up (classpath: the conf dir and the cached jars)."""

    main_class = ""
    heap = "256m"
    startup_timeout = 240.0

    #: the throughput collector: memstore cells live until a flush, and copying them through a small
    #: serial young generation cost the region server about as much CPU as the writes themselves
    gc = "-XX:+UseParallelGC"

    def __init__(self, server: HBaseServer, name: str) -> None:
        self.name = name
        super().__init__(server.workdir)
        self.server = server

    def spawn(self) -> None:
        """Start the JVM and return at once (:meth:`wait_ready` waits for it)."""
        if self.running():
            return
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(),
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_set_pdeathsig,
            )
        _LIVE.add(self)

    def wait_ready(self) -> None:
        """Wait until a :meth:`spawn`-ed JVM answers (stopped if it does not)."""
        try:
            wait_until(self.ready, timeout=self.startup_timeout, what=f"{self.name} to start", alive=self._dead)
        except BaseException:
            self.stop()
            raise

    def command(self) -> list[str]:
        """``java -Xmx… <Java 17 flags> -cp conf:lib/* <main class> start``."""
        s = self.server
        return [
            s.java, f"-Xmx{self.heap}", f"-Xms{self.heap}", self.gc, "-XX:ActiveProcessorCount=2",
            *_JAVA17_OPENS,
            f"-Djava.io.tmpdir={s.workdir / 'tmp'}",
            f"-Dlog4j.configuration=file:{s.workdir / 'conf' / 'log4j.properties'}",
            "-cp", f"{s.workdir / 'conf'}:{s.lib}/*",
            self.main_class, "start",
        ]  # fmt: skip


class _HBaseMaster(_HBaseJvm):
    main_class = "org.apache.hadoop.hbase.master.HMaster"
    heap = "1g"

    def ready(self) -> bool:
        """The region server's RPC port is open (the master and ZooKeeper came first)."""
        with socket.create_connection(("127.0.0.1", self.server.regionserver_port), timeout=1):
            return True


class _HBaseThrift(_HBaseJvm):
    main_class = "org.apache.hadoop.hbase.thrift.ThriftServer"

    def ready(self) -> bool:
        """The gateway answers ``getTableNames`` (HBase behind it is up)."""
        return self.server.tables() is not None


class HBaseServer:
    """HBase in standalone mode (HMaster with its region server and ZooKeeper in one JVM) plus the
    Thrift gateway, from the jars in ``$WEIR_CACHE/hbase-<version>/lib``, on free loopback ports,
    with its root directory in a temporary directory.

    ``tables`` are created (column family ``cf``) once it is up. :meth:`kill_and_restart` SIGKILLs
    both JVMs and starts them again on the same ports and directory (data written before survives:
    the write-ahead log is flushed to the local file system on every write).
    """

    def __init__(self, workdir: str | os.PathLike[str] | None = None, *, tables: Sequence[str] = ("state",)) -> None:
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="weir-hbase-"))
        self.java = require_binary("java")
        lib = hbase_lib_dir()
        require_service(
            lib is not None,
            f"the HBase {HBASE_VERSION} jars are not in the cache (run: bash .ci/setup.d/30-hbase.sh)",
        )
        assert lib is not None
        self.lib = lib
        self.tables_to_create = list(tables)
        self.zk_port, self.master_port, self.regionserver_port, self.thrift_port = (free_port() for _ in range(4))
        self.master = _HBaseMaster(self, "hbase-master")
        self.thrift = _HBaseThrift(self, "hbase-thrift")
        self._write_conf()

    def _write_conf(self) -> None:
        conf = self.workdir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (self.workdir / "tmp").mkdir(exist_ok=True)
        props = {
            "hbase.cluster.distributed": "false",
            "hbase.rootdir": (self.workdir / "root").as_uri(),
            "hbase.tmp.dir": str(self.workdir / "tmp"),
            "hbase.zookeeper.property.dataDir": str(self.workdir / "zk"),
            "hbase.zookeeper.quorum": "127.0.0.1",
            "hbase.zookeeper.property.clientPort": str(self.zk_port),
            "hbase.master.hostname": "127.0.0.1",
            "hbase.regionserver.hostname": "127.0.0.1",
            "hbase.master.port": str(self.master_port),
            "hbase.regionserver.port": str(self.regionserver_port),
            "hbase.master.info.port": "-1",
            "hbase.regionserver.info.port": "-1",
            "hbase.regionserver.thrift.port": str(self.thrift_port),
            "hbase.regionserver.thrift.ipaddress": "127.0.0.1",
            "hbase.thrift.info.port": "-1",
            "hbase.unsafe.stream.capability.enforce": "false",
            "hbase.regionserver.handler.count": "8",
            "hbase.master.handler.count": "8",
            # start-up: one region server only (the master otherwise waits 4.5 s for more), report
            # to the master every second; no balancer, normalizer or janitor runs in a test's life
            "hbase.master.wait.on.regionservers.mintostart": "1",
            "hbase.master.wait.on.regionservers.maxtostart": "1",
            "hbase.regionserver.msginterval": "1000",
            "hbase.balancer.period": "3600000",
            "hbase.normalizer.period": "3600000",
            "hbase.catalogjanitor.interval": "3600000",
            "hbase.thrift.minWorkerThreads": "4",
            "zookeeper.session.timeout": "20000",
            "hbase.client.retries.number": "10",
        }
        body = "".join(f"<property><name>{k}</name><value>{v}</value></property>\n" for k, v in props.items())
        (conf / "hbase-site.xml").write_text(f"<configuration>\n{body}</configuration>\n")
        (conf / "log4j.properties").write_text(
            "log4j.rootLogger=WARN,console\n"
            "log4j.appender.console=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.console.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{2}: %m%n\n"
        )

    # ---- a tiny admin client (happybase; fixtures never use weir's own HBase code) ---------------
    def connection(self) -> Any:
        """A new happybase connection to the gateway."""
        import happybase

        return happybase.Connection("127.0.0.1", self.thrift_port, timeout=60_000)

    def tables(self) -> list[str] | None:
        """Table names, or None while the gateway or HBase is not up."""
        try:
            conn = self.connection()
        except Exception:  # noqa: BLE001 - not listening yet
            return None
        try:
            return [t.decode() for t in conn.tables()]
        except Exception:  # noqa: BLE001 - HBase behind the gateway is still starting
            return None
        finally:
            conn.close()

    def create_table(self, name: str, families: Sequence[str] = ("cf",)) -> None:
        """Create ``name`` with ``families`` (retried while the master initialises)."""

        def create() -> bool:
            try:
                conn = self.connection()
            except Exception:  # noqa: BLE001 - the gateway is not listening (yet)
                return False
            try:
                if name.encode() not in conn.tables():
                    conn.create_table(name, {f: {} for f in families})
                conn.table(name).row(b"\x00probe")  # the region is online
                return True
            except Exception:  # noqa: BLE001 - PleaseHoldException while the master starts
                return False
            finally:
                conn.close()

        wait_until(create, timeout=240, what=f"HBase table {name!r} to be created", interval=0.5)

    def truncate(self, name: str = "state") -> None:
        """Delete every row of ``name`` (and wait 2 ms, past the delete markers' timestamp).

        After many deletes a major compaction is requested, so later scans do not wade through
        delete markers.
        """
        conn = self.connection()
        n = 0
        try:
            table = conn.table(name)
            with table.batch(batch_size=5000) as b:
                for key, _ in table.scan(filter=b"KeyOnlyFilter()", batch_size=5000):
                    b.delete(key)
                    n += 1
            if n > 5000:
                conn.compact_table(name, major=True)
        finally:
            conn.close()
        time.sleep(0.002)

    def url(self, table: str = "state", family: str = "cf") -> str:
        """``hbase://127.0.0.1:PORT/TABLE?family=cf``."""
        return f"hbase://127.0.0.1:{self.thrift_port}/{table}?family={family}"

    def start(self) -> HBaseServer:
        """Start both JVMs at once, wait for the gateway and create the tables.

        The gateway needs no master to start (it connects on demand), so its JVM loads its classes
        while the master comes up: that overlap saves about a third of the start-up. Both are
        spawned from the calling thread (their parent-death signal follows that thread).
        """
        try:
            self.thrift.spawn()
            self.master.start()
            self.thrift.wait_ready()
            for t in self.tables_to_create:
                self.create_table(t)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the gateway and the master by pid."""
        self.thrift.stop(timeout=10)
        self.master.stop(timeout=20)

    def kill(self) -> None:
        """SIGKILL both JVMs (a crash)."""
        self.thrift.kill()
        self.master.kill()

    def kill_and_restart(self) -> None:
        """SIGKILL both JVMs, start them again on the same ports and root directory, wait for the tables."""
        self.kill()
        self.start()

    def close(self) -> None:
        """Stop, and remove the directory if we created it (then SIGKILL: its data is not kept, and
        a graceful HBase shutdown takes 20 s or more)."""
        if self._own_dir:
            self.kill()
            shutil.rmtree(self.workdir, ignore_errors=True)
        else:
            self.stop()

    def __enter__(self) -> HBaseServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- Spark Connect -----------------------------------------------------------------------------
class SparkConnectServer(ServerProcess):
    """A Spark Connect server (``SparkConnectServer`` through PySpark's ``spark-submit``), ``local[2]``.

    It listens on a free loopback port (:attr:`url` is ``sc://127.0.0.1:PORT``), with the UI off and
    two shuffle partitions; its Python workers (``foreachBatch``, UDFs) run this interpreter, so they
    import weir. Extra ``conf`` and ``env`` are added to the server's; :meth:`stop` ends the JVM and
    its Python workers (the server's own process group).
    """

    name = "spark-connect"
    startup_timeout = 180.0  # a JVM start on a loaded machine
    main_class = "org.apache.spark.sql.connect.service.SparkConnectServer"

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        conf: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(workdir)
        require_binary("java")
        import pyspark

        self.spark_home = Path(pyspark.__file__).parent
        if not any((self.spark_home / "jars").glob("spark-connect_*.jar")):
            require_service(False, f"PySpark at {self.spark_home} has no spark-connect jar in its jars/")
        self.port = port or free_port()
        self.conf = {
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.sql.warehouse.dir": str(self.workdir / "warehouse"),
            "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
            "spark.python.authenticate.socketTimeout": "120s",  # slow workers on a busy machine
            "spark.pyspark.python": sys.executable,
            "spark.pyspark.driver.python": sys.executable,
            **(conf or {}),
        }
        self.env = dict(env or {})

    @property
    def url(self) -> str:
        """``sc://127.0.0.1:PORT``."""
        return f"sc://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """``spark-submit --class SparkConnectServer --master local[2] --conf ...``."""
        cmd = [str(self.spark_home / "bin" / "spark-submit"), "--class", self.main_class, "--master", "local[2]"]
        cmd += ["--name", "weir-tests-connect"]
        for k, v in self.conf.items():
            cmd += ["--conf", f"{k}={v}"]
        return cmd

    def start(self) -> ServerProcess:
        """Start the server with this interpreter as its workers' Python, and wait until it answers."""
        saved = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", *self.env)}
        os.environ.update(
            {
                "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable,
                "SPARK_HOME": str(self.spark_home),
            }
        )
        os.environ.update(self.env)
        try:
            return super().start()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def ready(self) -> bool:
        """The gRPC port accepts connections (the server binds it once its SparkSession is up)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=2):
            pass
        return True

    def _signal_group(self, sig: int) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)  # the server's own session: its JVM and Python workers

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM the server's process group, SIGKILL it after ``timeout`` seconds."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
        if proc is not None:
            self._signal_group(signal.SIGKILL)  # workers left behind by the JVM
        super().stop(timeout)

    def kill(self) -> None:
        """SIGKILL the server's process group (a crash), and reap it."""
        self._signal_group(signal.SIGKILL)
        super().kill()
