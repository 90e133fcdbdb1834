"""Runtime configuration (weir's own keys), dead-letter sinks and the local-store guard of the runner."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from weir.errors import ConfigError
from weir.runtime.spark.config import WEIR_KEYS, RuntimeConfig
from weir.runtime.spark.deadletter import DirectorySink, NamespaceSink, make_sink
from weir.runtime.spark.runner import check_local_store
from weir.state.config import parse_provider_config
from weir.state.factory import StateFactory, close_backends
from weir.state.memory import MemoryBackend


@pytest.fixture
def no_state_dir_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WEIR_STATE_DIR", raising=False)


# ---- RuntimeConfig ---------------------------------------------------------------------------------
@pytest.mark.usefixtures("no_state_dir_env")
def test_defaults() -> None:
    rc = RuntimeConfig.from_conf("wc", {})
    assert rc == RuntimeConfig(
        topology="wc",
        interval_ms=1000,
        max_retries=3,
        state_dir="./weir-state",
        checkpoint_location=os.path.abspath(os.path.join("./weir-state", "spark", "wc")),  # the driver's cwd
        master="local[*]",
        deadletter=None,
        max_task_parallelism=None,
        checkpoint_retain=2,
        provider=parse_provider_config({}),  # the default store: <weir.state.dir>/state.db
    )
    assert rc.local
    with pytest.raises(dataclasses.FrozenInstanceError):
        rc.max_retries = 5  # type: ignore[misc]


def test_state_dir_from_the_environment_and_from_conf(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WEIR_STATE_DIR", str(tmp_path / "env"))
    rc = RuntimeConfig.from_conf("wc", {})
    assert rc.state_dir == str(tmp_path / "env")
    assert rc.checkpoint_location == str(tmp_path / "env" / "spark" / "wc")
    rc = RuntimeConfig.from_conf("wc", {"weir.state.dir": str(tmp_path / "conf")})
    assert rc.checkpoint_location == str(tmp_path / "conf" / "spark" / "wc")
    rc = RuntimeConfig.from_conf("wc", {"weir.spark.checkpoint.location": "/ckpt/wc"})
    assert rc.checkpoint_location == "/ckpt/wc"


@pytest.mark.usefixtures("no_state_dir_env")
def test_a_shared_store_without_a_state_dir_keeps_spark_checkpoints_by_store_not_by_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    redis = {"topology.state.provider.config": {"url": "redis://:secret@127.0.0.1:6390/0"}}
    locs = []
    for cwd in ("a", "b"):
        (tmp_path / cwd).mkdir()
        monkeypatch.chdir(tmp_path / cwd)
        locs.append(RuntimeConfig.from_conf("wc", redis).checkpoint_location)
    assert locs[0] == locs[1] and locs[0].startswith(str(tmp_path / "xdg" / "weir" / "spark"))
    assert locs[0].endswith("/wc") and "secret" not in locs[0]
    other = {"topology.state.provider.config": {"url": "redis://127.0.0.1:6391/0"}}
    assert RuntimeConfig.from_conf("wc", other).checkpoint_location != locs[0]  # another store, another place
    # the embedded store, a state dir given, or a location given: as before
    assert RuntimeConfig.from_conf("wc", {}).checkpoint_location == str(tmp_path / "b" / "weir-state" / "spark" / "wc")
    given = {**redis, "weir.state.dir": str(tmp_path / "sd")}
    assert RuntimeConfig.from_conf("wc", given).checkpoint_location == str(tmp_path / "sd" / "spark" / "wc")


@pytest.mark.usefixtures("no_state_dir_env")
def test_every_key_is_read() -> None:
    rc = RuntimeConfig.from_conf(
        "wc",
        {
            "topology.state.checkpoint.interval.ms": 250,
            "weir.batch.max.retries": "0",
            "weir.checkpoint.retain": 5,
            "topology.max.task.parallelism": " 4 ",
            "weir.spark.master": "spark://127.0.0.1:7077",
            "weir.deadletter": "state",
            "weir.spark.conf": {"spark.executor.memory": "1g"},
            "weir.trident.allow.inexact": True,
            "topology.workers": 3,  # Storm keys weir does not use are accepted
            "my.own.key": object(),
        },
    )
    assert (rc.interval_ms, rc.max_retries, rc.checkpoint_retain, rc.max_task_parallelism) == (250, 0, 5, 4)
    assert (rc.master, rc.local, rc.deadletter) == ("spark://127.0.0.1:7077", False, "state")


def test_unknown_weir_key_is_refused_by_name() -> None:
    with pytest.raises(ConfigError) as info:
        RuntimeConfig.from_conf("wc", {"weir.batch.max.retry": 2})
    text = str(info.value)
    assert "unknown configuration key 'weir.batch.max.retry'" in text
    assert "weir.batch.max.retries" in text  # the known keys are listed
    assert isinstance(info.value, ValueError)
    assert "weir.deadletter" in WEIR_KEYS


def test_non_string_key_is_refused() -> None:
    with pytest.raises(ConfigError, match="configuration keys must be strings, got 3"):
        RuntimeConfig.from_conf("wc", {3: "x"})


@pytest.mark.parametrize("name", ["", "a/b", "$checkpointspout", None, 7])
def test_bad_topology_name(name: Any) -> None:
    with pytest.raises(ConfigError, match="topology name .* must be a (non-empty string|safe path component)"):
        RuntimeConfig.from_conf(name, {})


@pytest.mark.parametrize(
    ("key", "minimum"),
    [
        ("weir.batch.max.retries", 0),
        ("topology.state.checkpoint.interval.ms", 0),
        ("weir.checkpoint.retain", 1),
        ("topology.max.task.parallelism", 1),
    ],
)
@pytest.mark.parametrize("bad", ["three", "", True, 1.5, "2.0", [1], "²", "--5", None, "below"])
def test_integer_keys_refuse_bad_values(key: str, minimum: int, bad: Any) -> None:
    if bad == "below":
        bad = minimum - 1
    if bad is None and key == "topology.max.task.parallelism":
        assert RuntimeConfig.from_conf("wc", {key: None}).max_task_parallelism is None
        return
    with pytest.raises(ConfigError) as info:
        RuntimeConfig.from_conf("wc", {key: bad})
    assert f"{key} must be an integer ≥ {minimum}, got {bad!r}" in str(info.value)


@pytest.mark.parametrize("master", ["", 7, None])
def test_bad_master(master: Any) -> None:
    with pytest.raises(ConfigError, match="weir.spark.master must be a Spark master URL"):
        RuntimeConfig.from_conf("wc", {"weir.spark.master": master})


@pytest.mark.parametrize("value", [None, "", False, "off"])
def test_deadletter_off(value: Any) -> None:
    assert RuntimeConfig.from_conf("wc", {"weir.deadletter": value}).deadletter is None


@pytest.mark.parametrize("value", ["state", "namespace:failed-words", "/var/weir/deadletter", "dl"])
def test_deadletter_on(value: str) -> None:
    assert RuntimeConfig.from_conf("wc", {"weir.deadletter": value}).deadletter == value


@pytest.mark.parametrize("value", [True, 1, ["dir"], {"dir": "x"}])
def test_deadletter_of_a_wrong_type(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"weir.deadletter must be a directory path, 'state' or 'namespace:NAME'"):
        RuntimeConfig.from_conf("wc", {"weir.deadletter": value})


# ---- dead-letter sinks -------------------------------------------------------------------------
@pytest.fixture
def memory_provider() -> Iterator[Any]:
    yield StateFactory.from_url("memory://deadletter-test")
    close_backends()
    MemoryBackend.reset_all()


def test_directory_sink_writes_one_file_per_txid_and_a_replay_overwrites(tmp_path: Path) -> None:
    sink = make_sink(str(tmp_path / "dl"), "wc", None)
    assert isinstance(sink, DirectorySink)
    assert sink.describe() == str(tmp_path / "dl" / "wc")
    sink.write(7, [{"values": ["x", b"raw"], "error": "boom"}, {"values": ["ü"], "error": "e"}])
    sink.write(7, [{"values": ["x"], "error": "boom"}])  # the batch was replayed
    files = sorted(p.name for p in (tmp_path / "dl" / "wc").iterdir())
    assert files == ["txid-000000000007.jsonl"]
    lines = (tmp_path / "dl" / "wc" / files[0]).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [{"values": ["x"], "error": "boom"}]


def test_namespace_sinks(memory_provider: Any) -> None:
    sink = make_sink("state", "wc", memory_provider)
    assert isinstance(sink, NamespaceSink) and sink.namespace == "wc-$deadletter"
    sink = make_sink("namespace:failed", "wc", memory_provider)
    assert sink.describe() == "namespace 'failed'"
    sink.write(3, [{"values": [1], "error": "a"}, {"values": [2], "error": "b"}])
    sink.write(3, [{"values": [1], "error": "a"}, {"values": [2], "error": "b"}])  # replay: same keys
    rows = dict(memory_provider.new_state("failed"))
    assert rows == {
        "000000000003:000000": {"values": [1], "error": "a"},
        "000000000003:000001": {"values": [2], "error": "b"},
    }


def test_namespace_sink_needs_a_provider_and_a_name(memory_provider: Any) -> None:
    with pytest.raises(ConfigError, match="weir.deadletter='state' needs a state provider"):
        make_sink("state", "wc", None)
    with pytest.raises(ConfigError, match="weir.deadletter='namespace:' needs a namespace name"):
        make_sink("namespace:", "wc", memory_provider)


# ---- local-only stores -------------------------------------------------------------------------
@pytest.mark.parametrize("master", ["spark://127.0.0.1:7077", "yarn", "k8s://https://k8s:6443"])
def test_memory_store_is_refused_on_a_cluster_master(master: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_local_store("memory", master, "wc")
    text = str(info.value)
    assert "topology 'wc'" in text and "'memory' state provider" in text
    assert "local mode only" in text and master in text and "redis" in text


def test_the_provider_configuration_is_parsed_once_into_the_runtime_configuration(tmp_path: Path) -> None:
    """RuntimeConfig holds the parsed provider; the submit path resolves the provider from it."""
    from weir.runtime.spark.runner import resolve_provider
    from weir.state.factory import KeyValueStateProvider

    url = f"sqlite:///{tmp_path}/s.db"
    conf = {"topology.state.provider": "sqlite", "topology.state.provider.config": json.dumps({"url": url})}
    rc = RuntimeConfig.from_conf("wc", conf)
    assert rc.provider == parse_provider_config(conf) and rc.provider is not None and rc.provider.url == url
    # the parsed form is what the provider is made of: a different parsed config wins over conf
    other = parse_provider_config({"topology.state.provider.config": {"url": f"sqlite:///{tmp_path}/o.db"}})
    provider = resolve_provider("wc", conf, "local[2]", other)
    assert isinstance(provider, KeyValueStateProvider) and provider.config.url == other.url
    close_backends()
    # a configuration that does not parse fails when a provider is needed, with the parser's message
    bad = {"topology.state.provider": "sqlite", "topology.state.provider.config": "{not json"}
    rc = RuntimeConfig.from_conf("wc", bad)
    assert rc.provider is None
    with pytest.raises(ConfigError, match=r"topology.state.provider.config is not valid JSON"):
        resolve_provider("wc", bad, "local[2]", rc.provider)


@pytest.mark.parametrize(("value", "expected"), [(None, False), (True, True), ("yes", True), (0, False)])
def test_allow_inexact_is_parsed_with_the_runtime_configuration(value: Any, expected: bool) -> None:
    conf = {} if value is None else {"weir.trident.allow.inexact": value}
    assert RuntimeConfig.from_conf("wc", conf).allow_inexact is expected
    with pytest.raises(ConfigError, match=r"weir.trident.allow.inexact must be true or false, got 'maybe'"):
        RuntimeConfig.from_conf("wc", {"weir.trident.allow.inexact": "maybe"})


@pytest.mark.parametrize("master", ["local[*]", "local[2]"])
def test_memory_store_is_run_scoped_in_local_mode(master: str) -> None:
    """Storm's in-memory provider on local Spark: a SQLite file in a temporary directory, with a warning."""
    from weir.errors import NotDurableWarning
    from weir.runtime.spark.runner import resolve_provider
    from weir.state.factory import KeyValueStateProvider

    check_local_store("memory", master, "wc")
    conf = {"topology.state.provider": "memory", "topology.state.provider.config": {"valueClass": "json"}}
    with pytest.warns(NotDurableWarning, match="lost when the driver stops or restarts"):
        provider = resolve_provider("wc", conf, master)
    assert isinstance(provider, KeyValueStateProvider) and provider.config.provider == "sqlite"
    assert provider.config.url.endswith("/state.db") and "weir-run-wc-" in provider.config.url
    assert provider.config.options.get("valueClass") == "json"  # the provider's options are kept
    with pytest.warns(NotDurableWarning):
        other = resolve_provider("wc", conf, master)
    assert other.config.url != provider.config.url  # every submit (run) gets its own store


