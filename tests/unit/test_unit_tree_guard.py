"""The guard of tests/unit (tests/unit/conftest.py) refuses servers and Spark."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.unit.conftest import NO_SPARK_HOME, SERVER_FIXTURES, UnitTreeViolation


@pytest.mark.parametrize("binary", ["redis-server", "/usr/bin/memcached", "nats-server", "java"])
def test_starting_a_server_binary_fails(binary: str) -> None:
    with pytest.raises(UnitTreeViolation, match=r"test_starting_a_server_binary_fails.*tests/contract"):
        subprocess.Popen([binary, "--version"])


def test_starting_a_spark_session_fails() -> None:
    from pyspark.sql import SparkSession

    with pytest.raises(UnitTreeViolation, match="starts a SparkContext"):
        SparkSession.builder.master("local[1]").getOrCreate()


def test_child_processes_cannot_find_spark() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ['SPARK_HOME'])"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == NO_SPARK_HOME


def test_other_processes_still_run() -> None:
    out = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "42"


def test_server_fixtures_are_refused(request: pytest.FixtureRequest) -> None:
    """A unit test naming a server fixture fails before it runs (checked on a synthetic request)."""
    from tests.unit import conftest

    class FakeRequest:
        fixturenames = ["tmp_path", "redis_server"]

        class node:  # noqa: N801
            nodeid = "tests/unit/test_x.py::test_y"

    guard = conftest._no_server_no_spark.__wrapped__(FakeRequest(), pytest.MonkeyPatch())  # type: ignore[attr-defined]
    with pytest.raises(UnitTreeViolation, match=r"test_y uses fixture\(s\) \['redis_server'\]"):
        next(guard)
    assert {"spark", "redis_server", "postgres_url", "hbase_server"} <= SERVER_FIXTURES
