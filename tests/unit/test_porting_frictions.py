"""Tick tuples' plan and helpers, kept-instance lineage, Trident's FilterNull/Debug, submit-time emit checks
and the closest-name hint for a misspelled Storm class (no Spark)."""

from __future__ import annotations

from typing import Any

import pytest

from weir.errors import ConfigError, TopologyError
from weir.runtime.spark.storm import instances
from weir.runtime.spark.storm.instances import Lineage, LineageTracker
from weir.runtime.spark.storm.ticks import tick_plan, ticks_in
from weir.sources import FileSpout
from weir.state.config import parse_provider_config
from weir.topology import BasicBolt, Bolt, Fields, StatefulBolt, TopologyBuilder, Tuple
from weir.topology.ticks import SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, TupleUtils, is_tick, tick_tuple
from weir.trident import Debug, FilterNull
from weir.trident.tuple import make_tuple


class Echo(Bolt):
    def declare_output_fields(self, d: Any) -> None:
        d.declare(Fields("w"))
        d.declare_stream("side", Fields("w"))

    def execute(self, tup: Tuple) -> None:
        self.collector.emit("side", tup, [1])
        self.collector.emit([tup.values[0]])
        self.collector.ack(tup)


class Misrouted(Echo):
    def execute(self, tup: Tuple) -> None:
        self.collector.emit("sdie", [1])


class MisroutedDirect(BasicBolt):
    def declare_output_fields(self, d: Any) -> None:
        d.declare(Fields("w"))

    def execute(self, tup: Tuple, collector: Any) -> None:
        collector.emit_direct(0, "elsewhere", [1])


class NotACollector(BasicBolt):
    """An ``emit`` of something else (an event bus) is not a stream emit."""

    def declare_output_fields(self, d: Any) -> None:
        d.declare(Fields("w"))

    def execute(self, tup: Tuple, collector: Any) -> None:
        bus: Any = None
        if bus is not None:
            bus.emit("event", tup)
        collector.emit([1])


def _build(bolt: Any) -> None:
    b = TopologyBuilder()
    b.set_spout("s", FileSpout("/nonexistent-input"))
    b.set_bolt("b", bolt).shuffle_grouping("s")
    b.create_topology()


def test_an_emit_on_an_undeclared_literal_stream_is_refused_when_the_topology_is_created() -> None:
    _build(Echo())
    _build(NotACollector())
    with pytest.raises(TopologyError, match=r"bolt 'b': Misrouted.execute \(line \d+\) emits on stream 'sdie'"):
        _build(Misrouted())
    with pytest.raises(TopologyError, match=r"stream 'elsewhere'.*declared: default"):
        _build(MisroutedDirect())


def test_a_misspelled_storm_provider_class_names_the_closest_one() -> None:
    with pytest.raises(ConfigError, match=r"did you mean 'org.apache.storm.redis.state.RedisKeyValueStateProvider'"):
        parse_provider_config({"topology.state.provider": "org.apache.storm.redis.state.RedisKeyValueStateProvidr"})
    with pytest.raises(ConfigError, match=r"unknown provider 'postgress'; did you mean 'postgres'"):
        parse_provider_config({"topology.state.provider": "postgress"})
    with pytest.raises(ConfigError, match=r"com.example.Thing.*is not available in weir"):
        parse_provider_config({"topology.state.provider": "com.example.Thing"})


def test_filter_null_and_debug(capsys: pytest.CaptureFixture[str]) -> None:
    assert FilterNull().is_keep(make_tuple(("a", "b"), (1, 2)))
    assert not FilterNull().is_keep(make_tuple(("a", "b"), (1, None)))
    assert Debug().is_keep(make_tuple(("a", "b"), ("x", None)))
    assert Debug("n").is_keep(make_tuple(("a",), (3,)))
    assert capsys.readouterr().out == "DEBUG: [x, null]\nDEBUG(n): [3]\n"


class Counting(StatefulBolt):
    def init_state(self, state: Any) -> None:
        pass

    def execute(self, tup: Tuple) -> None:
        pass


def test_tick_plan_maps_the_frequency_onto_batches_and_refuses_what_cannot_tick() -> None:
    key = "topology.tick.tuple.freq.secs"
    assert tick_plan("t", "b", Counting(), {key: 10}, {}, 1000) == (10.0, 10)
    assert tick_plan("t", "b", Counting(), {key: 10}, {key: 1}, 500) == (1.0, 2)  # the component's wins
    assert tick_plan("t", "b", Counting(), {key: 0.2}, {}, 1000) == (0.2, 1)  # at least every batch
    assert tick_plan("t", "b", Counting(), {key: 60}, {}, 0) == (60.0, 1)
    assert tick_plan("t", "b", Counting(), {}, {}, 1000) is None
    assert tick_plan("t", "s", FileSpout("/x"), {key: 5}, {}, 1000) is None  # topology-wide: bolts only
    with pytest.raises(ConfigError, match=r"component 's'.*set on a FileSpout"):
        tick_plan("t", "s", FileSpout("/x"), {}, {key: 5}, 1000)
    for bad in (0, -1, True, "10"):
        with pytest.raises(
            ConfigError,
            match=r"topology 't', component 'b': topology.tick.tuple.freq.secs must be a positive number of seconds",
        ):
            tick_plan("t", "b", Counting(), {key: bad}, {}, 1000)
    assert [t for t in range(1, 9) if ticks_in(t, (3.0, 3))] == [3, 6]


def test_tick_tuples_are_recognised_as_in_storm() -> None:
    tick = tick_tuple(5.0, txid=4)
    assert (tick.source_component, tick.source_stream_id) == (SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID)
    assert (SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID) == ("__system", "__tick")
    assert is_tick(tick) and TupleUtils.is_tick(tick) and TupleUtils.isTick(tick)
    assert tick.values == (5.0,) and tick.txid == 4
    assert not is_tick(Tuple(["x"], Fields("w"), "spout")) and not is_tick("__tick")


def test_a_kept_instance_continues_only_into_the_next_batch_of_its_successful_attempt() -> None:
    class Inst:
        cleaned = 0

        def cleanup(self) -> None:
            Inst.cleaned += 1

    tracker = LineageTracker()
    first = tracker.next()
    assert Lineage.parse(first.to_property()) == first
    tracker.finished(1, first, ok=True)
    second = tracker.next()
    assert (second.prev_txid, second.prev_attempt) == (1, 1)
    assert Lineage.parse(second.to_property()) == second
    a = Inst()
    instances.keep("t", "c", 0, 1, first, a, "out")
    assert instances.take("t", "c", 0, 2, second) == (a, "out")
    assert instances.take("t", "c", 0, 2, second) is None  # taken: never shared by two tasks
    # attempt 2 of txid 2 fails after task 0 finished: its instance must not continue
    instances.keep("t", "c", 0, 2, second, a, "out")
    tracker.finished(2, second, ok=False)
    retry = tracker.next()
    assert (retry.prev_txid, retry.prev_attempt) == (1, 1)  # what attempt 1 of txid 1 left still counts
    assert instances.take("t", "c", 0, 2, retry) is None and Inst.cleaned == 1
    # another run (a restarted driver) never matches
    instances.keep("t", "c", 1, 1, first, Inst(), "out")
    other = LineageTracker()
    other.next()
    other.finished(1, Lineage(other.run, 1), ok=True)
    assert instances.take("t", "c", 1, 2, other.next()) is None and Inst.cleaned == 2
    assert Lineage.parse("garbage") is None and Lineage.parse(None) is None
    assert instances.clear_kept("t") == 0
