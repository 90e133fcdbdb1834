"""Storm's stateful sliding windows on weir: a 10-second average per sensor, every 5 seconds, in event time.

    readings (text files, one per micro-batch: "sensor epoch-ms reading")
      → parse
      → average: a BaseStatefulWindowedBolt, one task per sensor group (fields grouping). Windows of
        10 s sliding by 5 s on the readings' own timestamps; the watermark trails the latest
        timestamp by 2 s (with_lag), readings older than it go to the "late" stream. The window's
        tuples and the bolt's state (windows seen per task) are checkpointed together, exactly once;
        at most 500 readings per task stay in memory, the rest in the state store.
      → report: stores every window's average, and counts late readings, in its state

Run it twice: the second run adds new files and continues the windows where the first left them.

    python examples/sliding_window_average.py [--dir ./weir-window-example] [--files 4]
"""

from __future__ import annotations

import argparse
import os
import random
from pathlib import Path
from typing import Any

import weir
from weir.sources import FileSpout
from weir.state import StateFactory
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

SENSORS = ["boiler", "pump", "valve", "fan"]


class Parse(BaseBasicBolt):
    """``"pump 1700000001234 71"`` → ``("pump", 1700000001234, 71)``."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("sensor", "ts", "reading"))

    def execute(self, tup: Any, collector: Any) -> None:
        sensor, ts, reading = tup.get_string(0).split()
        collector.emit(Values(sensor, int(ts), int(reading)))


class SlidingAverage(BaseStatefulWindowedBolt):
    """Per window and sensor: the average reading, with the window's end timestamp."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("sensor", "end", "average", "readings"))

    def init_state(self, state: Any) -> None:
        self.state = state  # KeyValueState: survives restarts, committed with the window

    def execute(self, window: TupleWindow) -> None:
        sums: dict[str, list[int]] = {}
        for tup in window.get_iter():  # read chunk by chunk: the window may not fit in memory
            acc = sums.setdefault(tup.get_string_by_field("sensor"), [0, 0])
            acc[0] += tup.get_integer_by_field("reading")
            acc[1] += 1
        for sensor, (total, n) in sorted(sums.items()):
            self.collector.emit(Values(sensor, window.get_end_timestamp(), total / n, n))
        self.state.put("windows", self.state.get("windows", 0) + 1)


class Report(BaseStatefulBolt):
    """Keeps the latest averages and the number of late readings (Storm's basic execute: auto-acked)."""

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Any, collector: Any) -> None:
        if tup.source_stream_id == "late":
            self.state.put("late readings", self.state.get("late readings", 0) + 1)
        else:
            self.state.put(f"{tup['sensor']}@{tup['end']}", [round(tup["average"], 2), tup["readings"]])


def write_readings(directory: Path, files: int) -> None:
    """``files`` new files of 40 readings, 5 s of event time each, a little out of order, some late."""
    directory.mkdir(parents=True, exist_ok=True)
    start = len(list(directory.glob("part-*.txt")))
    rng = random.Random(start)
    t0 = 1_700_000_000_000
    for f in range(start, start + files):
        lines = []
        for i in range(40):
            ts = t0 + f * 5000 + i * 125 + rng.randrange(-1500, 1500)  # up to 1.5 s out of order
            lines.append(f"{rng.choice(SENSORS)} {ts} {rng.randrange(100)}")
        if f > start:
            lines.append(f"pump {t0 + f * 5000 - 4000} 0")  # older than the watermark: late
        tmp = directory / f".part-{f:04d}.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        os.utime(tmp, (1_700_000_000 + f, 1_700_000_000 + f))  # Spark picks files by modification time
        os.replace(tmp, directory / f"part-{f:04d}.txt")


def topology(input_dir: str) -> Any:
    average = (
        SlidingAverage()
        .with_window(Duration.seconds(10), Duration.seconds(5))
        .with_timestamp_field("ts")
        .with_lag(Duration.seconds(2))
        .with_late_tuple_stream("late")
        .with_persistence()
        .with_max_events_in_memory(500)
    )
    b = TopologyBuilder()
    b.set_spout("readings", FileSpout(input_dir, files_per_batch=1))
    b.set_bolt("parse", Parse()).shuffle_grouping("readings")
    b.set_bolt("average", average, 2).fields_grouping("parse", Fields("sensor"))
    b.set_bolt("report", Report()).global_grouping("average").global_grouping("average", "late")
    return b.create_topology()


def main() -> None:
    parser = argparse.ArgumentParser(description="Storm's stateful sliding windows on weir")
    parser.add_argument("--dir", default="./weir-window-example")
    parser.add_argument("--files", type=int, default=4, help="new input files (micro-batches) to add")
    args = parser.parse_args()
    base = Path(args.dir).resolve()
    write_readings(base / "input", args.files)
    conf = {
        "weir.state.dir": str(base / "state"),
        "weir.spark.master": "local[2]",
        "topology.state.checkpoint.interval.ms": 1000,  # below topology.message.timeout.secs (30)
    }
    run = weir.submit("sensor-averages", conf, topology(str(base / "input")))
    status = run.process_available()
    print(f"processed up to txid {status.last_txid} ({status.batches} new micro-batches)")

    provider = StateFactory.from_url(f"sqlite:///{base / 'state' / 'state.db'}")
    report = dict(provider.new_state("sensor-averages-report-0"))
    print(f"late readings: {report.pop('late readings', 0)}")
    for key in sorted(report)[-8:]:
        average, n = report[key]
        print(f"{key}: average {average} over {n} readings")
    for task in range(2):
        print(f"average task {task}: {dict(provider.new_state(f'sensor-averages-average-{task}'))}")


if __name__ == "__main__":
    main()
