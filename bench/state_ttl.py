"""TTL sweep cost: what expiring 10k keys adds to a batch's commit, on SQLite, Redis and PostgreSQL.

Per store: a task namespace holds ``--live`` keys that never expire plus ``--expiring`` keys written
with a TTL (``put(key, value, ttl=...)``). Then two batches are timed, each a fresh state instance's
``prepare_commit`` + ``commit`` with the same ``--touched`` ordinary writes:

* **baseline** — at a batch time before any expiry: only the writes (and the TTL cursor read);
* **sweep** — at a batch time past every expiry: the same writes plus the sweep, which reads the
  expiry buckets, checks each candidate and deletes every expired key in the same change set.

The difference, per 10k expired keys, is the sweep's cost. The script checks that every expiring
key is gone from the store afterwards and every live key is still there. Prints a table and writes
``bench/results/state_ttl.json``.

    .venv/bin/python bench/state_ttl.py --expiring 10000 --live 10000 --repeat 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Unavailable, machine, median, postgres_database, redis_server, sqlite_file, timed, write_results  # noqa: E402

from weir.cli._table import format_table, human_duration  # noqa: E402
from weir.state import StateFactory  # noqa: E402
from weir.state import ttl as T  # noqa: E402
from weir.state.factory import close_backends  # noqa: E402

STORES: dict[str, Callable[[], contextlib.AbstractContextManager[str]]] = {
    "sqlite": sqlite_file,
    "redis": redis_server,
    "postgres": postgres_database,
}


def _batch(provider: Any, ns: str, now: int, txid: int, touched: int) -> float:
    state = provider.new_state(ns)
    state.set_batch_time(now)

    def run() -> None:
        for i in range(touched):
            state.put(f"t{i}", txid)
        state.prepare_commit(txid)
        state.commit(txid)

    return timed(run)


def measure(url: str, expiring: int, live: int, touched: int, repeat: int) -> dict[str, Any]:
    provider = StateFactory.from_url(url)
    base_ms: list[float] = []
    sweep_ms: list[float] = []
    for r in range(repeat):
        ns = f"bench{uuid.uuid4().hex[:8]}-count-{r}"
        state = provider.new_state(ns)
        state.set_batch_time(0)
        for i in range(live):
            state.put(f"live{i}", i)
        for i in range(expiring):
            state.put(f"exp{i}", i, ttl=1000 + i % 5000)  # spread over 5 s of expiry buckets
        state.prepare_commit(1)
        state.commit(1)
        base_ms.append(_batch(provider, ns, 500, 2, touched) * 1000)
        sweep_ms.append(_batch(provider, ns, 60_000, 3, touched) * 1000)
        rows = {bytes(k) for k, _ in provider.backend.scan(ns) if not T.is_reserved(bytes(k))}
        left = sum(1 for k in rows if k.startswith(b'"exp'))
        if left or len(rows) != live + touched:
            msg = f"{url}: {left} expiring keys left, {len(rows)} rows (expected {live + touched})"
            raise AssertionError(msg)
        provider.backend.drop(ns)
    b, s = median(base_ms), median(sweep_ms)
    return {
        "baseline_commit_ms": round(b, 3),
        "sweep_commit_ms": round(s, 3),
        "sweep_ms_per_10k": round((s - b) * 10_000 / expiring, 3),
        "expired_keys_per_s": round(expiring / max((s - b) / 1000, 1e-9)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--expiring", type=int, default=10_000, help="keys that expire (default 10000)")
    ap.add_argument("--live", type=int, default=10_000, help="keys that never expire (default 10000)")
    ap.add_argument("--touched", type=int, default=100, help="ordinary writes per timed batch (default 100)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per store; the median is reported (default 3)")
    ap.add_argument("--stores", default=",".join(STORES), help="comma-separated: sqlite,redis,postgres")
    ap.add_argument("--out", default="state_ttl", help="results name under bench/results/, or a path ending in .json")
    args = ap.parse_args(argv)
    results: dict[str, Any] = {}
    for name in args.stores.split(","):
        try:
            with STORES[name]() as url:
                results[name] = measure(url, args.expiring, args.live, args.touched, args.repeat)
        except Unavailable as exc:
            results[name] = {"unavailable": str(exc)}
        finally:
            close_backends()
    rows = [
        [
            name,
            human_duration(r["baseline_commit_ms"] / 1000),
            human_duration(r["sweep_commit_ms"] / 1000),
            human_duration(r["sweep_ms_per_10k"] / 1000),
            f"{r['expired_keys_per_s']:,}",
        ]
        if "unavailable" not in r
        else [name, "unavailable", "", "", ""]
        for name, r in results.items()
    ]
    print(f"TTL sweep: {args.expiring} expiring + {args.live} live keys, {args.touched} writes per batch")
    print(format_table(["store", "commit (no expiry)", "commit (sweep)", "sweep per 10k keys", "expired keys/s"], rows))
    data = {"machine": machine(), "params": vars(args), "results": results}
    if args.out.endswith(".json"):  # a path
        path = Path(args.out)
        path.write_text(json.dumps(data, indent=2) + "\n")
    else:
        path = write_results(args.out, data)
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
