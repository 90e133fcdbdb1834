"""Benchmark: what a Trident SQLite map state costs per key at many distinct keys, without Spark.

Two parts, both in CPU seconds of the processes that do the work (the machine's load changes wall
time far more than CPU time):

``state``
    weir's own path: ``SqliteMapState.opaque`` → :class:`~weir.trident.state.OpaqueMap`
    ``multi_update`` of ``Count`` partials + ``commit``, batch after batch, every key of every batch
    new (the 2M-keys word count: 2M words over 2M distinct words). The two state partitions run in
    two worker processes at the same time and share one file and table, as Spark's two reused Python
    workers do. Per batch and partition it measures the backing map's ``multi_get`` (key encoding,
    ``IN`` queries), its ``multi_put`` (cell encoding, the upsert, ``COMMIT``), the wait for the
    file's write lock, and the whole update. ``--pragma NAME=VALUE`` (repeatable) is applied to each
    worker's connection first, to compare SQLite settings; ``--engine-only`` runs the same
    ``OpaqueMap`` over a backing map that keeps nothing (the engine's share).
``sqlite``
    SQLite alone through ``sqlite3``: a table of the map state's layout (``k TEXT PRIMARY KEY, v TEXT``,
    ``WITHOUT ROWID``, WAL, ``synchronous=NORMAL``, 64 MiB cache) holding ``--rows`` rows; sorted
    reads of ``--batch`` random keys (``IN`` lists of 500 as weir reads, one ``json_each`` join, a
    temporary table join), then the same keys written by three
    statement shapes (``INSERT ... ON CONFLICT DO UPDATE`` as weir writes, ``UPDATE``, ``INSERT OR
    REPLACE``) and ``COMMIT``, by one connection or by two taking turns (each commit of the other
    throws away a connection's page cache, as the two state partitions do to each other).

Usage::

    .venv/bin/python bench/sqlite_many_keys.py                                  # both parts
    .venv/bin/python bench/sqlite_many_keys.py --part state --pragma mmap_size=268435456
    .venv/bin/python bench/sqlite_many_keys.py --part state --engine-only
    .venv/bin/python bench/sqlite_many_keys.py --keys 20000 --rows 100000 --batch 10000   # small

Prints tables and writes ``bench/results/sqlite_many_keys.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import resource
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import machine, write_results  # noqa: E402
from wordcount_corpus import word_for_rank  # noqa: E402


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ---- part "state": weir's SQLite map state, two partitions in two processes --------------------
def _update(args: tuple[str, str, int, int, list[str], list[str], bool]) -> dict[str, float]:
    """One state partition's update of one batch, in a worker process: CPU (and wall) per phase."""
    db, table, partition, txid, words, pragmas, engine_only = args
    from weir.connectors.sqlite import maps as sqlite_maps
    from weir.trident import Count
    from weir.trident.backing import SqliteMapState
    from weir.trident.state import BackingMap, CombinerValueUpdater, OpaqueMap

    t: dict[str, float] = defaultdict(float)

    def timed(name: str, fn: Any) -> Any:
        def run(*a: Any, **kw: Any) -> Any:
            c, w = _cpu(), time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                t[f"{name}_cpu"] += _cpu() - c
                t[f"{name}_wall"] += time.perf_counter() - w

        return run

    if engine_only:

        class Nothing(BackingMap[Any]):
            def multi_get(self, keys: Any) -> list[Any]:
                return [None] * len(keys)

            def multi_put(self, keys: Any, vals: Any) -> None:
                pass

        state: Any = OpaqueMap(Nothing())
    else:
        factory = SqliteMapState.opaque(db, table=table)
        state = factory.make_state({}, partition, 2)
        conn = factory.store.connection()
        for p in pragmas:
            conn.execute(f"PRAGMA {p}")
        backing = state.backing
        backing.multi_get = timed("get", backing.multi_get)
        backing.multi_put = timed("put", backing.multi_put)
        real_write = sqlite_maps.write_transaction

        def write_transaction(conn: sqlite3.Connection, body: Any, **kw: Any) -> Any:
            # the wait for the write lock, alone: take it and give it back before the real write
            w = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            t["lock_wait_wall"] += time.perf_counter() - w
            conn.execute("ROLLBACK")
            return real_write(conn, body, **kw)

        sqlite_maps.write_transaction = write_transaction  # this worker's copy only
    agg = Count()
    keys = [[w] for w in words]
    updaters = [CombinerValueUpdater(agg, 1) for _ in words]
    c, w = _cpu(), time.perf_counter()
    state.begin_commit(txid)
    state.multi_update(keys, updaters)
    state.commit(txid)
    t["update_cpu"] += _cpu() - c
    t["update_wall"] += time.perf_counter() - w
    if not engine_only:
        sqlite_maps.write_transaction = real_write
    return dict(t)


