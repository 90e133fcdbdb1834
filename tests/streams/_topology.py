"""A topology with a windowed Streams operator and stateful bolts, plus its exact expected result.

lines (files, one per batch) → parse → window: ``TumblingWindowSort`` (fields grouping on ``key``,
2 tasks) → totals: a ``StatefulBolt`` counting per key (fields grouping) and sink: a ``StatefulBolt``
recording every window as it arrives (global grouping). Used by the Spark test and the crash driver.

:func:`model` computes in plain Python what a run without failures must commit: the routing is the
same stable hash, a batch is one file read in order, and each window task sees its tuples in file
order (one upstream partition), so the windows are exactly predictable.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from weir._util import stable_hash
from weir.sources import FileSpout
from weir.state import StateFactory
from weir.streams import Checkpoint, Operator, StateHandler, TumblingWindowSort
from weir.topology import BasicBolt, Fields, StatefulBolt, Topology, TopologyBuilder, Tuple

KEYS = [f"k{i}" for i in range(7)]
WINDOW_TASKS = 2


def write_inputs(directory: Path, n_files: int, per_file: int, seed: int = 11) -> list[list[tuple[str, int]]]:
    """``n_files`` files of ``key value`` lines; returns the batches (one file each)."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    batches = []
    for f in range(n_files):
        batch = [(rng.choice(KEYS), rng.randrange(1000)) for _ in range(per_file)]
        batches.append(batch)
        tmp = directory / f".part-{f:04d}.tmp"
        tmp.write_text("".join(f"{k} {v}\n" for k, v in batch))
        # Spark takes new files in modification-time order (milliseconds): make it the name order
        os.utime(tmp, (1_700_000_000 + f, 1_700_000_000 + f))
        os.replace(tmp, directory / f"part-{f:04d}.txt")
    return batches


class Parse(BasicBolt):
    """``"k3 17"`` → ``("k3", 17)``."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("key", "value"))

    def execute(self, tup: Tuple, collector: Any) -> None:
        key, value = tup.get_string(0).split()
        collector.emit([key, int(value)])


class LoggedWindow(TumblingWindowSort):
    """TumblingWindowSort that appends its state-handler calls to a log file (one line each)."""

    def __init__(self, size: int, log_path: str | None, label: str, *, non_blocking: bool = False) -> None:
        super().__init__(size, ["key", "value"], sort_by=["value"], non_blocking=non_blocking)
        self.log_path = log_path
        self.label = label

    def log(self, method: str, arg: Any = "") -> None:
        if not self.log_path:
            return
        role = "hook" if self.context.hooks_only else "task"
        line = f"{self.label} {os.getpid()} {role} {self.context.task_index} {method} {arg}\n"
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.log("prepare")

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        self.log("checkpoint", checkpoint.sequence_id)
        super().checkpoint(checkpoint)

    def reset(self, checkpoint: Checkpoint) -> None:
        self.log("reset", checkpoint.sequence_id)
        super().reset(checkpoint)

    def reset_to_initial_state(self) -> None:
        self.log("reset_to_initial_state")
        super().reset_to_initial_state()

    def region_checkpointed(self, id: int) -> None:  # noqa: A002
        self.log("region_checkpointed", id)

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        self.log("retire_checkpoint", id)


class KeyTotals(StatefulBolt):
    """Per key: [tuples, sum of values]."""

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Tuple) -> None:
        key = tup["key"]
        n, s = self.state.get(key, [0, 0])
        self.state.put(key, [n + 1, s + tup["value"]])
        self.collector.ack(tup)


class WindowSink(StatefulBolt):
    """Records each window's tuples in arrival order under ``"<window task>:<window>"``."""

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Tuple) -> None:
        k = f"{tup.source_task}:{tup['window']}"
        self.state.put(k, [*self.state.get(k, []), [tup["key"], tup["value"]]])
        self.collector.ack(tup)


class Audit(Operator, StateHandler):
    """Counts tuples; outside the region, checkpointed periodically."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("n"))

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.n = 0

    def process(self, tup: Tuple) -> None:
        self.n += 1

    def drain(self) -> None:
        pass

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        checkpoint.put("n", self.n)

    def reset(self, checkpoint: Checkpoint) -> None:
        self.n = checkpoint.get("n")

    def reset_to_initial_state(self) -> None:
        self.n = 0

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        pass


def build(
    input_dir: str,
    *,
    size: int,
    log_path: str | None = None,
    label: str = "run",
    non_blocking: bool = False,
    audit: bool = False,
) -> Topology:
    """The topology; with ``audit`` an extra periodic operator outside an explicit region."""
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(input_dir, files_per_batch=1))
    b.set_bolt("parse", Parse(), 1).shuffle_grouping("lines")
    window = LoggedWindow(size, log_path, label, non_blocking=non_blocking)
    b.set_bolt("window", window, WINDOW_TASKS).fields_grouping("parse", Fields("key"))
    b.set_bolt("totals", KeyTotals(), 2).fields_grouping("window", Fields("key"))
    b.set_bolt("sink", WindowSink(), 1).global_grouping("window")
    if audit:
        b.set_bolt("audit", Audit(), 1).shuffle_grouping("parse").add_configuration("checkpoint.period.ms", 0)
        b.consistent_region("window", "totals", "sink")
    return b.create_topology()


def model(batches: list[list[tuple[str, int]]], size: int) -> dict[str, Any]:
    """What a failure-free run commits: sink windows, totals per key, each window task's open window."""
    windows: dict[int, list[tuple[str, int]]] = {t: [] for t in range(WINDOW_TASKS)}
    number = dict.fromkeys(range(WINDOW_TASKS), 0)
    sink: dict[str, list[list[Any]]] = {}
    totals: dict[str, list[int]] = {}
    for batch in batches:
        for key, value in batch:
            task = stable_hash(key) % WINDOW_TASKS
            windows[task].append((key, value))
            if len(windows[task]) == size:
                ordered = sorted(windows[task], key=lambda kv: kv[1])
                sink[f"{task}:{number[task]}"] = [[k, v] for k, v in ordered]
                for k, v in ordered:
                    n, s = totals.get(k, [0, 0])
                    totals[k] = [n + 1, s + v]
                windows[task] = []
                number[task] += 1
    open_windows = {t: (number[t], sorted(windows[t], key=lambda kv: kv[1])) for t in windows}
    return {"sink": sink, "totals": totals, "open": open_windows}


def committed(url: str, topology: str) -> dict[str, Any]:
    """What the store holds: the same shape as :func:`model`."""
    from weir.streams import load_checkpoint

    provider = StateFactory.from_url(url)
    sink = dict(provider.new_state(f"{topology}-sink-0"))
    totals: dict[str, list[int]] = {}
    for i in range(2):
        totals.update(dict(provider.new_state(f"{topology}-totals-{i}")))
    open_windows = {}
    for t in range(WINDOW_TASKS):
        ck = load_checkpoint(provider, topology, "window", t)
        assert ck is not None, f"window task {t} has no complete checkpoint"
        number = ck.read_object()["window"]
        open_windows[t] = (number, ck.read_object())
    return {"sink": sink, "totals": totals, "open": open_windows}
