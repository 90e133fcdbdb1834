"""Storm's windowed bolts without Spark: window contents, new/expired tuples, watermarks, spilling."""

from __future__ import annotations

from typing import Any

import pytest

from weir.errors import TopologyError
from weir.testing import BoltTester
from weir.topology import (
    BaseStatefulWindowedBolt,
    BaseWindowedBolt,
    Count,
    Duration,
    Fields,
    TopologyBuilder,
    TupleWindow,
    Values,
)
from weir.topology.window_manager import window_namespace


class Recorder(BaseStatefulWindowedBolt):
    """Emits, per window, the values of get(), get_new() and get_expired(); counts windows in state."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("all", "new", "expired", "start", "end"))

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, window: TupleWindow) -> None:
        def vals(ts: list[Any]) -> list[Any]:
            return [t.get_value(0) for t in ts]

        self.state.put("windows", self.state.get("windows", 0) + 1)
        tuples = window.get()
        self.collector.emit(
            tuples,  # anchored to the whole window
            Values(
                vals(tuples),
                vals(window.get_new()),
                vals(window.get_expired()),
                window.get_start_timestamp(),
                window.get_end_timestamp(),
            ),
        )


def windows(t: BoltTester) -> list[tuple[Any, ...]]:
    return [v for _s, v in t.emitted("default")]


def test_count_sliding_window_gets_new_and_expired() -> None:
    t = BoltTester(Recorder().with_window(Count.of(5), Count.of(2)), inputs={"src": ["n"]})
    for n in range(1, 9):
        t.execute("src", [n])
    assert windows(t) == [
        ([1, 2], [1, 2], [], None, None),
        ([1, 2, 3, 4], [3, 4], [], None, None),
        ([2, 3, 4, 5, 6], [5, 6], [1], None, None),
        ([4, 5, 6, 7, 8], [7, 8], [2, 3], None, None),
    ]
    t.checkpoint()
    assert t.committed() == {"windows": 4}


def test_count_tumbling_window_survives_checkpoint_and_restart() -> None:
    t = BoltTester(Recorder().with_tumbling_window(Count.of(3)), inputs={"src": ["n"]})
    for n in (1, 2, 3, 4):
        t.execute("src", [n])
    assert windows(t) == [([1, 2, 3], [1, 2, 3], [], None, None)]
    t.checkpoint()
    t.execute("src", [99])  # rolled back below: never in a window
    t.rollback()
    t.restart()  # a new instance: the window (tuple 4) comes from the store
    for n in (5, 6):
        t.execute("src", [n])
    assert windows(t) == [([4, 5, 6], [4, 5, 6], [1, 2, 3], None, None)]


def test_a_window_without_sliding_interval_slides_with_every_tuple() -> None:
    t = BoltTester(Recorder().with_window(Count.of(3)), inputs={"src": ["n"]})
    for n in range(1, 5):
        t.execute("src", [n])
    assert [w[0] for w in windows(t)] == [[1], [1, 2], [1, 2, 3], [2, 3, 4]]


def test_processing_time_tumbling_window_fires_when_the_clock_passes_its_end() -> None:
    t = BoltTester(Recorder().with_tumbling_window(Duration.seconds(1)), inputs={"src": ["n"]})
    t.execute("src", ["a"], now_ms=100)
    t.execute("src", ["b"], now_ms=500)
    assert windows(t) == []
    t.execute("src", ["c"], now_ms=1200)  # the window (0, 1000] ended before this tuple
    assert windows(t) == [(["a", "b"], ["a", "b"], [], 0, 1000)]
    t.checkpoint(now_ms=1500)
    assert windows(t) == []
    t.checkpoint(now_ms=5000)  # (1000, 2000] fires; later windows are empty and skipped
    assert windows(t) == [(["c"], ["c"], ["a", "b"], 1000, 2000)]


class Sums(BaseStatefulWindowedBolt):
    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("end", "ids"))

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, window: TupleWindow) -> None:
        self.collector.emit(Values(window.get_end_timestamp(), sorted(t["id"] for t in window.get())))


def test_event_time_sliding_window_with_lag_watermark_and_late_stream() -> None:
    bolt = (
        Sums()
        .with_window(Duration.seconds(10), Duration.seconds(5))
        .with_timestamp_field("ts")
        .with_lag(Duration.seconds(1))
        .with_late_tuple_stream("late")
    )
    t = BoltTester(bolt, inputs={"src": ["id", "ts"]})
    for i, ts in enumerate([1000, 6000, 3000, 12_000]):  # out of order, within the lag
        t.execute("src", [i, ts])
    assert t.emitted() == []  # event time fires on the watermark, at the checkpoint
    t.checkpoint()  # watermark = 12000 - 1000
    assert windows(t) == [(5000, [0, 2]), (10_000, [0, 1, 2])]
    late = t.execute("src", ["x", 2000])  # older than the watermark 11000
    t.execute("src", [4, 16_000])
    out = t.emitted()
    assert out == [("late", (late,))]
    t.checkpoint()  # watermark 15000: (5000, 15000]
    assert windows(t) == [(15_000, [1, 3])]


def test_event_time_waits_for_every_input_stream() -> None:
    bolt = Sums().with_tumbling_window(Duration.seconds(1)).with_timestamp_field("ts")
    t = BoltTester(bolt, inputs={"a": ["id", "ts"], "b": ["id", "ts"]})
    t.execute("a", [1, 500])
    t.execute("a", [2, 5000])
    t.checkpoint()
    assert windows(t) == []  # stream b has no tuple yet: no watermark (as in Storm)
    t.execute("b", [3, 1500])
    t.checkpoint()  # watermark = min(5000, 1500)
    assert windows(t) == [(1000, [1])]


class IterSum(BaseStatefulWindowedBolt):
    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("sum", "count"))

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, window: TupleWindow) -> None:
        total = n = 0
        for tup in window.get_iter():  # chunk by chunk
            total += tup.get_integer(0)
            n += 1
        self.collector.emit(Values(total, n))


def test_large_window_stays_bounded_in_memory_and_spills_to_the_store() -> None:
    bolt = IterSum().with_window(Count.of(1000), Count.of(250)).with_persistence().with_max_events_in_memory(40)
    t = BoltTester(bolt, inputs={"src": ["n"]})
    for n in range(1, 3001):
        t.execute("src", [n])
        if n % 700 == 0:
            t.checkpoint()
    got = windows(t)
    expected = []
    for end in range(250, 3001, 250):
        ns = range(max(1, end - 999), end + 1)
        expected.append((sum(ns), len(ns)))
    assert got == expected
    assert t.windows is not None
    assert 0 < t.windows.peak_in_memory <= 40
    t.checkpoint()
    # the committed window holds only what later windows can still see: the last 1000 tuples, in chunks
    ns = window_namespace(t.context.state_namespace)
    keys = [k for k, _ in t.provider.new_state(ns)]
    assert "meta" in keys and len(keys) > 100


def test_window_misconfiguration_is_refused_naming_the_component() -> None:
    with pytest.raises(TopologyError, match="windowed bolt 'w': no window; call with_window"):
        BoltTester(Sums(), inputs={"src": ["id", "ts"]}, component="w")
    with pytest.raises(TopologyError, match="timestamp field 'ts' is not a field of stream 'default' of 'src'"):
        BoltTester(
            Sums().with_tumbling_window(Duration.of(10)).with_timestamp_field("ts"),
            inputs={"src": ["id"]},
            component="w",
        )
    with pytest.raises(TopologyError, match="count windows count tuples in arrival order"):
        BoltTester(
            Sums().with_tumbling_window(Count.of(10)).with_timestamp_field("ts"),
            inputs={"src": ["id", "ts"]},
            component="w",
        )
    with pytest.raises(TopologyError, match="with_lag and with_late_tuple_stream need event time"):
        BoltTester(
            Sums().with_tumbling_window(Count.of(10)).with_lag(Duration.of(5)),
            inputs={"src": ["id", "ts"]},
            component="w",
        )
    with pytest.raises(TopologyError, match="must both be Count or both Duration"):
        BoltTester(Sums().with_window(Count.of(10), Duration.of(5)), inputs={"src": ["id"]}, component="w")


def test_timestamp_that_is_not_a_number_names_the_tuple() -> None:
    bolt = Sums().with_tumbling_window(Duration.of(10)).with_timestamp_field("ts")
    t = BoltTester(bolt, inputs={"src": ["id", "ts"]}, component="w")
    with pytest.raises(TopologyError, match=r"timestamp field 'ts' of tuple \[1, '2024-01-01'\] must be epoch"):
        t.execute("src", [1, "2024-01-01"])


def test_windowed_bolt_late_stream_is_declared_by_the_builder() -> None:
    from weir.sources import RateSpout

    class Plain(BaseWindowedBolt):
        def execute(self, window: TupleWindow) -> None:
            pass

    b = TopologyBuilder()
    b.set_spout("rate", RateSpout(rows_per_batch=10))
    bolt = Plain().with_tumbling_window(Duration.seconds(1)).with_timestamp_field("timestamp")
    b.set_bolt("w", bolt.with_late_tuple_stream("late")).shuffle_grouping("rate")
    topo = b.create_topology()
    assert topo.components["w"].outputs["late"] == Fields("late_tuple")


def test_a_window_stored_with_other_settings_is_refused() -> None:
    first = BoltTester(Recorder().with_tumbling_window(Count.of(3)), inputs={"src": ["n"]}, store="layout")
    first.execute("src", [1])
    first.checkpoint()
    with pytest.raises(TopologyError) as info:
        BoltTester(Recorder().with_tumbling_window(Count.of(4)), inputs={"src": ["n"]}, store="layout")
    assert (
        "the stored window was written with (kind, time, length, sliding interval, slice width, chunk size) = "
        "['count', 'processing', 3, 3, 1000, 1000], but the bolt is configured with "
        "['count', 'processing', 4, 4, 1000, 1000]" in str(info.value)
    )
