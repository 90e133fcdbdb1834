"""A punctuated topology for the Spark test: marker lines in the files are window marks.

lines (files, one per batch; a line ``--`` is a window mark) → parse (a Storm bolt, 2 tasks, which
forwards the marks) → window: ``TumblingWindowSort(None, ...)`` (punctuation-based, fields grouping
on ``key``, 2 tasks) → sink: a ``StatefulBolt`` recording every window. :func:`model` computes the
exact windows: each window task aligns the marks of both parse tasks, so a window holds exactly the
tuples of its keys between two marker lines, whatever the interleaving of the parse tasks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from weir._util import stable_hash
from weir.sources import FileSpout
from weir.streams import TumblingWindowSort
from weir.topology import BasicBolt, Fields, StatefulBolt, Topology, TopologyBuilder, Tuple

MARK = "--"
WINDOW_TASKS = 2


class MarkedFiles(FileSpout):
    """A text FileSpout whose ``--`` lines are window marks."""

    def is_window_mark(self, row: Any) -> bool:
        return bool(row[0] == MARK)


class Parse(BasicBolt):
    """``"k3 17"`` → ``("k3", 17)``."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("key", "value"))

    def execute(self, tup: Tuple, collector: Any) -> None:
        key, value = tup.get_string(0).split()
        collector.emit([key, int(value)])


class WindowSink(StatefulBolt):
    """Records each window's tuples under ``"<window task>:<window>"``."""

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Tuple) -> None:
        k = f"{tup.source_task}:{tup['window']}"
        self.state.put(k, [*self.state.get(k, []), [tup["key"], tup["value"]]])
        self.collector.ack(tup)


def write_file(directory: Path, index: int, lines: list[str]) -> None:
    """One input file (picked up in name order, one per batch)."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".part-{index:04d}.tmp"
    tmp.write_text("".join(f"{line}\n" for line in lines))
    os.utime(tmp, (1_700_000_000 + index, 1_700_000_000 + index))
    os.replace(tmp, directory / f"part-{index:04d}.txt")


def build(input_dir: str) -> Topology:
    b = TopologyBuilder()
    b.set_spout("lines", MarkedFiles(input_dir, files_per_batch=1))
    b.set_bolt("parse", Parse(), 2).shuffle_grouping("lines")
    window = TumblingWindowSort(None, ["key", "value"], sort_by=["value"])
    b.set_bolt("window", window, WINDOW_TASKS).fields_grouping("parse", Fields("key"))
    b.set_bolt("sink", WindowSink(), 1).global_grouping("window")
    return b.create_topology()


def model(lines: list[str], *, final: bool) -> dict[str, list[list[Any]]]:
    """The sink's windows after ``lines`` (all files in order); ``final``: the open windows are flushed."""
    open_: dict[int, list[tuple[str, int]]] = {t: [] for t in range(WINDOW_TASKS)}
    number = dict.fromkeys(range(WINDOW_TASKS), 0)
    sink: dict[str, list[list[Any]]] = {}

    def close(task: int) -> None:
        if open_[task]:
            sink[f"{task}:{number[task]}"] = [[k, v] for k, v in sorted(open_[task], key=lambda kv: kv[1])]
            number[task] += 1
            open_[task] = []

    for line in lines:
        if line == MARK:
            for t in open_:
                close(t)
            continue
        key, value = line.split()
        open_[stable_hash(key) % WINDOW_TASKS].append((key, int(value)))
    if final:
        for t in open_:
            close(t)
    return sink
