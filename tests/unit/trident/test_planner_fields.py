"""The planner's field liveness: a Python stage passes on only the fields read after it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from weir.runtime.spark.trident.planner import needed_fields
from weir.sources import FileSpout
from weir.trident import Count, Filter, Function, MemoryMapState, TridentTopology


class Split(Function):
    def execute(self, tup: Any, collector: Any) -> None:
        for w in tup.get_string(0).split():
            collector.emit([w])


class Long(Filter):
    def is_keep(self, tup: Any) -> bool:
        return len(tup[0]) > 3


def _by_name(topo: TridentTopology) -> dict[str, Any]:
    needed = needed_fields(topo.nodes)
    return {n.name: needed[n.id] for n in topo.nodes}


def test_word_count_split_passes_on_only_the_word(tmp_path: Path) -> None:
    topo = TridentTopology()
    words = topo.new_stream("lines", FileSpout(str(tmp_path))).each(["line"], Split(), ["word"])
    words.group_by(["word"]).persistent_aggregate(MemoryMapState.Factory(), Count(), ["count"])
    needed = _by_name(topo)
    assert needed["lines"] == frozenset({"line"})
    assert needed["each:Split-1"] == frozenset({"word"})  # the line is not repeated per word
    state = [n for n in topo.nodes if n.kind == "persist_agg"][0]
    assert needed[state.name] == frozenset()  # a leaf: nothing reads its output


def test_a_field_read_later_is_kept_through_functions_and_filters(tmp_path: Path) -> None:
    topo = TridentTopology()
    s = topo.new_stream("lines", FileSpout(str(tmp_path))).each(["line"], Split(), ["word"])
    s = s.each(["word"], Long())
    s.group_by(["line", "word"]).persistent_aggregate(MemoryMapState.Factory(), Count(), ["count"])
    needed = _by_name(topo)
    assert needed["each:Split-1"] == frozenset({"line", "word"})
    assert needed["filter:Long-2"] == frozenset({"line", "word"})


def test_positional_operations_need_every_field(tmp_path: Path) -> None:
    topo = TridentTopology()
    a = topo.new_stream("a", FileSpout(str(tmp_path))).each(["line"], Split(), ["word"])
    b = topo.new_stream("b", FileSpout(str(tmp_path))).each(["line"], Split(), ["word"])
    merged = topo.merge(a, b)
    merged.project(["word"]).group_by(["word"]).persistent_aggregate(MemoryMapState.Factory(), Count(), ["n"])
    needed = _by_name(topo)
    assert needed[a.node.name] is None and needed[b.node.name] is None  # merge unions whole rows
    assert needed[merged.node.name] == frozenset({"word"})


def test_cached_partitions_equal_the_stable_hash() -> None:
    from weir._util import stable_hash
    from weir.runtime.spark.trident.state_tasks import partitions_of

    keys = [("a",), (1,), (True,), (1.0,), (b"x",), ("a", 1), ("a",), (1,), (True,)]
    for n in (2, 3, 7):
        first = partitions_of(keys, n)
        again = partitions_of(keys, n)  # from the cache
        assert first == again == [stable_hash(k) % n for k in keys]
