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

``--mode trident`` measures the same for a Trident opaque map state with ``weir.state.ttl.ms``: the
commit of a batch whose cutoff expires ``--expiring`` cells (written one batch before ``--live``
others) deletes them, found by txid (SQLite: expression index, PostgreSQL: ``txid`` index, Redis: a
sorted set), against the commit of the batch before (nothing expired); the script checks that
exactly the live cells are left. Results in ``bench/results/state_ttl_trident.json``.

    .venv/bin/python bench/state_ttl.py --mode trident --expiring 10000 --live 10000 --repeat 3
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


def _map_factory(url: str, name: str, *, indexed: bool = True) -> Any:
    """An opaque map state of the store at ``url``, as a run with a TTL writes it (Redis: indexed)."""
    from dataclasses import replace

    from weir.trident.backing import PostgresMapState, RedisMapState, SqliteMapState

    if url.startswith("sqlite"):
        factory = SqliteMapState.opaque(url, table=name)
    elif url.startswith("redis"):
        factory = RedisMapState.opaque(url, key_prefix=f"{name}:")
    else:
        factory = PostgresMapState.opaque(url, table=name, key_columns={"word": "TEXT"}, value_type="BIGINT")
    return replace(factory, store=factory.store.with_expiry_index()) if indexed else factory


def _write(factory: Any, txid: int, keys: list[str]) -> None:
    state = factory.make_state({}, 0, 1)
    state.begin_commit(txid)
    for i in range(0, len(keys), 10_000):
        chunk = keys[i : i + 10_000]
        state.multi_put([[k] for k in chunk], list(range(len(chunk))))
    state.commit(txid)


def measure_trident(url: str, expiring: int, live: int, repeat: int) -> dict[str, Any]:
    """The commit-time sweep of a Trident map state (``TtlSweep.commit``) deleting ``expiring`` cells.

    Cells are written at txid 1 (``expiring``) and 2 (``live``); batch times 0, 1 s and 10 s with a
    9.5 s TTL give txid 3 the cutoff 1. Timed: the commit of txid 2 (nothing expired: the baseline)
    and the commit of txid 3 (every expiring cell deleted, in chunks, by txid).
    """
    from weir.checkpoint.coordinator import CheckpointPhase, CheckPointState, CheckpointStore
    from weir.runtime.spark.trident.ttl import TtlSweep, record_batch_time
    from weir.trident.backing.catalog import catalog_for

    provider = StateFactory.from_url(url)
    backend = provider.backend
    base_ms: list[float] = []
    sweep_ms: list[float] = []
    ttls = {"counts": 9_500}
    plain_ms: list[float] = []
    write_ms: list[float] = []
    for _ in range(repeat):
        topo = f"bench{uuid.uuid4().hex[:8]}"
        name = f"ttl_{topo}"
        factory = _map_factory(url, name)
        sweep = TtlSweep.of(topo, {"weir.state.ttl.sweep.max": expiring}, provider, ttls, {"counts": factory})
        sweep.prepare()
        epoch = CheckpointStore(backend, topo).acquire_epoch()
        ns = f"$checkpointspout-{topo}"

        def log(txid: int, ms: int, topo: str = topo, epoch: int = epoch, ns: str = ns, sweep: Any = sweep) -> None:
            rec = CheckPointState(txid=txid, phase=CheckpointPhase.PREPARING, batch_txid=txid, batch_ms=ms)
            CheckpointStore(backend, topo).save(rec, epoch)
            record_batch_time(provider, ns, topo, txid, epoch, ttls, sweep.maps)

        log(1, 0)
        _write(factory, 1, [f"exp{i}" for i in range(expiring)])
        sweep.commit(1)
        log(2, 1_000)
        keys = [f"live{i}" for i in range(live)]
        plain = _map_factory(url, f"plain_{topo}", indexed=False)  # the same write to a map without TTL
        plain_ms.append(timed(lambda plain=plain, keys=keys: _write(plain, 2, keys)) * 1000)
        write_ms.append(timed(lambda factory=factory, keys=keys: _write(factory, 2, keys)) * 1000)
        base_ms.append(timed(lambda sweep=sweep: sweep.commit(2)) * 1000)
        log(3, 10_000)
        sweep_ms.append(timed(lambda sweep=sweep: sweep.commit(3)) * 1000)
        catalog = catalog_for(backend)
        assert catalog is not None
        left = catalog.count(factory.store.catalog_name())
        if sweep.last["counts"] != (3, expiring, True) or left != live:
            msg = f"{url}: the sweep deleted {sweep.last['counts']}, {left} cells left (expected {live} live)"
            raise AssertionError(msg)
        catalog.drop(factory.store.catalog_name())
        catalog.drop(plain.store.catalog_name())
    b, s = median(base_ms), median(sweep_ms)
    return {
        "baseline_commit_ms": round(b, 3),
        "sweep_commit_ms": round(s, 3),
        "sweep_ms_per_10k": round((s - b) * 10_000 / expiring, 3),
        "expired_keys_per_s": round(expiring / max((s - b) / 1000, 1e-9)),
        "write_plain_ms": round(median(plain_ms), 3),
        "write_indexed_ms": round(median(write_ms), 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--expiring", type=int, default=10_000, help="keys that expire (default 10000)")
    ap.add_argument("--live", type=int, default=10_000, help="keys that never expire (default 10000)")
    ap.add_argument("--touched", type=int, default=100, help="ordinary writes per timed batch (default 100)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per store; the median is reported (default 3)")
    ap.add_argument("--stores", default=",".join(STORES), help="comma-separated: sqlite,redis,postgres")
    ap.add_argument("--out", default=None, help="results name under bench/results/, or a path ending in .json")
    ap.add_argument(
        "--mode", choices=("storm", "trident"), default="storm", help="Storm key-value state or Trident map state"
    )
    args = ap.parse_args(argv)
    if args.out is None:
        args.out = "state_ttl" if args.mode == "storm" else "state_ttl_trident"
    results: dict[str, Any] = {}
    for name in args.stores.split(","):
        try:
            with STORES[name]() as url:
                if args.mode == "trident":
                    results[name] = measure_trident(url, args.expiring, args.live, args.repeat)
                else:
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
    if args.mode == "trident":
        print(f"Trident TTL sweep (the commit's delete): {args.expiring} expired + {args.live} live cells")
    else:
        print(f"TTL sweep: {args.expiring} expiring + {args.live} live keys, {args.touched} writes per batch")
    print(format_table(["store", "commit (no expiry)", "commit (sweep)", "sweep per 10k keys", "expired keys/s"], rows))
    if args.mode == "trident":  # what keeping cells findable by txid costs the batch's write
        print(f"writing {args.live} cells in one batch, without and with TTL (the txid index):")
        print(
            format_table(
                ["store", "write (no TTL)", "write (TTL)"],
                [
                    [n, human_duration(r["write_plain_ms"] / 1000), human_duration(r["write_indexed_ms"] / 1000)]
                    for n, r in results.items()
                    if "unavailable" not in r
                ],
            )
        )
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
