"""Benchmark of IBM Streams checkpoints on weir: time per batch vs state size, and restore time.

An operator holding N bytes of state (1 MB, 10 MB, 100 MB of random bytes; each tuple changes one
byte) runs micro-batches through weir's real task runner and checkpoint coordinator, in this process
(``weir.testing.OperatorTester``: the code a Spark task runs, without Spark's scheduling
noise), on SQLite and on Redis (started here on a free loopback port), in blocking and in
non-blocking mode. Per batch it reports

* **pause**      — how long tuple flow stops for the checkpoint: the whole ``checkpoint()`` plus the
  chunk writes when blocking, only ``prepare_for_non_blocking_checkpoint`` when non-blocking;
* **checkpoint** — the handler's ``checkpoint()`` and the durable chunk writes (in the background
  when non-blocking);
* **commit**     — the coordinator's commit phase (the small checkpoint record; data is not copied);
* **batch**      — the whole micro-batch, retirement of the old checkpoint included;
* **restore**    — after a simulated crash (worker and driver gone): reading the latest complete
  checkpoint back and ``reset()``.

Medians over the batches after the first. Prints a table and writes
``bench/results/streams_checkpoint.json``.

Usage::

    python bench/streams_checkpoint.py               # 1, 10, 100 MB on sqlite and redis (~2-3 min)
    python bench/streams_checkpoint.py --quick       # 1 and 10 MB
    python bench/streams_checkpoint.py --stores sqlite --sizes 1,10
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Unavailable, machine, redis_server, sqlite_file, write_results  # noqa: E402

from weir.cli._table import format_table, human_duration, human_size  # noqa: E402
from weir.streams import Checkpoint, Operator, OperatorContext, StateHandler  # noqa: E402
from weir.testing import OperatorTester  # noqa: E402
from weir.topology import Fields, OutputCollector, Tuple  # noqa: E402

MB = 1024 * 1024
TIMINGS = ("pause_ms", "checkpoint_ms", "wait_ms", "commit_ms", "batch_ms")
STORES: dict[str, Callable[[], contextlib.AbstractContextManager[str]]] = {
    "sqlite": sqlite_file,
    "redis": redis_server,
}


class BlobState(Operator, StateHandler):
    """``size`` bytes of state, written to the checkpoint stream as they are."""

    def __init__(self, size: int, non_blocking: bool) -> None:
        self.size = size
        self.non_blocking = non_blocking

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("n"))

    def prepare(self, conf: Mapping[str, Any], context: OperatorContext, collector: OutputCollector) -> None:
        super().prepare(conf, context, collector)
        self.data = bytearray(random.Random(self.size).randbytes(self.size))
        self.frozen: bytes | None = None
        region = context.consistent_region_context
        if self.non_blocking and region is not None:
            region.enable_non_blocking_checkpoint()

    def process(self, tup: Tuple) -> None:
        i = tup[0] % self.size
        self.data[i] = (self.data[i] + 1) % 256

    def drain(self) -> None:
        pass

    def prepare_for_non_blocking_checkpoint(self, id: int) -> None:  # noqa: A002
        self.frozen = bytes(self.data)  # the snapshot the background write uses

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        data = self.frozen if self.frozen is not None else self.data
        self.frozen = None
        checkpoint.output_stream.write(data)

    def reset(self, checkpoint: Checkpoint) -> None:
        self.data = bytearray(checkpoint.input_stream.read())

    def reset_to_initial_state(self) -> None:
        self.data = bytearray(random.Random(self.size).randbytes(self.size))

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        pass


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def bench_case(url: str, size: int, non_blocking: bool, batches: int) -> dict[str, Any]:
    """Run ``batches`` micro-batches, then a crash and one more batch; return the medians."""
    name = f"bench-{size // MB}mb-{'nb' if non_blocking else 'b'}"
    t = OperatorTester(BlobState(size, non_blocking), input_fields=["v"], store_url=url, topology=name)
    rows: list[dict[str, float]] = []
    for b in range(batches):
        t0 = time.perf_counter()
        r = t.run_batch([[b * 7 + i] for i in range(100)])
        wall = (time.perf_counter() - t0) * 1000
        if r.error is not None:
            raise r.error
        rep = r.reports[-1]
        rows.append(
            {
                "pause_ms": rep.extra.get("pause_ms", 0.0),
                "checkpoint_ms": rep.extra.get("checkpoint_ms", 0.0),
                "wait_ms": rep.extra.get("wait_ms", 0.0),
                "commit_ms": r.commit_ms,
                "batch_ms": wall,
                "bytes": rep.extra.get("checkpoint_bytes", 0),
            }
        )
    t.crash()
    t0 = time.perf_counter()
    r = t.run_batch([[1]])
    restore_batch_ms = (time.perf_counter() - t0) * 1000
    if r.error is not None:
        raise r.error
    rep = r.reports[-1]
    assert rep.extra["restore"] == "reset", rep
    t.close()
    steady = rows[1:] or rows
    return {
        "size_bytes": size,
        "non_blocking": non_blocking,
        "batches": batches,
        **{k: _median([row[k] for row in steady]) for k in TIMINGS},
        "checkpoint_bytes": rows[-1]["bytes"],
        "restore_ms": rep.extra["restore_ms"],
        "restore_batch_ms": restore_batch_ms,
        "per_batch": rows,
    }


def render(results: dict[str, Any]) -> str:
    rows = []
    for store, res in results.items():
        if "error" in res:
            continue
        for c in res["cases"]:
            rows.append(
                [
                    store,
                    human_size(c["size_bytes"]),
                    "non-blocking" if c["non_blocking"] else "blocking",
                    human_duration(c["pause_ms"] / 1000),
                    human_duration(c["checkpoint_ms"] / 1000),
                    human_duration(c["commit_ms"] / 1000),
                    human_duration(c["batch_ms"] / 1000),
                    human_duration(c["restore_ms"] / 1000),
                ]
            )
    out = format_table(["store", "state", "mode", "pause", "checkpoint", "commit", "batch", "restore"], rows)
    skipped = [f"{k}: {v['error']}" for k, v in results.items() if "error" in v]
    return out + ("\n\nskipped: " + "; ".join(skipped) if skipped else "")


@contextlib.contextmanager
def _store(name: str) -> Iterator[str]:
    with STORES[name]() as url:
        yield url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="1 and 10 MB only")
    parser.add_argument("--stores", default=",".join(STORES), help="comma-separated subset of sqlite,redis")
    parser.add_argument("--sizes", default=None, help="state sizes in MB (default 1,10,100)")
    parser.add_argument("--batches", type=int, default=4, help="batches per case (default 4; 3 for ≥100 MB)")
    args = parser.parse_args(argv)
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    unknown = [s for s in stores if s not in STORES]
    if unknown:
        parser.error(f"unknown stores {unknown}; choose from {', '.join(STORES)}")
    sizes_mb = [int(s) for s in args.sizes.split(",")] if args.sizes else ([1, 10] if args.quick else [1, 10, 100])
    started = time.perf_counter()
    results: dict[str, Any] = {}
    for store in stores:
        try:
            with _store(store) as url:
                cases = []
                for mb in sizes_mb:
                    for nb in (False, True):
                        print(f"… {store} {mb} MB {'non-blocking' if nb else 'blocking'}", file=sys.stderr, flush=True)
                        n = args.batches if mb < 100 else min(args.batches, 3)
                        cases.append(bench_case(url, mb * MB, nb, n))
                results[store] = {"url": url.split("@")[-1], "cases": cases}
        except Unavailable as exc:
            results[store] = {"error": str(exc)}
    print(render(results))
    path = write_results(
        "streams_checkpoint",
        {
            "benchmark": "streams_checkpoint",
            "machine": machine(),
            "sizes_mb": sizes_mb,
            "elapsed_s": time.perf_counter() - started,
            "stores": results,
            "notes": (
                "in-process task runner + coordinator (no Spark scheduling); medians of the batches after "
                "the first; pause = time tuple flow is stopped by the checkpoint"
            ),
        },
    )
    print(f"\nwrote {path} ({human_duration(time.perf_counter() - started)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
