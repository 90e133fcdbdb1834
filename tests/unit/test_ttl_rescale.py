"""Expiring keys survive a rescale: the TTL rows stay behind, each new task re-indexes on its first batch."""

from __future__ import annotations

from weir._util import stable_hash
from weir.checkpoint.coordinator import CheckpointPhase, CheckPointState, CheckpointStore
from weir.checkpoint.rescale import ComponentRoute, Rescaler, hash_route, plan_counts
from weir.state import ttl as T
from weir.state.kv import TransactionalKeyValueState
from weir.state.memory import MemoryBackend


def test_rescaled_expiring_keys_keep_their_expiry_and_are_swept_in_their_new_task() -> None:
    backend = MemoryBackend("ttl-rescale")
    keys = {f"k{i}": i for i in range(60)}
    for t in range(2):
        s = TransactionalKeyValueState(backend, f"tr-count-{t}")
        s.set_batch_time(0)
        for k, v in keys.items():
            if stable_hash(k) % 2 == t:
                s.put(k, v, ttl=1000 if v % 2 else 9000)  # odd values expire at 1000, even at 9000
        s.prepare_commit(1)
        s.commit(1)
    store = CheckpointStore(backend, "tr")
    epoch = store.acquire_epoch()
    store.save(CheckPointState(txid=1, phase=CheckpointPhase.COMMITTED, parallelism={"count": 2}), epoch)
    assert sum(plan_counts(backend, "tr", "count", 2, 3, hash_route()(3)).values()) == 60  # TTL rows not counted
    Rescaler("tr", {"count": ComponentRoute("count", route=hash_route())}).run(store, epoch, {"count": 3})
    seen: dict[str, int] = {}
    for t in range(3):
        s = TransactionalKeyValueState(backend, f"tr-count-{t}")
        s.set_batch_time(2000)
        live = dict(s)
        assert all(stable_hash(k) % 3 == t for k in live)
        seen.update(live)
        s.prepare_commit(2)  # no cursor in the new namespace: one scan re-indexes it and sweeps
        s.commit(2)
        stored = {bytes(k) for k, _ in backend.scan(f"tr-count-{t}") if not T.is_reserved(bytes(k))}
        assert stored == {s.key_serializer.serialize(k) for k in live}
    assert seen == {k: v for k, v in keys.items() if v % 2 == 0}
