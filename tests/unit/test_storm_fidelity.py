"""Storm fidelity without Spark: the ack contract, Storm's call shapes, execute signatures, Storm's names."""

from __future__ import annotations

from typing import Any

import pytest

import weir.topology as wt
import weir.trident as tr
from tests.spark._fidelity import ForgetsSomeAcks, Seed000WordCountBolt, Seed003WordCountBolt
from weir.errors import ConfigError, TopologyError
from weir.runtime.spark.config import RuntimeConfig
from weir.runtime.spark.storm.task import TaskSpec, run_task
from weir.sources import RateSpout
from weir.state import KeyValueState, StateFactory
from weir.state.config import parse_provider_config
from weir.testing import BoltTester
from weir.topology import (
    BaseBasicBolt,
    BaseRichBolt,
    BasicOutputCollector,
    Fields,
    OutputCollector,
    TopologyBuilder,
    Tuple,
    Values,
)


# ---- the seeds' WordCountBolt, ported verbatim (tests/spark/_fidelity.py) -----------------------
@pytest.mark.parametrize("bolt", [Seed000WordCountBolt, Seed003WordCountBolt])
def test_seed_word_count_bolts_count_exactly_in_the_tester(bolt: type) -> None:
    t = BoltTester(bolt(), inputs={"split": ["word"]}, topology="wc", component="count")
    for w in ["a", "b", "a", "c", "a"]:
        t.execute("split", [w])
    assert [v for _s, v in t.emitted()] == [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("a", 3)]
    t.checkpoint()
    assert t.committed() == {"a": 3, "b": 1, "c": 1}


# ---- the ack contract ----------------------------------------------------------------------------
def _spec(comp: Any, provider: Any, **kw: Any) -> TaskSpec:
    return TaskSpec(
        topology="acks",
        component_id="count",
        component=comp,
        parallelism=1,
        outputs={},
        input_fields={("split", "default"): Fields("word")},
        component_tasks={"split": 1, "count": 1},
        provider=provider,
        stateful=True,
        **kw,
    )


def _words(*ws: str) -> list[tuple[str, str, tuple[str], int]]:
    return [("split", "default", (w,), 0) for w in ws]


def test_unacked_tuples_fail_the_task_naming_component_task_txid_and_count(tmp_path: Any) -> None:
    provider = StateFactory.from_url(f"sqlite:///{tmp_path / 's.db'}")
    out = list(run_task(_spec(ForgetsSomeAcks(), provider), 0, 7, 1, _words("a", "x1", "b", "x2", "x3")))
    rep = out[-1][1]
    assert not rep.ok
    assert (
        "topology 'acks', component 'count', task 0, txid 7: 3 input tuple(s) were never acked or failed "
        "(first: ['x1'] from 'split')" in rep.error
    )
    assert "topology.acker.executors = 0" in rep.error
    assert provider.backend.txids("acks-count-0").prepared is None  # nothing prepared: the batch fails


def test_unacked_tuples_go_to_dead_letters_when_a_sink_is_set(tmp_path: Any) -> None:
    provider = StateFactory.from_url(f"sqlite:///{tmp_path / 's.db'}")
    out = list(run_task(_spec(ForgetsSomeAcks(), provider, deadletter=True), 0, 7, 1, _words("a", "x1", "x2")))
    dead = [r[1] for r in out if r[0] == "D"]
    assert [d["values"] for d in dead] == [["x1"], ["x2"]]
    assert all("never acked or failed (Storm's message timeout)" in d["error"] for d in dead)
    assert out[-1][1].ok and out[-1][1].failed == 2


def test_acking_off_keeps_committing_unacked_tuples(tmp_path: Any) -> None:
    provider = StateFactory.from_url(f"sqlite:///{tmp_path / 's.db'}")
    out = list(run_task(_spec(ForgetsSomeAcks(), provider, acking=False), 0, 7, 1, _words("a", "x1")))
    assert out[-1][1].ok
    assert provider.backend.txids("acks-count-0").prepared == 7


