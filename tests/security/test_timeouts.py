"""Bounded, named failures: a frozen PostgreSQL, a slow statement, a lost server, a re-sent Redis script."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.security._proxy import PausableProxy
from tests.servers import PostgresDatabase, RedisServer
from weir.connectors.postgres import PostgresBackend, PostgresOptions
from weir.connectors.redis import RedisBackend, RedisSettings
from weir.errors import ConfigError, StateError, StoreUnavailableError
from weir.state.config import parse_provider_config


def _pg_port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


@pytest.fixture
def frozen_pg(postgres_database: PostgresDatabase) -> Iterator[tuple[PausableProxy, str]]:
    """A proxy in front of the test PostgreSQL, and the url through it (with a password to hide)."""
    url = postgres_database.url
    port = _pg_port(url)
    with PausableProxy(port) as proxy:
        host_part = url.split("@", 1)[1]
        user = url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[0]
        proxied = f"postgresql://{user}:Sup3rSecretPw@127.0.0.1:{proxy.port}/" + host_part.split("/", 1)[1]
        yield proxy, proxied


def test_frozen_postgres_fails_the_write_within_socket_timeout(frozen_pg: tuple[PausableProxy, str]) -> None:
    proxy, url = frozen_pg
    backend = PostgresBackend.open(PostgresOptions(url, socket_timeout=1.5, statement_timeout=1.0))
    try:
        backend.write_prepared("frozen-ns", 1, {b"k": b"v"}, epoch=None)
        proxy.pause()
        started = time.monotonic()
        with pytest.raises(StateError) as info:
            backend.commit_prepared("frozen-ns", 1, epoch=None)
        waited = time.monotonic() - started
        text = str(info.value)
        assert "socketTimeout=1.5" in text, text
        assert "'frozen-ns'" in text and "commit txid 1" in text and "postgres store" in text
        assert "Sup3rSecretPw" not in text and "***" in text
        assert waited < 30, waited  # bounded (generous: the machine may be loaded)
        # a read waits no longer either
        with pytest.raises(StateError, match="read the txid record"):
            backend.txids("frozen-ns")
        proxy.resume()
        # the server answers again: a new connection, and the prepared set is still there to commit
        backend.commit_prepared("frozen-ns", 1, epoch=None)
        assert backend.get("frozen-ns", b"k") == b"v"
        assert backend.txids("frozen-ns").committed == 1
    finally:
        proxy.resume()
        backend.close()


def test_statement_timeout_is_a_named_state_error(postgres_database: PostgresDatabase) -> None:
    backend = PostgresBackend.open(PostgresOptions(postgres_database.url, statement_timeout=0.3))
    try:
        with pytest.raises(StateError) as info:
            backend._read("slow-ns", lambda c: c.execute("SELECT pg_sleep(3)").fetchone(), "sleep")
        text = str(info.value)
        assert "statementTimeout=0.3" in text and "'slow-ns'" in text and "sleep" in text
        assert "canceling statement" in text
    finally:
        backend.close()


def test_postgres_outage_is_a_state_error_not_psycopg(postgres_database: PostgresDatabase) -> None:
    """A server that went away mid-run: StateError naming store, namespace and operation."""
    with PausableProxy(_pg_port(postgres_database.url)) as proxy:
        tail = postgres_database.url.split("@", 1)[1].split("/", 1)[1]
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}/{tail}"
        backend = PostgresBackend.open(PostgresOptions(url, connect_timeout=2))
        backend.txids("gone-ns")
        proxy.close()  # every connection dropped, nothing listens any more
        with pytest.raises(StateError) as info:
            backend.write_direct("gone-ns", {b"a": b"1"}, None)
        assert type(info.value) is StoreUnavailableError  # a StateError that supervision retries
        assert "'gone-ns'" in str(info.value) and "write 1 changes" in str(info.value)
        backend.close()


def test_timeouts_are_validated_at_submit_time() -> None:
    for key, value in (("statementTimeout", -1), ("socketTimeout", "10"), ("statementTimeout", True)):
        cfg = parse_provider_config(
            {
                "topology.state.provider": "postgres",
                "topology.state.provider.config": {"url": "postgresql://u@h/db", key: value},
            }
        )
        with pytest.raises(ConfigError, match=key):
            PostgresOptions.from_config(cfg)
    opts = PostgresOptions("postgresql://u@h/db", statement_timeout=10)
    assert opts.socket_timeout == 70


# ---- Redis: chunked commits, a re-sent script --------------------------------------------------
def test_redis_commit_resent_after_it_applied_is_recognized(redis_server: RedisServer) -> None:
    backend = RedisBackend(RedisSettings.from_url(redis_server.url))
    ns = "resend-ns"
    backend.drop(ns)
    backend.write_prepared(ns, 5, {b"a": b"1", b"b": None}, epoch=None)
    backend.commit_prepared(ns, 5, epoch=None)
    # the client re-sends the same script (its reply was lost to a socket timeout): a no-op, not an error
    backend.commit_prepared(ns, 5, epoch=None)
    assert backend.txids(ns).committed == 5
    assert backend.get(ns, b"a") == b"1"
    # a commit of a txid that was never prepared is still refused
    with pytest.raises(StateError, match="not prepared"):
        backend.commit_prepared(ns, 6, epoch=None)
    backend.drop(ns)


def test_redis_chunked_commit_interrupted_between_chunks_is_finished_by_a_new_commit(
    redis_server: RedisServer,
) -> None:
    """A driver dying after some chunks of a large commit: the next commit (recovery) completes it."""
    from weir.connectors.redis.kv import _S_COMMIT

    backend = RedisBackend(RedisSettings.from_url(redis_server.url))
    backend.commit_chunk = 100
    ns = "chunked-ns"
    backend.drop(ns)
    backend.write_direct(ns, {b"gone-%d" % i: b"x" for i in range(50)}, None)
    # more entries than a listpack-encoded hash holds, so HSCAN returns chunks of about 100
    changes: dict[bytes, bytes | None] = {b"k%04d" % i: b"%d" % i for i in range(1150)}
    changes.update({b"gone-%d" % i: None for i in range(50)})
    backend.write_prepared(ns, 3, changes, epoch=2)
    # two chunks applied, then the driver "dies"
    for _ in range(2):
        assert _S_COMMIT(backend.client, backend.keys(ns), ["2", "3", 100]) == 2
    assert backend.txids(ns).committed is None and backend.txids(ns).prepared == 3
    left = backend.load_prepared(ns)
    assert left is not None and 0 < len(left[1]) < len(changes) - 150
    # recovery rolls the COMMITTING transaction forward
    backend.commit_prepared(ns, 3, epoch=2)
    assert backend.txids(ns).committed == 3 and backend.load_prepared(ns) is None
    assert dict(backend.scan(ns)) == {k: v for k, v in changes.items() if v is not None}
    # a fenced driver cannot continue someone else's commit
    backend.write_prepared(ns, 4, {b"k0000": b"new"}, epoch=5)
    with pytest.raises(StateError, match="epoch"):
        backend.commit_prepared(ns, 4, epoch=2)
    backend.drop(ns)


# ---- Trident's PostgreSQL map state: the same bounds --------------------------------------------
def test_frozen_postgres_fails_a_trident_map_state_within_socket_timeout(
    frozen_pg: tuple[PausableProxy, str],
) -> None:
    from weir.trident.backing import PostgresMapState, close_connections
    from weir.trident.state import OpaqueValue, StateType

    proxy, url = frozen_pg
    store = PostgresMapState.store(
        url, "frozen_counts", {"word": "TEXT"}, "BIGINT", connect_timeout=2, statement_timeout=1.0, socket_timeout=1.5
    )
    bmap = store.backing_map(StateType.OPAQUE)
    try:
        bmap.multi_put([("a",)], [OpaqueValue(1, 5, None)])
        proxy.pause()
        started = time.monotonic()
        with pytest.raises(StateError) as info:
            bmap.multi_put([("a",)], [OpaqueValue(2, 6, 5)])
        waited = time.monotonic() - started
        text = str(info.value)
        assert "socket_timeout=1.5" in text and "multi_put of 1 keys" in text, text
        assert "frozen_counts" in text
        assert "Sup3rSecretPw" not in text and "***" in text
        assert waited < 30, waited  # bounded (generous: the machine may be loaded)
        with pytest.raises(StateError, match="multi_get of 1 keys"):
            bmap.multi_get([("a",)])
        proxy.resume()
        # the server answers again: a new connection; the frozen write never applied
        assert bmap.multi_get([("a",)]) == [OpaqueValue(1, 5, None)]
        bmap.multi_put([("a",)], [OpaqueValue(2, 6, 5)])
        assert bmap.multi_get([("a",)]) == [OpaqueValue(2, 6, 5)]
    finally:
        proxy.resume()
        store.run(lambda c: c.execute("DROP TABLE IF EXISTS frozen_counts"), what="drop", in_transaction=False)
        close_connections()


def test_statement_timeout_of_a_trident_map_state_is_a_named_state_error(
    postgres_database: PostgresDatabase,
) -> None:
    from weir.trident.backing import PostgresMapState, close_connections

    store = PostgresMapState.store(postgres_database.url, "slow_counts", {"word": "TEXT"}, statement_timeout=0.3)
    try:
        with pytest.raises(StateError) as info:
            store.run(lambda c: c.execute("SELECT pg_sleep(3)").fetchone(), what="sleep", in_transaction=False)
        text = str(info.value)
        assert "statement_timeout=0.3" in text and "sleep" in text and "canceling statement" in text
        with pytest.raises(ConfigError, match="socket_timeout"):
            PostgresMapState.store(postgres_database.url, "t", {"word": "TEXT"}, socket_timeout=-1)
        store10 = PostgresMapState.store(postgres_database.url, "t", {"w": "TEXT"}, statement_timeout=10)
        assert store10.socket_timeout == 70
    finally:
        close_connections()
