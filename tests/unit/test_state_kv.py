"""TransactionalKeyValueState over the memory backend: the protocol's bookkeeping, without servers.

The full provider contract (every backend) is in ``tests/contract``; this file pins what belongs to
the state object itself: phases, layers, serializers and the memory backend's sharing rules.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from weir.errors import FencedError, SerializationError, StateError
from weir.state import KeyValueState, State, StateFactory
from weir.state.factory import close_backends
from weir.state.memory import MemoryBackend
from weir.state.serializers import IntSerializer, StrSerializer
from weir.state.spi import StatePhase, TransactionalKeyValueState, TxidRecord


@pytest.fixture
def backend() -> Iterator[MemoryBackend]:
    yield MemoryBackend("unit")


def _state(backend: MemoryBackend, ns: str = "topo-bolt-0", **kw: object) -> TransactionalKeyValueState:
    return TransactionalKeyValueState(backend, ns, **kw)  # type: ignore[arg-type]


def test_is_a_storm_key_value_state(backend: MemoryBackend) -> None:
    state = _state(backend)
    assert isinstance(state, KeyValueState) and isinstance(state, State)


def test_phase_and_txids_follow_the_protocol(backend: MemoryBackend) -> None:
    state = _state(backend)
    assert state.phase is StatePhase.IDLE
    assert (state.prepared_txid, state.committed_txid) == (None, None)
    state.put("a", 1)
    assert state.pending_count == 1
    state.prepare_commit(3)
    assert state.phase is StatePhase.PREPARED
    assert (state.prepared_txid, state.committed_txid, state.pending_count) == (3, None, 0)
    state.commit(3)
    assert state.phase is StatePhase.IDLE
    assert (state.prepared_txid, state.committed_txid) == (None, 3)
    state.put("b", 2)
    state.prepare_commit(4)
    state.rollback()
    assert state.phase is StatePhase.IDLE
    assert (state.prepared_txid, state.committed_txid) == (None, 3)
    assert backend.txids("topo-bolt-0") == TxidRecord(3, None, 0)


def test_phase_is_read_from_the_store(backend: MemoryBackend) -> None:
    writer = _state(backend)
    writer.put("a", 1)
    writer.prepare_commit(1)
    # another instance of the namespace sees that something is prepared (recovery needs it)
    assert _state(backend).phase is StatePhase.PREPARED


def test_get_many_reads_all_three_layers(backend: MemoryBackend) -> None:
    state = _state(backend)
    for k in "abcd":
        state.put(k, k.upper())
    state.prepare_commit(1)
    state.commit(1)
    state.delete("a")
    state.put("b", "prepared")
    state.prepare_commit(2)
    state.delete("c")
    state.put("e", "pending")
    assert state.get_many(["a", "b", "c", "d", "e", "z"], "-") == ["-", "prepared", "-", "D", "pending", "-"]
    assert state.get_many([]) == []


def test_delete_returns_the_previous_value_from_any_layer(backend: MemoryBackend) -> None:
    state = _state(backend)
    state.put("c", "committed")
    state.prepare_commit(1)
    state.commit(1)
    state.put("p", "prepared")
    state.prepare_commit(2)
    state.put("n", "pending")
    assert state.delete("c") == "committed"
    assert state.delete("p") == "prepared"
    assert state.delete("n") == "pending"
    assert state.delete("n") is None
    assert len(state) == 0


def test_iteration_is_a_snapshot_and_len_counts_live_keys(backend: MemoryBackend) -> None:
    state = _state(backend)
    for i in range(5):
        state.put(i, i * i)
    state.prepare_commit(1)
    state.commit(1)
    state.delete(0)
    state.put(9, 81)
    assert sorted(state) == [(1, 1), (2, 4), (3, 9), (4, 16), (9, 81)]
    assert len(state) == 5


def test_typed_serializers_are_used_for_keys_and_values(backend: MemoryBackend) -> None:
    state = _state(backend, key_serializer=StrSerializer(), value_serializer=IntSerializer())
    state.put("word", 3)
    state.prepare_commit(1)
    state.commit(1)
    assert backend.get("topo-bolt-0", b"word") == b"3"  # INCRBY-compatible in a real store
    with pytest.raises(SerializationError) as info:
        state.put("word", "three")
    assert "topo-bolt-0" in str(info.value) and "'word'" in str(info.value) and "str" in str(info.value)
    with pytest.raises(SerializationError, match="topo-bolt-0"):
        state.put(5, 1)


def test_corrupt_stored_value_names_the_namespace(backend: MemoryBackend) -> None:
    backend.write_direct("topo-bolt-0", {b'"k"': b"\xff not json"}, None)
    state = _state(backend)
    with pytest.raises(SerializationError, match="topo-bolt-0"):
        state.get("k")


def test_commit_without_txid_with_nothing_pending_writes_nothing(backend: MemoryBackend) -> None:
    state = _state(backend)
    state.commit()
    assert backend.namespaces() == []


def test_fence_carries_the_epoch_on_every_write(backend: MemoryBackend) -> None:
    ns = "topo-bolt-0"
    state = _state(backend)
    state.fence(backend.acquire_epoch(ns))
    assert state.epoch == 1
    backend.acquire_epoch(ns)
    state.put("x", 1)
    with pytest.raises(FencedError, match="epoch 1 is older than the stored epoch 2"):
        state.prepare_commit(1)
    assert backend.load_prepared(ns) is None
    fresh = _state(backend, epoch=2)
    fresh.put("x", 2)
    fresh.prepare_commit(1)
    fresh.commit(1)
    assert dict(_state(backend)) == {"x": 2}


def test_misuse_messages_say_what_to_do(backend: MemoryBackend) -> None:
    state = _state(backend)
    state.put("a", 1)
    state.prepare_commit(5)
    state.commit(5)
    with pytest.raises(StateError, match="txids must strictly increase"):
        state.prepare_commit(5)
    with pytest.raises(StateError, match="commit only what was prepared"):
        state.commit(6)


# ---- the memory backend ----------------------------------------------------------------------
def test_memory_stores_are_shared_per_name_in_a_process() -> None:
    try:
        first = StateFactory.from_url("memory://shared-unit")
        second = StateFactory.from_url("memory://shared-unit")
        other = StateFactory.from_url("memory://other-unit")
        s1 = first.new_state("ns")
        s1.put("k", 1)
        s1.prepare_commit(1)
        s1.commit(1)
        assert second.new_state("ns").get("k") == 1
        assert other.new_state("ns").get("k") is None
        assert MemoryBackend.shared("shared-unit") is MemoryBackend.shared("shared-unit")
        close_backends()  # the factory caches backends per process
        MemoryBackend.reset_all()
        assert StateFactory.from_url("memory://shared-unit").new_state("ns").get("k") is None
    finally:
        close_backends()
        MemoryBackend.reset_all()


def test_memory_backend_flags_and_namespaces(backend: MemoryBackend) -> None:
    assert (backend.kind, backend.durable, backend.distributed) == ("memory", False, False)
    assert backend.describe() == "memory://unit"
    for ns in ("b", "a", "c"):
        _state(backend, ns).put("k", 1)
    _state(backend, "b").prepare_commit(1)
    backend.write_direct("a", {b"1": b"1"}, None)
    backend.acquire_epoch("c")
    assert backend.namespaces() == ["a", "b", "c"]
    backend.put_many("d", [(b"1", b"2"), (b"3", b"4")])
    assert backend.count("d") == 2
    assert backend.get_many("d", [b"1", b"x", b"3"]) == [b"2", None, b"4"]
    backend.drop("d")
    assert backend.count("d") == 0 and "d" not in backend.namespaces()


def test_backend_split_separates_upserts_and_tombstones() -> None:
    ups, dels = MemoryBackend.split({b"a": b"1", b"b": None, b"c": b"3"})
    assert ups == [(b"a", b"1"), (b"c", b"3")]
    assert dels == [b"b"]


class _CountingBackend(MemoryBackend):
    def __init__(self) -> None:
        super().__init__()
        self.gets = 0
        self.scans = 0

    def get(self, namespace: str, key: bytes) -> bytes | None:
        self.gets += 1
        return super().get(namespace, key)

    def scan(self, namespace: str) -> Iterator[tuple[bytes, bytes]]:
        self.scans += 1
        return super().scan(namespace)


def _committed(backend: MemoryBackend, n: int) -> None:
    writer = _state(backend)
    for i in range(n):
        writer.put(f"w{i}", i)
    writer.prepare_commit(1)
    writer.commit(1)
    backend.gets = 0  # the prepare read the namespace's TTL cursor (weir.state.ttl): not part of the reads below


def test_dense_reads_switch_to_one_scan_and_return_the_same_values() -> None:
    backend = _CountingBackend()
    _committed(backend, 600)
    state = _state(backend)
    state.read_dense()
    state.put("w3", -3)  # pending writes still win over the scanned rows
    got = [state.get(f"w{i}") for i in range(600)] + [state.get("absent", "none")]
    assert got == [-3 if i == 3 else i for i in range(600)] + ["none"]
    assert backend.scans == 1 and backend.gets == 511  # 512th miss: 600 rows <= 16 x 512, one scan
    plain = _CountingBackend()
    _committed(plain, 600)
    other = _state(plain)
    assert [other.get(f"w{i}") for i in range(600)] == list(range(600))
    assert plain.scans == 0 and plain.gets == 600  # without read_dense: point reads only


def test_dense_reads_keep_point_reads_for_a_namespace_much_larger_than_what_is_read() -> None:
    backend = _CountingBackend()
    _committed(backend, 9000)
    state = _state(backend)
    state.read_dense()
    assert [state.get(f"w{i}") for i in range(600)] == list(range(600))
    assert backend.scans == 0 and backend.gets == 600  # 9,000 rows > 16 x 512 misses: no scan
