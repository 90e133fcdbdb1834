"""Benchmark of the state providers through the KeyValueState API.

For each provider (memory, sqlite, redis, a 3-master redis cluster, postgres, hbase — servers
started here on free loopback ports, a fresh PostgreSQL database dropped afterwards; HBase is the
standalone master and Thrift gateway of ``tests.servers.HBaseServer``, from the jars that
``.ci/setup.d/30-hbase.sh`` caches):

* puts/s    — ``put`` of N keys, then ``prepare_commit`` + ``commit`` (durable write throughput),
* gets/s    — committed ``get`` of one key at a time by a fresh reader (one round trip each), and
  the same gets straight on ``Backend.get`` with serialized keys (the store's share),
* get_many  — committed ``get_many`` in batches of 1000 keys,
* commit latency — for 1k, 10k and 100k dirty keys (updates of existing rows), ``prepare_commit``
  and ``commit`` timed separately, median of several runs.

HBase is measured twice on the same server: ``hbase-buckets`` (its default layout, several keys per
row) and ``hbase-rows`` (``layout=rows``, Storm's row per key).

Prints tables, checks the targets (commit of 10k keys ≤ 20 ms on SQLite, ≤ 50 ms on Redis and
≤ 100 ms on HBase; committed get ≤ 20 µs on SQLite) and writes ``bench/results/state_providers.json``.

Usage::

    python bench/state_providers.py            # full run (about 2 minutes here)
    python bench/state_providers.py --quick    # 1k and 10k only, fewer operations
    python bench/state_providers.py --providers sqlite,redis
    python bench/state_providers.py --large    # large state: commit cost vs state size, 1M-key commit

``--large`` (sqlite, redis, postgres by default) measures, on the backend directly: the commit of
10k dirty keys into a state of 10k, 100k and 1M keys (median of 3), and a 1M-key change set
(900k puts, 100k deletes) prepared and committed, with the growth of the process's peak RSS.
For SQLite, whose commits write a delta merged into the main table every 100k rows, it also runs
7 more commits per size and reports the mean of the 10 (the merge included: the amortized cost).
It writes ``bench/results/state_providers_large.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Unavailable,
    machine,
    median,
    memory_store,
    postgres_database,
    redis_cluster,
    redis_server,
    sqlite_file,
    timed,
    write_results,
)

from weir.cli._table import format_table, human_duration, human_rate  # noqa: E402
from weir.state import StateFactory  # noqa: E402
from weir.state.factory import close_backends  # noqa: E402


@contextlib.contextmanager
def hbase_server() -> Iterator[str]:
    """HBase standalone + Thrift gateway (``tests.servers.HBaseServer``); yields its ``hbase://`` URL."""
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    from tests.servers import HBaseServer, hbase_lib_dir

    if hbase_lib_dir() is None:
        msg = "the HBase jars are not cached (run: bash .ci/setup.d/30-hbase.sh)"
        raise Unavailable(msg)
    with HBaseServer() as server:
        yield server.url()


STORES: dict[str, Callable[[], contextlib.AbstractContextManager[str]]] = {
    "memory": memory_store,
    "sqlite": sqlite_file,
    "redis": redis_server,
    "redis-cluster": redis_cluster,
    "postgres": postgres_database,
    "hbase": hbase_server,
}

#: single-key gets per provider where the default would take minutes (a Thrift round trip each)
N_GETS: dict[str, int] = {"hbase": 2_000}

#: stores measured in several configurations on the same server, one result row each: HBase's
#: bucketed layout (the default) and its row-per-key layout (Storm's), side by side in one run
VARIANTS: dict[str, list[tuple[str, str]]] = {
    "hbase": [("hbase-buckets", "&layout=buckets"), ("hbase-rows", "&layout=rows")],
}

#: (provider, metric, size, limit in seconds, description)
TARGETS: list[tuple[str, str, int | None, float, str]] = [
    ("sqlite", "commit", 10_000, 0.020, "SQLite commit of 10k dirty keys ≤ 20 ms"),
    ("redis", "commit", 10_000, 0.050, "Redis commit of 10k dirty keys ≤ 50 ms"),
    ("redis-cluster", "commit", 10_000, 0.050, "Redis Cluster commit of 10k dirty keys ≤ 50 ms"),
    ("hbase-buckets", "commit", 10_000, 0.100, "HBase commit of 10k dirty keys ≤ 100 ms (default: buckets layout)"),
    ("sqlite", "get", None, 20e-6, "SQLite committed get ≤ 20 µs"),
]


def _keys(n: int) -> list[str]:
    return [f"key:{i:07d}" for i in range(n)]


