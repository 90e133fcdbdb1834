"""Benchmark of reading state as data: N committed keys into a Spark DataFrame, per store, against a plain client loop.

Each case fills the 4 task namespaces of a word-count-like bolt (JSON string keys, integer values,
``stable_hash(key) % 4`` apiece) with N keys and stores the coordinator record, then times

* ``weir.state.read(spark, url, topology).count()`` on ``local[2]``: 4 partitions, each scanning one
  namespace on an executor and decoding keys and values (JSON) into rows;
* a plain client loop in one process: the store's own client (``sqlite3``, ``redis-py`` ``HSCAN``,
  ``psycopg`` server-side cursor) reading the same rows and decoding them the same way.

The DataFrame is verified (N rows, the sum of the values); the loop too.

Then the Storm word count (``weir.demo.wordcount_topology``, 2 tasks, 8 batches) runs on SQLite,
Redis and PostgreSQL with the change feed off and on (``weir.state.changelog.retain``), and the median commit
time of its batches is read from the checkpoint history; the feed is checked to hold the last N txids.

    python bench/state_read.py --keys 100000 --stores sqlite redis postgres
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

from _common import local_spark, machine, postgres_database, redis_server, sqlite_file, write_results  # noqa: E402

from weir._util import stable_hash  # noqa: E402
from weir.checkpoint.coordinator import CheckPointState, CheckpointStore  # noqa: E402
from weir.checkpoint.rescale import task_namespace  # noqa: E402
from weir.state import StateFactory  # noqa: E402

STORES: dict[str, Callable[[], contextlib.AbstractContextManager[str]]] = {
    "sqlite": sqlite_file,
    "redis": redis_server,
    "postgres": postgres_database,
}
TASKS = 4
CHUNK = 5_000


def fill(url: str, topology: str, keys: int) -> int:
    """``keys`` committed counts in the TASKS task namespaces and the coordinator record; their sum."""
    backend = StateFactory.from_url(url).backend
    buffers: list[dict[bytes, bytes | None]] = [{} for _ in range(TASKS)]
    total = 0
    for i in range(keys):
        word = f"w{i:07d}"
        t = stable_hash(word) % TASKS
        n = i % 997 + 1
        total += n
        buffers[t][f'"{word}"'.encode()] = str(n).encode()
        if len(buffers[t]) >= CHUNK:
            backend.write_direct(task_namespace(topology, "count", t), buffers[t], None)
            buffers[t] = {}
    for t, buf in enumerate(buffers):
        if buf:
            backend.write_direct(task_namespace(topology, "count", t), buf, None)
    if hasattr(backend, "merge"):  # SQLite: the rows into its main table, where a long-lived store keeps them
        for t in range(TASKS):
            backend.merge(task_namespace(topology, "count", t))
    store = CheckpointStore(backend, topology)
    store.save(CheckPointState(txid=1, parallelism={"count": TASKS}), store.acquire_epoch())
    return total


def weir_read(spark: Any, url: str, topology: str, rows_per_partition: int = 250_000) -> tuple[float, int, int, int]:
    """Seconds, rows, value sum and partitions of one ``weir.state.read`` (count and sum in one job)."""
    from pyspark.sql import functions as F

    import weir.state

    t0 = time.perf_counter()
    df = weir.state.read(spark, url, topology, rows_per_partition=rows_per_partition)
    row = df.agg(F.count("*").alias("n"), F.sum(F.col("value").cast("long")).alias("s")).first()
    secs = time.perf_counter() - t0
    assert row is not None
    return secs, int(row.n), int(row.s), df.rdd.getNumPartitions()


def plain_loop(kind: str, url: str, topology: str) -> tuple[float, int, int]:
    """Seconds, rows and value sum of the store's own client reading the same namespaces."""
    backend: Any = StateFactory.from_url(url).backend
    names = [task_namespace(topology, "count", t) for t in range(TASKS)]
    rows = total = 0
    t0 = time.perf_counter()
    if kind == "sqlite":
        import sqlite3

        conn = sqlite3.connect(backend.path)
        for ns in names:
            for k, v in conn.execute("SELECT k, v FROM weir_kv WHERE ns = ?", (ns,)):
                json.loads(k)
                total += json.loads(v)
                rows += 1
        conn.close()
    elif kind == "redis":
        import redis

        client = redis.Redis.from_url(url)
        for ns in names:
            for k, v in client.hscan_iter(backend.keys(ns)[0], count=5_000):
                json.loads(k)
                total += json.loads(v)
                rows += 1
        client.close()
    else:
        import psycopg

        with psycopg.connect(url) as conn, conn.cursor(name="bench") as cur:
            cur.itersize = 5_000
            cur.execute("SELECT k, v FROM weir_kv WHERE ns = ANY(%s)", (names,))
            for k, v in cur:
                json.loads(bytes(k))
                total += json.loads(bytes(v))
                rows += 1
    return time.perf_counter() - t0, rows, total


