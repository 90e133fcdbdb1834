"""Shared fixtures: real servers (session-scoped, stopped by pid), a fresh store per test, Spark.

Servers come from :mod:`tests.servers`; a missing binary skips the test, or fails it when
``WEIR_REQUIRE_SERVICES=1`` (CI). ``provider_url`` is parametrised *indirectly* over
:data:`tests.servers.PROVIDERS`::

    @pytest.mark.parametrize("provider_url", PROVIDERS, indirect=True)
    def test_x(provider_url): ...
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.servers import (
    HBaseServer,
    Memcached,
    NatsServer,
    PostgresDatabase,
    RabbitMQServer,
    RedisCluster,
    RedisServer,
    SparkConnectServer,
    require_binary,
)

# Hypothesis: no example database in the work tree, no per-example deadline (real servers vary).
settings.register_profile("weir", deadline=None, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "weir"))

# ---- JVM flags of the Spark JVMs the tests start (the session, crash drivers, the CLI) ------------
#: C1 only and the serial collector (as the Kafka nodes of tests/servers.py): the tests' Spark JVMs
#: run small inputs, and C2's compiler threads cost more CPU than they save on 2 cores. Measured as
#: the CPU (user + sys) of the whole process tree: a clean 8-batch tests/crash/storm_driver.py run
#: 31-35 s -> 20-21 s; test_storm_crash.py[sqlite] 230 s -> 146 s; tests/trident/test_spark.py (the
#: ``spark`` session) 138 s -> 91 s. Read by spark-submit, so it reaches the ``spark`` session and
#: every child that starts Spark (crash drivers, the CLI); the Connect server starts without it.
SHORT_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
if "SPARK_SUBMIT_OPTS" not in os.environ:
    from tests._jvm_cds import cds_opts

    # plus a class-data-sharing archive of Spark's classes (made once, cached): tests/_jvm_cds.py
    os.environ["SPARK_SUBMIT_OPTS"] = f"{SHORT_JVM_OPTS} {cds_opts(SHORT_JVM_OPTS)}".strip()


# ---- xdist ---------------------------------------------------------------------------------------
#: the test files that start a Spark Connect server
CONNECT_FILES = {
    "tests/spark/test_connect.py",
    "tests/spark/test_storm_connect.py",
    "tests/crash/test_storm_connect_crash.py",
    "tests/spark/test_trident_connect.py",
    "tests/crash/test_trident_connect_crash.py",
    "tests/streams/test_spark_streams.py",
    "tests/crash/test_streams_connect_crash.py",
}


def xdist_group(nodeid: str) -> str:
    """The work unit of a test under ``-n 2 --dist loadgroup``: ``hbase``, ``kafka`` or the test itself.

    Session fixtures are per worker: grouping keeps HBase (master and Thrift gateway) and the Kafka
    broker to one worker each instead of starting them on both. Everything else is spread freely:
    servers bind free ports, tests write under their own tmp dirs, PostgreSQL gets a database per
    worker. (By the test id: pytest 9 ignores the ``@group`` suffix pytest-xdist 3.8 gives marked tests.)
    """
    if "hbase" in nodeid.lower():
        return "hbase"
    if "rabbitmq" in nodeid.lower():
        return "rabbitmq"
    if nodeid.startswith("tests/kafka/"):
        return "kafka"
    if nodeid.split("::")[0] in CONNECT_FILES:  # one Spark Connect server per worker: keep its tests on one
        return "connect"
    if "import_storm" in nodeid:  # one Apache Storm LocalCluster run per worker: keep its tests on one
        return "storm"
    if nodeid.startswith("tests/spark/test_standalone_cluster.py"):  # its master and two workers: started once
        return "standalone"
    return nodeid


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` with the groups of :func:`xdist_group`, longest (recorded) units first."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from collections import OrderedDict

    from xdist.scheduler import LoadScopeScheduling

    from tests._schedule import Estimator, load_table, order_units

    estimate = Estimator(load_table())

    class ServerGroups(LoadScopeScheduling):
        _longest_first = False

        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            if not self._longest_first:  # the first hand-out: longest units first (tests/_schedule.py)
                self._longest_first = True
                order = order_units(((s, u.keys()) for s, u in self.workqueue.items()), estimate)
                self.workqueue = OrderedDict((s, self.workqueue[s]) for s in order)
            super()._assign_work_unit(node)

    return ServerGroups(config, log)


# ---- servers ---------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A standalone ``redis-server`` on a free loopback port (no persistence)."""
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def rabbitmq_server() -> Iterator[RabbitMQServer]:
    """Debian's ``rabbitmq-server`` as its own node on free loopback ports (slow to boot: one per worker)."""
    with RabbitMQServer() as server:
        yield server


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    """A 3-master Redis Cluster on free loopback ports."""
    with RedisCluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def memcached_server() -> Iterator[Memcached]:
    """A ``memcached`` on a free loopback port (TCP only)."""
    with Memcached() as server:
        yield server


@pytest.fixture(scope="session")
def nats_server() -> Iterator[NatsServer]:
    """A ``nats-server`` with JetStream on a free loopback port (restartable)."""
    with NatsServer() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[PostgresDatabase]:
    """A fresh database on the local PostgreSQL server, dropped at the end of the run."""
    db = PostgresDatabase()
    try:
        yield db
    finally:
        _close_backends()
        db.drop()