def test_tester_refuses_a_checkpoint_with_unacked_tuples() -> None:
    t = BoltTester(ForgetsSomeAcks(), inputs={"split": ["word"]}, component="count")
    t.execute("split", ["a"])
    t.execute("split", ["x"])
    assert [u.values for u in t.unacked] == [["x"]]
    with pytest.raises(TopologyError, match="component 'count', task 0, txid 1: 1 input tuple"):
        t.checkpoint()


def _collector() -> OutputCollector:
    return OutputCollector(
        "split", 1, {"default": Fields("word"), "pairs": Fields("a", "b")}, topology="wc", acking=True
    )


def _input(out: OutputCollector, *values: Any) -> Tuple:
    return out.received(Tuple(list(values), Fields("line"), "lines", "default", 0, 1))


def test_anchor_ack_or_fail_of_a_tuple_the_task_never_received_errors_at_the_call() -> None:
    out = _collector()
    mine = _input(out, "a b")
    stranger = Tuple(["c"], Fields("line"), "lines")
    for call in (lambda: out.emit(stranger, Values("c")), lambda: out.ack(stranger), lambda: out.fail(stranger)):
        with pytest.raises(TopologyError, match=r"tuple \['c'\] from 'lines' was not received by this task"):
            call()
    out.emit(mine, Values("a"))
    out.ack(mine)
    assert out.unacked == [] and out.acked == 1


# ---- Storm's call shapes -------------------------------------------------------------------------
def test_storm_call_shapes_dispatch_on_argument_types() -> None:
    out = _collector()
    t1, t2 = _input(out, "x"), _input(out, "y")
    out.emit(Values("a"))
    out.emit("pairs", Values("a", "b"))
    out.emit(t1, Values("c"))
    out.emit([t1, t2], Values("d"))
    out.emit("pairs", t1, Values("e", "f"))
    out.emit("pairs", [t1, t2], ["g", "h"])
    out.emit([], Values("i"))  # an empty anchor list: unanchored
    out.emit(Values("j"), anchors=[t1])  # weir's keywords still work
    out.emit_direct(2, Values("k"))
    out.emit_direct(3, "pairs", Values("l", "m"))
    out.emit_direct(4, t1, Values("n"))
    out.emit_direct(5, "pairs", [t1], ("o", "p"))
    out.emit(Values(t1))  # a Values holding a Tuple is values, never anchors
    assert out.emitted == [
        ("default", ("a",), None),
        ("pairs", ("a", "b"), None),
        ("default", ("c",), None),
        ("default", ("d",), None),
        ("pairs", ("e", "f"), None),
        ("pairs", ("g", "h"), None),
        ("default", ("i",), None),
        ("default", ("j",), None),
        ("default", ("k",), 2),
        ("pairs", ("l", "m"), 3),
        ("default", ("n",), 4),
        ("pairs", ("o", "p"), 5),
        ("default", (t1,), None),
    ]


