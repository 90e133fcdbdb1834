"""Storm's topology API: builder validation, Fields / Values / Tuple, and the output collectors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from weir.errors import TopologyError
from weir.topology import (
    DEFAULT_STREAM,
    BasicBolt,
    BasicOutputCollector,
    Bolt,
    Fields,
    GroupingKind,
    OutputCollector,
    OutputFieldsDeclarer,
    Spout,
    StatefulBolt,
    TopologyBuilder,
    TopologyContext,
    Tuple,
    Values,
)


# ---- components ------------------------------------------------------------------------------
class WordSpout(Spout):
    def __init__(self, fields: tuple[str, ...] = ("sentence",), direct: bool = False) -> None:
        self.fields = fields
        self.direct = direct

    def create_stream(self, spark: Any, context: Any) -> Any:  # never called: no Spark here
        raise NotImplementedError

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields(*self.fields), direct=self.direct)


class SilentSpout(Spout):
    def create_stream(self, spark: Any, context: Any) -> Any:
        raise NotImplementedError


class Splitter(Bolt):
    def execute(self, tup: Tuple) -> None:
        for w in tup.get_string(0).split():
            self.collector.emit(Values(w), anchors=[tup])

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["word"])
        declarer.declare_stream("lengths", ("word", "length"), direct=True)


class Counter(StatefulBolt):
    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Tuple) -> None:
        pass

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields("word", "count"))


class Printer(BasicBolt):
    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        pass


class Broken(Bolt):
    def execute(self, tup: Tuple) -> None:
        pass

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        raise RuntimeError("no fields today")


def base() -> TopologyBuilder:
    b = TopologyBuilder()
    b.set_spout("spout", WordSpout())
    b.set_bolt("split", Splitter(), 2).shuffle_grouping("spout")
    return b


def topology_error(builder: TopologyBuilder) -> TopologyError:
    with pytest.raises(TopologyError) as info:
        builder.create_topology()
    return info.value


# ---- a valid topology ----------------------------------------------------------------------------
def test_valid_topology_is_ordered_and_described() -> None:
    b = base()
    b.set_bolt("count", Counter(), 3).fields_grouping("split", Fields("word"))
    b.set_bolt("print", Printer()).global_grouping("count").direct_grouping("split", "lengths")
    topo = b.create_topology()
    assert topo.order.index("spout") < topo.order.index("split") < topo.order.index("count") < topo.order.index("print")
    assert [c.id for c in topo.spouts] == ["spout"]
    assert [c.id for c in topo.bolts] == ["split", "count", "print"]
    assert [c.id for c in topo.stateful] == ["count"]
    split = topo.components["split"]
    assert split.parallelism == 2
    assert split.outputs == {"default": Fields("word"), "lengths": Fields("word", "length")}
    assert split.direct_streams == {"lengths"}
    count = topo.components["count"]
    assert count.inputs[0].grouping.kind is GroupingKind.FIELDS
    assert count.inputs[0].grouping.fields == ("word",)
    assert sorted((c.id, s.stream) for c, s in topo.consumers("split")) == [
        ("count", DEFAULT_STREAM),
        ("print", "lengths"),
    ]


def test_every_grouping_kind_and_fields_grouping_with_a_stream() -> None:
    b = base()
    d = b.set_bolt("x", Printer(), 2)
    d.shuffle_grouping("split").all_grouping("split").none_grouping("split")
    d.local_or_shuffle_grouping("split").global_grouping("split")
    d.fields_grouping("split", "lengths", Fields("length")).fields_grouping("split", "word")
    d.add_configuration("k", 1).set_num_tasks(4)
    topo = b.create_topology()
    spec = topo.components["x"]
    assert [s.grouping.kind for s in spec.inputs] == [
        GroupingKind.SHUFFLE,
        GroupingKind.ALL,
        GroupingKind.NONE,
        GroupingKind.LOCAL_OR_SHUFFLE,
        GroupingKind.GLOBAL,
        GroupingKind.FIELDS,
        GroupingKind.FIELDS,
    ]
    assert (spec.inputs[5].stream, spec.inputs[5].grouping.fields) == ("lengths", ("length",))
    assert spec.inputs[6].grouping.fields == ("word",)
    assert (spec.conf, spec.parallelism) == ({"k": 1}, 4)


# ---- validation ------------------------------------------------------------------------------
def test_grouping_on_an_unknown_component() -> None:
    b = base()
    b.set_bolt("count", Counter()).shuffle_grouping("splitter")
    err = topology_error(b)
    assert err.component == "count"
    assert "bolt 'count' subscribes to unknown component 'splitter'" in str(err)
    assert "known components: count, split, spout" in str(err)


def test_cycle_is_refused_and_shown() -> None:
    b = base()
    b.set_bolt("a", Splitter()).shuffle_grouping("split").shuffle_grouping("b")
    b.set_bolt("b", Splitter()).shuffle_grouping("a")
    err = topology_error(b)
    assert "cycle (a -> b -> a)" in str(err)
    assert err.component == "a"
    assert "break the cycle" in str(err)


def test_self_loop_is_a_cycle() -> None:
    b = base()
    b.set_bolt("loop", Splitter()).shuffle_grouping("split").shuffle_grouping("loop")
    assert "cycle (loop -> loop)" in str(topology_error(b))


def test_fields_grouping_on_an_undeclared_field() -> None:
    b = base()
    b.set_bolt("count", Counter()).fields_grouping("split", Fields("word", "lang"))
    err = topology_error(b)
    assert err.component == "count"
    assert "bolt 'count': fields grouping on ['lang'] of 'split' stream 'default'" in str(err)
    assert "whose fields are ['word']" in str(err)


def test_fields_grouping_needs_fields_and_a_known_call_form() -> None:
    with pytest.raises(TopologyError, match="'count': fields_grouping on 'split' needs at least one field"):
        base().set_bolt("count", Counter()).fields_grouping("split", Fields())
    with pytest.raises(TopologyError, match=r"bolt 'count': fields_grouping\(component, \[stream,\] fields\)"):
        base().set_bolt("count", Counter()).fields_grouping("split")


def test_subscribing_to_an_undeclared_stream() -> None:
    b = base()
    b.set_bolt("count", Counter()).shuffle_grouping("split", "errors")
    err = topology_error(b)
    assert err.component == "count"
    assert "stream 'errors' of 'split', which declares only ['default', 'lengths']" in str(err)


def test_subscribing_to_a_component_without_streams() -> None:
    b = base()
    b.set_bolt("print", Printer()).shuffle_grouping("split")
    b.set_bolt("after", Printer()).shuffle_grouping("print")
    assert "which declares only no streams" in str(topology_error(b))


def test_direct_grouping_on_a_stream_that_is_not_direct() -> None:
    b = base()
    b.set_bolt("count", Counter()).direct_grouping("split")
    err = topology_error(b)
    assert err.component == "count"
    assert "direct grouping on stream 'default' of 'split', which is not declared direct" in str(err)
    assert "declare_stream(..., direct=True)" in str(err)


def test_direct_grouping_on_a_direct_spout_stream_is_fine() -> None:
    b = TopologyBuilder()
    b.set_spout("spout", WordSpout(direct=True))
    b.set_bolt("print", Printer()).direct_grouping("spout")
    assert b.create_topology().components["print"].inputs[0].grouping.kind is GroupingKind.DIRECT


def test_bolt_without_inputs() -> None:
    b = base()
    b.set_bolt("lonely", Printer())
    err = topology_error(b)
    assert err.component == "lonely"
    assert "bolt 'lonely' has no inputs" in str(err)
    assert ".shuffle_grouping('spout')" in str(err)


def test_duplicate_component_id() -> None:
    b = base()
    with pytest.raises(TopologyError, match="component id 'split' is used twice") as info:
        b.set_bolt("split", Printer())
    assert info.value.component == "split"
    with pytest.raises(TopologyError, match="'spout' is used twice"):
        b.set_spout("spout", WordSpout())


@pytest.mark.parametrize("cid", ["", "$checkpointspout", "a/b", 3])
def test_invalid_component_id(cid: Any) -> None:
    with pytest.raises(TopologyError, match="must be a non-empty string"):
        TopologyBuilder().set_bolt(cid, Printer())


@pytest.mark.parametrize("n", [0, -1, True, "2", 1.5, None])
def test_bad_parallelism(n: Any) -> None:
    with pytest.raises(TopologyError, match=r"component 'split': parallelism must be a positive int") as info:
        TopologyBuilder().set_bolt("split", Splitter(), n)
    assert info.value.component == "split"
    with pytest.raises(TopologyError, match=r"component 'spout': parallelism must be a positive int"):
        TopologyBuilder().set_spout("spout", WordSpout(), n)
    with pytest.raises(TopologyError, match=r"component 'x': parallelism must be a positive int"):
        TopologyBuilder().set_bolt("x", Printer()).set_num_tasks(n)


def test_topology_without_a_spout() -> None:
    b = TopologyBuilder()
    b.set_bolt("print", Printer()).shuffle_grouping("print")
    err = topology_error(b)
    assert "needs at least one spout" in str(err)


def test_wrong_component_types() -> None:
    with pytest.raises(TopologyError, match=r"set_spout\('s'\): Printer is not a weir Spout") as info:
        TopologyBuilder().set_spout("s", Printer())  # type: ignore[arg-type]
    assert info.value.component == "s"
    with pytest.raises(TopologyError, match=r"set_bolt\('b'\): WordSpout is not a Bolt"):
        TopologyBuilder().set_bolt("b", WordSpout())
    with pytest.raises(TopologyError, match="grouping source must be a component id"):
        TopologyBuilder().set_bolt("b", Printer()).shuffle_grouping("")


def test_spout_without_output_fields() -> None:
    b = TopologyBuilder()
    b.set_spout("quiet", SilentSpout())
    err = topology_error(b)
    assert (err.component, str(err)) == ("quiet", "spout 'quiet' declares no output fields")


def test_failing_declare_output_fields_is_reported_with_the_component() -> None:
    b = base()
    b.set_bolt("broken", Broken()).shuffle_grouping("split")
    err = topology_error(b)
    assert err.component == "broken"
    assert "component 'broken': declare_output_fields failed: no fields today" in str(err)
    assert isinstance(err.__cause__, RuntimeError)


def test_consistent_region_with_an_unknown_component() -> None:
    b = base()
    b.consistent_region("split", "nope")
    err = topology_error(b)
    assert err.component == "nope"
    assert "consistent_region names unknown component 'nope'" in str(err)


def test_output_fields_declarer_refuses_bad_and_duplicate_streams() -> None:
    d = OutputFieldsDeclarer()
    d.declare(["a"])
    with pytest.raises(ValueError, match="stream 'default' is declared twice"):
        d.declare(["b"])
    with pytest.raises(ValueError, match=r"invalid stream id '\$checkpoint'"):
        d.declare_stream("$checkpoint", ["a"])


# ---- Fields / Values / Tuple ---------------------------------------------------------------------
def test_fields() -> None:
    f = Fields("word", "count")
    assert f == Fields(["word", "count"]) == Fields("word", ["count"])
    assert f == ["word", "count"] and f == ("word", "count")
    assert f != Fields("count", "word")
    assert hash(f) == hash(Fields(["word", "count"]))
    assert (len(f), f[1], list(f), f.to_list()) == (2, "count", ["word", "count"], ["word", "count"])
    assert "word" in f and "lang" not in f
    assert f.field_index("count") == 1
    with pytest.raises(KeyError, match=r"unknown field 'lang'; fields are \['word', 'count'\]"):
        f.field_index("lang")
    assert f.select(Fields("count"), ["x", 3]) == [3]
    assert f.select(["count", "word"], ["x", 3]) == [3, "x"]
    assert repr(f) == "Fields('word', 'count')"
    with pytest.raises(ValueError, match="duplicate field names"):
        Fields("a", "a")
    with pytest.raises(TypeError, match="non-empty strings"):
        Fields("a", "")
    with pytest.raises(TypeError, match="non-empty strings"):
        Fields(["a", 1])  # type: ignore[list-item]


def test_values_is_a_list() -> None:
    v = Values("word", 3)
    assert v == ["word", 3] and isinstance(v, list)
    assert Values() == []


def make_tuple() -> Tuple:
    return Tuple(Values("storm", 7, 2.5, True), Fields("word", "count", "weight", "flag"), "split", "words", 3, 11)


def test_tuple_accessors() -> None:
    t = make_tuple()
    assert (t.source_component, t.source_stream_id, t.source_task, t.txid) == ("split", "words", 3, 11)
    assert t.get_string(0) == "storm"
    assert t.get_integer(1) == 7 and t.get_long(1) == 7
    assert t.get_float(2) == 2.5 and t.get_double(1) == 7.0
    assert t.get_value(3) is True
    assert t.get_value_by_field("count") == 7
    assert t.get_string_by_field("word") == "storm"
    assert t.get_integer_by_field("count") == 7
    assert t[0] == "storm" and t["weight"] == 2.5 and t[-1] is True
    assert (len(t), t.size(), list(t)) == (4, 4, ["storm", 7, 2.5, True])
    assert t.get_values() == ["storm", 7, 2.5, True]
    assert t.get_fields() == Fields("word", "count", "weight", "flag")
    assert t.contains("flag") and not t.contains("lang")
    assert t.select(Fields("count", "word")) == [7, "storm"]
    assert repr(t) == "Tuple(['storm', 7, 2.5, True], from=split:words[3])"


def test_tuple_type_errors_name_the_source() -> None:
    t = make_tuple()
    with pytest.raises(TypeError, match="field 1 of a tuple from 'split' is int, not str"):
        t.get_string(1)
    with pytest.raises(TypeError, match="field 0 of a tuple from 'split' is str, not int"):
        t.get_integer(0)
    with pytest.raises(TypeError, match="is bool, not int"):
        t.get_integer(3)
    with pytest.raises(KeyError, match="unknown field 'lang'"):
        t["lang"]
    with pytest.raises(IndexError):
        t.get_value(9)


def test_tuple_defaults() -> None:
    t = Tuple(["x"], Fields("w"), "spout")
    assert (t.source_stream_id, t.source_task, t.txid) == (DEFAULT_STREAM, 0, None)


def test_topology_context() -> None:
    ctx = TopologyContext("wc", "count", 2, 4, component_tasks={"count": 4, "split": 2})
    assert ctx.state_namespace == "wc-count-2"
    assert (ctx.this_task_id, ctx.this_component_id) == (2, "count")
    assert ctx.get_component_tasks("split") == [0, 1]
    assert ctx.get_component_tasks("unknown") == []


# ---- collectors ------------------------------------------------------------------------------
def collector() -> OutputCollector:
    return OutputCollector("split", 2, {"default": Fields("word"), "pairs": ("a", "b")}, topology="wc")


def test_emit_and_emit_direct_buffer_validated_tuples() -> None:
    out = collector()
    src = make_tuple()
    out.emit(Values("a"), anchors=[src])
    out.emit(["x", "y"], anchors=src, stream="pairs")
    out.emit_direct(3, ("z",))
    out.emit_direct(1, ["p", "q"], stream="pairs")  # a task index must be an int (see test_storm_call_shapes)
    assert out.emitted == [
        ("default", ("a",), None),
        ("pairs", ("x", "y"), None),
        ("default", ("z",), 3),
        ("pairs", ("p", "q"), 1),
    ]


@pytest.mark.parametrize("direct", [False, True])
def test_emit_on_an_undeclared_stream(direct: bool) -> None:
    out = collector()
    with pytest.raises(TopologyError) as info:
        if direct:
            out.emit_direct(0, ["a"], stream="errors")
        else:
            out.emit(["a"], stream="errors")
    err = info.value
    assert (err.topology, err.component, err.task) == ("wc", "split", 2)
    assert "topology 'wc', component 'split', task 2: emit on undeclared stream 'errors'" in str(err)
    assert "(declared: default, pairs)" in str(err)
    assert "declare_stream" in str(err)
    assert out.emitted == []


def test_emit_with_the_wrong_number_of_values() -> None:
    out = collector()
    with pytest.raises(TopologyError) as info:
        out.emit(Values("a", "b"))
    err = info.value
    assert (err.topology, err.component, err.task) == ("wc", "split", 2)
    assert "task 2: emitted 2 values on stream 'default', which declares 1 fields" in str(err)
    with pytest.raises(TopologyError, match="emitted 1 values on stream 'pairs', which declares 2 fields"):
        out.emit_direct(0, ["a"], stream="pairs")


@pytest.mark.parametrize("values", ["ab", b"ab", {"a": 1, "b": 2}, 5])
def test_emit_of_something_that_is_not_a_list_of_values(values: Any) -> None:
    out = collector()
    with pytest.raises(TopologyError) as info:
        out.emit(values, stream="pairs")  # "ab" would otherwise become the two values "a", "b"
    err = info.value
    assert (err.topology, err.component, err.task) == ("wc", "split", 2)
    assert f"emit takes a list of values, e.g. Values(word, count), got {type(values).__name__}" in str(err)
    with pytest.raises(TopologyError, match="emit takes a list of values"):
        BasicOutputCollector(out).emit_direct(0, values)
    assert out.emitted == []


def test_emit_without_declared_streams() -> None:
    out = OutputCollector("sink", 0, {}, topology="wc")
    with pytest.raises(TopologyError, match=r"\(declared: none\)"):
        out.emit(["a"])


def test_ack_fail_and_report_error() -> None:
    out = collector()
    t1, t2 = make_tuple(), make_tuple()
    out.ack(t1)
    out.ack(t2)
    out.fail(t1)
    out.fail(t2, "bad word")
    assert out.acked == 2
    assert out.failed == [(t1, "failed by the bolt (collector.fail)"), (t2, "bad word")]
    try:
        raise ValueError("disk full")
    except ValueError as exc:
        out.report_error(exc)
    out.report_error("just a note")
    assert len(out.errors) == 2
    assert out.errors[0].startswith("Traceback") and "ValueError: disk full" in out.errors[0]
    assert out.errors[1] == "just a note"
    assert out.emitted == []  # none of these emit or fail the batch by themselves


def test_basic_output_collector_emits_through_the_output_collector() -> None:
    out = collector()
    basic = BasicOutputCollector(out)
    basic.current = make_tuple()
    basic.emit(["a"])
    basic.emit(["a", "b"], stream="pairs")
    basic.emit_direct(1, ["c"])
    basic.report_error("oops")
    assert out.emitted == [("default", ("a",), None), ("pairs", ("a", "b"), None), ("default", ("c",), 1)]
    assert out.errors == ["oops"]
    with pytest.raises(TopologyError, match="component 'split', task 2: emit on undeclared stream 'x'"):
        basic.emit(["a"], stream="x")


def test_bolt_default_prepare_keeps_the_collector() -> None:
    bolt = Splitter()
    out = OutputCollector("split", 0, {"default": Fields("word"), "lengths": Fields("word", "length")})
    conf: Mapping[str, Any] = {}
    bolt.prepare(conf, TopologyContext("wc", "split"), out)
    assert bolt.collector is out
    bolt.execute(Tuple(["a b"], Fields("sentence"), "spout"))
    assert out.emitted == [("default", ("a",), None), ("default", ("b",), None)]