@pytest.fixture(scope="session")
def postgres_url(postgres_database: PostgresDatabase) -> str:
    """``postgresql://postgres@127.0.0.1:5432/weir_test_<random>``."""
    return postgres_database.url


@pytest.fixture(scope="session")
def hbase_server() -> Iterator[HBaseServer]:
    """HBase standalone + its Thrift gateway (one pair of JVMs per run), with table ``state``/``cf``."""
    with HBaseServer(tables=("state", "trident")) as server:
        yield server
        _close_backends()


# ---- state -----------------------------------------------------------------------------------
@pytest.fixture
def tmp_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty ``weir.state.dir`` for one test (also exported as ``$WEIR_STATE_DIR``)."""
    path = tmp_path / "weir-state"
    path.mkdir()
    monkeypatch.setenv("WEIR_STATE_DIR", str(path))
    return path


def _close_backends() -> None:
    from weir.state.factory import close_backends

    close_backends()


@pytest.fixture
def provider_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty store of the requested kind (``indirect`` parameter, see PROVIDERS).

    ``memory`` gets a store name of its own, ``sqlite`` a new file, Redis and the Redis Cluster are
    flushed, the PostgreSQL test database has every table truncated and HBase's ``state`` table is
    emptied. Backends cached by
    :func:`weir.state.factory.open_backend` are closed before and after the test.
    """
    kind = getattr(request, "param", None)
    if kind is None:
        pytest.fail("provider_url must be parametrised indirectly, e.g. over tests.servers.PROVIDERS")
    _close_backends()
    empty: Callable[[], None] | None = None  # empties a shared server's store: before the test and after it
    if kind == "memory":
        url = f"memory://test-{uuid.uuid4().hex[:12]}"
    elif kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'state.db'}"
    elif kind == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        empty, url = server.flushall, server.url
    elif kind == "redis-cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        empty, url = cluster.flushall, cluster.url
    elif kind == "postgres":
        db: PostgresDatabase = request.getfixturevalue("postgres_database")
        empty, url = db.truncate_all, db.url
    elif kind in ("hbase", "hbase-rows"):  # the default layout (buckets) / a row per key
        hbase: HBaseServer = request.getfixturevalue("hbase_server")
        empty = functools.partial(hbase.truncate, "state")
        url = hbase.url("state") + ("&layout=rows" if kind == "hbase-rows" else "")
    else:
        pytest.fail(f"unknown provider set-up {kind!r}")
    if empty is not None:
        empty()
    try:
        yield url
    finally:
        _close_backends()
        if kind == "memory":
            from weir.state.memory import MemoryBackend

            MemoryBackend.reset_all()
        # emptied after the test too: later tests of this worker that share the server without this
        # fixture (a store-wide DRPC registration, say) must not meet what this one left
        if empty is not None:
            with contextlib.suppress(Exception):  # a server the test stopped: the next user empties it first
                empty()


# ---- Spark -----------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def spark_connect_server() -> Iterator[SparkConnectServer]:
    """A Spark Connect server (``local[2]``, this interpreter's workers) for the run, started on first use.

    Its Python workers import the test suite's own modules (``tests.*``: topologies, operations) as
    classic Spark's workers do, from the repository root.
    """
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    if os.environ.get("SPARK_SUBMIT_OPTS", "").startswith(SHORT_JVM_OPTS):  # ours (with the CDS archive)
        env["SPARK_SUBMIT_OPTS"] = ""  # a long-lived JVM: C2 as usual
    with SparkConnectServer(env=env) as server:
        yield server


@pytest.fixture(scope="session")
def spark_connect_url(spark_connect_server: SparkConnectServer) -> str:
    """``sc://127.0.0.1:PORT`` of the run's Spark Connect server (failing, not skipped, in CI if it cannot start)."""
    return spark_connect_server.url


@pytest.fixture(autouse=True)
def _connect_mode_stays_in_its_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """A Spark Connect session sets PySpark's ``SPARK_CONNECT_MODE_ENABLED`` for its whole process (as
    PySpark's own builder does); undone after the test (after any test outside the Connect test files,
    whose module-scoped sessions keep it while they run), so neither the classic ``spark`` session's
    functions nor a child process (a crash driver, the CLI) of a later test is switched to Connect."""
    had = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    yield
    if had is None or request.node.nodeid.split("::")[0] not in CONNECT_FILES:
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


@pytest.fixture
def spark_connect(spark_connect_url: str) -> Iterator[Any]:
    """A Spark Connect session on the run's server, made as weir makes it (ended after the test).

    A Connect session switches this process's ``pyspark.sql.functions`` to Spark Connect's (PySpark's
    ``SPARK_CONNECT_MODE_ENABLED``), as in any Connect client: that is undone after the test, so the
    classic ``spark`` session keeps working for the next one.
    """
    from weir.runtime.spark.session import get_spark

    had = "SPARK_CONNECT_MODE_ENABLED" in os.environ
    session = get_spark(
        "local[2]", "weir-tests-connect", {"spark.sql.shuffle.partitions": "2"}, remote=spark_connect_url
    )
    try:
        yield session
    finally:
        session.stop()
        if not had:
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One local[2] SparkSession for the run, created only when a test asks for it."""
    require_binary("java")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("weir-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.python.authenticate.socketTimeout", "120s")  # slow workers on a busy machine
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    try:
        yield session
    finally:
        session.stop()
