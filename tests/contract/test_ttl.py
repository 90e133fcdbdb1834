"""State TTL: ``put(key, value, ttl=...)`` and ``weir.state.ttl.ms`` on every key-value store.

Time is driven by the test (``set_batch_time``), never by sleeping. A key is live while its expiry is
after the batch time; from the first batch at or past it, it is invisible, and that batch's commit
deletes it (and its index rows) from the store.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from tests.contract._support import committed, new_ns, provider_of, provider_params
from weir.errors import ConfigError
from weir.state import ttl as T
from weir.state.factory import open_backend
from weir.state.spi import KeyValueStateProvider, TransactionalKeyValueState

TTL_STORES = pytest.mark.parametrize(
    "provider_url", provider_params(("memory", "sqlite", "redis", "postgres", "hbase")), indirect=True
)


def batch(provider: KeyValueStateProvider, ns: str, now: int, conf: dict[str, Any] | None = None) -> Any:
    """A state instance of one batch at time ``now`` (the runtime makes one per task per batch).

    The topology's coordinator record carries the batch time, as the coordinator stores it with
    ``PREPARING``: readers outside the batch (``committed``) decide expiry at that time too.
    """
    topology = ns.split("-")[0]
    record = json.dumps({"txid": 0, "phase": "COMMITTED", "batch_ms": now, "batch_txid": 0}).encode()
    open_backend(provider.config).write_direct(f"$checkpointspout-{topology}", {b"__state": record}, None)
    state = provider.new_state(ns, conf or {})
    state.set_batch_time(now)
    return state


def raw_rows(provider: KeyValueStateProvider, ns: str) -> dict[bytes, bytes]:
    """Every committed row of ``ns`` as stored (reserved TTL rows included)."""
    backend = open_backend(provider.config, fresh=True)
    try:
        return {bytes(k): bytes(v) for k, v in backend.scan(ns)}
    finally:
        backend.close()


def user_keys(rows: dict[bytes, bytes]) -> set[bytes]:
    return {k for k in rows if not T.is_reserved(k)}


@TTL_STORES
def test_a_key_expires_at_its_batch_time_and_the_commit_deletes_it(provider_url: str) -> None:
    provider, ns = provider_of(provider_url), new_ns("ttl")
    s = batch(provider, ns, 10_000)
    s.put("short", 1, ttl=1500)  # expires at 11_500
    s.put("long", 2, ttl=dt.timedelta(seconds=10))  # 20_000
    s.put("forever", 3)
    assert s.get("short") == 1
    s.prepare_commit(1)
    s.commit(1)
    assert committed(provider, ns) == {"short": 1, "long": 2, "forever": 3}

    s = batch(provider, ns, 11_499)  # just before: still there
    assert s.get("short") == 1
    s.prepare_commit(2)
    s.commit(2)

    s = batch(provider, ns, 11_500)  # at the expiry: gone for every read
    assert s.get("short") is None
    assert s.get("short", "d") == "d"
    assert s.get_many(["short", "long"]) == [None, 2]
    assert dict(s) == {"long": 2, "forever": 3}
    assert s.delete("short") is None
    s.prepare_commit(3)
    s.commit(3)
    rows = raw_rows(provider, ns)
    assert {T.expiry_of(rows[k]) for k in user_keys(rows)} == {20_000, None}
    assert committed(provider, ns) == {"long": 2, "forever": 3}

    s = batch(provider, ns, 25_000)  # long expires; only the permanent key and the cursor remain
    s.prepare_commit(4)
    s.commit(4)
    rows = raw_rows(provider, ns)
    assert user_keys(rows) == {s.key_serializer.serialize("forever")}
    assert set(rows) - user_keys(rows) == {T.CURSOR_KEY}


@TTL_STORES
def test_component_default_ttl_overwrites_and_rollbacks(provider_url: str) -> None:
    provider, ns = provider_of(provider_url), new_ns("ttl")
    conf = {T.TTL_CONF_KEY: 1000}
    s = batch(provider, ns, 0, conf)
    s.put("a", "x")  # default: expires at 1000
    s.put("b", "y")
    s.put("c", "z", ttl=5000)  # an explicit TTL wins
    s.prepare_commit(1)
    s.commit(1)

    s = batch(provider, ns, 900, conf)
    s.put("b", "y2")  # re-written: expires at 1900
    s.prepare_commit(2)
    s.commit(2)

    plain = batch(provider, ns, 950)  # no default TTL: a put makes the key permanent again
    plain.put("c", "permanent")
    plain.prepare_commit(3)
    plain.commit(3)

    s = batch(provider, ns, 1000, conf)
    assert dict(s) == {"b": "y2", "c": "permanent"}
    s.prepare_commit(4)
    s.rollback()  # the sweep was part of the rolled-back change set: the store still has "a"...
    assert s.get("a") is None  # ...but no reader sees it
    s = batch(provider, ns, 1000, conf)
    s.prepare_commit(4)
    s.commit(4)
    assert committed(provider, ns) == {"b": "y2", "c": "permanent"}

    s = batch(provider, ns, 6000, conf)
    s.prepare_commit(5)
    s.commit(5)
    assert committed(provider, ns) == {"c": "permanent"}


@TTL_STORES
def test_a_namespace_without_its_index_is_reindexed_by_one_scan(provider_url: str) -> None:
    """Keys moved in by a rescale, a load or a migration come without index rows."""
    provider, ns = provider_of(provider_url), new_ns("ttl")
    s = batch(provider, ns, 0)
    for i in range(20):
        s.put(f"k{i}", i, ttl=100 * (i + 1))
    s.prepare_commit(1)
    s.commit(1)
    backend = open_backend(provider.config)
    backend.write_direct(ns, {k: None for k in raw_rows(provider, ns) if T.is_reserved(k)}, None)
    assert not [k for k in raw_rows(provider, ns) if T.is_reserved(k)]

    s = batch(provider, ns, 1000)  # k0..k9 expired
    s.prepare_commit(2)
    s.commit(2)
    assert committed(provider, ns) == {f"k{i}": i for i in range(10, 20)}
    s = batch(provider, ns, 1500)
    s.prepare_commit(3)
    s.commit(3)
    assert committed(provider, ns) == {f"k{i}": i for i in range(15, 20)}


@TTL_STORES
def test_far_behind_cursor_and_a_state_that_never_used_ttl(provider_url: str) -> None:
    provider, ns = provider_of(provider_url), new_ns("ttl")
    s = batch(provider, ns, 0)
    s.put("plain", 1)
    s.prepare_commit(1)
    s.commit(1)
    assert set(raw_rows(provider, ns)) == {s.key_serializer.serialize("plain")}  # no TTL rows at all

    s = batch(provider, ns, 0)
    s.put("soon", 1, ttl=10)
    s.prepare_commit(2)
    s.commit(2)
    days = 3 * 24 * 3600 * 1000  # the topology was stopped for days: thousands of empty buckets
    s = batch(provider, ns, days)
    assert dict(s) == {"plain": 1}
    s.prepare_commit(3)
    s.commit(3)
    assert committed(provider, ns) == {"plain": 1}
    assert T.decode_cursor(raw_rows(provider, ns)[T.CURSOR_KEY]) == days // T.BUCKET_MS - 1


def test_bad_ttls_are_named() -> None:
    with pytest.raises(ConfigError, match="positive"):
        T.ttl_ms_of(0, "x")
    with pytest.raises(ConfigError, match=r"component 'c'.*milliseconds"):
        T.ttl_ms_of(1.5, "component 'c'")
    state = TransactionalKeyValueState(open_backend(provider_of("memory://ttl-bad").config), "t-c-0")
    with pytest.raises(ConfigError, match=r"namespace 't-c-0', key 'k'"):
        state.put("k", 1, ttl=-5)