def bench_provider(name: str, url: str, sizes: list[int], n_puts: int, n_gets: int, runs: int) -> dict[str, Any]:
    """Measure one provider; returns the JSON-ready results."""
    provider = StateFactory.from_url(url)
    ns = f"bench-{name}-0"
    writer = provider.new_state(ns)
    out: dict[str, Any] = {"provider": name, "backend": writer.backend.describe()}
    txid = 0

    # -- durable put throughput: N puts, prepare, commit (rows are new: inserts)
    keys = _keys(max(n_puts, max(sizes)))
    t_put = timed(lambda: [writer.put(k, i) for i, k in enumerate(keys[:n_puts])])
    txid += 1
    t_prep = timed(lambda: writer.prepare_commit(txid))
    t_commit = timed(lambda: writer.commit(txid))
    total = t_put + t_prep + t_commit
    out["puts"] = {
        "n": n_puts,
        "puts_per_s": n_puts / total,
        "put_loop_s": t_put,
        "prepare_s": t_prep,
        "commit_s": t_commit,
    }
    # make sure every key of the largest commit size exists, so commits below are updates
    if max(sizes) > n_puts:
        for i, k in enumerate(keys[n_puts : max(sizes)], start=n_puts):
            writer.put(k, i)
        txid += 1
        writer.prepare_commit(txid)
        writer.commit(txid)

    # -- committed gets by an independent reader
    reader = provider.new_state(ns)
    rnd = random.Random(7)
    sample = [keys[rnd.randrange(n_puts)] for _ in range(n_gets)]
    for k in sample[:200]:  # warm-up (connections, statement caches)
        reader.get(k)
    skeys = [reader.key_serializer.serialize(k) for k in sample]
    backend = reader.backend
    batches = [sample[i : i + 1000] for i in range(0, len(sample), 1000)]
    # best of 3 interleaved repetitions (the machine may be shared): the API get, the same gets
    # straight on the backend with serialized keys (the store's share), and get_many in batches
    t_get = t_raw = t_many = float("inf")
    for _ in range(3):
        t_get = min(t_get, timed(lambda: [reader.get(k) for k in sample]))
        t_raw = min(t_raw, timed(lambda: [backend.get(ns, sk) for sk in skeys]))
        t_many = min(t_many, timed(lambda: [reader.get_many(b) for b in batches]))
    assert reader.get(sample[0]) is not None
    out["gets"] = {
        "n": n_gets,
        "gets_per_s": n_gets / t_get,
        "get_s": t_get / n_gets,
        "backend_get_s": t_raw / n_gets,
        "get_many_keys_per_s": n_gets / t_many,
    }

    # -- commit latency of N dirty keys (updates), prepare and commit separately
    out["commit"] = {}
    for size in sizes:
        preps: list[float] = []
        commits: list[float] = []
        for r in range(runs):
            for i, k in enumerate(keys[:size]):
                writer.put(k, i + r + 1)
            txid += 1
            preps.append(timed(lambda t=txid: writer.prepare_commit(t)))
            commits.append(timed(lambda t=txid: writer.commit(t)))
        out["commit"][str(size)] = {
            "runs": runs,
            "prepare_s": median(preps),
            "commit_s": median(commits),
            "prepare_min_s": min(preps),
            "commit_min_s": min(commits),
            "prepare_runs_s": preps,
            "commit_runs_s": commits,
        }
    assert reader.get(keys[0]) == runs  # last commit of size >= 1 wrote i + runs for i == 0
    writer.backend.drop(ns)
    return out


@contextlib.contextmanager
def _store(name: str) -> Iterator[str]:
    with STORES[name]() as url:
        try:
            yield url
        finally:
            close_backends()


