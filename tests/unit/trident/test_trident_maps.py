"""OpaqueMap, TransactionalMap and NonTransactionalMap over a dict backing map."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Any

import pytest

from weir.errors import ConfigError, SerializationError, StateError
from weir.trident.state import (
    CombinerValueUpdater,
    MapState,
    NonTransactionalMap,
    OpaqueMap,
    OpaqueValue,
    ReducerValueUpdater,
    State,
    StateType,
    TransactionalMap,
    TransactionalValue,
)
from weir.trident.state.maps import GC_PAUSE_KEYS


def add(summer: Any, *deltas: int) -> list[CombinerValueUpdater[int]]:
    return [CombinerValueUpdater(summer, d) for d in deltas]


def batch(
    m: MapState[Any], txid: int, keys: Sequence[Sequence[Any]], ups: list[Any], *, commit: bool = True
) -> list[Any]:
    m.begin_commit(txid)
    out = m.multi_update(keys, ups)
    if commit:
        m.commit(txid)
    return out


class TestOpaqueMap:
    def test_build_and_types(self, recording: Any) -> None:
        m = OpaqueMap.build(recording)
        assert isinstance(m, MapState) and isinstance(m, State)
        assert m.state_type is StateType.OPAQUE and m.backing is recording

    def test_counts_and_stores_opaque_values(self, recording: Any, summer: Any) -> None:
        m = OpaqueMap.build(recording)
        assert batch(m, 1, [["man"], ["dog"]], add(summer, 2, 1)) == [2, 1]
        assert recording.data == {("man",): OpaqueValue(1, 2), ("dog",): OpaqueValue(1, 1)}
        assert batch(m, 2, [["man"]], add(summer, 3)) == [5]
        assert recording.data[("man",)] == OpaqueValue(2, 5, 2)
        assert m.multi_get([["man"], ["dog"], ["cat"]]) == [5, 1, None]

    def test_one_get_and_one_put_per_update_with_tuple_keys(self, recording: Any, summer: Any) -> None:
        m = OpaqueMap.build(recording)
        batch(m, 1, [["a"], ["b"], ["c", 1]], add(summer, 1, 2, 3))
        assert recording.gets == [[("a",), ("b",), ("c", 1)]]
        assert len(recording.puts) == 1
        assert [k for k, _ in recording.puts[0]] == [("a",), ("b",), ("c", 1)]

    def test_replay_with_different_batch_recomputes_from_prev(self, recording: Any, summer: Any) -> None:
        m = OpaqueMap.build(recording)
        batch(m, 3, [["k"]], add(summer, 3))
        # batch 4 writes +2 and fails before commit
        batch(m, 4, [["k"]], add(summer, 2), commit=False)
        assert recording.data[("k",)] == OpaqueValue(4, 5, 3)
        # a new map instance (a restarted task) replays batch 4 with +3
        m2 = OpaqueMap.build(recording)
        assert batch(m2, 4, [["k"]], add(summer, 3)) == [6]
        assert recording.data[("k",)] == OpaqueValue(4, 6, 3)
        assert batch(m2, 7, [["k"]], add(summer, 1)) == [7]  # skipped txids 5 and 6

    def test_multi_get_during_replay_sees_value_before_the_batch(self, recording: Any, summer: Any) -> None:
        m = OpaqueMap.build(recording)
        batch(m, 1, [["k"]], add(summer, 10))
        batch(m, 2, [["k"]], add(summer, 5), commit=False)
        m.begin_commit(2)
        assert m.multi_get([["k"]]) == [10]  # the failed attempt of 2 is invisible to its replay
        m.commit(2)
        assert m.multi_get([["k"]]) == [15]  # outside a batch: the current value

    def test_second_update_in_same_batch_builds_on_first(self, recording: Any, summer: Any) -> None:
        m = OpaqueMap.build(recording)
        batch(m, 1, [["k"]], add(summer, 1))
        m.begin_commit(2)
        assert m.multi_update([["k"]], add(summer, 2)) == [3]
        recording.reset_calls()
        assert m.multi_update([["k"], ["j"]], add(summer, 4, 1)) == [7, 1]
        assert recording.gets == [[("j",)]]  # k comes from this batch's own writes
        assert m.multi_get([["k"]]) == [7]
        m.commit(2)
        assert recording.data[("k",)] == OpaqueValue(2, 7, 1)

    def test_duplicate_keys_in_one_call_apply_in_order(self, recording: Any, summer: Any) -> None:
        m = OpaqueMap.build(recording)
        out = batch(m, 1, [["k"], ("k",), ["j"]], add(summer, 1, 2, 5))
        assert out == [1, 3, 5]
        assert recording.gets == [[("k",), ("j",)]]
        assert recording.puts == [[(("k",), OpaqueValue(1, 3)), (("j",), OpaqueValue(1, 5))]]

    def test_multi_put_sets_values_and_keeps_prev_for_replay(self, recording: Any) -> None:
        m = OpaqueMap.build(recording)
        m.begin_commit(1)
        m.multi_put([["a"]], ["x"])
        m.commit(1)
        m.begin_commit(2)
        m.multi_put([["a"], ["a"]], ["y", "z"])
        assert recording.data[("a",)] == OpaqueValue(2, "z", "x")
        m.begin_commit(2)  # replay
        assert m.multi_get([["a"]]) == ["x"]
        m.multi_put([["a"]], ["w"])
        m.commit(2)
        assert recording.data[("a",)] == OpaqueValue(2, "w", "x")

    def test_batch_behind_stored_txid_raises_naming_key_and_txids(self, recording: Any, summer: Any) -> None:
        recording.data[("late",)] = OpaqueValue(9, 1, 0)
        m = OpaqueMap.build(recording)
        m.begin_commit(8)
        with pytest.raises(StateError, match=r"late.*8.*9"):
            m.multi_update([["late"]], add(summer, 1))
        with pytest.raises(StateError, match="behind"):
            m.multi_get([["late"]])
        assert recording.puts == []

    def test_list_form_cells_from_a_serializing_store(self, recording: Any, summer: Any) -> None:
        recording.data[("k",)] = [4, 6, 4]  # what a JSON store hands back
        m = OpaqueMap.build(recording)
        assert batch(m, 4, [["k"]], add(summer, 1)) == [5]
        assert recording.data[("k",)] == OpaqueValue(4, 5, 4)

    @pytest.mark.parametrize("stored", [42, [1, 2], TransactionalValue(1, 2)])
    def test_foreign_cells_raise_serialization_error(self, recording: Any, summer: Any, stored: Any) -> None:
        recording.data[("k",)] = stored
        m = OpaqueMap.build(recording)
        with pytest.raises(SerializationError, match=r"OpaqueMap key \('k',\)"):
            batch(m, 1, [["k"]], add(summer, 1))

    def test_failed_put_does_not_poison_the_batch_cache(self, recording: Any, summer: Any) -> None:
        m = OpaqueMap.build(recording)
        batch(m, 1, [["k"]], add(summer, 1))
        m.begin_commit(2)
        recording.fail_next_put = True
        with pytest.raises(ConnectionError):
            m.multi_update([["k"]], add(summer, 5))
        assert m.multi_update([["k"]], add(summer, 5)) == [6]
        m.commit(2)

    def test_none_txid_updates_are_new_each_time(self, recording: Any, summer: Any) -> None:
        m = OpaqueMap.build(recording)
        assert m.multi_update([["k"]], add(summer, 1)) == [1]
        assert m.multi_update([["k"]], add(summer, 1)) == [2]


class TestTransactionalMap:
    def test_seed_004_example(self, recording: Any, summer: Any) -> None:
        recording.data.update(
            {
                ("man",): TransactionalValue(1, 3),
                ("dog",): TransactionalValue(3, 4),
                ("apple",): TransactionalValue(2, 10),
            }
        )
        m = TransactionalMap.build(recording)
        assert m.state_type is StateType.TRANSACTIONAL
        # batch 3 is ["man"], ["man"], ["dog"]: partial counts man=2, dog=1
        assert batch(m, 3, [["man"], ["dog"]], add(summer, 2, 1)) == [5, 4]
        assert recording.data == {
            ("man",): TransactionalValue(3, 5),
            ("dog",): TransactionalValue(3, 4),
            ("apple",): TransactionalValue(2, 10),
        }
        assert recording.puts == [[(("man",), TransactionalValue(3, 5))]]  # dog is skipped

    def test_replay_is_skipped_and_new_batches_apply(self, recording: Any, summer: Any) -> None:
        m = TransactionalMap.build(recording)
        batch(m, 1, [["a"], ["b"]], add(summer, 1, 1))
        batch(m, 2, [["a"]], add(summer, 2), commit=False)  # fails before commit
        m2 = TransactionalMap.build(recording)
        recording.reset_calls()
        assert batch(m2, 2, [["a"], ["b"]], add(summer, 2, 4)) == [3, 5]  # a skipped, b applied
        assert recording.puts == [[(("b",), TransactionalValue(2, 5))]]
        assert batch(m2, 5, [["a"]], add(summer, 1)) == [4]
        assert m2.multi_get([["a"], ["b"], ["z"]]) == [4, 5, None]

    def test_all_keys_skipped_means_no_put(self, recording: Any, summer: Any) -> None:
        m = TransactionalMap.build(recording)
        batch(m, 1, [["a"]], add(summer, 1))
        recording.reset_calls()
        assert batch(m, 1, [["a"]], add(summer, 1)) == [1]
        assert len(recording.gets) == 1 and recording.puts == []

    def test_second_update_in_same_batch_applies(self, recording: Any, summer: Any) -> None:
        m = TransactionalMap.build(recording)
        m.begin_commit(1)
        assert m.multi_update([["a"]], add(summer, 1)) == [1]
        assert m.multi_update([["a"]], add(summer, 1)) == [2]
        assert m.multi_update([["a"], ["a"]], add(summer, 1, 1)) == [3, 4]
        m.commit(1)
        assert recording.data[("a",)] == TransactionalValue(1, 4)

    def test_newer_stored_txid_raises(self, recording: Any, summer: Any) -> None:
        recording.data[("a",)] = TransactionalValue(10, 1)
        m = TransactionalMap.build(recording)
        m.begin_commit(9)
        with pytest.raises(StateError, match=r"'a'.*9.*10"):
            m.multi_update([["a"]], add(summer, 1))

    def test_multi_put_stamps_txid(self, recording: Any) -> None:
        m = TransactionalMap.build(recording)
        m.begin_commit(4)
        m.multi_put([["a"], ["b"]], [1, None])
        m.commit(4)
        assert recording.data == {("a",): TransactionalValue(4, 1), ("b",): TransactionalValue(4, None)}
        assert m.multi_get([["a"], ["b"]]) == [1, None]

    def test_list_form_and_foreign_cells(self, recording: Any, summer: Any) -> None:
        recording.data[("a",)] = [1, 10]
        recording.data[("b",)] = OpaqueValue(1, 2)
        m = TransactionalMap.build(recording)
        assert m.multi_get([["a"]]) == [10]
        with pytest.raises(SerializationError, match="TransactionalMap key"):
            m.multi_get([["b"]])

    def test_reducer_updater(self, recording: Any) -> None:
        class Concat:
            def init(self) -> str:
                return ""

            def reduce(self, curr: str, tup: Any) -> str:
                return curr + str(tup[0])

        m = TransactionalMap.build(recording)
        m.begin_commit(1)
        assert m.multi_update([["w"]], [ReducerValueUpdater(Concat(), [("a",), ("b",)])]) == ["ab"]
        m.commit(1)
        m.begin_commit(2)
        assert m.multi_update([["w"]], [ReducerValueUpdater(Concat(), [("c",)])]) == ["abc"]


class TestNonTransactionalMap:
    def test_stores_plain_values_and_reapplies_replays(self, recording: Any, summer: Any) -> None:
        m = NonTransactionalMap.build(recording)
        assert m.state_type is StateType.NON_TRANSACTIONAL
        assert batch(m, 1, [["a"]], add(summer, 2)) == [2]
        assert recording.data == {("a",): 2}
        assert batch(m, 1, [["a"]], add(summer, 2)) == [4]  # at-least-once: counted twice
        assert len(recording.gets) == 2 and len(recording.puts) == 2

    def test_get_put_and_duplicates(self, recording: Any, summer: Any) -> None:
        m = NonTransactionalMap.build(recording)
        m.begin_commit(1)
        assert m.current_txid == 1
        m.multi_put([["a"], ["b"], ["a"]], [1, 2, 3])
        assert recording.puts == [[(("a",), 3), (("b",), 2)]]
        assert m.multi_update([["a"], ["a"]], add(summer, 1, 1)) == [4, 5]
        assert m.multi_get([["a"], ["b"], ["c"]]) == [5, 2, None]
        m.commit(1)
        assert m.current_txid is None


class TestMisuse:
    @pytest.mark.parametrize("cls", [OpaqueMap, TransactionalMap, NonTransactionalMap])
    def test_bad_arguments_raise_config_error(self, cls: Any, recording: Any, summer: Any) -> None:
        m = cls.build(recording)
        with pytest.raises(ConfigError, match="Wrap a single value"):
            m.multi_get(["apple"])
        with pytest.raises(ConfigError, match="list of keys"):
            m.multi_get("apple")
        with pytest.raises(ConfigError, match="2 keys but 1 updaters"):
            m.multi_update([["a"], ["b"]], add(summer, 1))
        with pytest.raises(ConfigError, match="1 keys but 2 values"):
            m.multi_put([["a"]], [1, 2])
        with pytest.raises(ConfigError, match="txid must be an int"):
            m.begin_commit("7")
        with pytest.raises(ConfigError, match="backing map"):
            cls.build({})
        assert recording.gets == [] and recording.puts == []

    @pytest.mark.parametrize("cls", [OpaqueMap, TransactionalMap])
    def test_commit_of_other_txid_raises(self, cls: Any, recording: Any) -> None:
        m = cls.build(recording)
        m.begin_commit(3)
        with pytest.raises(StateError, match=r"commit\(4\).*txid 3"):
            m.commit(4)
        m.commit(3)
        assert m.current_txid is None

    def test_backing_returning_wrong_length_raises(self, summer: Any) -> None:
        class Broken:
            def multi_get(self, keys: Any) -> list[Any]:
                return []

            def multi_put(self, keys: Any, vals: Any) -> None:
                raise AssertionError("not reached")

        m = OpaqueMap.build(Broken())  # type: ignore[arg-type]
        with pytest.raises(StateError, match="returned 0 values for 1 keys"):
            m.multi_get([["a"]])

    def test_nested_list_values_in_keys_are_frozen(self, recording: Any, summer: Any) -> None:
        m = OpaqueMap.build(recording)
        batch(m, 1, [["a", [1, 2]]], add(summer, 1))
        assert list(recording.data) == [("a", (1, 2))]
        assert m.multi_get([("a", (1, 2))]) == [1]

    def test_empty_calls_touch_nothing(self, recording: Any) -> None:
        for cls in (OpaqueMap, TransactionalMap, NonTransactionalMap):
            m = cls.build(recording)
            m.begin_commit(1)
            assert m.multi_update([], []) == []
            assert m.multi_get([]) == []
            m.multi_put([], [])
            m.commit(1)
        assert recording.gets == [] and recording.puts == []


class _GcProbe:
    """An updater that records whether the cyclic GC was on when it ran (and may raise)."""

    def __init__(self, seen: list[bool], fail: bool = False) -> None:
        self.seen, self.fail = seen, fail

    def update(self, stored: Any) -> Any:
        self.seen.append(gc.isenabled())
        if self.fail:
            raise ValueError("updater failed")
        return (stored or 0) + 1


@pytest.mark.parametrize("cls", [OpaqueMap, TransactionalMap, NonTransactionalMap])
def test_bulk_calls_pause_the_gc_and_always_restore_it(cls: Any, recording: Any) -> None:
    """From GC_PAUSE_KEYS keys the collector waits for the call; it is back on after, also after an error."""
    assert gc.isenabled()
    m = cls.build(recording)
    n = GC_PAUSE_KEYS
    seen: list[bool] = []
    assert batch(m, 1, [[i] for i in range(n)], [_GcProbe(seen) for _ in range(n)]) == [1] * n
    assert seen == [False] * n and gc.isenabled()
    seen.clear()
    batch(m, 2, [["small"]], [_GcProbe(seen)])
    assert seen == [True] and gc.isenabled()  # a small call leaves the collector alone
    seen.clear()
    m.begin_commit(3)
    with pytest.raises(ValueError, match="updater failed"):
        m.multi_update([[i] for i in range(n)], [_GcProbe(seen, fail=True) for _ in range(n)])
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:  # a collector the caller switched off stays off
        m.multi_update([[i] for i in range(n)], [_GcProbe(seen) for _ in range(n)])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_gc_paused_is_scoped_to_large_steps_and_survives_errors() -> None:
    from weir.trident.state.maps import gc_paused

    with gc_paused(GC_PAUSE_KEYS - 1):
        assert gc.isenabled()
    with pytest.raises(KeyError), gc_paused(GC_PAUSE_KEYS):
        assert not gc.isenabled()
        raise KeyError("x")
    assert gc.isenabled()