@pytest.mark.parametrize("master", ["spark://127.0.0.1:7077", "yarn", "k8s://https://k8s:6443"])
def test_sqlite_store_is_refused_outside_local_mode(master: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_local_store("sqlite", master, "wc")
    text = str(info.value)
    assert f"Spark master {master!r}" in text
    assert "'sqlite' state provider is a file on one machine" in text
    assert "use redis or postgres" in text


@pytest.mark.parametrize("master", ["local", "local[*]", "local[2]", "local-cluster[2,1,1024]"])
def test_sqlite_store_is_fine_in_local_mode(master: str) -> None:
    check_local_store("sqlite", master, "wc")


@pytest.mark.parametrize("kind", ["redis", "postgres"])
@pytest.mark.parametrize("master", ["local[*]", "spark://127.0.0.1:7077", "yarn"])
def test_server_stores_are_fine_anywhere(kind: str, master: str) -> None:
    check_local_store(kind, master, "wc")


def test_weir_spark_conf_is_parsed_and_checked() -> None:
    from weir.runtime.spark.config import RuntimeConfig

    rc = RuntimeConfig.from_conf("t", {"weir.spark.conf": {"spark.executor.memory": "2g", "spark.cores.max": 4}})
    assert rc.spark_conf == {"spark.executor.memory": "2g", "spark.cores.max": "4"}
    with pytest.raises(ConfigError, match="weir.spark.conf"):
        RuntimeConfig.from_conf("t", {"weir.spark.conf": "spark.executor.memory=2g"})


def test_connect_share_workers_is_on_by_default_and_a_flag() -> None:
    assert RuntimeConfig.from_conf("wc", {}).connect_share_workers is True
    assert RuntimeConfig.from_conf("wc", {"weir.connect.share.workers": "false"}).connect_share_workers is False
    with pytest.raises(ConfigError, match=r"weir.connect.share.workers must be true or false, got 'sometimes'"):
        RuntimeConfig.from_conf("wc", {"weir.connect.share.workers": "sometimes"})
