"""Benchmark of Storm's ack contract and of windowed bolts in weir's task runner (no Spark scheduling).

One task of a bolt runs over N input tuples through :func:`weir.runtime.spark.storm.task.run_task` (the
code a Spark task runs), in this process, on an embedded SQLite store, in four variants:

* **basic, acking off** — a word count in the basic shape, ``topology.acker.executors = 0``;
* **basic, acking on**  — the same, acked automatically (the default);
* **rich, acking on**   — ``execute(tup)`` with ``self.collector.emit(tup, values)`` and ``ack(tup)``;
* **windowed**          — a stateful windowed bolt, count window of 1000 sliding by 100, at most
  5000 tuples in memory (every tuple is stored in the window).

Prints µs per tuple (median of the repeats) and writes ``bench/results/storm_acking.json``.

Usage::

    python bench/storm_acking.py              # 200k tuples, 3 repeats
    python bench/storm_acking.py --tuples 50000 --repeats 1
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, median, timed, write_results  # noqa: E402

from weir.runtime.spark.storm.task import TaskSpec, run_task  # noqa: E402
from weir.state import StateFactory  # noqa: E402
from weir.topology import (  # noqa: E402
    BaseStatefulBolt,
    BaseStatefulWindowedBolt,
    Count,
    Fields,
    TupleWindow,
    Values,
)


class BasicCount(BaseStatefulBolt):
    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute(self, tup: Any, collector: Any) -> None:
        w = tup.get_string(0)
        c = self.counts.get(w, 0) + 1
        self.counts.put(w, c)
        collector.emit(Values(w, c))


class RichCount(BaseStatefulBolt):
    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute(self, tup: Any) -> None:
        w = tup.get_string(0)
        c = self.counts.get(w, 0) + 1
        self.counts.put(w, c)
        self.collector.emit(tup, Values(w, c))
        self.collector.ack(tup)


class WindowCount(BaseStatefulWindowedBolt):
    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, window: TupleWindow) -> None:
        n = sum(1 for _ in window.get_iter())
        self.collector.emit(Values("window", n))


def one(bolt: Any, n: int, *, acking: bool, store: str) -> float:
    provider = StateFactory.from_url(f"sqlite:///{store}")
    spec = TaskSpec(
        topology="bench",
        component_id="count",
        component=bolt,
        parallelism=1,
        outputs={"default": Fields("word", "count")},
        input_fields={("split", "default"): Fields("word")},
        component_tasks={"split": 1, "count": 1},
        provider=provider,
        stateful=True,
        consumed_streams=frozenset(),
        acking=acking,
    )
    words = [("split", "default", (f"w{i % 5000}",), 0) for i in range(n)]
    txid = [0]

    def go() -> None:
        txid[0] += 1
        out = list(run_task(spec, 0, txid[0], 1, words))
        assert out[-1][1].ok, out[-1][1].error
        provider.backend.commit_prepared("bench-count-0", txid[0], 1)
        if bolt.__class__ is WindowCount:
            provider.backend.commit_prepared("bench-count-0-window", txid[0], 1)

    return timed(go)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    variants = [
        ("basic, acking off", lambda: BasicCount(), False),
        ("basic, acking on", lambda: BasicCount(), True),
        ("rich, acking on", lambda: RichCount(), True),
        (
            "windowed (count 1000/100)",
            lambda: WindowCount().with_window(Count.of(1000), Count.of(100)).with_max_events_in_memory(5000),
            True,
        ),
    ]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, make, acking) in enumerate(variants):
            secs = [one(make(), args.tuples, acking=acking, store=f"{tmp}/s{i}-{r}.db") for r in range(args.repeats)]
            us = median(secs) / args.tuples * 1e6
            rows.append({"variant": name, "tuples": args.tuples, "us_per_tuple": round(us, 2)})
            print(f"{name:28s} {us:8.2f} µs/tuple  ({args.tuples} tuples, median of {args.repeats})", flush=True)
    path = write_results("storm_acking", {"machine": machine(), "results": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
