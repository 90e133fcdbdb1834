"""The connector registry: every package under weir.connectors registers one descriptor, and the
lower layers find stores, schemes, Storm class names, catalogs and legacy names only through it."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import weir.connectors
from weir.errors import ConfigError
from weir.state import StateFactory, registry
from weir.state.config import parse_provider_config, provider_from_url, short_names
from weir.state.factory import open_backend
from weir.state.memory import MemoryBackend


def test_every_connector_package_registers_one_descriptor() -> None:
    packages = sorted(m.name for m in pkgutil.iter_modules(weir.connectors.__path__) if m.ispkg)
    assert packages == ["hbase", "kafka", "memcached", "nats", "postgres", "rabbitmq", "redis", "sqlite"]
    for name in packages:
        module = importlib.import_module(f"weir.connectors.{name}")
        assert registry.connector(name) is module.CONNECTOR, f"weir.connectors.{name} did not register"
    assert [c.name for c in registry.connectors()] == sorted([*packages, "memory"])


def test_providers_schemes_aliases_and_storm_classes_come_from_the_descriptors() -> None:
    assert short_names() == ("hbase", "memory", "postgres", "redis", "sqlite")
    assert {s: provider_from_url(f"{s}://x/y") for s in ("rediss", "redis+cluster", "postgresql", "memory")} == {
        "rediss": "redis",
        "redis+cluster": "redis",
        "postgresql": "postgres",
        "memory": "memory",
    }
    assert registry.storm_providers()["org.apache.storm.redis.state.RedisClusterKeyValueStateProvider"] == "redis"
    pg = parse_provider_config(
        {"topology.state.provider": "pg", "topology.state.provider.config": {"url": "postgresql://u@h/db"}}
    )
    assert pg.provider == "postgres"
    cluster = {"jedisClusterConfig": {"nodes": ["127.0.0.1:7000"]}}
    assert parse_provider_config({"topology.state.provider.config": cluster}).provider == "redis"


def test_a_system_without_a_storm_backend_is_not_a_provider() -> None:
    with pytest.raises(ConfigError, match="unknown scheme 'memcached'"):
        provider_from_url("memcached://127.0.0.1:11211")
    with pytest.raises(ConfigError, match="unknown provider 'kafka'"):
        parse_provider_config({"topology.state.provider": "kafka"})


def test_a_new_store_is_one_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    """A descriptor registered at run time is a provider like the built-in ones (no edit elsewhere)."""
    registry.connectors()  # discover the built-in ones first
    desc = registry.Connector(
        name="scratch",
        url_schemes=("scratch",),
        url_example="scratch://NAME",
        option_keys=frozenset({"name"}),
        open_backend=lambda cfg: MemoryBackend.shared("scratch-" + cfg.url.split("://", 1)[1]),
    )
    monkeypatch.setitem(registry._REGISTRY, "scratch", desc)
    provider = StateFactory.from_url("scratch://t1")
    state = provider.new_state("ns")
    state.put("k", 1)
    state.prepare_commit(1)
    state.commit(1)
    backend = open_backend(parse_provider_config({"topology.state.provider.config": {"url": "scratch://t1"}}))
    assert backend is MemoryBackend.shared("scratch-t1") and backend.txids("ns").committed == 1


def test_a_second_claim_of_a_scheme_is_refused() -> None:
    registry.connectors()
    clash = registry.Connector(name="other", url_schemes=("rediss",))
    with pytest.raises(ConfigError, match=r"connector 'other' claims rediss, already claimed by connector 'redis'"):
        registry.register(clash)
    assert registry.connector("other") is None


@pytest.mark.parametrize(
    ("package", "name", "module"),
    [
        ("weir.sources", "KafkaSpout", "weir.connectors.kafka.spout"),
        ("weir.sources", "NatsSpout", "weir.connectors.nats.spout"),
        ("weir.sources", "RedisStreamSpout", "weir.connectors.redis.spout"),
        ("weir.sinks", "KafkaBolt", "weir.connectors.kafka.sink"),
        ("weir.trident.backing", "SqliteMapState", "weir.connectors.sqlite.maps"),
        ("weir.trident.backing", "HBaseMapStore", "weir.connectors.hbase.maps"),
        ("weir.trident.backing", "MemcachedBackingMap", "weir.connectors.memcached.maps"),
    ],
)
def test_the_public_import_paths_still_work(package: str, name: str, module: str) -> None:
    obj = getattr(importlib.import_module(package), name)
    assert obj is getattr(importlib.import_module(module), name)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'Nope'"):
        getattr(importlib.import_module(package), "Nope")


def test_catalogs_come_from_the_descriptors(tmp_path: object) -> None:
    from weir.trident.backing.catalog import catalog_for

    backend = open_backend(
        parse_provider_config({"topology.state.provider.config": {"url": f"sqlite:///{tmp_path}/c.db"}})
    )
    assert type(catalog_for(backend)).__name__ == "SqliteMapCatalog"
    assert catalog_for(MemoryBackend()) is None
