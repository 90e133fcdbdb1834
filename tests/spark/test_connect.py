"""Spark Connect: the session weir builds on a real Connect server, its configuration, and refusals.

The server is the run's ``spark_connect_url`` fixture (PySpark's ``SparkConnectServer`` through
``spark-submit``, ``local[2]``). A dialect whose runtime is not written for Connect is refused at
submit, naming why, before anything runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.cli._support import run
from weir.errors import ConfigError, TopologyError
from weir.runtime.spark.config import RuntimeConfig
from weir.runtime.spark.session import connect_master, get_spark, is_connect, remote_url
from weir.sources import FileSpout
from weir.trident import Count, MemoryMapState, TridentTopology

pytestmark = pytest.mark.spark


@pytest.fixture
def connect(spark_connect: Any) -> Iterator[Any]:
    """The Connect session of ``spark_connect`` (tests/conftest.py), with three shuffle partitions."""
    spark_connect.conf.set("spark.sql.shuffle.partitions", "3")
    yield spark_connect


def test_get_spark_builds_a_connect_session_on_the_server(connect: Any, spark_connect_url: str) -> None:
    assert is_connect(connect)
    with pytest.raises(Exception, match="sparkContext"):  # a thin client: no SparkContext in this process
        connect.sparkContext  # noqa: B018
    assert connect.range(7).selectExpr("sum(id) AS s").collect()[0]["s"] == 21
    # the session-level settings of weir.spark.conf reach the server's session
    assert connect.conf.get("spark.sql.shuffle.partitions") == "3"
    # a loopback server is local mode, as the server reports it
    assert connect_master(connect, spark_connect_url) == "local[2]"
    assert (
        connect_master(connect, "sc://spark.example.com:15002")
        == "sc://spark.example.com:15002 (spark.master local[2])"
    )


def test_the_servers_master_is_asked_once_per_session(
    connect: Any, spark_connect_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A submit asks for the master twice (its checks, then its session): one Config round trip, not two."""
    from pyspark.sql.connect.client.core import SparkConnectClient

    from weir.runtime.spark import session

    asked: list[str] = []
    config = SparkConnectClient.config

    def spy(self: Any, operation: Any) -> Any:
        asked.append(str(operation))
        return config(self, operation)

    monkeypatch.setattr(SparkConnectClient, "config", spy)
    session._SERVER_MASTERS.pop(connect, None)
    assert [connect_master(connect, spark_connect_url) for _ in range(3)] == ["local[2]"] * 3
    assert sum("spark.master" in op for op in asked) == 1, asked


def test_python_udfs_run_on_the_server_with_weir_importable(connect: Any) -> None:
    from pyspark.sql.connect.functions.builtin import udf
    from pyspark.sql.types import StringType

    where_weir_is = udf(lambda _: __import__("weir").__file__, StringType())  # imported by the server's worker
    got = connect.range(1).select(where_weir_is("id").alias("f")).collect()[0]["f"]
    assert got == weir.__file__


def test_a_server_wide_setting_is_refused_naming_the_key(spark_connect_url: str) -> None:
    try:
        with pytest.raises(ConfigError, match=r"refuses spark\.ui\.enabled='true'.*spark-submit --conf"):
            get_spark("local[2]", "weir-test-connect", {"spark.ui.enabled": "true"}, remote=spark_connect_url).stop()
    finally:
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        active = ConnectSession.getActiveSession()
        if active is not None:
            active.stop()
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


def test_the_remote_url_comes_from_conf_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    assert RuntimeConfig.from_conf("t", {}).remote is None
    assert RuntimeConfig.from_conf("t", {"weir.spark.remote": "sc://h:15002"}).remote == "sc://h:15002"
    monkeypatch.setenv("SPARK_REMOTE", "sc://env-host:15002")
    assert RuntimeConfig.from_conf("t", {}).remote == "sc://env-host:15002"
    assert RuntimeConfig.from_conf("t", {"weir.spark.remote": "sc://conf:1"}).remote == "sc://conf:1"
    # $SPARK_REMOTE with a master in the conf: the environment decides where it runs
    assert RuntimeConfig.from_conf("t", {"weir.spark.master": "local[2]"}).remote == "sc://env-host:15002"