def wordcount_commit_ms(spark: Any, url: str, corpus: str, retain: int, workdir: Path) -> tuple[float, int]:
    """Median commit time (ms, from the checkpoint history) of a Storm word count, one file per batch."""
    import weir
    from weir.checkpoint.history import load_history
    from weir.demo import wordcount_topology

    topo = f"wcfeed{retain}"
    conf = {
        "weir.state.dir": str(workdir / topo),
        "topology.state.provider.config": {"url": url},
        "weir.state.changelog.retain": retain,
    }
    weir.submit(topo, conf, wordcount_topology(corpus, parallelism=2), spark=spark).process_available()
    backend = StateFactory.from_url(url).backend
    entries = [e for e in load_history(backend, f"$checkpointspout-{topo}") if e.kind == "batch"]
    commits = sorted(e.commit_ms for e in entries if e.status == "committed")
    if not commits:
        raise SystemExit(f"{url}: the word count committed no batch")
    if retain:  # the feed holds exactly the last `retain` txids of each task namespace
        last = max(e.txid for e in entries)
        for t in range(2):
            kept = {c.txid for c in backend.log_changes(task_namespace(topo, "count", t), 0, last)}  # type: ignore[attr-defined]
            if not kept or min(kept) <= last - retain:
                raise SystemExit(f"{url}: the change feed keeps txids {sorted(kept)}, expected the last {retain}")
    return commits[len(commits) // 2], len(commits)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--stores", nargs="+", default=list(STORES), choices=list(STORES))
    ap.add_argument("--wordcount-words", type=int, default=400_000, help="words of the commit-time run (0: skip it)")
    ap.add_argument("--retain", type=int, default=10, help="weir.state.changelog.retain of the feed-on run")
    ap.add_argument("--tasks", type=int, default=4, help="task namespaces the keys are spread over")
    ap.add_argument(
        "--rows-per-partition", type=int, default=250_000, help="weir.state.read splits bigger namespaces into ranges"
    )
    ap.add_argument("--name", default="state_read", help="results file bench/results/<name>.json")
    ap.add_argument("--out", type=Path, help="write the JSON here instead")
    args = ap.parse_args(argv)
    global TASKS  # noqa: PLW0603 -- fill() and plain_loop() read it
    TASKS = args.tasks
    spark = local_spark("bench-state-read")
    rows: list[dict[str, Any]] = []
    head = f"{'store':<9} {'keys':>9} {'tasks':>5} {'parts':>5} {'read s':>8} {'read rows/s':>12} {'loop s':>8}"
    print(f"{head} {'loop rows/s':>12}", flush=True)
    for name in args.stores:
        with STORES[name]() as url:
            for n in args.keys:
                topo = f"bench{n}"
                total = fill(url, topo, n)
                weir_read(spark, url, topo, args.rows_per_partition)  # warm the Python workers and connections
                secs, got, got_sum, parts = weir_read(spark, url, topo, args.rows_per_partition)
                lsecs, lrows, lsum = plain_loop(name, url, topo)
                if (got, got_sum) != (n, total) or (lrows, lsum) != (n, total):
                    raise SystemExit(
                        f"{name}: read {got} rows / sum {got_sum}, loop {lrows} / {lsum}; expected {n} / {total}"
                    )
                rows.append(
                    {
                        "store": name,
                        "keys": n,
                        "tasks": TASKS,
                        "partitions": parts,
                        "read_s": round(secs, 3),
                        "read_rows_per_s": round(n / secs),
                        "loop_s": round(lsecs, 3),
                        "loop_rows_per_s": round(n / lsecs),
                    }
                )
                print(
                    f"{name:<9} {n:>9} {TASKS:>5} {parts:>5} {secs:>8.2f} {n / secs:>12.0f} {lsecs:>8.2f} "
                    f"{n / lsecs:>12.0f}",
                    flush=True,
                )
                backend = StateFactory.from_url(url).backend
                for ns in backend.namespaces():
                    if ns.startswith((f"{topo}-", f"$checkpointspout-{topo}")):
                        backend.drop(ns)
    commit_rows: list[dict[str, Any]] = []
    if args.wordcount_words:
        import tempfile

        from weir.demo import generate_corpus

        print(f"\nStorm word count, {args.wordcount_words} words in 8 batches: median commit ms", flush=True)
        print(f"{'store':<9} {'feed off':>9} {'feed on':>9} {'retain':>7}", flush=True)
        for name in args.stores:
            with STORES[name]() as url, tempfile.TemporaryDirectory() as tmp:
                corpus = str(Path(tmp) / "corpus")
                generate_corpus(corpus, n_words=args.wordcount_words, n_distinct=20_000, n_files=8, seed=5)
                off, n_off = wordcount_commit_ms(spark, url, corpus, 0, Path(tmp))
                on, n_on = wordcount_commit_ms(spark, url, corpus, args.retain, Path(tmp))
                commit_rows.append(
                    {"store": name, "batches": [n_off, n_on], "commit_ms_feed_off": off, "commit_ms_feed_on": on,
                     "retain": args.retain, "words": args.wordcount_words}
                )  # fmt: skip
                print(f"{name:<9} {off:>9.1f} {on:>9.1f} {args.retain:>7}", flush=True)
    data = {
        "machine": machine(),
        "tasks": TASKS,
        "spark_master": "local[2]",
        "rows": rows,
        "wordcount_commit": commit_rows,
    }
    if args.out:
        args.out.write_text(json.dumps(data, indent=2) + "\n")
        path = args.out
    else:
        path = write_results(args.name, data)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
