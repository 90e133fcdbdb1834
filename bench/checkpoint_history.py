"""Benchmark of the checkpoint history's cost: coordinator time per batch with and without it.

The real :class:`~weir.checkpoint.coordinator.Coordinator` runs empty batches (a job that returns
at once with per-component stats, no stateful namespaces), so what is measured is the coordinator's
own store writes: PREPARING, COMMITTING, COMMITTED, each carrying the batch's history entry in the
same write when history is on, plus the deletion of the entry that falls out of the bound. On
SQLite and on Redis (started here on a free loopback port). Prints a table and writes
``bench/results/checkpoint_history.json``.

Usage::

    python bench/checkpoint_history.py              # 2000 batches per case
    python bench/checkpoint_history.py --batches 500
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, median, redis_server, sqlite_file, write_results  # noqa: E402

from weir.checkpoint import CheckpointStore, Coordinator, JobOutcome  # noqa: E402
from weir.checkpoint.history import CheckpointHistory  # noqa: E402
from weir.state.config import parse_provider_config, provider_from_url  # noqa: E402
from weir.state.factory import open_backend  # noqa: E402

STATS = {
    "tuples_in": 1000,
    "components": {c: {"in": 1000, "out": 1000, "failed": 0} for c in ("lines", "split", "count")},
    "keys_written": {f"bench-count-{i}": 400 for i in range(4)},
}


class NoParticipants:
    def commit_all(self, txid: int, epoch: int, after_first: Callable[[], None] | None = None) -> None:
        pass

    def rollback_all(self, epoch: int, after_first: Callable[[], None] | None = None) -> None:
        pass


def per_batch_ms(url: str, batches: int, history: int | None) -> list[float]:
    cfg = parse_provider_config(
        {"topology.state.provider": provider_from_url(url), "topology.state.provider.config": {"url": url}}
    )
    backend = open_backend(cfg, fresh=True)
    try:
        topo = f"bench-{history}"
        store = CheckpointStore(backend, topo)
        hist = None if history is None else CheckpointHistory(backend, store.namespace, history)
        coord = Coordinator(topo, store, NoParticipants(), {}, history=hist)
        coord.start()

        def job(txid: int, epoch: int, attempt: int) -> JobOutcome:
            return JobOutcome(stats=STATS)

        out = []
        for b in range(batches):
            t0 = time.perf_counter()
            coord.run_batch("q", b, job)
            out.append((time.perf_counter() - t0) * 1000)
        return out[10:]
    finally:
        backend.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=2000)
    args = ap.parse_args()
    stores: dict[str, Callable[[], contextlib.AbstractContextManager[str]]] = {
        "sqlite": sqlite_file,
        "redis": redis_server,
    }
    rows: list[dict[str, Any]] = []
    for name, make in stores.items():
        with make() as url:
            for history in (None, 100):
                ms = per_batch_ms(url, args.batches, history)
                rows.append(
                    {"store": name, "history": "off" if history is None else f"on ({history})", "median_ms": median(ms)}
                )
    print(f"{'store':<8} {'history':<10} {'coordinator ms/batch (median)':>30}")
    for r in rows:
        print(f"{r['store']:<8} {r['history']:<10} {r['median_ms']:>30.3f}")
    path = write_results("checkpoint_history", {"machine": machine(), "batches": args.batches, "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
