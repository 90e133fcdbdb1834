"""Benchmark of IBM Streams punctuation on weir: the cost of carrying and aligning marks.

A pass-through operator (it submits every tuple) runs one micro-batch of N tuples through weir's real
task runner and coordinator in this process (``weir.testing.OperatorTester``, memory store),
in four cases:

* **off**            — the task's input is not aligned (a topology without Streams operators or
  punctuating spouts: ``TaskSpec.punctuation`` is False);
* **on, no marks**   — aligned input, no mark in it (every topology with Streams operators);
* **on, 1 upstream** — a window mark every ``--every`` tuples from one upstream task;
* **on, 2 upstream** — two upstream tasks, interleaved, each with a mark every ``--every`` of its
  tuples: tuples behind a mark wait until the other task's mark arrives.

Best of ``--repeat`` runs. Prints a table and writes ``bench/results/streams_punctuation.json``.

Usage::

    python bench/streams_punctuation.py               # 200k tuples, a mark every 100
    python bench/streams_punctuation.py --tuples 50000 --every 10
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, write_results  # noqa: E402

from weir.cli._table import format_table  # noqa: E402
from weir.streams import Operator, Punctuation  # noqa: E402
from weir.testing import OperatorTester  # noqa: E402
from weir.topology import Fields, Tuple  # noqa: E402

W = Punctuation.WINDOW_MARKER


class PassThrough(Operator):
    """Submits every tuple; stateless (no checkpoint), so the numbers are the transport's."""

    checkpointed = False

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("v"))

    def process(self, tup: Tuple) -> None:
        self.submit([tup[0]])


def _records(n: int, every: int, upstream: int) -> list[tuple[Any, ...]]:
    recs: list[tuple[Any, ...]] = []
    for i in range(n):
        task = i % upstream
        recs.append(("src", "default", (i,), task))
        if every and (i // upstream + 1) % every == 0:
            recs.append(OperatorTester.mark(W, "src", task, upstream))
    return recs


def bench_case(name: str, n: int, every: int, upstream: int, punctuation: bool, repeat: int) -> dict[str, Any]:
    recs = _records(n, every, upstream)
    best = float("inf")
    out = 0
    for _ in range(repeat):
        t = OperatorTester(PassThrough(), input_fields=["v"])
        t.spec.punctuation = punctuation
        t0 = time.perf_counter()
        r = t.run_batch([], records={0: recs})
        best = min(best, time.perf_counter() - t0)
        assert r.committed, r.error
        out = len(r.outputs)
        t.close()
    return {"case": name, "tuples": n, "marks": len(recs) - n, "outputs": out, "s": best, "tuples_per_s": n / best}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--tuples", type=int, default=200_000)
    parser.add_argument("--every", type=int, default=100, help="tuples per upstream task between window marks")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    logging.getLogger("weir.streams").setLevel(logging.ERROR)  # a stateless operator prepares no checkpoint
    started = time.perf_counter()
    cases = [
        bench_case("off", args.tuples, 0, 1, False, args.repeat),
        bench_case("on, no marks", args.tuples, 0, 1, True, args.repeat),
        bench_case("on, 1 upstream", args.tuples, args.every, 1, True, args.repeat),
        bench_case("on, 2 upstream", args.tuples, args.every, 2, True, args.repeat),
    ]
    base = cases[0]["tuples_per_s"]
    rows = [
        (c["case"], c["tuples"], c["marks"], f"{c['s'] * 1000:.0f} ms", f"{c['tuples_per_s']:,.0f}",
         f"{c['tuples_per_s'] / base:.2f}")
        for c in cases
    ]  # fmt: skip
    print(format_table(["case", "tuples", "marks", "batch", "tuples/s", "vs off"], rows))
    path = write_results(
        "streams_punctuation",
        {
            "benchmark": "streams_punctuation",
            "machine": machine(),
            "every": args.every,
            "cases": cases,
            "notes": (
                "in-process task runner + coordinator, memory store, a stateless pass-through operator; best of runs"
            ),
        },
    )
    print(f"\nwrote {path} ({time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
