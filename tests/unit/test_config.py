"""Parsing of Storm's state keys: defaults, aliases, URL forms, and every ConfigError path."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from weir.errors import ConfigError
from weir.state import StateFactory, StateProvider
from weir.state.config import (
    PROVIDER_CONFIG_KEY,
    PROVIDER_KEY,
    ProviderConfig,
    default_state_dir,
    parse_provider_config,
    provider_from_url,
)
from weir.state.spi import KeyValueStateProvider


def _parse(provider: Any = None, config: Any = None, **extra: Any) -> ProviderConfig:
    conf: dict[str, Any] = dict(extra)
    if provider is not None:
        conf[PROVIDER_KEY] = provider
    if config is not None:
        conf[PROVIDER_CONFIG_KEY] = config
    return parse_provider_config(conf)


def _error(provider: Any = None, config: Any = None, **extra: Any) -> str:
    with pytest.raises(ConfigError) as info:
        _parse(provider, config, **extra)
    assert isinstance(info.value, ValueError)
    return str(info.value)


# ---- what parses -----------------------------------------------------------------------------
def test_default_is_sqlite_under_the_state_dir(tmp_state_dir: Path) -> None:
    cfg = _parse()
    assert cfg.provider == "sqlite"
    assert cfg.url == "sqlite:///" + os.path.abspath(tmp_state_dir / "state.db")


def test_weir_state_dir_key_wins_over_the_environment(tmp_state_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    cfg = _parse(**{"weir.state.dir": str(other)})
    assert cfg.url == "sqlite:///" + os.path.abspath(other / "state.db")
    assert default_state_dir({"weir.state.dir": str(other)}) == str(other)
    assert default_state_dir({}) == str(tmp_state_dir)


def test_default_state_dir_without_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WEIR_STATE_DIR", raising=False)
    assert default_state_dir(None) == "./weir-state"


@pytest.mark.parametrize(
    ("name", "provider"),
    [
        ("memory", "memory"),
        ("sqlite", "sqlite"),
        ("redis", "redis"),
        ("redis-cluster", "redis"),
        ("postgres", "postgres"),
        ("postgresql", "postgres"),
        ("pg", "postgres"),
        ("org.apache.storm.state.InMemoryKeyValueStateProvider", "memory"),
        ("org.apache.storm.redis.state.RedisKeyValueStateProvider", "redis"),
        ("org.apache.storm.redis.state.RedisClusterKeyValueStateProvider", "redis"),
        ("hbase", "hbase"),
        ("org.apache.storm.hbase.state.HBaseKeyValueStateProvider", "hbase"),
    ],
)
def test_short_names_and_storm_class_names(name: str, provider: str) -> None:
    config: dict[str, str] | None = None
    if provider == "postgres":
        config = {"url": "postgresql://u@h/db"}
    elif provider == "hbase":
        config = {"tableName": "state", "columnFamily": "cf"}
    assert _parse(name, config).provider == provider


@pytest.mark.parametrize(
    ("url", "provider"),
    [
        ("memory://x", "memory"),
        ("sqlite:///rel.db", "sqlite"),
        ("sqlite:////abs/x.db", "sqlite"),
        ("redis://127.0.0.1:6379/0", "redis"),
        ("rediss://h:1/0", "redis"),
        ("redis+cluster://a:1,b:2", "redis"),
        ("postgres://u@h/db", "postgres"),
        ("postgresql://u:p@h:5432/db", "postgres"),
        ("hbase://h:9090/state?family=cf", "hbase"),
        ("REDIS://h:1", "redis"),
    ],
)
def test_provider_is_inferred_from_the_url(url: str, provider: str) -> None:
    assert provider_from_url(url) == provider
    cfg = _parse(config={"url": url})
    assert cfg.provider == provider
    assert cfg.url == url


def test_storm_redis_pool_config_as_json_string() -> None:
    raw = json.dumps(
        {
            "keyClass": "str",
            "valueClass": "int",
            "jedisPoolConfig": {
                "host": "127.0.0.1",
                "port": 6380,
                "timeout": 2000,
                "database": 3,
                "password": None,
            },
        }
    )
    cfg = _parse("org.apache.storm.redis.state.RedisKeyValueStateProvider", raw)
    assert cfg.provider == "redis"
    assert cfg.options["jedisPoolConfig"]["port"] == 6380
    assert (cfg.key_class, cfg.value_class) == ("str", "int")
    # jedisPoolConfig alone is enough to pick redis
    assert _parse(config={"jedisPoolConfig": {"host": "h"}}).provider == "redis"


def test_storm_redis_cluster_config() -> None:
    cfg = _parse(
        "redis",
        {
            "jedisClusterConfig": {
                "nodes": ["127.0.0.1:7000", "127.0.0.1:7001"],
                "timeout": 100,
                "maxRedirections": 5,
            }
        },
    )
    assert cfg.options["jedisClusterConfig"]["nodes"] == ["127.0.0.1:7000", "127.0.0.1:7001"]


def test_empty_config_string_and_none_mean_no_options(tmp_state_dir: Path) -> None:
    assert _parse("memory", "").options == {}
    assert _parse("memory", None).options == {}


def test_redacted_hides_passwords_and_cache_key_is_stable() -> None:
    cfg = _parse("redis", {"jedisPoolConfig": {"host": "h", "password": "s3cret"}})
    assert "s3cret" not in json.dumps(cfg.redacted())
    assert cfg.options["jedisPoolConfig"]["password"] == "s3cret"
    pg = _parse("postgres", {"url": "postgresql://user:hunter2@h:5432/db"})
    assert "hunter2" not in json.dumps(pg.redacted())
    again = _parse("postgres", {"url": "postgresql://user:hunter2@h:5432/db"})
    assert pg.cache_key() == again.cache_key()
    assert pg.cache_key() != _parse("postgres", {"url": "postgresql://user@h:5432/other"}).cache_key()


def test_provider_config_is_frozen() -> None:
    cfg = _parse("memory")
    with pytest.raises(AttributeError):
        cfg.provider = "redis"  # type: ignore[misc]


def test_custom_provider_by_dotted_path() -> None:
    cfg = _parse("tests.unit.test_config.CustomProvider", {"anything": 1})
    assert cfg.provider == "custom"
    assert cfg.custom_class == "tests.unit.test_config.CustomProvider"
    provider = StateFactory.get_provider({PROVIDER_KEY: "tests.unit.test_config.CustomProvider"})
    assert isinstance(provider, CustomProvider)


def test_state_factory_from_url_and_get_provider() -> None:
    provider = StateFactory.from_url("memory://cfg-test")
    assert isinstance(provider, KeyValueStateProvider)
    assert provider.config.provider == "memory"
    same = StateFactory.get_provider({PROVIDER_KEY: "memory", PROVIDER_CONFIG_KEY: {"url": "memory://cfg-test"}})
    assert isinstance(same, KeyValueStateProvider)
    assert same.config == provider.config


class CustomProvider(StateProvider):
    """A user provider for the dotted-path test."""

    def new_state(self, namespace: str, conf: Any = None, context: Any = None) -> Any:
        raise NotImplementedError


class NotAProvider:
    """Not a StateProvider (and must never be instantiated by name)."""

    created = False

    def __init__(self) -> None:
        type(self).created = True


PROVIDER_INSTANCE = CustomProvider()


# ---- every ConfigError path ------------------------------------------------------------------
@pytest.mark.parametrize("name", ["mongodb", "cassandra", "rocksdb", "Redis"])
def test_unknown_provider(name: str) -> None:
    msg = _error(name)
    assert PROVIDER_KEY in msg and repr(name) in msg and "sqlite" in msg


def test_provider_config_dataclass_rejects_unknown_provider() -> None:
    with pytest.raises(ConfigError, match="unknown provider 'nope'"):
        ProviderConfig("nope")


@pytest.mark.parametrize("value", [5, ["redis"], {"name": "redis"}, True])
def test_provider_must_be_a_string(value: Any) -> None:
    assert f"{PROVIDER_KEY} must be a string" in _error(value)


@pytest.mark.parametrize("raw", ["{not json", '{"url": }', "{'single': 'quotes'}", '{"a": 1'])
def test_malformed_json(raw: str) -> None:
    msg = _error("memory", raw)
    assert PROVIDER_CONFIG_KEY in msg and "not valid JSON" in msg and "line 1" in msg


@pytest.mark.parametrize("raw", ["[1, 2]", '"text"', "42", "null"])
def test_json_that_is_not_an_object(raw: str) -> None:
    msg = _error("memory", raw)
    assert "must be a JSON object" in msg


@pytest.mark.parametrize("raw", [42, ["url"], 3.5, b'{"url": "memory://x"}'])
def test_config_that_is_neither_json_nor_a_dict(raw: Any) -> None:
    assert "must be a JSON string or a dict" in _error("memory", raw)


@pytest.mark.parametrize(
    ("provider", "config", "key"),
    [
        ("sqlite", {"url": "sqlite:///x.db", "host": "h"}, "'host'"),
        ("memory", {"path": "/tmp/x"}, "'path'"),
        ("redis", {"url": "redis://h:1/0", "schema": "s"}, "'schema'"),
        ("postgres", {"url": "postgresql://u@h/db", "jedisPoolConfig": {}}, "'jedisPoolConfig'"),
        ("sqlite", {"keySerialiserClass": "str"}, "'keySerialiserClass'"),
    ],
)
def test_unknown_keys(provider: str, config: dict[str, Any], key: str) -> None:
    msg = _error(provider, config)
    assert "unknown key" in msg and key in msg and f"the {provider} provider" in msg


@pytest.mark.parametrize("key", ["keyClass", "valueClass", "keySerializerClass", "valueSerializerClass", "url"])
def test_common_keys_must_be_strings(key: str) -> None:
    msg = _error("memory", {key: 5})
    assert f"{key} must be a string" in msg and "int" in msg


@pytest.mark.parametrize(
    ("provider", "url"),
    [
        ("redis", "postgresql://u@h/db"),
        ("sqlite", "redis://h:1/0"),
        ("postgres", "sqlite:///x.db"),
        ("memory", "redis+cluster://a:1"),
    ],
)
def test_url_provider_mismatch(provider: str, url: str) -> None:
    msg = _error(provider, {"url": url})
    assert "does not match provider" in msg and url in msg and provider in msg


@pytest.mark.parametrize("url", ["mysql://h/db", "file:///x", "no-scheme", "cassandra://h:9042"])
def test_url_with_an_unknown_scheme(url: str) -> None:
    msg = _error(None, {"url": url})
    assert "unknown scheme" in msg and url in msg


@pytest.mark.parametrize(
    ("pool", "expected"),
    [
        ("host:6379", "jedisPoolConfig must be an object"),
        ({"hostname": "h"}, "unknown key jedisPoolConfig.hostname"),
        ({"port": "6379"}, "jedisPoolConfig.port must be int, got str"),
        ({"port": True}, "jedisPoolConfig.port must be int, got bool"),
        ({"timeout": 1.5}, "jedisPoolConfig.timeout must be int"),
        ({"database": None}, "jedisPoolConfig.database must be int"),
        ({"password": 1234}, "jedisPoolConfig.password must be str or NoneType"),
        ({"host": ["a"]}, "jedisPoolConfig.host must be str"),
    ],
)
def test_jedis_pool_config_errors(pool: Any, expected: str) -> None:
    assert expected in _error("redis", {"jedisPoolConfig": pool})


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [
        (["h:1"], "jedisClusterConfig must be an object"),
        ({"nodes": []}, "non-empty list of 'host:port'"),
        ({}, "non-empty list of 'host:port'"),
        ({"nodes": ["hostonly"]}, "non-empty list of 'host:port'"),
        ({"nodes": [7000]}, "non-empty list of 'host:port'"),
        ({"nodes": "h:1,h:2"}, "jedisClusterConfig.nodes must be list, got str"),
        ({"nodes": ["h:1"], "maxRedirections": "5"}, "jedisClusterConfig.maxRedirections must be int"),
        ({"nodes": ["h:1"], "timeout": False}, "jedisClusterConfig.timeout must be int, got bool"),
        ({"nodes": ["h:1"], "seeds": ["h:1"]}, "unknown key jedisClusterConfig.seeds"),
    ],
)
def test_jedis_cluster_config_errors(cluster: Any, expected: str) -> None:
    assert expected in _error("redis", {"jedisClusterConfig": cluster})


def test_postgres_needs_a_url() -> None:
    msg = _error("postgres", {"schema": "weir"})
    assert "needs a 'url'" in msg and "postgresql://" in msg


@pytest.mark.parametrize("key", ["keyClass", "valueClass", "keySerializerClass", "valueSerializerClass"])
def test_unknown_serializer_names_the_key(key: str) -> None:
    msg = _error("memory", {key: "no.such.Serializer"})
    assert key in msg and "no.such" in msg


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("no.such.module.Provider", "cannot import module"),
        ("tests.unit.test_config.Missing", "has no attribute"),
        ("tests.unit.test_config.NotAProvider", "is not a subclass of weir.state.StateProvider"),
        ("subprocess.Popen", "'subprocess.Popen' is not a subclass of weir.state.StateProvider"),
        ("tests.unit.test_config.PROVIDER_INSTANCE", "is not a subclass of weir.state.StateProvider"),
    ],
)
def test_custom_provider_errors(path: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        StateFactory.get_provider({PROVIDER_KEY: path})
    assert expected in str(info.value)
    assert not NotAProvider.created  # refused before anything was instantiated


def test_custom_provider_has_no_builtin_backend() -> None:
    from weir.state.factory import open_backend

    with pytest.raises(ConfigError, match="custom StateProvider"):
        open_backend(_parse("tests.unit.test_config.CustomProvider"))


def test_from_url_with_a_bad_url() -> None:
    with pytest.raises(ConfigError, match="unknown scheme"):
        StateFactory.from_url("ftp://h/x")
    with pytest.raises(ConfigError, match="unknown key 'bogus'"):
        StateFactory.from_url("memory://x", bogus=1)