@pytest.mark.parametrize(
    ("call", "text"),
    [
        (
            lambda o, t: o.emit(Values("a"), t),
            "emit: the last argument is an input tuple, so the values are "
            "missing or the arguments are in the wrong order; use emit([stream,] [anchor | [anchors],] values)",
        ),
        (lambda o, t: o.emit(Values("a"), [t]), "emit: the last argument is an input tuple list"),
        (lambda o, t: o.emit(t), "emit: the last argument is an input tuple"),
        (lambda o, t: o.emit(["a"], ["b"]), "emit: ambiguous call with two lists (['a'], ['b'])"),
        (lambda o, t: o.emit(Values("a", "b"), "pairs"), "emit: the last argument is the stream id 'pairs'"),
        (lambda o, t: o.emit("pairs", "default", ["a"]), "emit: two stream ids ('pairs', 'default')"),
        (lambda o, t: o.emit("pairs", ["a", "b"], stream="pairs"), "the stream is given twice"),
        (lambda o, t: o.emit(t, ["a"], anchors=[t]), "the anchors are given twice"),
        (lambda o, t: o.emit("default", t, [t], ["a"]), "emit: too many arguments"),
        (
            lambda o, t: o.emit_direct("1", ["a"]),
            "emit_direct: the first argument is the target task index (an int), got str '1'",
        ),
        (lambda o, t: o.emit_direct(t, ["a"]), "emit_direct: the first argument is the target task index"),
        (
            lambda o, t: BasicOutputCollector(o).emit(t, ["a"]),
            "emit: anchors are not accepted here; use BasicOutputCollector.emit([stream,] values)",
        ),
    ],
)
def test_wrong_argument_order_and_ambiguous_calls_raise_with_the_storm_shape(call: Any, text: str) -> None:
    out = _collector()
    t = _input(out, "x")
    with pytest.raises(TopologyError) as info:
        call(out, t)
    assert "topology 'wc', component 'split', task 1: " in str(info.value)
    assert text in str(info.value)
    assert out.emitted == []


def test_basic_output_collector_storm_shapes() -> None:
    out = _collector()
    basic = BasicOutputCollector(out)
    basic.current = _input(out, "x")
    basic.emit(Values("a"))
    basic.emit("pairs", Values("a", "b"))
    basic.emit_direct(1, Values("c"))
    basic.emit_direct(2, "pairs", ["d", "e"])
    assert out.emitted == [
        ("default", ("a",), None),
        ("pairs", ("a", "b"), None),
        ("default", ("c",), 1),
        ("pairs", ("d", "e"), 2),
    ]


# ---- execute signatures, checked when the topology is created (before submit) -------------------
class NoArgs(BaseRichBolt):
    def execute(self) -> None:  # type: ignore[override]
        pass


class ThreeArgs(BaseRichBolt):
    def execute(self, tup: Any, collector: Any, extra: Any) -> None:  # type: ignore[override]
        pass


class BasicOneArg(BaseBasicBolt):
    def execute(self, tup: Any) -> None:  # type: ignore[override]
        pass


class KeywordOnly(BaseRichBolt):
    def execute(self, tup: Any, *, mode: str) -> None:  # type: ignore[override]
        pass


@pytest.mark.parametrize(
    ("bolt", "text"),
    [
        (
            NoArgs(),
            "component 'b': NoArgs.execute() cannot be called by weir; write execute(self, tup) (ack or "
            "fail each tuple with self.collector) or execute(self, tup, collector)",
        ),
        (ThreeArgs(), "component 'b': ThreeArgs.execute(tup, collector, extra) cannot be called by weir"),
        (
            BasicOneArg(),
            "component 'b': BasicOneArg.execute(tup) cannot be called by weir; write "
            "execute(self, tup, collector) (a BasicBolt gets a BasicOutputCollector)",
        ),
        (KeywordOnly(), "KeywordOnly.execute(tup, *, mode) cannot be called by weir"),
    ],
)
def test_an_execute_weir_cannot_call_is_refused_when_the_topology_is_created(bolt: Any, text: str) -> None:
    b = TopologyBuilder()
    b.set_spout("rate", RateSpout(rows_per_batch=10))
    b.set_bolt("b", bolt).shuffle_grouping("rate")
    with pytest.raises(TopologyError) as info:
        b.create_topology()
    assert text in str(info.value)
    assert info.value.component == "b"


