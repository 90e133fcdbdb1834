"""CachedMap: LRU cache over a backing map."""

from __future__ import annotations

from typing import Any

import pytest

from weir.errors import ConfigError, StateError
from weir.trident.state import BackingMap, CachedMap, CombinerValueUpdater, OpaqueMap, OpaqueValue


def test_is_a_backing_map(recording: Any) -> None:
    assert isinstance(CachedMap(recording, 3), BackingMap)


def test_hits_are_served_from_cache_and_misses_fetched_in_one_call(recording: Any) -> None:
    recording.data.update({("a",): 1, ("b",): 2, ("c",): 3})
    cm = CachedMap(recording, 10)
    assert cm.multi_get([("a",), ("b",)]) == [1, 2]
    assert recording.gets == [[("a",), ("b",)]]
    recording.reset_calls()
    assert cm.multi_get([("b",), ("c",), ("a",), ("d",), ("c",)]) == [2, 3, 1, None, 3]
    assert recording.gets == [[("c",), ("d",)]]  # one call, distinct misses only
    recording.reset_calls()
    assert cm.multi_get([("a",), ("b",), ("c",)]) == [1, 2, 3]
    assert recording.gets == []


def test_nulls_are_cached(recording: Any) -> None:
    cm = CachedMap(recording, 10)
    assert cm.multi_get([("ghost",)]) == [None]
    assert ("ghost",) in cm
    recording.data[("ghost",)] = "written behind the cache's back"
    assert cm.multi_get([("ghost",)]) == [None]
    assert len(recording.gets) == 1


def test_put_writes_through_and_updates_cache(recording: Any) -> None:
    cm = CachedMap(recording, 10)
    cm.multi_put([("a",), ("b",)], [1, None])
    assert recording.data == {("a",): 1, ("b",): None}
    assert cm.multi_get([("a",), ("b",)]) == [1, None]
    assert recording.gets == []


def test_lru_eviction_keeps_most_recently_used(recording: Any) -> None:
    recording.data.update({(k,): k.upper() for k in "abcd"})
    cm = CachedMap(recording, 2)
    cm.multi_get([("a",)])
    cm.multi_get([("b",)])
    cm.multi_get([("a",)])  # a is now more recent than b
    cm.multi_get([("c",)])  # evicts b
    assert len(cm) == 2 and ("a",) in cm and ("c",) in cm and ("b",) not in cm
    recording.reset_calls()
    assert cm.multi_get([("a",), ("b",)]) == ["A", "B"]
    assert recording.gets == [[("b",)]]
    cm.multi_put([("d",)], ["D"])  # a put counts as a use and evicts the least recent (c)
    assert ("c",) not in cm and ("d",) in cm and ("b",) in cm


def test_batch_larger_than_cache_still_returns_every_value(recording: Any) -> None:
    recording.data.update({(i,): i for i in range(10)})
    cm = CachedMap(recording, 3)
    assert cm.multi_get([(i,) for i in range(10)]) == list(range(10))
    assert len(cm) == 3 and all((i,) in cm for i in (7, 8, 9))


def test_failed_delegate_put_drops_those_keys(recording: Any) -> None:
    recording.data[("a",)] = 1
    cm = CachedMap(recording, 10)
    cm.multi_get([("a",), ("b",)])
    recording.fail_next_put = True
    with pytest.raises(ConnectionError):
        cm.multi_put([("a",)], [2])
    assert ("a",) not in cm and ("b",) in cm
    assert cm.multi_get([("a",)]) == [1]


def test_list_keys_are_accepted(recording: Any) -> None:
    cm = CachedMap(recording, 4)
    cm.multi_put([["x", 1]], [5])  # type: ignore[list-item]
    assert cm.multi_get([("x", 1)]) == [5]
    assert recording.data == {("x", 1): 5}


@pytest.mark.parametrize("size", [0, -1, 1.5, True, "10"])
def test_bad_cache_size(recording: Any, size: Any) -> None:
    with pytest.raises(ConfigError, match="cache_size"):
        CachedMap(recording, size)


def test_bad_delegate() -> None:
    with pytest.raises(ConfigError, match="backing map"):
        CachedMap(object(), 3)  # type: ignore[arg-type]


def test_delegate_returning_wrong_length(recording: Any) -> None:
    class Short(type(recording)):  # type: ignore[misc]
        def multi_get(self, keys: Any) -> list[Any]:
            return [None]

    cm: CachedMap[Any] = CachedMap(Short(), 3)
    with pytest.raises(StateError, match="returned 1 values for 2 keys"):
        cm.multi_get([("a",), ("b",)])


def test_clear(recording: Any) -> None:
    cm = CachedMap(recording, 3)
    cm.multi_get([("a",)])
    cm.clear()
    assert len(cm) == 0


def test_under_an_opaque_map_replays_hit_the_cache(recording: Any, summer: Any) -> None:
    cm = CachedMap(recording, 100)
    m = OpaqueMap.build(cm)
    for txid, delta in [(1, 2), (2, 5), (2, 1), (3, 4)]:  # batch 2 replayed with another count
        m.begin_commit(txid)
        m.multi_update([["k"]], [CombinerValueUpdater(summer, delta)])
        m.commit(txid)
    assert recording.data[("k",)] == OpaqueValue(3, 7, 3)
    assert recording.gets == [[("k",)]]  # only the very first read reached the store
    assert len(recording.puts) == 4
