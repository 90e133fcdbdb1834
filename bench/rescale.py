"""Benchmark of a rescale: time to re-partition a stateful bolt's keys from 2 to 5 tasks, per store and key count.

Each case fills the 2 task namespaces of a word-count-like bolt (JSON string keys, integer values,
``stable_hash(key) % 2`` apiece) with N keys, then times :meth:`weir.checkpoint.rescale.Rescaler.run`
(the step ``weir.submit`` and ``weir state rescale`` run): resolve prepares, stage the 5 new
namespaces, switch, clean up. The result is verified: N keys in the new namespaces, each in the
task its hash names. ``keys/s`` staying flat as N grows is what "linear in the keys" means.

    python bench/rescale.py --keys 10000 100000 --stores sqlite redis postgres
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, postgres_database, redis_server, sqlite_file, write_results  # noqa: E402

from weir._util import stable_hash  # noqa: E402
from weir.checkpoint.coordinator import CheckPointState, CheckpointStore  # noqa: E402
from weir.checkpoint.rescale import ComponentRoute, Rescaler, hash_route, task_namespace  # noqa: E402
from weir.state import StateFactory  # noqa: E402

STORES: dict[str, Callable[[], contextlib.AbstractContextManager[str]]] = {
    "sqlite": sqlite_file,
    "redis": redis_server,
    "postgres": postgres_database,
}
OLD, NEW = 2, 5
CHUNK = 5_000


def fill(url: str, topology: str, keys: int) -> None:
    """``keys`` committed word counts in the OLD task namespaces, and the coordinator record."""
    backend = StateFactory.from_url(url).backend
    buffers: list[dict[bytes, bytes | None]] = [{} for _ in range(OLD)]
    for i in range(keys):
        word = f"w{i:07d}"
        t = stable_hash(word) % OLD
        buffers[t][f'"{word}"'.encode()] = str(i % 997 + 1).encode()
        if len(buffers[t]) >= CHUNK:
            backend.write_direct(task_namespace(topology, "count", t), buffers[t], None)
            buffers[t] = {}
    for t, buf in enumerate(buffers):
        if buf:
            backend.write_direct(task_namespace(topology, "count", t), buf, None)
    store = CheckpointStore(backend, topology)
    store.save(CheckPointState(txid=1, parallelism={"count": OLD}), store.acquire_epoch())


def rescale_s(url: str, topology: str) -> float:
    """Seconds of one re-partition OLD → NEW (the whole fenced step)."""
    backend = StateFactory.from_url(url).backend
    store = CheckpointStore(backend, topology)
    rescaler = Rescaler(topology, {"count": ComponentRoute("count", route=hash_route())})
    epoch = store.acquire_epoch()
    t0 = time.perf_counter()
    rescaler.run(store, epoch, {"count": NEW})
    return time.perf_counter() - t0


def verify(url: str, topology: str, keys: int) -> None:
    """Every key is in the namespace of its new task; none lost, none doubled."""
    backend = StateFactory.from_url(url).backend
    seen = 0
    for t in range(NEW):
        for k, _ in backend.scan(task_namespace(topology, "count", t)):
            if stable_hash(k.decode()[1:-1]) % NEW != t:
                raise SystemExit(f"{url}: key {k!r} in task {t}")
            seen += 1
    if seen != keys:
        raise SystemExit(f"{url}: {seen} keys after the rescale, expected {keys}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--stores", nargs="+", default=list(STORES), choices=list(STORES))
    ap.add_argument("--name", default="rescale", help="results file bench/results/<name>.json")
    ap.add_argument("--out", type=Path, help="write the JSON here instead")
    args = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []
    print(f"{'store':<9} {'keys':>9} {'rescale s':>10} {'keys/s':>10}", flush=True)
    for name in args.stores:
        with STORES[name]() as url:
            for n in args.keys:
                topo = f"bench{n}"
                fill(url, topo, n)
                secs = rescale_s(url, topo)
                verify(url, topo, n)
                rows.append({"store": name, "keys": n, "seconds": round(secs, 3), "keys_per_s": round(n / secs)})
                print(f"{name:<9} {n:>9} {secs:>10.2f} {n / secs:>10.0f}", flush=True)
                backend = StateFactory.from_url(url).backend
                for ns in backend.namespaces():
                    if ns.startswith((f"{topo}-", f"$checkpointspout-{topo}")):
                        backend.drop(ns)
    data = {"machine": machine(), "from": OLD, "to": NEW, "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(data, indent=2) + "\n")
        path = args.out
    else:
        path = write_results(args.name, data)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
