"""Redis backing maps: JSON any client can read, slot-aware cluster writes, errors."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from tests.servers import RedisCluster, RedisServer, free_port, redis_command
from weir.connectors.redis.client import RedisSettings
from weir.errors import ConfigError, StoreUnavailableError
from weir.trident.backing import RedisMapState, close_connections
from weir.trident.state import OpaqueValue, TransactionalValue

pytestmark = pytest.mark.services


@pytest.fixture(autouse=True)
def _close() -> Iterator[None]:
    close_connections()
    yield
    close_connections()


def _prefix() -> str:
    return f"t{uuid.uuid4().hex[:8]}:"


def test_values_are_json_strings_under_prefix_and_json_key(redis_server: RedisServer) -> None:
    prefix = _prefix()
    factory = RedisMapState.opaque(redis_server.url, key_prefix=prefix)
    state = factory.make_state({}, 0, 1)
    state.begin_commit(3)
    state.multi_put([["man", 2], ["naïve"]], [5, {"a": [1]}])
    state.commit(3)
    raw = redis_command(redis_server.port, "GET", f'{prefix}["man",2]')
    assert json.loads(raw) == [3, 5, None]
    raw = redis_command(redis_server.port, "GET", f'{prefix}["naïve"]'.encode())
    assert json.loads(raw.decode()) == [3, {"a": [1]}, None]


def test_standalone_settings_from_storm_config(redis_server: RedisServer) -> None:
    import redis

    conf = {"jedisPoolConfig": {"host": "127.0.0.1", "port": redis_server.port, "database": 2}}
    prefix = _prefix()
    factory = RedisMapState.transactional(conf, key_prefix=prefix)
    backing = factory.backing_map()
    backing.multi_put([("a",)], [TransactionalValue(1, 2)])
    assert backing.multi_get([("a",)]) == [TransactionalValue(1, 2)]
    with redis.Redis(host="127.0.0.1", port=redis_server.port, db=2) as plain:
        assert plain.get(f'{prefix}["a"]') == b"[1,2]"
    assert redis_command(redis_server.port, "GET", f'{prefix}["a"]') is None  # not in database 0
    assert RedisMapState.store(conf).settings == RedisSettings(nodes=(("127.0.0.1", redis_server.port),), database=2)


def _keys_per_node(cluster: RedisCluster, prefix: str) -> list[int]:
    return [len(redis_command(port, "KEYS", f"{prefix}*")) for port in cluster.ports]


def test_cluster_keys_spread_over_slots_and_round_trip(redis_cluster: RedisCluster) -> None:
    prefix = _prefix()
    factory = RedisMapState.opaque(redis_cluster.url, key_prefix=prefix)
    assert not factory.store.single_slot
    keys = [(f"w{i}", i) for i in range(300)]
    cells = [OpaqueValue(1, i, None) for i in range(300)]
    factory.backing_map().multi_put(keys, cells)
    spread = _keys_per_node(redis_cluster, prefix)
    assert sum(spread) == 300 and sum(1 for n in spread if n) >= 2
    assert factory.backing_map().multi_get(list(reversed(keys))) == list(reversed(cells))


def test_cluster_hash_tag_prefix_keeps_the_map_in_one_slot(redis_cluster: RedisCluster) -> None:
    tag = uuid.uuid4().hex[:6]
    factory = RedisMapState.opaque(redis_cluster.url, key_prefix=f"{{{tag}}}:wc:")
    assert factory.store.single_slot
    keys = [(f"w{i}",) for i in range(200)]
    factory.backing_map().multi_put(keys, [OpaqueValue(1, i, None) for i in range(200)])
    spread = _keys_per_node(redis_cluster, f"{{{tag}}}:wc:")
    assert sorted(spread) == [0, 0, 200]
    assert factory.backing_map().multi_get(keys[:3]) == [OpaqueValue(1, i, None) for i in range(3)]


@pytest.mark.parametrize(
    ("prefix", "single"), [("{a}:", True), ("x{a}", True), ("{}a", False), ("a}{b}", True), ("{a", False)]
)
def test_single_slot_follows_redis_hash_tag_rule(prefix: str, single: bool) -> None:
    store = RedisMapState.store("redis+cluster://127.0.0.1:7000", key_prefix=prefix)
    assert store.single_slot is single


def test_bad_urls_and_options_raise_config_error() -> None:
    with pytest.raises(ConfigError, match=r"RedisMapState: redis provider: cannot read url 'http://h:1'"):
        RedisMapState.opaque("http://h:1")
    with pytest.raises(ConfigError, match=r"database 'x' is not a number"):
        RedisMapState.opaque("redis://127.0.0.1:1/x")
    with pytest.raises(ConfigError, match=r"key_prefix must be a non-empty string"):
        RedisMapState.opaque("redis://127.0.0.1:1/0", key_prefix="")
    with pytest.raises(ConfigError, match=r"give a redis://"):
        RedisMapState.opaque(42)


def test_unreachable_server_raises_config_error_naming_it() -> None:
    port = free_port()
    with pytest.raises(ConfigError, match=rf"key prefix 'wc:'.*cannot use Redis at redis://127.0.0.1:{port}/0"):
        RedisMapState.opaque(f"redis://127.0.0.1:{port}/0", key_prefix="wc:")
    # without the check the factory is made, and the first operation (while the topology runs) names
    # the same server as unavailable: retriable, not a configuration error
    factory = RedisMapState.opaque(f"redis://127.0.0.1:{port}/0?timeout=200", key_prefix="wc:", check=False)
    state = factory.make_state({}, 0, 1)
    with pytest.raises(StoreUnavailableError, match=rf"127.0.0.1:{port}"):
        state.multi_get([["a"]])


def test_mode_mismatch_raises_config_error(redis_server: RedisServer, redis_cluster: RedisCluster) -> None:
    with pytest.raises(ConfigError, match=r"Redis Cluster node"):
        RedisMapState.opaque(f"redis://127.0.0.1:{redis_cluster.ports[0]}/0")
    with pytest.raises(ConfigError, match=r"redis\+cluster://"):
        RedisMapState.opaque(f"redis+cluster://127.0.0.1:{redis_server.port}")


def test_a_restarted_server_is_reconnected_to() -> None:
    with RedisServer(appendonly=True) as server:
        backing = RedisMapState.opaque(server.url, key_prefix="r:").backing_map()
        backing.multi_put([("a",)], [OpaqueValue(1, 2, None)])
        server.kill_and_restart()
        assert backing.multi_get([("a",)]) == [OpaqueValue(1, 2, None)]
        close_connections()
