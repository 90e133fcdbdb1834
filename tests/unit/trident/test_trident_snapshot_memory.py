"""SnapshottableMap and MemoryMapState (and its Factory)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from weir.errors import ConfigError
from weir.trident.state import (
    CombinerValueUpdater,
    MapState,
    MemoryBackingMap,
    MemoryMapState,
    NonTransactionalMap,
    OpaqueMap,
    OpaqueValue,
    RemovableMapState,
    Snapshottable,
    SnapshottableMap,
    StateFactory,
    StateType,
    TransactionalMap,
    TransactionalValue,
)


class TestSnapshottableMap:
    def test_global_value_lives_under_fixed_key(self, recording: Any, summer: Any) -> None:
        s = SnapshottableMap(OpaqueMap.build(recording), ["$total"])
        assert isinstance(s, Snapshottable) and isinstance(s, MapState)
        assert s.state_type is StateType.OPAQUE
        s.begin_commit(1)
        assert s.get() is None
        assert s.update(CombinerValueUpdater(summer, 5)) == 5
        s.commit(1)
        s.begin_commit(2)
        assert s.update(CombinerValueUpdater(summer, 2)) == 7
        s.begin_commit(2)  # replay of 2 with another partial
        assert s.get() == 5
        assert s.update(CombinerValueUpdater(summer, 10)) == 15
        s.commit(2)
        assert recording.data == {("$total",): OpaqueValue(2, 15, 5)}
        assert s.get() == 15

    def test_set_and_map_operations_delegate(self, recording: Any, summer: Any) -> None:
        s = SnapshottableMap(TransactionalMap.build(recording), "g")
        assert s.global_key == ("g",) and s.state_type is StateType.TRANSACTIONAL
        s.begin_commit(1)
        s.set(3)
        s.multi_put([["a"]], [1])
        assert s.multi_update([["a"]], [CombinerValueUpdater(summer, 1)]) == [2]
        s.commit(1)
        assert s.multi_get([["a"], ["g"]]) == [2, 3]
        assert recording.data[("g",)] == TransactionalValue(1, 3)

    def test_rejects_non_map_state(self, recording: Any) -> None:
        with pytest.raises(ConfigError, match="MapState"):
            SnapshottableMap(recording, ["g"])  # type: ignore[arg-type]


class TestMemoryMapState:
    def test_factory_is_a_state_factory_with_type(self) -> None:
        f = MemoryMapState.Factory()
        assert isinstance(f, StateFactory) and f.state_type is StateType.OPAQUE
        assert MemoryMapState.Factory("transactional").state_type is StateType.TRANSACTIONAL
        with pytest.raises(ConfigError, match="unknown state type"):
            MemoryMapState.Factory("exactly-once")

    def test_remade_state_sees_earlier_commits_per_partition(self, summer: Any) -> None:
        f = MemoryMapState.Factory()
        s0 = f.make_state({}, 0, 2)
        assert isinstance(s0, RemovableMapState) and isinstance(s0, Snapshottable)
        s0.begin_commit(1)
        s0.multi_update([["a"]], [CombinerValueUpdater(summer, 1)])
        s0.commit(1)
        again = f.make_state({}, 0, 2)
        assert again.multi_get([["a"]]) == [1]
        assert f.make_state({}, 1, 2).multi_get([["a"]]) == [None]  # other partition, other data
        assert MemoryMapState.Factory().make_state({}, 0, 2).multi_get([["a"]]) == [None]  # other id

    def test_pickled_factory_reaches_same_data(self) -> None:
        f = MemoryMapState.Factory(state_id="wordcounts")
        s = f.make_state({}, 0, 1)
        s.begin_commit(1)
        s.set(42)
        s.commit(1)
        clone = pickle.loads(pickle.dumps(f))
        assert clone.make_state({}, 0, 1).get() == 42

    @pytest.mark.parametrize(
        ("state_type", "map_cls"),
        [
            (StateType.OPAQUE, OpaqueMap),
            (StateType.TRANSACTIONAL, TransactionalMap),
            (StateType.NON_TRANSACTIONAL, NonTransactionalMap),
        ],
    )
    def test_wraps_the_map_of_its_type(self, state_type: StateType, map_cls: type, summer: Any) -> None:
        f = MemoryMapState.Factory(state_type)
        s = f.make_state({}, 0, 1)
        assert isinstance(s._map, map_cls) and getattr(s._map, "backing") is s.backing
        assert isinstance(s.backing, MemoryBackingMap)
        for txid, delta in [(1, 1), (2, 2), (2, 2)]:
            s = f.make_state({}, 0, 1)
            s.begin_commit(txid)
            s.multi_update([["k"]], [CombinerValueUpdater(summer, delta)])
            s.commit(txid)
        expected = 5 if state_type is StateType.NON_TRANSACTIONAL else 3
        assert f.make_state({}, 0, 1).multi_get([["k"]]) == [expected]

    def test_replay_across_remade_states(self, summer: Any) -> None:
        f = MemoryMapState.Factory()
        s = f.make_state({}, 0, 1)
        s.begin_commit(3)
        s.multi_update([["k"]], [CombinerValueUpdater(summer, 3)])
        s.commit(3)
        s = f.make_state({}, 0, 1)
        s.begin_commit(4)
        s.multi_update([["k"]], [CombinerValueUpdater(summer, 2)])  # crash before commit
        s = f.make_state({}, 0, 1)
        s.begin_commit(4)
        assert s.multi_update([["k"]], [CombinerValueUpdater(summer, 3)]) == [6]
        s.commit(4)

    def test_multi_remove_nulls_now_and_deletes_at_next_batch(self) -> None:
        f = MemoryMapState.Factory()
        s = f.make_state({}, 0, 1)
        s.begin_commit(1)
        s.multi_put([["a"], ["b"]], [1, 2])
        s.commit(1)
        s.begin_commit(2)
        s.multi_remove([["a"]])
        assert s.multi_get([["a"], ["b"]]) == [None, 2]
        assert ("a",) in s.backing.data  # still there: a replay of 2 may need prev
        s.commit(2)
        s2 = f.make_state({}, 0, 1)  # a re-made state still deletes it
        s2.begin_commit(3)
        assert ("a",) not in s2.backing.data
        assert s2.multi_get([["a"], ["b"]]) == [None, 2]
        s2.commit(3)

    def test_removal_of_a_failed_attempt_does_not_delete_what_the_replay_wrote(self) -> None:
        f = MemoryMapState.Factory()
        s = f.make_state({}, 0, 1)
        s.begin_commit(1)
        s.multi_put([["a"]], [1])
        s.commit(1)
        s.begin_commit(2)
        s.multi_remove([["a"]])  # attempt 1 of batch 2 fails after this
        s = f.make_state({}, 0, 1)
        s.begin_commit(2)  # the replay sets a instead of removing it
        assert s.multi_get([["a"]]) == [1]
        s.multi_put([["a"]], [5])
        s.commit(2)
        s.begin_commit(3)
        assert s.multi_get([["a"]]) == [5]
        assert s.backing.data[("a",)] == OpaqueValue(2, 5, 1)

    def test_snapshottable_and_get_tuples(self) -> None:
        s = MemoryMapState.Factory().make_state({}, 0, 1)
        s.begin_commit(1)
        s.set(10)
        s.multi_put([["w", 1], ["x", 2]], ["a", None])
        s.commit(1)
        assert s.get() == 10
        assert sorted(map(tuple, s.get_tuples()), key=repr) == sorted(
            [("$MEMORY-MAP-STATE-GLOBAL$", 10), ("w", 1, "a")], key=repr
        )

    @pytest.mark.parametrize(("index", "count"), [(-1, 2), (2, 2), (0, 0), ("0", 1), (True, 2)])
    def test_bad_partition(self, index: Any, count: Any) -> None:
        with pytest.raises(ConfigError, match="partition|num_partitions"):
            MemoryMapState.Factory().make_state({}, index, count)

    def test_bad_id(self) -> None:
        with pytest.raises(ConfigError):
            MemoryMapState.Factory(state_id="")
        with pytest.raises(ConfigError):
            MemoryMapState("")

    def test_clear_all(self) -> None:
        f = MemoryMapState.Factory()
        s = f.make_state({}, 0, 1)
        s.multi_put([["a"]], [1])
        MemoryMapState.clear_all()
        assert f.make_state({}, 0, 1).multi_get([["a"]]) == [None]
