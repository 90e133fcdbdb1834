"""``weir.state.ttl.ms`` for Trident map states, on SQLite, Redis and PostgreSQL (no Spark).

A cell expires ``ttl`` after the batch time of the txid that last wrote it: the driver logs each
batch's time (the coordinator record's ``batch_ms``) and gives the batch a cutoff txid; the map state
reads cells written at or before it as absent — in updates (a rewritten key starts from the
aggregator's init, an opaque ``prev`` becomes ``None``) and in ``multi_get`` — and a replay of the same
txid computes the same cutoff and so the same values.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.contract._support import provider_of, provider_params
from tests.servers import Memcached
from tests.trident._support import Split, Store
from weir.checkpoint.coordinator import CheckpointPhase, CheckPointState, CheckpointStore
from weir.errors import ConfigError, FencedError, StateError
from weir.runtime.spark.trident.ttl import TIMES_KEY, expire_upto, record_batch_time
from weir.sources import FileSpout
from weir.state.factory import open_backend
from weir.trident import Count, TridentTopology
from weir.trident.backing import MemcachedMapState
from weir.trident.state import CombinerValueUpdater, OpaqueValue, TransactionalValue

STORES = pytest.mark.parametrize("provider_url", provider_params(("sqlite", "redis", "postgres")), indirect=True)
KINDS = ("opaque", "transactional")


class Add:
    def combine(self, a: Any, b: Any) -> Any:
        return a + b

    def init(self) -> Any:
        return 0


def _store(url: str) -> Store:
    kind = "sqlite" if url.startswith("sqlite") else "redis" if url.startswith("redis") else "postgres"
    return Store(kind, url, uuid.uuid4().hex[:8])


def _batch(factory: Any, txid: int, upto: int | None, adds: dict[str, int]) -> list[Any]:
    state = factory.make_state({}, 0, 1)
    state.expire_through(upto)
    state.begin_commit(txid)
    got = state.multi_update([[k] for k in adds], [CombinerValueUpdater(Add(), v) for v in adds.values()])
    state.commit(txid)
    return list(got)


def _get(factory: Any, upto: int | None, keys: list[str]) -> list[Any]:
    state = factory.make_state({}, 0, 1)
    state.expire_through(upto)
    return list(state.multi_get([[k] for k in keys]))


@STORES
@pytest.mark.parametrize("kind", KINDS)
def test_expired_cells_read_as_absent_and_restart_from_init(provider_url: str, kind: str) -> None:
    factory = _store(provider_url).factory(kind, "ttl")
    assert _batch(factory, 1, None, {"a": 1, "b": 1}) == [1, 1]
    assert _batch(factory, 2, None, {"b": 2}) == [3]
    # at txid 3 every cell written at txid <= 1 has expired: a is gone, b (written at 2) lives
    assert _get(factory, 1, ["a", "b"]) == [None, 3]
    for _ in range(2):  # the batch and its replay (same txid, same cutoff) give the same values
        assert _batch(factory, 3, 1, {"a": 5, "b": 1}) == [5, 4]
    cells = factory.store.backing_map(factory.state_type).multi_get([["a"], ["b"]])
    if kind == "opaque":  # the expired value is not kept as prev: a replay rebuilds from nothing
        assert cells == [OpaqueValue(3, 5, None), OpaqueValue(3, 4, 3)]
    else:
        assert cells == [TransactionalValue(3, 5), TransactionalValue(3, 4)]
    # without a cutoff nothing expires (the same store, read by a state without TTL)
    assert _get(factory, None, ["a", "b"]) == [5, 4]
    # everything written up to txid 3 expired: both keys are absent, a new batch starts from init
    assert _get(factory, 3, ["a", "b"]) == [None, None]
    assert _batch(factory, 4, 3, {"b": 1}) == [1]


@STORES
def test_an_opaque_replay_after_expiry_never_resurrects_the_expired_value(provider_url: str) -> None:
    factory = _store(provider_url).factory("opaque", "ttlreplay")
    _batch(factory, 1, None, {"a": 10})
    # txid 2 runs with a expired, writes a = 1, and is replayed with other tuples (an opaque spout)
    assert _batch(factory, 2, 1, {"a": 1}) == [1]
    assert _batch(factory, 2, 1, {"a": 7}) == [7]  # rebuilt from prev = None, never from the expired 10
    assert _get(factory, 1, ["a"]) == [7]


def _prepare(backend: Any, topo: str, epoch: int, txid: int, ms: int) -> None:
    rec = CheckPointState(txid=txid, phase=CheckpointPhase.PREPARING, batch_txid=txid, batch_ms=ms)
    CheckpointStore(backend, topo).save(rec, epoch)


@STORES
def test_the_time_log_gives_each_batch_its_cutoff_and_a_replay_the_same_one(provider_url: str) -> None:
    backend = open_backend(provider_of(provider_url).config)
    topo = f"ttl{uuid.uuid4().hex[:6]}"
    ns = f"$checkpointspout-{topo}"
    epoch = CheckpointStore(backend, topo).acquire_epoch()
    prov = provider_of(provider_url)
    ttls = {"counts": 1000, "other": 5000}
    seen = {}
    for txid, ms in [(1, 10_000), (2, 10_500), (3, 11_000), (4, 11_600), (5, 16_000)]:
        _prepare(backend, topo, epoch, txid, ms)
        seen[txid] = record_batch_time(prov, ns, topo, txid, epoch, ttls)
        assert record_batch_time(prov, ns, topo, txid, epoch, ttls) == seen[txid]  # a replay: the same
    assert seen[1] == {"counts": None, "other": None}
    assert seen[3] == {"counts": 1, "other": None}  # 10000 + 1000 <= 11000
    assert seen[4] == {"counts": 2, "other": None}
    assert seen[5] == {"counts": 4, "other": 3}  # 11600 + 1000 <= 16000; 11000 + 5000 <= 16000
    # the log keeps what a later batch can still need: txids from the smallest cutoff on
    assert json.loads(backend.get(ns, TIMES_KEY)) == {
        "v": 1,
        "times": [[3, 11000], [4, 11600], [5, 16000]],
        "states": {"counts": {"ttl_ms": 1000, "map": None}, "other": {"ttl_ms": 5000, "map": None}},
    }
    assert expire_upto({1: 0, 2: 5}, 2, 5) == 1 and expire_upto({1: 0, 2: 4}, 2, 5) is None
    # a driver of an older epoch is fenced; a record of another txid is a named error
    CheckpointStore(backend, topo).acquire_epoch()
    with pytest.raises(FencedError):
        record_batch_time(prov, ns, topo, 5, epoch, ttls)
    with pytest.raises(
        StateError, match=rf"topology '{topo}', txid 6: the coordinator record holds the time of txid 5"
    ):
        record_batch_time(prov, ns, topo, 6, None, ttls)


@pytest.mark.services
def test_a_ttl_on_a_memcached_map_state_is_refused_at_submit_naming_it(
    tmp_path: Path, memcached_server: Memcached
) -> None:
    topo = TridentTopology()
    (
        topo.new_stream("lines", FileSpout(str(tmp_path / "lines")))
        .each(["line"], Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(MemcachedMapState.opaque(memcached_server.url, key_prefix="wc:"), Count(), "count")
        .name("counts")
    )
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.state.ttl.ms": {"counts": 1000}}
    with pytest.raises(
        ConfigError,
        match=r"topology 'mc', state 'counts': weir.state.ttl.ms: TTL is supported .*SQLite, Redis and PostgreSQL"
        r".*memcached",
    ):
        weir.submit("mc", conf, topo)
