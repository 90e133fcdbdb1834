"""Memcached backing maps: memcached-safe keys, readable JSON values, several servers, errors."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator

import pytest
from pymemcache.client.base import Client

from tests.servers import Memcached, free_port
from weir.connectors.memcached.client import memcached_key
from weir.errors import ConfigError
from weir.trident.backing import MemcachedMapState, close_connections
from weir.trident.state import OpaqueValue

pytestmark = pytest.mark.services


@pytest.fixture(autouse=True)
def _close() -> Iterator[None]:
    close_connections()
    yield
    close_connections()


def test_safe_keys_are_readable_and_unsafe_ones_hashed(memcached_server: Memcached) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    factory = MemcachedMapState.opaque(memcached_server.url, key_prefix=prefix)
    long_word = "x" * 300
    keys = [["man", 2], ["two words"], ["naïve"], [long_word]]
    state = factory.make_state({}, 0, 1)
    state.begin_commit(7)
    state.multi_put(keys, [1, 2, 3, 4])
    state.commit(7)
    raw = Client(memcached_server.address)
    try:
        assert json.loads(raw.get(f'{prefix}["man",2]')) == [7, 1, None]
        for key, val in ((["two words"], 2), (["naïve"], 3), ([long_word], 4)):
            text = json.dumps(key, ensure_ascii=False, separators=(",", ":"))
            hashed = prefix + "#" + hashlib.sha1(text.encode()).hexdigest()
            assert memcached_key(prefix, text) == hashed
            assert json.loads(raw.get(hashed)) == [7, val, None]
    finally:
        raw.close()
    assert factory.make_state({}, 0, 1).multi_get(keys) == [1, 2, 3, 4]


def test_several_servers_share_the_keys(memcached_server: Memcached) -> None:
    with Memcached() as second:
        prefix = f"t{uuid.uuid4().hex[:8]}:"
        url = f"memcached://127.0.0.1:{memcached_server.port},127.0.0.1:{second.port}"
        factory = MemcachedMapState.opaque(url, key_prefix=prefix)
        assert factory.store.servers == (memcached_server.address, second.address)
        keys = [(f"w{i}",) for i in range(100)]
        cells = [OpaqueValue(1, i, None) for i in range(100)]
        factory.backing_map().multi_put(keys, cells)
        assert factory.backing_map().multi_get(keys) == cells
        counts = []
        for server in (memcached_server, second):
            raw = Client(server.address)
            counts.append(len(raw.get_many([f'{prefix}["w{i}"]' for i in range(100)])))
            raw.close()
        assert sum(counts) == 100 and min(counts) > 0
        close_connections()


@pytest.mark.parametrize(
    ("servers", "match"),
    [
        ("redis://127.0.0.1:1", r"memcached://host:port"),
        ("127.0.0.1:notaport", r"'127.0.0.1:notaport' is not 'host:port'"),
        ([("127.0.0.1", "1")], r"give the servers as"),
        ("", r"give the servers as"),
    ],
)
def test_bad_servers_raise_config_error(servers: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        MemcachedMapState.opaque(servers)


def test_bad_options_raise_config_error(memcached_server: Memcached) -> None:
    with pytest.raises(ConfigError, match=r"key_prefix 'word counts' must be"):
        MemcachedMapState.opaque(memcached_server.url, key_prefix="word counts")
    with pytest.raises(ConfigError, match=r"expire must be a non-negative int"):
        MemcachedMapState.opaque(memcached_server.url, expire=-1)


def test_unreachable_server_raises_config_error_naming_it(memcached_server: Memcached) -> None:
    port = free_port()
    with pytest.raises(ConfigError, match=rf"cannot use memcached at 127.0.0.1:{port}.*key prefix 'wc:'"):
        MemcachedMapState.transactional([memcached_server.address, ("127.0.0.1", port)], key_prefix="wc:", timeout=1)


def test_failure_of_a_running_server_is_a_state_error_then_reconnects() -> None:
    from weir.errors import StateError

    with Memcached() as server:
        factory = MemcachedMapState.non_transactional(server.url, key_prefix="crash:", timeout=1)
        backing = factory.backing_map()
        backing.multi_put([("a",)], [1])
        server.kill()
        with pytest.raises(StateError, match=rf"memcached://127.0.0.1:{server.port} key prefix 'crash:'"):
            backing.multi_get([("a",)])
        server.start()
        assert backing.multi_get([("a",)]) == [None]  # memcached keeps nothing across a restart
        backing.multi_put([("a",)], [2])
        assert backing.multi_get([("a",)]) == [2]
        close_connections()
