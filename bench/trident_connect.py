"""Benchmark: the Trident word count on classic PySpark and over Spark Connect, side by side.

``bench/trident_wordcount.py --connect`` runs this (or run it directly). One corpus
(``bench/wordcount_corpus.py``), the topology of ``trident_wordcount.py`` (``FileSpout`` → Python
``Split`` → ``group_by(word)`` → ``persistent_aggregate(Count)`` into an opaque map state, 2
partitions), run to the end of the input by ``process_available()`` (a real streaming query,
``Trigger.AvailableNow``, ``--files-per-batch`` files per batch):

* classic: a ``local[2]`` SparkSession in this process;
* connect: a Spark Connect server (``local[2]``, started from the PySpark install on a free loopback
  port, as the tests start it); the query runs on the server, its ``foreachBatch`` is relayed to
  this process's coordinator, the stages carry each batch's txid, task reports come back as JSON.

Rounds are interleaved (classic, connect, classic, connect, …) and the table shows the median; each
variant first runs a small warm-up corpus. Every run is checked against the generator's exact counts
(the map state read back with ``multi_get``).

Usage::

    .venv/bin/python bench/trident_connect.py --words 300000 --repeat 3
    .venv/bin/python bench/trident_wordcount.py --connect --words 300000 --repeat 3

Prints a table and writes ``bench/results/trident_wordcount_connect.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # the test suite's Spark Connect server

from _common import local_spark, machine, redis_server, write_results  # noqa: E402
from wordcount_corpus import generate_corpus  # noqa: E402

TARGET = 0.8  # issue 30: Connect ≥ 0.8× classic


def _mode(connect: bool) -> None:
    """PySpark's process-wide switch of ``pyspark.sql.functions`` between classic and Connect."""
    if connect:
        os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    else:
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


def drive(session: Any, connect: bool, work: Path, input_dir: Path, fpb: int, store: str, urls: dict[str, str]) -> Any:
    """Run the word count to the end of ``input_dir``; seconds, batches and the counts read back."""
    from trident_wordcount import _factory, trident_topology

    import weir

    _mode(connect)
    table = f"wc_{uuid.uuid4().hex[:10]}"
    url = str(work / "trident.db") if store == "sqlite" else urls[store]
    factory = _factory("opaque", store, url, table)
    conf = {"weir.state.dir": str(work / table), "weir.restart.max": 5}  # a slow foreachBatch worker start
    t0 = time.perf_counter()
    run = weir.submit(f"twc-{table}", conf, trident_topology(input_dir, fpb, factory), spark=session)
    status = run.process_available()
    seconds = time.perf_counter() - t0
    if status.error:
        msg = f"twc-{table} ({'connect' if connect else 'classic'}) failed: {status.error}"
        raise RuntimeError(msg)
    return seconds, status.batches, factory, batch_span(run.query)


def batch_span(query: Any) -> float:
    """Seconds from the start of the query's first data batch to the end of its last one.

    Read from Spark's own progress reports (the trigger's start ``timestamp`` plus its
    ``triggerExecution`` time), the same on classic and over Connect: the run's time without the
    query's start and stop, which is what a long-running topology's throughput is made of.
    """
    from datetime import datetime

    spans = []
    for p in query.recentProgress:
        durations = p.durationMs or {}
        if "addBatch" not in durations:  # a trigger that found no data
            continue
        start = datetime.fromisoformat(p.timestamp.replace("Z", "+00:00")).timestamp()
        spans.append((start, start + durations["triggerExecution"] / 1000.0))
    if not spans:
        return float("nan")
    return max(e for _, e in spans) - min(s for s, _ in spans)


