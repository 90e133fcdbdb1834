"""The ``redis`` provider against real servers: the session's standalone server and 3-master Redis
Cluster (tests/conftest.py), one with a password and one that is stopped under a live backend."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.security._servers import PasswordRedis
from tests.servers import RedisCluster, RedisServer, free_port
from weir.connectors.redis import COMMIT_CHUNK, INLINE_LIMIT, RedisBackend, RedisSettings, open_backend
from weir.errors import ConfigError, FencedError, StateError, StoreUnavailableError
from weir.state import StateFactory
from weir.state.config import parse_provider_config
from weir.state.kv import TransactionalKeyValueState
from weir.state.serializers import BytesSerializer, StrSerializer

pytestmark = pytest.mark.services
PASSWORD = "s3cret-pw"


@pytest.fixture(scope="module")
def standalone_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture(scope="module")
def auth_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with PasswordRedis(tmp_path_factory.mktemp("redis-auth"), extra_args=["--requirepass", PASSWORD]) as server:
        yield server.port


@pytest.fixture(scope="module")
def cluster_url(redis_cluster: RedisCluster) -> str:
    return redis_cluster.url


def _cli(port: int, *args: str) -> str:
    """``redis-cli`` output: the layout must be readable by any client."""
    return subprocess.run(
        ["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args], capture_output=True, text=True, timeout=30
    ).stdout


@pytest.fixture(params=["standalone", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_url"))


def _backend(url: str) -> RedisBackend:
    return open_backend(parse_provider_config({"topology.state.provider.config": {"url": url}}))


@pytest.fixture
def backend(url: str) -> Iterator[RedisBackend]:
    b = _backend(url)
    yield b
    b.close()


@pytest.fixture
def ns() -> str:
    return f"t-{uuid.uuid4().hex[:10]}-0"


def _kv(b: RedisBackend, ns: str, **kw: Any) -> TransactionalKeyValueState:
    return TransactionalKeyValueState(b, ns, **kw)


# ---- semantics ---------------------------------------------------------------------------------
def test_put_get_delete_read_own_writes(backend: RedisBackend, ns: str) -> None:
    s, other = _kv(backend, ns), _kv(backend, ns)
    s.put("hello", 1)
    s.put("gone", 2)
    assert s.get("hello") == 1 and other.get("hello") is None
    assert s.delete("gone") == 2 and s.get("gone", "dflt") == "dflt"
    s.prepare_commit(1)
    assert other.get("hello") is None and s.get("hello") == 1  # prepared: only the writer sees it
    s.commit(1)
    assert other.get("hello") == 1 and other.get("gone") is None
    assert backend.txids(ns).committed == 1 and backend.txids(ns).prepared is None
    assert s.get_many(["hello", "nope"], 0) == [1, 0]
    assert dict(other) == {"hello": 1} and backend.count(ns) == 1
    s.commit(1)  # idempotent


def test_prepare_commit_rollback_and_misuse(backend: RedisBackend, ns: str) -> None:
    s = _kv(backend, ns)
    s.put("a", 1)
    s.prepare_commit(5)
    s.commit(5)
    s.put("a", 2)
    s.put("b", 3)
    s.prepare_commit(6)
    assert backend.load_prepared(ns) == (6, {b'"a"': b"2", b'"b"': b"3"})
    s.rollback()
    assert backend.load_prepared(ns) is None and backend.txids(ns).prepared is None
    assert _kv(backend, ns).get("a") == 1 and s.get("b") is None
    with pytest.raises(StateError, match=rf"{ns}.*txid 5.*committed txid 5"):
        s.prepare_commit(5)
    with pytest.raises(StateError, match=rf"{ns}.*txid 9"):
        s.commit(9)
    with pytest.raises(StateError, match=rf"{ns}.*commit txid 9.*prepared txid is none"):
        backend.commit_prepared(ns, 9, None)


def test_tombstones_cannot_be_confused_with_values(backend: RedisBackend, ns: str) -> None:
    s = _kv(backend, ns, key_serializer=StrSerializer(), value_serializer=BytesSerializer())
    odd = {"empty": b"", "dash": b"-", "eq": b"=", "nul": b"\x00", "x": b"-x"}
    for k, v in odd.items():
        s.put(k, v)
    s.put("victim", b"v")
    s.prepare_commit(1)
    s.commit(1)
    s.delete("victim")
    s.put("dash", b"--")
    s.prepare_commit(2)
    txid, prepared = backend.load_prepared(ns) or (None, {})
    assert txid == 2 and prepared == {b"victim": None, b"dash": b"--"}
    s.commit(2)
    fresh = _kv(backend, ns, key_serializer=StrSerializer(), value_serializer=BytesSerializer())
    assert dict(fresh) == {**odd, "dash": b"--"}


def test_epoch_fencing(backend: RedisBackend, ns: str) -> None:
    old = backend.acquire_epoch(ns)
    new = backend.acquire_epoch(ns)
    assert new == old + 1 == backend.txids(ns).epoch
    backend.write_prepared(ns, 1, {b"k": b"1"}, new)
    large = {str(i).encode(): b"y" for i in range(20_000)}
    for write in (
        lambda: backend.write_prepared(ns, 2, {b"k": b"2"}, old),
        lambda: backend.write_prepared(ns, 2, large, old),  # staged path
        lambda: backend.commit_prepared(ns, 1, old),
        lambda: backend.discard_prepared(ns, old),
        lambda: backend.write_direct(ns, {b"k": b"3"}, old),
    ):
        with pytest.raises(FencedError, match=rf"{ns}.*epoch {old} is older than the stored epoch {new}"):
            write()
    assert backend.load_prepared(ns) == (1, {b"k": b"1"}) and backend.count(ns) == 0
    assert not _stage_keys(backend, f"*{ns}*$stage$*")  # the refused staged set was deleted
    backend.write_direct(ns, {b"d": b"1"}, new + 5)  # a newer epoch is stored
    assert backend.txids(ns).epoch == new + 5
    with pytest.raises(FencedError):
        backend.commit_prepared(ns, 1, new)
    backend.commit_prepared(ns, 1, None)  # unfenced admin write
    assert backend.get(ns, b"k") == b"1" and backend.txids(ns).committed == 1


def test_write_direct_and_namespaces_and_drop(backend: RedisBackend, ns: str) -> None:
    s = _kv(backend, ns)
    s.put("cp", {"txid": 3, "phase": "COMMITTED"})
    s.commit()  # direct save, no txid
    assert backend.txids(ns).committed is None and _kv(backend, ns).get("cp")["phase"] == "COMMITTED"
    assert ns in backend.namespaces()
    backend.drop(ns)
    assert ns not in backend.namespaces() and backend.count(ns) == 0


N = 3 * max(COMMIT_CHUNK, INLINE_LIMIT) + 1


def test_large_change_sets(backend: RedisBackend, url: str) -> None:
    """Change sets past INLINE_LIMIT and COMMIT_CHUNK: staged, committed in chunks, staging cleaned up.

    (100k keys on every store: test_scale.py; commit timings: bench/state_providers.py.)
    """
    name = f"big-{uuid.uuid4().hex[:8]}"
    s = _kv(backend, name)
    for i in range(N):
        s.put(f"word{i}", i)
    s.prepare_commit(1)
    s.commit(1)
    # check it, then delete half of it through the staged path
    assert backend.count(name) == N
    keys = [f'"word{i}"'.encode() for i in range(0, N, 13)] + [b"missing"]
    got = backend.get_many(name, keys)
    assert got[-1] is None and got[:-1] == [k[5:-1] for k in keys[:-1]]
    rows = list(backend.scan(name))
    assert len(rows) == N and len({k for k, _ in rows}) == N
    for i in range(0, N, 2):
        s.delete(f"word{i}")
    s.prepare_commit(2)
    s.commit(2)
    assert backend.count(name) == N // 2 and backend.get(name, b'"word1"') == b"1"
    backend.put_many(name, ((f"k{i}".encode(), b"1") for i in range(30_000)))
    assert backend.count(name) == N // 2 + 30_000
    backend.drop(name)
    assert not _stage_keys(backend, "*big-*$stage$*")


def _stage_keys(backend: RedisBackend, pattern: str) -> list[bytes]:
    conns = (
        [backend.client.get_redis_connection(n) for n in backend.client.get_primaries()]
        if backend.settings.cluster
        else [backend.client]
    )
    return [k for c in conns for k in c.scan_iter(match=pattern)]


def test_binary_keys_and_values(backend: RedisBackend, ns: str) -> None:
    raw = {"key_serializer": BytesSerializer(), "value_serializer": BytesSerializer()}
    s = _kv(backend, ns, **raw)
    weird = {b"\xdb\x00\xff": b"\xdb", b"": b"=", b"-": b"-", bytes(range(256)): bytes(range(255, -1, -1))}
    for k, v in weird.items():
        s.put(k, v)
    s.prepare_commit(1)
    s.commit(1)
    assert dict(_kv(backend, ns, **raw)) == weird
    s.delete(b"")
    s.commit()  # direct write with a tombstone
    assert backend.get(ns, b"") is None and backend.count(ns) == 3


# ---- layout ------------------------------------------------------------------------------------
def test_storm_layout_is_readable_by_any_client(standalone_url: str, ns: str) -> None:
    port = standalone_url.rsplit(":", 1)[1].split("/")[0]
    b = _backend(standalone_url)
    s = _kv(b, ns)
    s.put("hello", 7)
    s.prepare_commit(3)
    assert _cli(int(port), "hget", f"{ns}$prepare", '"hello"').strip() == "=7"
    s.commit(3)
    assert _cli(int(port), "hget", ns, '"hello"').strip() == "7"
    assert _cli(int(port), "hget", f"{ns}$txid", "commit").strip() == "3"
    provider = StateFactory.from_url(standalone_url, keyClass="str", valueClass="int")
    st = provider.new_state(ns + "-typed")
    st.put("hello", 9)
    st.prepare_commit(1)
    st.commit(1)
    assert _cli(int(port), "hget", ns + "-typed", "hello").strip() == "9"


def test_cluster_keys_share_one_slot(cluster_url: str, ns: str) -> None:
    b = _backend(cluster_url)
    s = _kv(b, ns)
    s.put("hello", 1)
    s.prepare_commit(1)
    s.commit(1)
    s.put("hello", 2)
    s.prepare_commit(2)
    keys = b.keys(ns)
    assert keys == (f"{{{ns}}}".encode(), f"{{{ns}}}$prepare".encode(), f"{{{ns}}}$txid".encode())
    node = b.client.get_redis_connection(b.client.get_primaries()[0])
    slots = {node.execute_command("CLUSTER KEYSLOT", k) for k in keys}
    assert len(slots) == 1
    owner = b.client.get_node_from_key(keys[0])
    conn = b.client.get_redis_connection(owner)
    assert conn.exists(*keys) == 3  # all three on the node that owns the slot
    assert b.namespaces().count(ns) == 1


# ---- connection and configuration --------------------------------------------------------------
def test_bad_password_and_missing_password(auth_port: int) -> None:
    for cfg in (
        {"jedisPoolConfig": {"host": "127.0.0.1", "port": auth_port, "password": "wrong-pw"}},
        {"url": f"redis://:wrong-pw@127.0.0.1:{auth_port}/0"},
    ):
        with pytest.raises(ConfigError, match=rf"127.0.0.1:{auth_port}.*password") as info:
            open_backend(parse_provider_config({"topology.state.provider.config": cfg}))
        assert "wrong-pw" not in str(info.value) and info.value.__cause__ is None
    with pytest.raises(ConfigError, match=rf"127.0.0.1:{auth_port}.*password"):
        _backend(f"redis://127.0.0.1:{auth_port}/0")
    ok = open_backend(
        parse_provider_config(
            {"topology.state.provider.config": {"jedisPoolConfig": {"port": auth_port, "password": PASSWORD}}}
        )
    )
    ok.write_direct("pw-ns", {b"a": b"1"}, None)
    assert ok.get("pw-ns", b"a") == b"1" and PASSWORD not in ok.describe()


def test_unreachable_server_is_a_config_error() -> None:
    port = free_port()
    for url in (f"redis://127.0.0.1:{port}/0", f"redis+cluster://127.0.0.1:{port}"):
        with pytest.raises(ConfigError, match=rf"127.0.0.1:{port}.*start the server") as info:
            _backend(url.replace("://", "://:hunter2@"))
        assert "hunter2" not in str(info.value)


def test_server_lost_at_runtime_is_a_state_error(tmp_path: Path, ns: str) -> None:
    with RedisServer(tmp_path) as server:
        where = server.url
        b = _backend(where)
        b.write_direct(ns, {b"a": b"1"}, None)
    with pytest.raises(
        StoreUnavailableError, match=rf"namespace '{ns}': commit txid 4 on the redis store {where} failed"
    ):
        b.commit_prepared(ns, 4, 1)  # after the client's retries (a short outage is ridden out): retriable


def test_mode_mismatch_is_a_config_error(standalone_url: str, cluster_url: str) -> None:
    host_port = standalone_url.removeprefix("redis://").removesuffix("/0")
    with pytest.raises(ConfigError, match="not a cluster"):
        _backend(f"redis+cluster://{host_port}")
    first = cluster_url.removeprefix("redis+cluster://").split(",")[0]
    with pytest.raises(ConfigError, match="Cluster node.*redis\\+cluster://"):
        _backend(f"redis://{first}/0")


def test_settings_parsing() -> None:
    s = RedisSettings.from_url("redis://:p%40ss@example.org:6380/3?timeout=500")
    assert (s.nodes, s.database, s.password, s.timeout_ms, s.cluster) == (
        (("example.org", 6380),), 3, "p@ss", 500, False,
    )  # fmt: skip
    assert s.describe() == "redis://example.org:6380/3"
    s = RedisSettings.from_url("rediss://user:pw@[::1]")
    assert (s.nodes, s.username, s.password, s.ssl) == ((("::1", 6379),), "user", "pw", True)
    s = RedisSettings.from_url("redis+cluster://h1:7000,h2:7001/")
    assert s.cluster and s.nodes == (("h1", 7000), ("h2", 7001))
    assert RedisSettings.from_config({}).nodes == (("localhost", 6379),)
    cluster = {"nodes": ["a:1", "b:2"], "timeout": 900, "maxRedirections": 3, "password": "x"}
    s = RedisSettings.from_config({"jedisClusterConfig": cluster})
    assert (s.cluster, s.nodes, s.timeout_ms, s.max_redirections) == (True, (("a", 1), ("b", 2)), 900, 3)
    s = RedisSettings.from_config({"jedisPoolConfig": {"host": "h", "port": 1, "database": 2, "timeout": 5}})
    assert (s.nodes, s.database, s.timeout_ms) == ((("h", 1),), 2, 5)
    for bad in (
        {"url": "redis://h:notaport/0"},
        {"url": "redis://h/notadb"},
        {"url": "redis+cluster://h:1/2"},
        {"url": "redis://a:1,b:2"},
        {"url": "redis://h?bogus=1"},
        {"url": "redis://x", "jedisPoolConfig": {"host": "h"}},
        {"jedisPoolConfig": {"port": 0}},
    ):
        with pytest.raises(ConfigError):
            RedisSettings.from_config(bad)
