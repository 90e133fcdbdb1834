"""The unit tree's promise: no server and no Spark.

Every test here runs in plain Python against embedded stores (memory, SQLite files in a tmp dir).
A unit test that asks for a server or Spark fixture, starts a server binary or the Spark JVM
(``spark-submit``/``java``), or creates a ``SparkContext`` fails with a message saying where the
test belongs: server-backed tests go to ``tests/contract`` (or the feature's own tree), Spark tests
to ``tests/spark``, ``tests/trident``, ``tests/streams``.

Child processes inherit ``SPARK_HOME`` pointing nowhere, so a subprocess that tries to start Spark
fails too.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

#: fixtures of tests/conftest.py (and the feature conftests) that start a server or Spark
SERVER_FIXTURES = frozenset(
    {
        "spark",
        "redis_server",
        "redis_cluster",
        "memcached_server",
        "nats_server",
        "postgres_database",
        "postgres_url",
        "hbase_server",
        "kafka",
        "kafka_broker",
        "kafka_cluster",
        "provider_url",
    }
)

#: executables a unit test must not start (servers, and the JVM that Spark runs in)
SERVER_BINARIES = frozenset(
    {
        "redis-server",
        "memcached",
        "nats-server",
        "postgres",
        "pg_ctl",
        "pg_ctlcluster",
        "java",
        "spark-submit",
        "spark-class",
        "kafka-server-start.sh",
        "hbase",
    }
)

NO_SPARK_HOME = "/nonexistent/weir-unit-tests-start-no-spark"

_WHERE = (
    "tests/unit runs without servers and without Spark: move this test to tests/contract "
    "(server-backed) or a Spark test tree (tests/spark, tests/trident, tests/streams)"
)


class UnitTreeViolation(AssertionError):
    """A unit test started (or asked for) a server or Spark."""


@pytest.fixture(autouse=True)
def _no_server_no_spark(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    wanted = sorted(SERVER_FIXTURES.intersection(request.fixturenames))
    if wanted:
        raise UnitTreeViolation(f"{request.node.nodeid} uses fixture(s) {wanted}; {_WHERE}")
    real_init = subprocess.Popen.__init__

    def guarded_init(self: subprocess.Popen[Any], args: Any, *a: Any, **kw: Any) -> None:
        argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        first = os.fsdecode(argv[0]) if argv else ""
        if kw.get("shell"):
            first = first.split()[0] if first.split() else ""
        name = os.path.basename(first)
        if name in SERVER_BINARIES:
            raise UnitTreeViolation(f"{request.node.nodeid} starts {name!r}; {_WHERE}")
        real_init(self, args, *a, **kw)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded_init)
    monkeypatch.setenv("SPARK_HOME", NO_SPARK_HOME)
    try:
        from pyspark.core import context as spark_context
    except ImportError:  # pragma: no cover - another pyspark layout
        spark_context = None
    if spark_context is not None:

        def no_gateway(*_a: Any, **_kw: Any) -> Any:
            raise UnitTreeViolation(f"{request.node.nodeid} starts a SparkContext; {_WHERE}")

        monkeypatch.setattr(spark_context, "launch_gateway", no_gateway)
        # under pytest-xdist a worker may already hold another tree's session: getting it is refused too
        from pyspark.sql import SparkSession

        def no_session(*_a: Any, **_kw: Any) -> Any:
            raise UnitTreeViolation(f"{request.node.nodeid} starts a SparkContext; {_WHERE}")

        monkeypatch.setattr(SparkSession.Builder, "getOrCreate", no_session)
        monkeypatch.setattr(spark_context.SparkContext, "getOrCreate", no_session)
    yield