def read_counts(factory: Any, keys: list[str]) -> dict[str, int]:
    """The map state's counts of ``keys`` (``multi_get`` in chunks)."""
    state = factory.make_state({}, 0, 1)
    out: dict[str, int] = {}
    for i in range(0, len(keys), 5000):
        chunk = keys[i : i + 5000]
        for word, value in zip(chunk, state.multi_get([[w] for w in chunk]), strict=True):
            if value is not None:
                out[word] = int(value)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run both variants, interleaved; exit status 1 if a count was wrong."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--words", type=int, default=300_000, help="total words (default 300,000)")
    p.add_argument("--keys", type=int, default=20_000, help="distinct words (default 20,000)")
    p.add_argument("--files", type=int, default=20)
    p.add_argument("--files-per-batch", type=int, default=2)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--store", choices=("sqlite", "redis"), default="sqlite", help="the map state's store")
    p.add_argument("--repeat", type=int, default=3, help="interleaved rounds; the table shows the median")
    p.add_argument("--out", help="JSON output path (default bench/results/trident_wordcount_connect.json)")
    args, _ = p.parse_known_args(argv)
    from tests.servers import SparkConnectServer

    from weir.runtime.spark.session import get_spark

    work = Path(tempfile.mkdtemp(prefix="weir-bench-tcx-"))
    stack = contextlib.ExitStack()
    runs: dict[str, list[float]] = {"classic": [], "connect": []}
    spans: dict[str, list[float]] = {"classic": [], "connect": []}
    batches: dict[str, int] = {}
    ok = True
    try:
        expected = generate_corpus(work / "input", args.words, args.keys, args.files, args.seed)
        warm = generate_corpus(work / "warm", 5_000, 500, 2, args.seed + 1)
        keys, n = sorted(expected), sum(expected.values())
        urls: dict[str, str] = {}
        if args.store == "redis":
            urls["redis"] = stack.enter_context(redis_server())
        t = time.perf_counter()
        classic = local_spark("weir-bench-trident-connect")
        server = stack.enter_context(SparkConnectServer(work / "connect"))
        connect = get_spark(
            "local[2]", "weir-bench-trident-connect", {"spark.sql.shuffle.partitions": "2"}, remote=server.url
        )
        stack.callback(connect.stop)
        print(f"classic session and Connect server ({server.url}) up ({time.perf_counter() - t:.1f} s)", flush=True)
        sessions = {"classic": classic, "connect": connect}
        for v, s in sessions.items():
            secs, _, factory, _ = drive(s, v == "connect", work, work / "warm", 1, args.store, urls)
            good = read_counts(factory, sorted(warm)) == dict(warm)
            print(f"  warm-up ({v}) {secs:6.1f} s  verified={'yes' if good else 'NO'}", flush=True)
        for rnd in range(args.repeat):
            for v, s in sessions.items():
                secs, nb, factory, span = drive(
                    s, v == "connect", work, work / "input", args.files_per_batch, args.store, urls
                )
                verified = read_counts(factory, keys) == dict(expected)
                ok = ok and verified
                runs[v].append(round(secs, 2))
                spans[v].append(round(span, 2))
                batches[v] = nb
                print(
                    f"  round {rnd + 1} ({v:<7}) {secs:7.1f} s  {n / secs:>10,.0f} words/s  batches={nb}  "
                    f"batches span {span:5.1f} s  verified={'yes' if verified else 'NO'}",
                    flush=True,
                )
    finally:
        _mode(False)
        stack.close()
        shutil.rmtree(work, ignore_errors=True)
    rows = []
    for v, secs in runs.items():
        med = statistics.median(secs)
        span = statistics.median(spans[v])
        rows.append(
            {
                "variant": v,
                "words": n,
                "runs_s": secs,
                "median_s": med,
                "words_per_s": round(n / med),
                "batch_spans_s": spans[v],
                "median_batch_span_s": span,
                "batch_words_per_s": round(n / span),
                "batches": batches.get(v, 0),
            }
        )
    for r in rows:
        r["vs_classic"] = round(r["words_per_s"] / rows[0]["words_per_s"], 3)
        r["batches_vs_classic"] = round(r["batch_words_per_s"] / rows[0]["batch_words_per_s"], 3)
    print()
    print("whole run: submit to the query's end; batches: the first data batch's start to the last one's end")
    head = (
        f"{'variant':<9} {'words':>9} {'run s':>6} {'runs (s)':>18} {'words/s':>9} {'vs classic':>10}"
        f" {'batches s':>9} {'words/s':>9} {'vs classic':>10}  verified"
    )
    print(head)
    widths = (9, 9, 6, 18, 9, 10, 9, 9, 10, 8)
    print(" ".join("-" * w for w in widths))
    for r in rows:
        print(
            f"{r['variant']:<9} {r['words']:>9,} {r['median_s']:>6.1f} {'/'.join(str(x) for x in r['runs_s']):>18} "
            f"{r['words_per_s']:>9,} {r['vs_classic']:>10.2f} {r['median_batch_span_s']:>9.1f} "
            f"{r['batch_words_per_s']:>9,} {r['batches_vs_classic']:>10.2f}  {'yes' if ok else 'NO'}"
        )
    ratio, batch_ratio = rows[1]["vs_classic"], rows[1]["batches_vs_classic"]
    verdict = (
        f"target: connect >= {TARGET}x classic: whole run {'met' if ratio >= TARGET else 'NOT met'} ({ratio:.2f}x), "
        f"batches {'met' if batch_ratio >= TARGET else 'NOT met'} ({batch_ratio:.2f}x)"
    )
    print(verdict)
    data = {
        "benchmark": "trident_wordcount_connect",
        "machine": machine(),
        "args": vars(args),
        "results": rows,
        "verified": ok,
        "target": verdict,
    }
    if args.out:
        path = Path(args.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2) + "\n")
    else:
        path = write_results("trident_wordcount_connect", data)
    print(f"wrote {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
