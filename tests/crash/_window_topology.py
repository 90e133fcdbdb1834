"""The windowed topology of the windowing crash test: event-time sliding windows, late tuples, a sink.

readings (text files "key ts value", one file per micro-batch) → parse → avg (a stateful windowed
bolt, 2 tasks by key: 4 s windows sliding by 2 s, lag 1 s, late tuples to stream ``late``, at most
16 tuples in memory) → sink (records every window output and every late tuple in its state).
"""

from __future__ import annotations

import os
import random
from typing import Any

from weir.sources import FileSpout
from weir.topology import (
    BaseBasicBolt,
    BaseStatefulBolt,
    BaseStatefulWindowedBolt,
    Duration,
    Fields,
    TopologyBuilder,
    TupleWindow,
    Values,
)

NAME = "crashwin"


class Parse(BaseBasicBolt):
    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("key", "ts", "value"))

    def execute(self, tup: Any, collector: Any) -> None:
        key, ts, value = tup.get_string(0).split()
        collector.emit(Values(key, int(ts), int(value)))


class WindowSum(BaseStatefulWindowedBolt):
    """Per window: (end, count, sum); its own state counts windows and adds up the sums."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("end", "count", "sum"))

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, window: TupleWindow) -> None:
        n = total = 0
        for tup in window.get_iter():
            n += 1
            total += tup.get_integer_by_field("value")
        self.state.put("windows", self.state.get("windows", 0) + 1)
        self.state.put("sum", self.state.get("sum", 0) + total)
        self.collector.emit(window.get(), Values(window.get_end_timestamp(), n, total))


class Sink(BaseStatefulBolt):
    """Window outputs by (task, end) and late tuples by their values (Storm's basic shape: auto-acked)."""

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Any, collector: Any) -> None:
        if tup.source_stream_id == "late":
            late = tup.get_value(0)
            self.state.put("late:" + ":".join(map(str, late.values)), 1)
        else:
            self.state.put(f"w{tup.source_task}:{tup['end']}", [tup["count"], tup["sum"]])


def build(input_dir: str) -> Any:
    b = TopologyBuilder()
    b.set_spout("readings", FileSpout(input_dir, files_per_batch=1))
    b.set_bolt("parse", Parse(), 2).shuffle_grouping("readings")
    avg = (
        WindowSum()
        .with_window(Duration.of(4000), Duration.of(2000))
        .with_timestamp_field("ts")
        .with_lag(Duration.of(1000))
        .with_late_tuple_stream("late")
        .with_persistence()
        .with_max_events_in_memory(16)
    )
    b.set_bolt("avg", avg, 2).fields_grouping("parse", Fields("key"))
    b.set_bolt("sink", Sink(), 1).global_grouping("avg").global_grouping("avg", "late")
    return b.create_topology()


def write_readings(directory: str, n_files: int = 6, per_file: int = 60, seed: int = 5) -> None:
    """Files of readings, 3 s of event time each, shuffled within the lag, plus a few late ones."""
    os.makedirs(directory, exist_ok=True)
    rng = random.Random(seed)
    for f in range(n_files):
        lines = []
        for i in range(per_file):
            ts = f * 3000 + int(i * 3000 / per_file)
            lines.append(f"k{rng.randrange(6)} {ts} {rng.randrange(100)}")
        rng.shuffle(lines)
        if f > 0:  # older than the watermark left by the previous file: late
            lines += [f"k{rng.randrange(6)} {f * 3000 - 2900} {rng.randrange(100)}" for _ in range(3)]
        tmp = os.path.join(directory, f".r-{f:03d}.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
        path = os.path.join(directory, f"r-{f:03d}.txt")
        os.replace(tmp, path)
        os.utime(path, (1_700_000_000 + 10 * f, 1_700_000_000 + 10 * f))  # Spark reads files oldest first
