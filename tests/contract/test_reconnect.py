"""The store goes away underneath a cached backend (server SIGKILL + restart, connections killed):
the same provider object carries on, and committed and prepared data are intact."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.contract._support import committed, new_ns, provider_of, txids
from tests.servers import PostgresDatabase, RedisServer

pytestmark = pytest.mark.services


@pytest.fixture
def durable_redis() -> Iterator[RedisServer]:
    """A Redis with an fsync-always AOF, so data survives SIGKILL of the server."""
    from weir.state.factory import close_backends

    with RedisServer(appendonly=True) as server:
        yield server
        close_backends()


def test_redis_server_sigkill_and_restart(durable_redis: RedisServer) -> None:
    provider = provider_of(durable_redis.url)
    ns = new_ns("restart")
    state = provider.new_state(ns)
    state.put("a", 1)
    state.prepare_commit(1)
    state.commit(1)
    state.put("b", 2)
    state.prepare_commit(2)
    durable_redis.kill_and_restart()
    assert provider.new_state(ns).get("a") == 1
    rec = provider.backend.txids(ns)
    assert (rec.committed, rec.prepared) == (1, 2)
    state.commit(2)
    durable_redis.kill_and_restart()
    state.put("c", 3)
    state.prepare_commit(3)
    state.commit(3)
    assert committed(provider, ns) == {"a": 1, "b": 2, "c": 3}


@pytest.mark.parametrize("provider_url", ["postgres"], indirect=True)
def test_postgres_connections_terminated(provider_url: str, postgres_database: PostgresDatabase) -> None:
    provider = provider_of(provider_url)
    ns = new_ns("restart")
    state = provider.new_state(ns)
    state.put("a", 1)
    state.prepare_commit(1)
    state.commit(1)
    state.put("b", 2)
    state.prepare_commit(2)
    assert postgres_database.terminate_connections() >= 1
    assert provider.new_state(ns).get("a") == 1
    state.commit(2)
    postgres_database.terminate_connections()
    state.put("c", 3)
    state.prepare_commit(3)
    postgres_database.terminate_connections()
    state.commit(3)
    assert committed(provider, ns) == {"a": 1, "b": 2, "c": 3}
    rec = txids(provider, ns)
    assert (rec.committed, rec.prepared) == (3, None)
