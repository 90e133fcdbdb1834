"""The Trident stream API without Spark: building, wiring errors, the guarantee table, fields, tuples."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import weir
import weir.trident
from tests.trident._support import NonTransactionalFileSpout, OpaqueFileSpout, Split
from weir.errors import ConfigError, TopologyError
from weir.runtime.spark.trident.state_tasks import spark_int_hash, spark_routing_values
from weir.sources import FileSpout
from weir.trident import (
    Aggregator,
    Count,
    Filter,
    MapGet,
    MemoryMapState,
    ReducerAggregator,
    StateType,
    Sum,
    TridentTopology,
)
from weir.trident.fields import decode_any, encode_any, parse_fields
from weir.trident.guarantee import TABLE
from weir.trident.tuple import make_tuple


def _lines(tmp_path: Path, spout_cls: type = FileSpout) -> tuple[TridentTopology, Any]:
    topo = TridentTopology()
    return topo, topo.new_stream("lines", spout_cls(str(tmp_path)))


class Long(Filter):
    def is_keep(self, tup: Any) -> bool:
        return len(tup[0]) > 3


class First(ReducerAggregator[Any]):
    def init(self) -> Any:
        return None

    def reduce(self, curr: Any, tup: Any) -> Any:
        return tup[0] if curr is None else curr


class Emit(Aggregator[list[Any]]):
    def init(self, batch_id: int, collector: Any) -> list[Any]:
        return []

    def aggregate(self, val: list[Any], tup: Any, collector: Any) -> None:
        val.append(tup[0])

    def complete(self, val: list[Any], collector: Any) -> None:
        collector.emit([len(val), "x"])


def test_fields_flow_through_the_operations(tmp_path: Path) -> None:
    topo, lines = _lines(tmp_path)
    words = lines.each(["line"], Split(), ["word"])
    assert words.fields == ["line", "word"]
    assert words.each(Long()).fields == ["line", "word"]
    assert words.each(["word"], Long()).fields == ["line", "word"]
    assert words.project(["word"]).fields == ["word"]
    assert words.map(lambda t: (t[1],), ["w:str"]).fields == ["w"]
    assert words.map(lambda t: tuple(t)).fields == ["line", "word"]
    assert words.flat_map(lambda t: [(t[1], 1)], "w, n:int").fields == ["w", "n"]
    assert words.peek(print).filter(lambda t: True).fields == ["line", "word"]
    assert words.group_by(["word"]).aggregate(Count(), ["count"]).fields == ["word", "count"]
    assert words.aggregate(["word"], First(), ["first"]).fields == ["first"]
    assert words.partition_aggregate(["word"], Emit(), ["n", "tag"]).fields == ["n", "tag"]
    assert words.partition_by(["word"]).shuffle().global_().broadcast().fields == ["line", "word"]
    counts = words.group_by("word").persistent_aggregate(MemoryMapState.Factory(), Count(), "count")
    assert counts.new_values_stream().fields == ["word", "count"]
    total = words.persistent_aggregate(MemoryMapState.Factory(), Count(), "total")
    assert total.kind == "snapshot" and total.new_values_stream().fields == ["total"]
    q = words.state_query(counts, ["word"], MapGet(), ["count"])
    assert q.fields == ["line", "word", "count"]
    assert q.node.new_fields[0].dtype is not None  # MapGet of a Count state is a bigint
    other = topo.new_stream("more", FileSpout(str(tmp_path)))
    assert topo.merge(lines, other).fields == ["line"]
    joined = topo.join(words, ["word"], other.each(["line"], Split(), ["w"]), ["w"], ["word", "l1", "l2"])
    assert joined.fields == ["word", "l1", "l2"]
    assert "persistent_aggregate:Count" in topo.describe()


def test_parallelism_hint_applies_to_the_operations_since_the_last_repartition(tmp_path: Path) -> None:
    _, lines = _lines(tmp_path)
    s = lines.partition_by(["line"]).each(["line"], Split(), ["word"]).each(Long()).parallelism_hint(3)
    part = s.node.parents[0].parents[0]
    assert part.kind == "partition" and part.parallelism == 3
    spout_side = lines.each(["line"], Split(), ["w2"]).parallelism_hint(2)
    assert spout_side.node.parents[0].parallelism == 2  # the spout's output is spread over 2 partitions
    state = s.group_by(["word"]).persistent_aggregate(MemoryMapState.Factory(), Count(), "c").parallelism_hint(4)
    assert state.parallelism == 4


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda s: s.each(["nope"], Split(), ["word"]), "unknown input field 'nope'"),
        (lambda s: s.each(["line"], Split(), ["line"]), "already exists"),
        (lambda s: s.each(["line"], Split()), "each() takes"),
        (lambda s: s.project([]), "at least one field"),
        (lambda s: s.group_by([]), "at least one field"),
        (lambda s: s.aggregate(len, ["n"]), "CombinerAggregator"),
        (lambda s: s.aggregate(Count(), ["a", "b"]), "one output field"),
        (lambda s: s.each(["line"], Split(), ["word:complex"]), "unknown type"),
        (lambda s: s.each(["line"], Split(), ["a", "a"]), "duplicate"),
        (lambda s: s.each(["line"], Split(), ["_weir_x"]), "reserved"),
        (
            lambda s: s.group_by(["line"]).persistent_aggregate(MemoryMapState.Factory(), Emit(), ["n"]),
            "use aggregate()",
        ),
        (lambda s: s.persistent_aggregate(object(), Count(), "n"), "make_state"),
        (lambda s: s.state_query(object(), ["line"], MapGet(), ["x"]), "TridentState"),
        (lambda s: s.partition_persist(MemoryMapState.Factory(), ["line"], Split()), "StateUpdater"),
        (lambda s: s.parallelism_hint(0), "positive int"),
    ],
)
def test_wiring_mistakes_are_refused_when_building(tmp_path: Path, build: Any, message: str) -> None:
    _, lines = _lines(tmp_path)
    with pytest.raises(TopologyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build(lines)


def test_topology_level_wiring_mistakes(tmp_path: Path) -> None:
    topo, lines = _lines(tmp_path)
    words = lines.each(["line"], Split(), ["word"])
    with pytest.raises(TopologyError, match="already exists"):
        topo.new_stream("lines", FileSpout(str(tmp_path)))
    with pytest.raises(TopologyError, match="expected a weir Spout"):
        topo.new_stream("x", object())  # type: ignore[arg-type]
    with pytest.raises(TopologyError, match="same number of fields"):
        topo.merge(lines, words)
    with pytest.raises(TopologyError, match="the join yields 3"):
        topo.join(words, ["word"], words, ["word"], ["a", "b"])
    other = TridentTopology().new_stream("o", FileSpout(str(tmp_path)))
    with pytest.raises(TopologyError, match="another TridentTopology|this topology"):
        topo.merge(lines, other)
    with pytest.raises(TopologyError, match="static state"):
        topo.new_static_state(MemoryMapState.Factory()).new_values_stream()


# ---- seed 004's spout × state table --------------------------------------------------------------
SPOUTS = {"transactional": FileSpout, "opaque": OpaqueFileSpout, "non_transactional": NonTransactionalFileSpout}
EXACT = {
    ("transactional", "transactional"), ("transactional", "opaque"), ("opaque", "opaque"),
}  # fmt: skip


@pytest.mark.parametrize("spout_kind", list(SPOUTS))
@pytest.mark.parametrize("state_kind", ["non_transactional", "transactional", "opaque"])
def test_the_guarantee_table_is_checked_at_submit(tmp_path: Path, spout_kind: str, state_kind: str) -> None:
    topo, lines = _lines(tmp_path, SPOUTS[spout_kind])
    lines.each(["line"], Split(), ["word"]).group_by(["word"]).persistent_aggregate(
        MemoryMapState.Factory(state_kind), Count(), "count"
    )
    conf = {"weir.state.dir": str(tmp_path / "state")}
    if (spout_kind, state_kind) in EXACT:
        assert topo.check_guarantees(conf) == []
        return
    with pytest.raises(TopologyError) as info:
        weir.submit("table", conf, topo)  # raises before any Spark session starts
    text = str(info.value)
    assert "cannot be exactly-once" in text and TABLE in text and "weir.trident.allow.inexact" in text
    assert f"spout 'lines' is {spout_kind.replace('_', '-')}" in text
    warned = topo.check_guarantees({**conf, "weir.trident.allow.inexact": True})
    assert len(warned) == 1 and "state-0" in warned[0]
    assert topo.check_guarantees({**conf, "weir.trident.allow.inexact": "true"}) == warned


def test_per_call_opt_out_and_undeclared_state_types(tmp_path: Path) -> None:
    from tests.trident._support import LocationDBFactory, LocationUpdater

    topo, lines = _lines(tmp_path, OpaqueFileSpout)
    words = lines.each(["line"], Split(), ["word"])
    words.group_by(["word"]).persistent_aggregate(
        MemoryMapState.Factory(StateType.TRANSACTIONAL), Count(), "count", allow_inexact=True
    )
    # a user's own State declares no type: accepted behind an opaque spout ...
    words.partition_persist(LocationDBFactory(str(tmp_path / "loc.db")), ["word", "line"], LocationUpdater())
    warned = topo.check_guarantees({})
    assert len(warned) == 1 and "transactional" in warned[0]
    # ... but nothing makes a non-transactional spout exactly-once
    topo2, lines2 = _lines(tmp_path, NonTransactionalFileSpout)
    lines2.partition_persist(LocationDBFactory(str(tmp_path / "loc.db")), ["line"], LocationUpdater())
    with pytest.raises(TopologyError, match="non-transactional"):
        topo2.check_guarantees({})
    with pytest.raises(ConfigError, match="must be true or false"):
        topo2.check_guarantees({"weir.trident.allow.inexact": "maybe"})


def test_memory_map_state_is_refused_on_a_cluster_master(tmp_path: Path) -> None:
    topo, lines = _lines(tmp_path)
    lines.group_by(["line"]).persistent_aggregate(MemoryMapState.Factory(), Count(), "count")
    # the check itself, on the master the run will use (a submit in this test session would use the
    # session's local master, whatever weir.spark.master says)
    from weir.runtime.spark.trident.runner import _memory_states

    with pytest.raises(ConfigError, match="local mode only") as ei:
        _memory_states("mem", topo, "spark://10.0.0.1:7077")
    assert "spark://10.0.0.1:7077" in str(ei.value) and "MemoryMapState" in str(ei.value)


def test_an_empty_topology_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="no stream"):
        weir.submit("empty", {"weir.state.dir": str(tmp_path / "state")}, TridentTopology())


# ---- fields, the any-encoding, tuples ---------------------------------------------------------------
def test_field_specs() -> None:
    from pyspark.sql.types import BinaryType, DoubleType, LongType, StringType

    fs = parse_fields(["word:str", "n:int", "x: float", "b:binary", "raw"])
    assert [f.name for f in fs] == ["word", "n", "x", "b", "raw"]
    assert [f.dtype for f in fs[:4]] == [StringType(), LongType(), DoubleType(), BinaryType()]
    assert fs[4].is_any and fs[4].spark_type() == BinaryType()
    assert [f.name for f in parse_fields("a, b")] == ["a", "b"]
    assert parse_fields({"a": "bigint", "b": StringType()})[1].dtype == StringType()
    assert [f.name for f in parse_fields(weir.topology.Fields("a", "b"))] == ["a", "b"]


scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(), st.binary())
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner), max_leaves=8)


# hypothesis's check that ``extend`` recurses can misfire on the ``|`` of two strategies (it warns, and
# warnings are errors here): the strategy does recurse, as the nested values it draws show
@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
@given(values)
def test_the_any_encoding_round_trips_and_is_canonical(value: Any) -> None:
    encoded = encode_any(value)
    if value is None:
        assert encoded is None
        return
    assert decode_any(encoded) == value
    assert type(decode_any(encoded)) is type(value)
    rebuilt = pickle.loads(pickle.dumps(value))  # an equal value built separately encodes identically
    assert encode_any(rebuilt) == encoded


def test_the_any_encoding_pickles_other_objects() -> None:
    from decimal import Decimal

    assert decode_any(encode_any(Decimal("1.5"))) == Decimal("1.5")
    assert decode_any(encode_any({"a": [1, 2]})) == {"a": [1, 2]}


def test_trident_tuples() -> None:
    t = make_tuple(["word", "n"], ["cat", 3])
    assert t[0] == "cat" and t["n"] == 3 and t.get_string(0) == "cat" and t.get_integer_by_field("n") == 3
    assert t.get_float(1) == 3.0 and t.select(["n", "word"]) == [3, "cat"] and t.contains("n")
    assert list(t.get_fields()) == ["word", "n"] and t.get_values() == ["cat", 3] and t.size() == 2
    with pytest.raises(TypeError, match="not str"):
        t.get_string(1)
    with pytest.raises(KeyError, match="fields are"):
        t["nope"]
    back = pickle.loads(pickle.dumps(t))
    assert back == t and back["word"] == "cat"
    assert repr(t) == "TridentTuple(word='cat', n=3)"


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 16])
def test_routing_values_land_in_their_partition(n: int) -> None:
    qs = spark_routing_values(n)
    assert [spark_int_hash(q) % n for q in qs] == list(range(n))


def test_spark_int_hash_matches_known_spark_values() -> None:
    # pmod(hash(CAST(id AS INT)), 7) and hash() values measured in Spark 4.3
    assert [spark_int_hash(i) for i in range(4)] == [933211791, -559580957, 1765031574, -1823081949]


def test_sum_and_count_describe_their_sql() -> None:
    from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType

    assert Count().value_type([]) == LongType()
    assert Sum().value_type([IntegerType()]) == LongType()
    assert Sum().value_type([DoubleType()]) == DoubleType()
    assert Sum().value_type([StringType()]) is None and Sum().value_type([None]) is None
    assert Sum().combine(None, 2) == 2 and Sum().combine(1, 2) == 3


def test_the_plan_is_stored_as_a_graph_for_weir_ui(tmp_path: Path) -> None:
    """``trident_shape``: every operation a component, state operations stateful, edges to parents."""
    from weir.runtime.spark.trident.runner import trident_shape

    topo, lines = _lines(tmp_path)
    words = lines.each(["line"], Split(), ["word"])
    counts = words.group_by("word").persistent_aggregate(MemoryMapState.Factory(), Count(), "count")
    words.state_query(counts, ["word"], MapGet(), ["count"])
    shape = trident_shape(topo.nodes)
    comps = {c["id"]: c for c in shape["components"]}
    assert shape["dialect"] == "trident"
    assert comps["lines"]["kind"] == "spout" and not comps["lines"]["stateful"]
    stateful = {c["class"] for c in comps.values() if c["stateful"]}
    assert stateful == {"persist_agg", "state_query"}
    for c in comps.values():  # every edge names a component of the graph
        assert all(i["source"] in comps for i in c["inputs"])
    persist = next(c for c in comps.values() if c["class"] == "persist_agg")
    assert persist["inputs"] and persist["inputs"][0]["grouping"] == "partition"
    json.dumps(shape)  # stored as JSON beside the coordinator record
