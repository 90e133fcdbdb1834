"""The TTL sweep of Trident map states and the readers that hide expired cells (SQLite, Redis, PostgreSQL).

The commit of txid *n* deletes the cells whose stored txid is at or below *n*'s cutoff
(``weir.state.ttl.ms``), found by txid without a scan, each delete conditional on the cell's txid at
that moment: a rewritten cell survives, a replayed commit deletes nothing new, and at most
``weir.state.ttl.sweep.max`` cells go per commit (later commits finish). Readers outside a batch hide
the cells expired at the topology's last committed txid. No Spark here; the word count on Spark is in
``tests/trident/test_ttl.py`` and the SIGKILL chain in ``tests/crash/test_tick_lifetime_ttl_crash.py``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from typing import Any

import pytest

from tests.cli._support import run
from tests.contract._support import provider_of, provider_params
from tests.contract.test_trident_ttl import KINDS, _batch, _store
from weir.checkpoint.coordinator import CheckpointPhase, CheckPointState, CheckpointStore
from weir.errors import ConfigError
from weir.runtime.spark.trident.ttl import TtlSweep, record_batch_time
from weir.state.factory import open_backend
from weir.trident.backing.expiry import reader_cutoff

STORES = pytest.mark.parametrize("provider_url", provider_params(("sqlite", "redis", "postgres")), indirect=True)


def _indexed(factory: Any) -> Any:
    """The factory as a run with a TTL uses it (Redis: the sweep's index kept with every write)."""
    return replace(factory, store=factory.store.with_expiry_index())


@STORES
@pytest.mark.parametrize("kind", KINDS)
def test_the_sweep_deletes_exactly_the_expired_cells_and_again_nothing(provider_url: str, kind: str) -> None:
    store = _store(provider_url)
    factory = _indexed(store.factory(kind, "sweep"))
    _batch(factory, 1, None, {"a": 1, "b": 1, "c": 1})
    _batch(factory, 2, None, {"d": 1})
    _batch(factory, 3, 1, {"b": 1})  # txid 3 sees a, b, c expired (cutoff 1) and rewrites b
    st, s = factory.state_type, factory.store
    s.prepare_expiry(st)
    assert s.delete_expired(st, 1, 100, txid=3) == (2, False)
    assert store.read_all("sweep") == {("b",): 1, ("d",): 1}  # a and c gone; b (txid 3) and d (2) stay
    assert s.delete_expired(st, 1, 100, txid=3) == (0, False)  # the commit again: nothing more
    assert store.read_all("sweep") == {("b",): 1, ("d",): 1}


def _log(prov: Any, backend: Any, topo: str, epoch: int, txid: int, ms: int, maps: dict[str, str]) -> int | None:
    """Record txid's time as the coordinator and the driver do; the state's cutoff."""
    rec = CheckPointState(txid=txid, phase=CheckpointPhase.PREPARING, batch_txid=txid, batch_ms=ms)
    CheckpointStore(backend, topo).save(rec, epoch)
    return record_batch_time(prov, f"$checkpointspout-{topo}", topo, txid, epoch, {"counts": 1000}, maps)["counts"]


def _committed(backend: Any, topo: str, epoch: int, txid: int, ms: int) -> None:
    rec = CheckPointState(txid=txid, phase=CheckpointPhase.COMMITTED, batch_txid=txid, batch_ms=ms)
    CheckpointStore(backend, topo).save(rec, epoch)


@STORES
def test_a_mass_expiry_is_swept_over_several_commits_and_readers_hide_the_rest(
    provider_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    prov = provider_of(provider_url)
    backend = open_backend(prov.config)
    store = _store(provider_url)
    factory = _indexed(store.factory("opaque", "mass"))
    topo = f"sw{uuid.uuid4().hex[:6]}"
    epoch = CheckpointStore(backend, topo).acquire_epoch()
    mapname = f"trident:{factory.store.catalog_name()}"
    sweep = TtlSweep.of(topo, {"weir.state.ttl.sweep.max": 3}, prov, {"counts": 1000}, {"counts": factory})
    sweep.prepare()
    assert sweep.maps == {"counts": mapname}
    words = [f"k{i}" for i in range(7)]
    for txid, ms, adds in [(1, 10_000, dict.fromkeys(words, 1)), (2, 10_500, {"x": 1}), (3, 11_000, {"k0": 1})]:
        cut = _log(prov, backend, topo, epoch, txid, ms, sweep.maps)
        _batch(factory, txid, cut, adds)
        if txid < 3:
            sweep.commit(txid)
            _committed(backend, topo, epoch, txid, ms)
    # txid 3 (cutoff 1): k1..k6 expired; its commit deletes 3 of them
    sweep.commit(3)
    _committed(backend, topo, epoch, 3, 11_000)
    assert sweep.last["counts"] == (3, 3, True)
    stored = set(store.read_all("mass"))
    assert {("k0",), ("x",)} < stored and len(stored) == 5
    # readers through weir hide the three expired cells still stored
    assert reader_cutoff(backend, mapname) == 1
    got = run(capsys, "state", "dump", "--url", provider_url, mapname)
    assert got.code == 0 and sorted(d["key"] for d in got.json_lines()) == [["k0"], ["x"]]
    hidden = sorted(k[0] for k in stored - {("k0",), ("x",)})
    assert run(capsys, "state", "get", "--url", provider_url, mapname, hidden[0]).code == 1
    assert json.loads(run(capsys, "state", "get", "--url", provider_url, mapname, "x").out)["curr"] == 1
    # recovery may run the commit of 3 again: it deletes the next chunk of the same expired set
    sweep.commit(3)
    assert set(store.read_all("mass")) == {("k0",), ("x",)}  # the expired set is gone
    assert sweep.last["counts"] == (3, 3, True)
    # the next commit finds nothing left; the cells written after the cutoff were never touched
    cut = _log(prov, backend, topo, epoch, 4, 11_200, sweep.maps)
    assert cut == 1
    _batch(factory, 4, cut, {"x": 1})
    sweep.commit(4)
    assert sweep.last["counts"] == (4, 0, False)
    assert store.read_all("mass") == {("k0",): 1, ("x",): 2}


@pytest.mark.parametrize("provider_url", provider_params(("redis",)), indirect=True)
def test_redis_cells_written_without_the_index_are_found_by_one_scan_and_the_index_is_pruned(
    provider_url: str,
) -> None:
    import redis

    store = _store(provider_url)
    plain = store.factory("transactional", "old")  # a run without TTL (or initial_state) wrote these
    _batch(plain, 1, None, {"a": 1, "b": 1})
    factory = _indexed(plain)
    _batch(factory, 2, None, {"c": 1})
    s = factory.store
    client = redis.Redis.from_url(provider_url)
    try:
        assert client.zcard(s.index_key) == 1 and client.get(s.mark_key) is None
        # the first sweep finds no mark of the previous commit: it indexes the map by one scan first
        assert s.delete_expired(factory.state_type, 1, 100, txid=3) == (2, False)
        assert store.read_all("old") == {("c",): 1}
        assert client.zrange(s.index_key, 0, -1, withscores=True) == [(f'{s.key_prefix}["c"]'.encode(), 2.0)]
        assert client.get(s.mark_key) == b"3"
    finally:
        client.close()


def test_the_sweep_chunk_setting_is_checked_at_submit() -> None:
    with pytest.raises(ConfigError, match=r"topology 't': weir.state.ttl.sweep.max .* whole number >= 1"):
        TtlSweep.of("t", {"weir.state.ttl.sweep.max": 0}, None, {}, {})


@pytest.mark.parametrize("provider_url", provider_params(("redis-cluster",)), indirect=True)
@pytest.mark.parametrize("tagged", [False, True], ids=["slots", "hash-tag"])
def test_the_sweep_on_a_redis_cluster_with_and_without_a_hash_tag(provider_url: str, tagged: bool) -> None:
    from weir.trident.backing import RedisMapState
    from weir.trident.state import TransactionalValue

    tag = uuid.uuid4().hex[:8]
    factory = _indexed(RedisMapState.transactional(provider_url, key_prefix=f"{{sw{tag}}}:" if tagged else f"sw{tag}:"))
    _batch(factory, 1, None, {"a": 1, "b": 1, "c": 1})
    _batch(factory, 2, None, {"d": 1})
    _batch(factory, 3, 1, {"b": 1})
    st, s = factory.state_type, factory.store
    assert s.delete_expired(st, 1, 100, txid=3) == (2, False)
    assert s.delete_expired(st, 1, 100, txid=3) == (0, False)
    cells = s.backing_map(st).multi_get([[k] for k in "abcd"])
    assert cells == [None, TransactionalValue(3, 1), None, TransactionalValue(2, 1)]  # b restarted from init
