"""Benchmark: per-batch latency of small micro-batches — Spark's stateful count, Storm bolts, Trident.

The fixed cost of a micro-batch decides how small a batch can usefully be. Every variant reads the
same directory of small files, one file per micro-batch (``maxFilesPerTrigger`` / ``files_per_batch``
= 1) under ``Trigger.AvailableNow``, so a batch holds exactly ``--sizes`` tuples (one word per line):

=======  ===================================================================================
native   Spark ``groupBy(word).count()``, output mode update, default state store
storm    weir Storm API: ``FileSpout`` → split bolt (2 tasks) → ``StatefulBolt`` count (2 tasks,
         fields grouping) on the embedded SQLite provider
trident  weir Trident: Python ``Split`` → ``group_by`` → ``persistent_aggregate(Count)``, opaque
         SQLite map state, 2 partitions
=======  ===================================================================================

A batch's wall time is Spark's own ``durationMs.triggerExecution`` from the query's progress
events (the same clock for all three); the table gives p50 and p95 over the batches of each run,
and weir's overhead over native at p50.

Usage::

    .venv/bin/python bench/latency.py                          # 10, 100, 1000 tuples, 30 batches each
    .venv/bin/python bench/latency.py --sizes 10 --batches 40 --variants native,trident

Prints a table and writes ``bench/results/latency.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import local_spark, machine, write_results  # noqa: E402
from storm_wordcount import ProgressLog, weir_topology  # noqa: E402
from trident_wordcount import _factory, trident_topology  # noqa: E402

VARIANTS = {
    "native": "spark groupBy.count (stateful)",
    "storm": "weir storm bolts + sqlite",
    "trident": "weir trident opaque + sqlite",
}
#: issue 15's target: a 10-tuple batch's p50 at most native's p50 + 50 ms
TARGET_OVERHEAD_MS = 50.0


@dataclass
class Row:
    """One variant at one batch size."""

    variant: str
    label: str
    tuples_per_batch: int
    batches: int
    p50_ms: float
    p95_ms: float
    mean_ms: float
    overhead_p50_ms: float | None = None
    verified: bool = True
    phases_p50_ms: dict[str, float] = field(default_factory=dict)


def write_inputs(directory: Path, tuples: int, batches: int, seed: int) -> Counter[str]:
    """``batches`` files of ``tuples`` one-word lines; the expected counts."""
    import random

    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    expected: Counter[str] = Counter()
    for b in range(batches):
        words = [f"w{rng.randrange(max(10, tuples))}" for _ in range(tuples)]
        expected.update(words)
        tmp = directory / f".part-{b:05d}.tmp"
        tmp.write_text("\n".join(words) + "\n")
        os.utime(tmp, (1_700_000_000 + b, 1_700_000_000 + b))  # Spark lists files in mtime order
        os.replace(tmp, directory / f"part-{b:05d}.txt")
    return expected


def _percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return 0.0
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _batch_events(progress: ProgressLog, query_id: str) -> list[dict[str, Any]]:
    progress.terminated[query_id].wait(15)
    return [e for e in progress.events.get(query_id, []) if e["rows"] > 0]


def run_native(spark: Any, progress: ProgressLog, input_dir: Path, work: Path) -> tuple[str, dict[str, int]]:
    """Spark's stateful count, one file per batch; the query id and the final counts."""
    counts: dict[str, int] = {}

    def keep(batch_df: Any, batch_id: int) -> None:
        for row in batch_df.collect():
            counts[row[0]] = int(row[1])

    lines = spark.readStream.format("text").option("maxFilesPerTrigger", 1).load(str(input_dir))
    q = (
        lines.withColumnRenamed("value", "word")
        .groupBy("word")
        .count()
        .writeStream.outputMode("update")
        .foreachBatch(keep)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    return str(q.id), counts


def run_weir(spark: Any, variant: str, input_dir: Path, work: Path) -> tuple[str, dict[str, int]]:
    """The Storm or Trident word count, one file per batch; the query id and the committed counts."""
    import weir
    from weir.state import StateFactory

    name = f"lat-{variant}-{uuid.uuid4().hex[:8]}"
    conf: dict[str, Any] = {"weir.state.dir": str(work), "weir.spark.master": "local[2]"}
    factory = None
    if variant == "storm":
        topo = weir_topology(input_dir, 1)
    else:
        factory = _factory("opaque", "sqlite", str(work / "trident.db"), "counts")
        topo = trident_topology(input_dir, 1, factory)
    run = weir.submit(name, conf, topo, spark=spark)
    status = run.process_available()
    if status.error:
        raise RuntimeError(f"weir run {name} failed: {status.error}")
    counts: dict[str, int] = {}
    if variant == "storm":
        for task in range(2):
            counts.update(dict(StateFactory.get_state(f"{name}-count-{task}", conf)))
    else:
        assert factory is not None
        state = factory.make_state({}, 0, 1)
        words = [f"w{i}" for i in range(100_000)]
        for i in range(0, len(words), 5000):
            chunk = words[i : i + 5000]
            for w, v in zip(chunk, state.multi_get([[x] for x in chunk]), strict=True):
                if v is not None:
                    counts[w] = int(v)
    return str(run.query.id), counts


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit status 1 if any variant's counts were wrong."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="10,100,1000", help="tuples per batch, comma-separated (default 10,100,1000)")
    p.add_argument("--batches", type=int, default=30, help="batches per run (default 30, at least 30 counts)")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {', '.join(VARIANTS)}")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-warmup", action="store_true", help="skip the warm-up run of each variant")
    p.add_argument("--out", help="JSON output path (default bench/results/latency.json)")
    args = p.parse_args(argv)
    chosen = [v.strip() for v in args.variants.split(",") if v.strip()]
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if any(v not in VARIANTS for v in chosen) or not sizes or min(sizes) < 1 or args.batches < 3:
        p.error(f"variants from {', '.join(VARIANTS)}; sizes >= 1; --batches >= 3")

    work = Path(tempfile.mkdtemp(prefix="weir-bench-latency-"))
    rows: list[Row] = []
    try:
        spark = local_spark("weir-bench-latency", {"spark.sql.streaming.forceDeleteTempCheckpointLocation": "true"})
        progress = ProgressLog(spark)
        # warm-up: JVM, Python workers and imports are not charged to the first variant
        warm = work / "warm"
        write_inputs(warm, 10, 3, args.seed)
        for v in [] if args.no_warmup else chosen:
            d = work / f"warm-{v}"
            d.mkdir()
            run_native(spark, progress, warm, d) if v == "native" else run_weir(spark, v, warm, d)
        for size in sizes:
            input_dir = work / f"in-{size}"
            expected = write_inputs(input_dir, size, args.batches, args.seed + size)
            for v in chosen:
                d = work / f"{v}-{size}"
                d.mkdir()
                t0 = time.perf_counter()
                if v == "native":
                    qid, got = run_native(spark, progress, input_dir, d)
                else:
                    qid, got = run_weir(spark, v, input_dir, d)
                events = _batch_events(progress, qid)
                walls = [float(e["ms"].get("triggerExecution", 0)) for e in events]
                phases: dict[str, float] = {}
                for key in ("addBatch", "queryPlanning", "getBatch", "latestOffset", "walCommit", "commitOffsets"):
                    vals = [float(e["ms"].get(key, 0)) for e in events]
                    phases[key] = round(statistics.median(vals), 1) if vals else 0.0
                row = Row(
                    v,
                    VARIANTS[v],
                    size,
                    len(walls),
                    round(_percentile(walls, 0.5), 1),
                    round(_percentile(walls, 0.95), 1),
                    round(statistics.fmean(walls), 1) if walls else 0.0,
                    verified=dict(got) == dict(expected),
                    phases_p50_ms=phases,
                )
                rows.append(row)
                print(
                    f"  {size:>5} tuples  {v:<8} {len(walls)} batches  p50 {row.p50_ms:7.1f} ms  "
                    f"p95 {row.p95_ms:7.1f} ms  ({time.perf_counter() - t0:.1f} s)  "
                    f"verified={'yes' if row.verified else 'NO'}",
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)

    native = {r.tuples_per_batch: r for r in rows if r.variant == "native"}
    for r in rows:
        if r.tuples_per_batch in native:
            r.overhead_p50_ms = round(r.p50_ms - native[r.tuples_per_batch].p50_ms, 1)
    head = [
        "tuples/batch",
        "variant",
        "batches",
        "p50 ms",
        "p95 ms",
        "mean ms",
        "p50 - native",
        "addBatch p50",
        "verified",
    ]
    body = [
        [
            str(r.tuples_per_batch),
            f"{r.variant}: {r.label}",
            str(r.batches),
            f"{r.p50_ms:.1f}",
            f"{r.p95_ms:.1f}",
            f"{r.mean_ms:.1f}",
            "-" if r.overhead_p50_ms is None else f"{r.overhead_p50_ms:+.1f}",
            f"{r.phases_p50_ms.get('addBatch', 0):.1f}",
            "yes" if r.verified else "NO",
        ]
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    print()
    for cells in [head, ["-" * w for w in widths], *body]:
        print(
            "  ".join(c.ljust(w) if i == 1 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
        )
    verdicts = []
    for r in rows:
        if r.tuples_per_batch == 10 and r.variant != "native" and r.overhead_p50_ms is not None:
            ok = r.overhead_p50_ms <= TARGET_OVERHEAD_MS
            verdicts.append(
                f"target {r.variant} 10-tuple p50 <= native + {TARGET_OVERHEAD_MS:.0f} ms: "
                f"{r.overhead_p50_ms:+.1f} ms -> {'met' if ok else 'NOT met'}"
            )
    for line in verdicts:
        print(line)

    import pyspark

    payload = {
        "benchmark": "latency",
        "machine": {**machine(), "pyspark": pyspark.__version__},
        "params": {"sizes": sizes, "batches": args.batches, "seed": args.seed, "variants": chosen},
        "targets": verdicts,
        "results": [asdict(r) for r in rows],
    }
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(payload, indent=2) + "\n")
    else:
        out = write_results("latency", payload)
    print(f"\nwrote {out}")
    return 0 if all(r.verified for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
