"""IBM Streams state handlers on weir: sorted tumbling windows and a running maximum per sensor.

    readings (text files, one per micro-batch: "sensor reading")
      → parse
      → window: TumblingWindowSort(4) — each window of 4 readings, submitted sorted (a built-in
        operator whose open window is a SortedTupleWindow state handler)
      → peak: an Operator that is its own StateHandler — keeps the maximum per sensor and submits
        the maxima that changed from drain(), once per micro-batch (one consistent cut)

The whole topology is one consistent region: per micro-batch and task, every tuple is processed,
then drain() and checkpoint() run on every handler; a checkpoint is complete when the batch commits.
Run it twice: the second run resumes from the checkpoints (windows that were open stay open).

    python examples/streams_window.py [--dir ./weir-streams-example] [--files 3] [--remote sc://HOST:PORT]

With ``--remote`` the run is a Spark Connect client of that server (docs/where-weir-runs.md).
"""

from __future__ import annotations

import argparse
import os
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import weir
from weir.cli import Progress
from weir.sources import FileSpout
from weir.streams import Checkpoint, Operator, OperatorContext, StateHandler, TumblingWindowSort, load_checkpoint
from weir.topology import BasicBolt, Fields, OutputCollector, TopologyBuilder, Tuple

SENSORS = ["boiler", "pump", "valve"]


class Parse(BasicBolt):
    """``"pump 71"`` → ``("pump", 71)``."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("sensor", "reading"))

    def execute(self, tup: Tuple, collector: Any) -> None:
        sensor, reading = tup.get_string(0).split()
        collector.emit([sensor, int(reading)])


class Peak(Operator, StateHandler):
    """Maximum reading per sensor; new maxima are submitted in drain(), at the end of each cut."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("sensor", "peak"))

    def prepare(self, conf: Mapping[str, Any], context: OperatorContext, collector: OutputCollector) -> None:
        super().prepare(conf, context, collector)
        self.peaks: dict[str, int] = {}
        self.changed: set[str] = set()

    def process(self, tup: Tuple) -> None:
        sensor, reading = tup["sensor"], tup["reading"]
        if reading > self.peaks.get(sensor, -1):
            self.peaks[sensor] = reading
            self.changed.add(sensor)

    # ---- StateHandler ----
    def drain(self) -> None:
        for sensor in sorted(self.changed):
            self.submit([sensor, self.peaks[sensor]])
        self.changed.clear()

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        checkpoint.put("peaks", dict(self.peaks))

    def reset(self, checkpoint: Checkpoint) -> None:
        self.peaks = dict(checkpoint.get("peaks", {}))
        self.changed.clear()

    def reset_to_initial_state(self) -> None:
        self.peaks, self.changed = {}, set()

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002 - Streams' name
        pass  # nothing outside the checkpoint to clean up


def write_readings(directory: Path, files: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    start = len(list(directory.glob("part-*.txt")))
    rng = random.Random(start)
    for f in range(start, start + files):
        lines = [f"{rng.choice(SENSORS)} {rng.randrange(100)}" for _ in range(10)]
        tmp = directory / f".part-{f:04d}.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        os.utime(tmp, (1_700_000_000 + f, 1_700_000_000 + f))  # Spark picks files by modification time
        os.replace(tmp, directory / f"part-{f:04d}.txt")


def main() -> None:
    parser = argparse.ArgumentParser(description="Streams state handlers on weir")
    parser.add_argument("--dir", default="./weir-streams-example")
    parser.add_argument("--files", type=int, default=3, help="new input files (micro-batches) to add")
    parser.add_argument("--remote", metavar="URL", help="a Spark Connect server to run on (sc://127.0.0.1:PORT)")
    args = parser.parse_args()
    base = Path(args.dir).resolve()
    write_readings(base / "input", args.files)

    b = TopologyBuilder()
    b.set_spout("readings", FileSpout(str(base / "input"), files_per_batch=1))
    b.set_bolt("parse", Parse()).shuffle_grouping("readings")
    b.set_bolt("window", TumblingWindowSort(4, ["sensor", "reading"], sort_by=["reading"]), 2).fields_grouping(
        "parse", Fields("sensor")
    )
    b.set_bolt("peak", Peak()).global_grouping("window")
    conf = {"weir.state.dir": str(base / "state"), "weir.spark.master": "local[2]"}
    if args.remote:  # a Spark Connect client: the server's master runs the tasks
        conf = {"weir.state.dir": str(base / "state"), "weir.spark.remote": args.remote}
    run = weir.submit("sensors", conf, b.create_topology())
    with Progress(run):  # the live status line on stderr
        status = run.process_available()
    print(f"processed up to txid {status.last_txid} ({status.batches} new micro-batches)")

    url = f"sqlite:///{base / 'state' / 'state.db'}"
    for task in range(2):
        ck = load_checkpoint(url, "sensors", "window", task)
        if ck is None:
            continue
        number = ck.read_object()["window"]
        print(f"window task {task}: checkpoint {ck.sequence_id}, {number} windows sorted, open: {ck.read_object()}")
    ck = load_checkpoint(url, "sensors", "peak", 0)
    if ck is not None:
        print(f"peaks as of checkpoint {ck.sequence_id}: {ck.get('peaks')}")


if __name__ == "__main__":
    main()