def check_targets(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each target with the measured value and whether it is met."""
    checked = []
    for provider, metric, size, limit, text in TARGETS:
        res = results.get(provider)
        if not res or "error" in res:
            checked.append({"target": text, "limit_s": limit, "measured_s": None, "met": None})
            continue
        measured = res["commit"][str(size)]["commit_s"] if metric == "commit" else res["gets"]["get_s"]
        if metric == "commit" and str(size) not in res["commit"]:
            measured = None
        checked.append(
            {
                "target": text,
                "limit_s": limit,
                "measured_s": measured,
                "met": None if measured is None else measured <= limit,
            }
        )
    return checked


def render(results: dict[str, dict[str, Any]], sizes: list[int], targets: list[dict[str, Any]]) -> str:
    """The three tables as text."""
    ok = {k: v for k, v in results.items() if "error" not in v}
    parts = []
    rows = []
    for name, res in ok.items():
        rows.append(
            [
                name,
                human_rate(res["puts"]["puts_per_s"]),
                human_rate(res["gets"]["gets_per_s"]),
                human_duration(res["gets"]["get_s"]),
                human_duration(res["gets"]["backend_get_s"]),
                human_rate(res["gets"]["get_many_keys_per_s"]),
            ]
        )
    parts.append(
        format_table(["provider", "puts/s (with commit)", "gets/s", "get", "Backend.get", "get_many keys/s"], rows)
    )
    headers = ["provider"]
    for size in sizes:
        label = f"{size // 1000}k"
        headers += [f"prepare {label}", f"commit {label}"]
    rows = []
    for name, res in ok.items():
        row: list[Any] = [name]
        for size in sizes:
            c = res["commit"][str(size)]
            row += [human_duration(c["prepare_s"]), human_duration(c["commit_s"])]
        rows.append(row)
    parts.append("commit latency (median; dirty keys = updates of existing rows)\n" + format_table(headers, rows))
    rows = [
        [
            t["target"],
            "-" if t["measured_s"] is None else human_duration(t["measured_s"]),
            {True: "met", False: "MISSED", None: "n/a"}[t["met"]],
        ]
        for t in targets
    ]
    parts.append(format_table(["target", "measured", "status"], rows, max_width=None))
    skipped = [f"{k}: {v['error']}" for k, v in results.items() if "error" in v]
    if skipped:
        parts.append("skipped: " + "; ".join(skipped))
    return "\n\n".join(parts)


def _peak_rss_reset() -> int:
    with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
        f.write("5")
    return _peak_rss()


def _peak_rss() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def bench_large(name: str, url: str, state_sizes: list[int], big: int) -> dict[str, Any]:
    """Commit cost against state size, and one ``big``-key change set (see the module docs)."""
    import gc

    backend = StateFactory.from_url(url).backend
    ns = f"bench-large-{name}"
    backend.drop(ns)
    out: dict[str, Any] = {"provider": name, "commit_10k_by_state_size": {}}
    loaded = 0
    txid = 0
    for size in state_sizes:
        backend.put_many(ns, ((b"key:%08d" % i, b"0") for i in range(loaded, size)))
        loaded = size
        if name == "sqlite":  # fold the bulk load into the database file first, as a long run would have
            with contextlib.closing(__import__("sqlite3").connect(url.removeprefix("sqlite:///"))) as c:
                c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        times = []
        for _ in range(3):
            txid += 1
            rnd = random.Random(txid)
            changes = {b"key:%08d" % rnd.randrange(size): b"%d" % txid for _ in range(10_000)}
            backend.write_prepared(ns, txid, changes, epoch=None)
            t0 = time.perf_counter()
            backend.commit_prepared(ns, txid, epoch=None)
            times.append(time.perf_counter() - t0)
        out["commit_10k_by_state_size"][str(size)] = median(times)
        print(f"  {name}: commit of 10k keys into {size:,} keys: {median(times) * 1000:.1f} ms", file=sys.stderr)
        if hasattr(backend, "merge"):
            # SQLite defers part of a commit: the merge of its delta into the main table, once the
            # delta holds mergeRows (100k) rows, i.e. every 10th commit of 10k keys. The mean over
            # 10 commits (the 3 above and 7 more, the last merging) is the amortized cost.
            for _ in range(7):
                txid += 1
                rnd = random.Random(txid)
                changes = {b"key:%08d" % rnd.randrange(size): b"%d" % txid for _ in range(10_000)}
                backend.write_prepared(ns, txid, changes, epoch=None)
                t0 = time.perf_counter()
                backend.commit_prepared(ns, txid, epoch=None)
                times.append(time.perf_counter() - t0)
            backend.merge(ns)  # what is left (a partly-duplicated delta merges later than the 10th)
            amortized = sum(times) / len(times)
            out.setdefault("commit_10k_amortized_by_state_size", {})[str(size)] = amortized
            print(
                f"  {name}: mean of 10 commits of 10k keys into {size:,} keys, merges included: "
                f"{amortized * 1000:.1f} ms (max {max(times) * 1000:.0f} ms)",
                file=sys.stderr,
            )
    backend.drop(ns)
    changes_big = {b"key:%08d" % i: (None if i % 10 == 0 else b"%d" % i) for i in range(big)}
    gc.collect()
    base = _peak_rss_reset()
    txid += 1
    t0 = time.perf_counter()
    backend.write_prepared(ns, txid, changes_big, epoch=None)
    t1 = time.perf_counter()
    backend.commit_prepared(ns, txid, epoch=None)
    t2 = time.perf_counter()
    out["big_commit"] = {
        "keys": big,
        "prepare_s": t1 - t0,
        "commit_s": t2 - t1,
        "peak_rss_growth_bytes": _peak_rss() - base,
    }
    assert backend.count(ns) == big - (big + 9) // 10
    backend.drop(ns)
    return out


def main_large(names: list[str], state_sizes: list[int], big: int) -> int:
    """``--large``: print the table and write ``bench/results/state_providers_large.json``."""
    results: dict[str, dict[str, Any]] = {}
    started = time.perf_counter()
    for name in names:
        print(f"… {name}", file=sys.stderr, flush=True)
        try:
            with _store(name) as url:
                results[name] = bench_large(name, url, state_sizes, big)
        except Unavailable as exc:
            results[name] = {"provider": name, "error": str(exc)}
    rows = []
    merge_rows = []
    for name, res in results.items():
        if "error" in res:
            continue
        if "commit_10k_amortized_by_state_size" in res:
            amortized = res["commit_10k_amortized_by_state_size"]
            merge_rows.append([name] + [human_duration(amortized[str(n)]) for n in state_sizes])
        b = res["big_commit"]
        rows.append(
            [name]
            + [human_duration(res["commit_10k_by_state_size"][str(n)]) for n in state_sizes]
            + [human_duration(b["prepare_s"]), human_duration(b["commit_s"])]
            + [f"{b['peak_rss_growth_bytes'] / 2**20:.0f} MiB"]
        )
    headers = (
        ["provider"]
        + [f"commit 10k into {n:,}" for n in state_sizes]
        + [f"prepare {big:,}", f"commit {big:,}", "peak RSS growth"]
    )
    print(format_table(headers, rows))
    if merge_rows:
        print("\nmean of 10 commits of 10k keys, the merge of their delta into the main table included:")
        print(format_table(["provider"] + [f"into {n:,}" for n in state_sizes], merge_rows))
    path = write_results(
        "state_providers_large",
        {
            "benchmark": "state_providers --large",
            "machine": machine(),
            "state_sizes": state_sizes,
            "big": big,
            "elapsed_s": time.perf_counter() - started,
            "providers": results,
        },
    )
    print(f"\nwrote {path} ({human_duration(time.perf_counter() - started)})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="1k and 10k dirty keys only, fewer operations")
    parser.add_argument("--large", action="store_true", help="commit cost against state size, 1M-key commit")
    parser.add_argument("--big", type=int, default=1_000_000, help="--large: keys of the big change set")
    parser.add_argument("--providers", default=",".join(STORES), help="comma-separated subset of " + ",".join(STORES))
    parser.add_argument("--runs", type=int, default=None, help="runs per commit size (default 5, quick 3)")
    args = parser.parse_args(argv)
    names = [p.strip() for p in args.providers.split(",") if p.strip()]
    unknown = [n for n in names if n not in STORES]
    if unknown:
        parser.error(f"unknown providers {unknown}; choose from {', '.join(STORES)}")
    if args.large:
        if args.providers == ",".join(STORES):
            names = ["sqlite", "redis", "postgres"]
        return main_large(names, [10_000, 100_000, 1_000_000], args.big)
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    n_puts = 10_000 if args.quick else 100_000
    n_gets = 3_000 if args.quick else 10_000
    runs = args.runs or (3 if args.quick else 5)

    results: dict[str, dict[str, Any]] = {}
    started = time.perf_counter()
    for name in names:
        print(f"… {name}", file=sys.stderr, flush=True)
        variants = VARIANTS.get(name, [(name, "")])
        try:
            with _store(name) as url:
                for label, suffix in variants:
                    t0 = time.perf_counter()
                    gets = min(n_gets, N_GETS.get(name, n_gets))
                    results[label] = bench_provider(label, url + suffix, sizes, n_puts, gets, runs)
                    results[label]["elapsed_s"] = time.perf_counter() - t0
        except Unavailable as exc:
            for label, _ in variants:
                results[label] = {"provider": label, "error": str(exc)}
    targets = check_targets(results)
    print(render(results, sizes, targets))
    path = write_results(
        "state_providers",
        {
            "benchmark": "state_providers",
            "machine": machine(),
            "quick": args.quick,
            "sizes": sizes,
            "n_puts": n_puts,
            "n_gets": n_gets,
            "runs": runs,
            "elapsed_s": time.perf_counter() - started,
            "providers": results,
            "targets": targets,
        },
    )
    print(f"\nwrote {path} ({human_duration(time.perf_counter() - started)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