def part_state(work: Path, n_keys: int, n_batches: int, pragmas: list[str], engine_only: bool) -> dict[str, Any]:
    """Every key new: batch ``b`` writes words ``b * n / batches ...``, split over two partitions."""
    per = n_keys // n_batches
    ranks = list(range(n_keys))
    random.Random(1).shuffle(ranks)
    db = str(work / "state.db")
    tot: dict[str, float] = defaultdict(float)
    wall0 = time.perf_counter()
    with mp.get_context("fork").Pool(2) as pool:
        for b in range(n_batches):
            words = [word_for_rank(r) for r in ranks[b * per : (b + 1) * per]]
            halves = [words[0::2], words[1::2]]
            jobs = [(db, "wc", p, b + 1, halves[p], pragmas, engine_only) for p in (0, 1)]
            for t in pool.map(_update, jobs, chunksize=1):
                for k, v in t.items():
                    tot[k] += v
    wall = time.perf_counter() - wall0
    if not engine_only:  # every key was written once: check the table, as the word count verifies
        with sqlite3.connect(db) as conn:
            rows = conn.execute('SELECT count(*), sum(json_extract(v, "$[1]")) FROM wc').fetchone()
        if tuple(rows) != (per * n_batches, per * n_batches):
            raise SystemExit(f"state part: the table holds {rows}, expected {per * n_batches} keys of count 1")
    keys_written = per * n_batches
    out = {k: round(v, 3) for k, v in sorted(tot.items())}
    out.update(
        wall_s=round(wall, 2),
        keys=keys_written,
        us_per_key_update_cpu=round(1e6 * tot["update_cpu"] / keys_written, 2),
        pragmas=pragmas,
        engine_only=engine_only,
    )
    if not engine_only:
        out["db_mib"] = round(os.path.getsize(db) / 2**20, 1)
        wal = Path(db + "-wal")
        out["wal_mib"] = round(wal.stat().st_size / 2**20, 1) if wal.exists() else 0.0
    return out


# ---- part "sqlite": SQLite alone -----------------------------------------------------------------
_SHAPES = {
    "upsert": ("INSERT INTO t (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v", False),
    "update": ("UPDATE t SET v = ? WHERE k = ?", True),
    "replace": ("INSERT OR REPLACE INTO t (k, v) VALUES (?, ?)", False),
}


def _read_in(c: sqlite3.Connection, keys: list[str]) -> int:
    """weir's read: ``IN`` lists of 500 keys."""
    n = 0
    for i in range(0, len(keys), 500):
        chunk = keys[i : i + 500]
        n += len(c.execute(f"SELECT k, v FROM t WHERE k IN ({','.join('?' * len(chunk))})", chunk).fetchall())
    return n


def _read_json_each(c: sqlite3.Connection, keys: list[str]) -> int:
    """One statement: the keys as one JSON array parameter, joined to the table."""
    sql = "SELECT t.k, t.v FROM json_each(?) AS j JOIN t ON t.k = j.value"
    return len(c.execute(sql, (json.dumps(keys),)).fetchall())


def _read_temp_table(c: sqlite3.Connection, keys: list[str]) -> int:
    """The keys inserted into a temporary table, joined to the table."""
    c.execute("CREATE TEMP TABLE IF NOT EXISTS q (k TEXT PRIMARY KEY) WITHOUT ROWID")
    c.execute("DELETE FROM q")
    c.executemany("INSERT OR IGNORE INTO q VALUES (?)", [(k,) for k in keys])
    return len(c.execute("SELECT t.k, t.v FROM q JOIN t ON t.k = q.k").fetchall())


_READS = {"read": _read_in, "read json_each": _read_json_each, "read temp table": _read_temp_table}