def test_a_bad_remote_is_refused_at_submit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    with pytest.raises(ConfigError, match=r"weir\.spark\.remote must be a Spark Connect URL .*'http://h:1'"):
        RuntimeConfig.from_conf("t", {"weir.spark.remote": "http://h:1"})
    monkeypatch.setenv("SPARK_REMOTE", "h:15002")
    with pytest.raises(ConfigError, match=r"\$SPARK_REMOTE must be a Spark Connect URL"):
        remote_url(None)
    monkeypatch.delenv("SPARK_REMOTE")
    with pytest.raises(ConfigError, match=r"both weir\.spark\.master .* and weir\.spark\.remote .* drop one"):
        RuntimeConfig.from_conf("t", {"weir.spark.remote": "sc://h:1", "weir.spark.master": "local[2]"})


def _trident(tmp_path: Path) -> TridentTopology:
    topo = TridentTopology()
    lines = topo.new_stream("lines", FileSpout(str(tmp_path / "in")))
    lines.group_by("line").persistent_aggregate(MemoryMapState.Factory(), Count(), "count")
    return topo


def test_what_cannot_run_over_connect_is_refused_before_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    # refused before any Spark starts: the command's stop_spark() on the way out would stop the test
    # session's classic Spark that later tests share
    monkeypatch.setattr("weir.runtime.spark.session.stop_spark", lambda: None)
    (tmp_path / "in").mkdir()
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.spark.remote": "sc://127.0.0.1:1"}
    # nothing listens on port 1: each refusal comes before any connection
    from tests.streams import _punct  # window marks from the source: positions the Connect stages do not keep

    with pytest.raises(TopologyError, match=r"spout 'lines' sends window marks .* do not keep that order"):
        weir.submit("wc", conf, _punct.build(str(tmp_path / "in")))
    # the coordinator stays in this process: the server's workers must reach it on a loopback port
    far = {**conf, "weir.spark.remote": "sc://spark.example.com:15002"}
    with pytest.raises(
        ConfigError, match=r"Spark Connect server sc://spark\.example\.com:15002 is not on this machine"
    ):
        weir.submit("wc", far, _trident(tmp_path))
    assert not (tmp_path / "state").exists()


def test_weir_run_remote_reaches_the_submit_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    # refused before any Spark starts: the command's stop_spark() on the way out would stop the test
    # session's classic Spark that later tests share
    monkeypatch.setattr("weir.runtime.spark.session.stop_spark", lambda: None)
    (tmp_path / "in").mkdir()
    module = tmp_path / "wc_topology.py"
    module.write_text(  # a server on another machine is refused (the relay is a loopback port)
        "from weir.sources import FileSpout\n"
        "from weir.trident import Count, MemoryMapState, TridentTopology\n"
        "topo = TridentTopology()\n"
        f"topo.new_stream('lines', FileSpout({str(tmp_path / 'in')!r})).group_by('line')"
        ".persistent_aggregate(MemoryMapState.Factory(), Count(), 'count')\n"
        "TOPOLOGY = topo\n"
    )
    os.environ.pop("SPARK_REMOTE", None)
    got = run(
        capsys,
        "run",
        f"{module}:TOPOLOGY",
        "--remote",
        "sc://spark.example.com:15002",
        "--conf",
        f"weir.state.dir={tmp_path}/s",
    )
    assert got.code != 0
    assert "the Spark Connect server sc://spark.example.com:15002 is not on this machine" in got.err
    both = run(capsys, "run", f"{module}:TOPOLOGY", "--remote", "sc://h:1", "--master", "local[1]")
    assert both.code == 2
    assert "--master: not allowed with argument --remote" in both.err