# ---- names and configuration ---------------------------------------------------------------------
def test_storm_names_are_importable_aliases() -> None:
    assert wt.IStatefulBolt is wt.BaseStatefulBolt is wt.StatefulBolt
    assert wt.BaseRichBolt is wt.IRichBolt is wt.Bolt
    assert wt.BaseBasicBolt is wt.IBasicBolt is wt.BasicBolt
    assert wt.BaseRichSpout is wt.Spout
    assert wt.BaseWindowedBolt is wt.WindowedBolt
    assert wt.BaseStatefulWindowedBolt is wt.StatefulWindowedBolt
    assert wt.FailedException is wt.FailedTuple
    # Storm's generic state parameter reads the same in Python
    kv = KeyValueState[str, int]
    assert wt.BaseStatefulBolt[kv].__origin__ is wt.StatefulBolt  # type: ignore[attr-defined]
    assert wt.BaseStatefulWindowedBolt[kv].__origin__ is wt.StatefulWindowedBolt  # type: ignore[attr-defined]
    assert tr.BaseQueryFunction is tr.QueryFunction
    assert tr.BaseStateUpdater is tr.StateUpdater
    assert tr.IBackingMap is tr.BackingMap
    assert tr.BaseFunction is tr.Function
    assert tr.BaseFilter is tr.Filter
    assert tr.BaseAggregator is tr.Aggregator


# every provider class name the seeds mention
SEED_PROVIDERS = {
    "org.apache.storm.redis.state.RedisKeyValueStateProvider": "redis",
    "org.apache.storm.hbase.state.HBaseKeyValueStateProvider": "hbase",
    "org.apache.storm.state.InMemoryKeyValueStateProvider": "memory",  # Storm's default
}


#: the provider config each seed gives with its class name (seed 003's HBase keys)
SEED_CONFIGS = {
    "org.apache.storm.hbase.state.HBaseKeyValueStateProvider": {
        "hbaseConfigKey": "hbase.conf",
        "tableName": "state",
        "columnFamily": "cf",
    },
}


@pytest.mark.parametrize(("name", "short"), sorted(SEED_PROVIDERS.items()))
def test_every_storm_provider_name_of_the_seeds_maps_to_a_weir_provider(name: str, short: str) -> None:
    conf: dict[str, Any] = {"topology.state.provider": name}
    if name in SEED_CONFIGS:
        conf["topology.state.provider.config"] = SEED_CONFIGS[name]
        conf["hbase.conf"] = {"hbase.regionserver.thrift.port": 9090}
    assert parse_provider_config(conf).provider == short


def test_an_unknown_java_provider_class_is_named_not_imported() -> None:
    with pytest.raises(ConfigError, match=r"'com.example.MyStateProvider' \(a Java class\) is not available"):
        parse_provider_config({"topology.state.provider": "com.example.MyStateProvider"})


def test_a_java_serializer_class_is_named_not_imported() -> None:
    from weir.state.serializers import serializer_for

    with pytest.raises(ConfigError) as info:
        serializer_for("org.apache.storm.state.DefaultStateSerializer", what="keySerializerClass")
    assert "keySerializerClass: 'org.apache.storm.state.DefaultStateSerializer' is a Java class" in str(info.value)
    assert "No module named" not in str(info.value)


def test_checkpoint_interval_not_below_the_message_timeout_is_refused_at_submit() -> None:
    with pytest.raises(ConfigError) as info:
        RuntimeConfig.from_conf("t", {"topology.state.checkpoint.interval.ms": 30_000})
    assert (
        "topology 't': topology.state.checkpoint.interval.ms = 30000 is not below topology.message.timeout.secs = 30"
        in str(info.value)
    )
    rc = RuntimeConfig.from_conf(
        "t", {"topology.state.checkpoint.interval.ms": 30_000, "topology.message.timeout.secs": 31}
    )
    assert (rc.interval_ms, rc.message_timeout_secs, rc.acking) == (30_000, 31, True)
    off = RuntimeConfig.from_conf("t", {"topology.state.checkpoint.interval.ms": 60_000, "topology.acker.executors": 0})
    assert off.acking is False  # acking off: no timeouts, as in Storm
    with pytest.raises(ConfigError, match=r"topology.message.timeout.secs must be an integer ≥ 1, got 'soon'"):
        RuntimeConfig.from_conf("t", {"topology.message.timeout.secs": "soon"})
