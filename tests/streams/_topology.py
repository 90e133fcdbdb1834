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
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from weir._util import stable_hash
from weir.sources import FileSpout
from weir.state import StateFactory
from weir.streams import (
    Checkpoint,
    Operator,
    StatefulWindowListener,
    StateHandler,
    TumblingWindowSort,
    WindowEvent,
)
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

    def __init__(
        self, size: int, log_path: str | None, label: str, *, non_blocking: bool = False, listeners: Any = ()
    ) -> None:
        super().__init__(size, ["key", "value"], sort_by=["value"], non_blocking=non_blocking, listeners=listeners)
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
    """Counts tuples; outside the region, checkpointed periodically or, with ``every``, by itself
    (``create_checkpoint()`` after every ``every`` tuples)."""

    def __init__(self, every: int = 0) -> None:
        self.every = every

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("n"))

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.n = 0

    def process(self, tup: Tuple) -> None:
        self.n += 1
        if self.every and self.n % self.every == 0:
            assert self.context.create_checkpoint() == self.n // self.every

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


class WindowStats(StatefulWindowListener[dict[str, int]]):
    """Per window task: tuples inserted, windows triggered, sum of the evicted values."""

    def initial_state(self, partition: Any) -> dict[str, int]:
        return {"inserted": 0, "windows": 0, "evicted_sum": 0}

    def handle_event(self, event: WindowEvent, tuples: list[Any], partition: Any, state: dict[str, int]) -> None:
        if event is WindowEvent.INSERTION:
            state["inserted"] += len(tuples)
        elif event is WindowEvent.TRIGGER:
            state["windows"] += 1
        else:
            state["evicted_sum"] += sum(t[1] for t in tuples)


class Gauge(Operator, StateHandler):
    """In a region of its own: ``parse`` is a data port, ``window`` a control port; every data tuple
    is also counted by a background thread holding a permit. Each checkpoint logs the cut's trace
    (``d`` data tuple, ``D`` drain, ``c`` control tuple) and the counts."""

    control_ports = ("window",)

    def __init__(self, log_path: str | None) -> None:
        self.log_path = log_path

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("n"))

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.counts = {"data": 0, "control": 0, "background": 0}
        self.trace: list[str] = []
        self.lock = threading.Lock()

    def process(self, tup: Tuple) -> None:
        if tup.source_component == "window":
            self.trace.append("c")
            self.counts["control"] += 1
            return
        self.trace.append("d")
        self.counts["data"] += 1
        region = self.context.consistent_region_context
        region.acquire_permit()
        threading.Thread(target=self._background, args=(region,), daemon=True).start()

    def _background(self, region: Any) -> None:
        try:
            time.sleep(0.01)
            with self.lock:
                self.counts["background"] += 1
        finally:
            region.release_permit()

    def drain(self) -> None:
        self.trace.append("D")

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        with self.lock:
            counts = dict(self.counts)
        checkpoint.put("counts", counts)
        if self.log_path:
            line = f"gauge {self.context.task_index} {checkpoint.sequence_id} {''.join(self.trace)} "
            line += f"{counts['data']} {counts['background']}\n"
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(line)
        self.trace = []

    def reset(self, checkpoint: Checkpoint) -> None:
        self.counts = dict(checkpoint.get("counts"))
        self.trace = []

    def reset_to_initial_state(self) -> None:
        self.counts = {"data": 0, "control": 0, "background": 0}
        self.trace = []

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
    gauge_log: str | None = None,
) -> Topology:
    """The topology; with ``audit`` extra operators outside an explicit region (periodic every batch,
    periodic with a period longer than the run, operator-driven), a ``WindowStats`` listener on the
    window and a ``Gauge`` in a second region (control port, permits, region options)."""
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(input_dir, files_per_batch=1))
    b.set_bolt("parse", Parse(), 1).shuffle_grouping("lines")
    window = LoggedWindow(size, log_path, label, non_blocking=non_blocking, listeners=[WindowStats()] if audit else [])
    b.set_bolt("window", window, WINDOW_TASKS).fields_grouping("parse", Fields("key"))
    b.set_bolt("totals", KeyTotals(), 2).fields_grouping("window", Fields("key"))
    b.set_bolt("sink", WindowSink(), 1).global_grouping("window")
    if audit:
        b.set_bolt("audit", Audit(), 1).shuffle_grouping("parse").add_configuration("checkpoint.period.ms", 0)
        b.set_bolt("audit_slow", Audit(), 1).shuffle_grouping("parse").add_configuration(
            "checkpoint.period.ms", 3_600_000
        )
        b.set_bolt("driven", Audit(every=10), 1).shuffle_grouping("parse")
        b.set_bolt("gauge", Gauge(gauge_log), 1).shuffle_grouping("parse").shuffle_grouping("window")
        b.consistent_region("window", "totals", "sink")
        b.consistent_region("gauge", drain_timeout=120, reset_timeout=120, max_consecutive_reset_attempts=3)
    return b.create_topology()


def model(batches: list[list[tuple[str, int]]], size: int, *, final: bool = False) -> dict[str, Any]:
    """What a failure-free run commits: sink windows, totals per key, each window task's open window.

    ``final``: the run ended with a final mark, which flushed every non-empty open window.
    """
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
    for task in windows if final else ():
        if windows[task]:
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
