"""Benchmark: how long a Trident DRPC request waits for its answer (seed 004's word-count query).

A topology counts the words of a small corpus into a transactional map state and serves seed 004's
``words`` query (``split → group_by → state_query(MapGet) → FilterNull → aggregate(Sum)``). Once
the counts are in, a client sends ``--requests`` requests one after another, each right after the
previous answer. Per request: the wall time from ``execute`` to the answer (ms), and how many
micro-batches it waited (the answering batch's txid minus the last txid committed when the request
was sent). Every answer is checked against the corpus' counts.

Usage::

    .venv/bin/python bench/drpc_latency.py                      # SQLite, 30 requests, 1000 ms trigger
    .venv/bin/python bench/drpc_latency.py --store redis --interval-ms 200 --requests 50

Prints a table and writes ``bench/results/drpc_latency.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402

WORDS = "the cat sat on the mat and the dog ran to the man".split()


def split_function() -> Any:
    from weir.trident import Function

    class Split(Function):
        def execute(self, tup: Any, collector: Any) -> None:
            for w in tup.get_string(0).split():
                collector.emit([w])

    return Split()


@contextlib.contextmanager
def store_url(kind: str) -> Iterator[str]:
    if kind == "sqlite":
        with _common.sqlite_file() as url:
            yield url
    elif kind == "redis":
        with _common.redis_server() as url:
            yield url
    elif kind == "postgres":
        with _common.postgres_database() as url:
            yield url
    else:
        msg = f"unknown --store {kind!r} (sqlite, redis, postgres)"
        raise SystemExit(msg)


def run(kind: str, url: str, requests: int, interval_ms: int, spark: Any, workdir: Path) -> dict[str, Any]:
    import weir
    from weir.drpc import Client
    from weir.sources import FileSpout
    from weir.trident import Count, FilterNull, MapGet, Sum, TridentTopology
    from weir.trident.backing import (  # type: ignore[attr-defined]
        PostgresMapState,
        RedisMapState,
        SqliteMapState,
    )

    lines = workdir / "lines"
    lines.mkdir()
    text = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(8)) for i in range(200)]
    (lines / "f0.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
    expected = Counter(w for line in text for w in line.split())
    if kind == "sqlite":
        factory = SqliteMapState.factory("transactional", url, table="drpc_bench")
    elif kind == "redis":
        factory = RedisMapState.factory("transactional", url, key_prefix="drpc_bench:")
    else:
        factory = PostgresMapState.factory(
            "transactional", url, table="drpc_bench", key_columns={"word": "TEXT"}, value_type="BIGINT"
        )
    topology = TridentTopology()
    counts = (
        topology.new_stream("lines", FileSpout(str(lines)))
        .each(["line"], split_function(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(factory, Count(), "count")
    )
    (
        topology.new_drpc_stream("words")
        .each(["args"], split_function(), ["word:str"])
        .group_by(["word"])
        .state_query(counts, ["word"], MapGet(), ["count"])
        .each(["count"], FilterNull())
        .aggregate(["count"], Sum(), ["sum"])
    )
    conf: dict[str, Any] = {
        "weir.state.dir": str(workdir / "state"),
        "topology.state.checkpoint.interval.ms": interval_ms,
        "topology.state.provider": kind,
        "topology.state.provider.config": {"url": url},
    }
    handle = weir.submit("drpc-bench", conf, topology, spark=spark)
    handle.start()
    client = Client(url)
    try:
        want = sum(expected[w] for w in "cat dog the man".split())
        deadline = time.monotonic() + 300
        while client.execute("words", "cat dog the man", timeout=120) != want:  # the counts are in
            if time.monotonic() > deadline:
                msg = "the word counts did not arrive within 300 s"
                raise SystemExit(msg)
        ms: list[float] = []
        batches: list[int] = []
        for i in range(requests):
            args = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(3))
            before = handle.status().last_txid or 0
            t0 = time.perf_counter()
            got = client.execute("words", args, timeout=120)
            ms.append((time.perf_counter() - t0) * 1000)
            batches.append((client.last_txid or 0) - before)
            if got != sum(expected[w] for w in args.split()):
                msg = f"wrong answer for {args!r}: {got}"
                raise SystemExit(msg)
        status = handle.status()
    finally:
        handle.stop()
    return {
        "store": kind,
        "interval_ms": interval_ms,
        "requests": requests,
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": round(sorted(ms)[max(0, int(len(ms) * 0.95) - 1)], 1),
        "p50_batches": statistics.median(batches),
        "max_batches": max(batches),
        "batches_run": status.batches,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", default="sqlite", help="sqlite, redis or postgres (comma-separated for several)")
    p.add_argument("--requests", type=int, default=30)
    p.add_argument("--interval-ms", type=int, default=1000, help="topology.state.checkpoint.interval.ms")
    p.add_argument("--out", default="drpc_latency", help="results file name (bench/results/NAME.json)")
    args = p.parse_args(argv)
    spark = _common.local_spark("weir-drpc-bench")
    rows = []
    for kind in args.store.split(","):
        with store_url(kind) as url, tempfile.TemporaryDirectory() as tmp:
            rows.append(run(kind, url, args.requests, args.interval_ms, spark, Path(tmp)))
    cols = ["store", "interval_ms", "requests", "p50_ms", "p95_ms", "p50_batches", "max_batches", "batches_run"]
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(str(r[c]) for c in cols))
    path = _common.write_results(args.out, {"machine": _common.machine(), "rows": rows})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