def part_sqlite(work: Path, n_rows: int, batch: int, rounds: int) -> dict[str, Any]:
    """CPU of sorted reads, three write shapes and commits of ``batch`` keys in ``n_rows`` rows."""
    db = str(work / "sqlite.db")

    def connect() -> sqlite3.Connection:
        c = sqlite3.connect(db, isolation_level=None)
        c.execute("PRAGMA journal_mode = WAL")
        c.execute("PRAGMA synchronous = NORMAL")
        c.execute("PRAGMA cache_size = -65536")
        return c

    a, b = connect(), connect()
    a.execute("CREATE TABLE t (k TEXT NOT NULL PRIMARY KEY, v TEXT) WITHOUT ROWID")
    keys = [f'["{word_for_rank(r)}"]' for r in range(n_rows)]
    a.execute("BEGIN")
    a.executemany("INSERT INTO t VALUES (?, ?)", [(k, "[1,1,null]") for k in keys])
    a.execute("COMMIT")
    rng = random.Random(2)
    out: dict[str, Any] = {"rows": n_rows, "batch": batch, "rounds": rounds}
    for label, conns in (("one connection", [a]), ("two connections, taking turns", [a, b])):
        acc: dict[str, float] = defaultdict(float)
        for r in range(rounds):
            for i, (shape, (sql, value_first)) in enumerate(_SHAPES.items()):
                c = conns[(r * len(_SHAPES) + i) % len(conns)]  # two connections: each write by the other one
                sample = sorted(rng.sample(keys, batch))
                for read, fn in _READS.items():
                    c0 = _cpu()
                    c.execute("BEGIN")
                    found = fn(c, sample)
                    c.execute("COMMIT")
                    acc[read] += _cpu() - c0
                    if found != batch:
                        raise SystemExit(f"sqlite part: {read} found {found} of {batch} keys")
                rows = [("[2,2,1]", k) if value_first else (k, "[2,2,1]") for k in sample]
                c0 = _cpu()
                c.execute("BEGIN IMMEDIATE")
                c.executemany(sql, rows)
                c1 = _cpu()
                c.execute("COMMIT")
                acc[shape] += c1 - c0
                acc["commit"] += _cpu() - c1
        n = rounds * batch
        per_shape = {k: len(_SHAPES) if k in _READS or k == "commit" else 1 for k in acc}  # once per write shape
        out[label] = {k: round(1e6 * v / (n * per_shape[k]), 2) for k, v in acc.items()}
    a.close()
    b.close()
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the chosen parts; print their tables; write the JSON."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", choices=("state", "sqlite", "both"), default="both")
    p.add_argument("--keys", type=int, default=2_000_000, help="state part: distinct keys written (default 2M)")
    p.add_argument("--batches", type=int, default=10, help="state part: batches (default 10)")
    p.add_argument("--pragma", action="append", default=[], metavar="NAME=VALUE", help="state part: a PRAGMA")
    p.add_argument("--engine-only", action="store_true", help="state part: an OpaqueMap over a map keeping nothing")
    p.add_argument("--rows", type=int, default=1_000_000, help="sqlite part: rows in the table (default 1M)")
    p.add_argument("--batch", type=int, default=100_000, help="sqlite part: keys read and written (default 100k)")
    p.add_argument("--rounds", type=int, default=2, help="sqlite part: rounds per write shape (default 2)")
    p.add_argument("--out", help="JSON output path (default bench/results/sqlite_many_keys.json)")
    args = p.parse_args(argv)
    if args.keys < args.batches or args.batch > args.rows or min(args.batches, args.batch, args.rounds) < 1:
        p.error("need --keys >= --batches >= 1 and 1 <= --batch <= --rows")
    bad = [x for x in args.pragma if not x.replace("_", "").replace("=", "").replace("-", "").isalnum()]
    if bad:
        p.error(f"--pragma takes NAME=VALUE, got {bad}")
    load = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="weir-bench-sqlite-keys-"))
    result: dict[str, Any] = {"benchmark": "sqlite_many_keys", "machine": machine(), "load_at_start": load}
    try:
        if args.part in ("state", "both"):
            s = part_state(work, args.keys, args.batches, args.pragma, args.engine_only)
            result["state"] = s
            what = "engine only (a map keeping nothing)" if args.engine_only else "SqliteMapState.opaque"
            print(f"state: {what}, {s['keys']:,} new keys in {args.batches} batches, 2 partitions "
                  f"(pragmas: {', '.join(args.pragma) or 'none'}; load {load:.2f})")  # fmt: skip
            print(f"  {'phase':<28}{'cpu s':>8}{'wall s':>8}")
            for phase in ("get", "put", "lock_wait", "update"):
                if f"{phase}_cpu" in s or f"{phase}_wall" in s:
                    cpu = s.get(f"{phase}_cpu")
                    print(f"  {phase:<28}{'-' if cpu is None else f'{cpu:.2f}':>8}{s[f'{phase}_wall']:>8.2f}")
            print(f"  per key update: {s['us_per_key_update_cpu']} µs CPU; whole run {s['wall_s']} s"
                  + (f"; file {s['db_mib']} MiB, WAL {s['wal_mib']} MiB" if "db_mib" in s else ""))  # fmt: skip
        if args.part in ("sqlite", "both"):
            q = part_sqlite(work, args.rows, args.batch, args.rounds)
            result["sqlite"] = q
            print(f"sqlite: {args.batch:,} sorted random keys in {args.rows:,} rows, µs CPU per key")
            cols = [*_READS, *_SHAPES, "commit"]
            print(f"  {'':<32}" + "".join(f"{c:>16}" for c in cols))
            for label in ("one connection", "two connections, taking turns"):
                print(f"  {label:<32}" + "".join(f"{q[label][c]:>16.2f}" for c in cols))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
    else:
        out = write_results("sqlite_many_keys", result)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
