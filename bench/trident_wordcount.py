"""Benchmark: Trident ``persistent_aggregate(Count)`` versus Spark's own streaming count, side by side.

One process, one SparkSession (``local[2]``, UI off, 2 shuffle partitions), one generated corpus
(``bench/wordcount_corpus.py``), every variant reading the same files, the same number of files per
micro-batch, under ``Trigger.AvailableNow``. Rounds are interleaved (every variant once per round,
in order) and the table shows the median of the rounds:

=======  ===================================================================================
native   Spark ``readStream.text`` → ``explode(split(value))`` in SQL → ``groupBy(word).count()``
pysplit  the same count with the split as a Python function (``mapInArrow``): what a Spark user
         with Python logic writes — the fair reference for Trident's Python ``Split``
nostate  read + Python split + a per-batch count collected to the driver, nothing kept: the
         stateless limit as a Spark user would write it (the collection costs per key)
floor    read + Python split + a per-batch ``groupBy(word).count()`` computed in full in Spark
         (partial and final aggregation, one shuffle) but reduced there to one row of checksums:
         the clean stateless floor, nothing kept, nothing collected per key
to-null  weir Trident as ``to-*`` (same planner, Python stages, opaque map and Spark-hash routing)
         over a store that keeps nothing: every read misses, every write is reduced to one line of
         checksums per call (the engine without the store)
to-*     weir Trident, opaque map state (``OpaqueMap``), Python ``Split`` → ``group_by`` →
         ``persistent_aggregate(Count)`` with parallelism 2, on sqlite / redis / postgres
tt-*     the same with a transactional map state
=======  ===================================================================================

Every variant is verified against the generator's exact counts: Spark's by collecting each batch's
updated counts, weir's by reading the map state back (``multi_get`` over every word). The two
floors keep no counts, so they are verified batch by batch instead: each batch's number of groups,
sum of counts and checksum ``sum(crc32(word) * count)`` (computed in Spark for ``floor``, by the
null store for ``to-null``) must equal those of the files Spark put in that batch (read from the
file source's log in the query's checkpoint), and every file must be read once; across batches
this checks every word's count exactly (up to a crc32 collision).

Usage::

    .venv/bin/python bench/trident_wordcount.py                      # 2M words, 20k keys, all variants
    .venv/bin/python bench/trident_wordcount.py --keys 200000 --words 8000000
    .venv/bin/python bench/trident_wordcount.py --words 200000 --variants native,pysplit,to-sqlite --repeat 1
    .venv/bin/python bench/trident_wordcount.py --connect --words 300000   # classic vs Spark Connect

Prints a table with ratios against ``native`` and ``pysplit`` and writes
``bench/results/trident_wordcount.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import event_log_conf, local_spark, machine, postgres_database, redis_server, write_results  # noqa: E402
from storm_wordcount import ProgressLog, _cpu_delta, tree_cpu_seconds, verify  # noqa: E402
from wordcount_corpus import corpus_files, generate_corpus  # noqa: E402

#: one batch's checksums: (number of groups, sum of counts, sum of crc32(word) * count)
Tally = tuple[int, int, int]

VARIANTS = {
    "native": "spark count, split in SQL",
    "pysplit": "spark count, split in Python (mapInArrow)",
    "nostate": "stateless limit (Python split, nothing kept)",
    "floor": "stateless floor (Python split, count forced, not collected)",
    "to-null": "trident opaque, a store keeping nothing",
    "to-sqlite": "trident opaque, sqlite",
    "tt-sqlite": "trident transactional, sqlite",
    "to-redis": "trident opaque, redis",
    "tt-redis": "trident transactional, redis",
    "to-postgres": "trident opaque, postgres",
    "tt-postgres": "trident transactional, postgres",
}
#: variants verified by per-batch checksums (they keep no counts)
TALLIED = frozenset({"floor", "to-null"})
#: issue 15's targets, as ratios of words/s in one run
TARGETS = {("to-sqlite", "pysplit"): 1.0, ("to-sqlite", "native"): 0.8}


@dataclass
class Result:
    """The runs of one variant (seconds per round) and what they measured."""

    variant: str
    label: str
    words: int
    runs_s: list[float] = field(default_factory=list)
    runs_cpu_s: list[float | None] = field(default_factory=list)
    batches: int = 0
    verified: bool = True
    detail: str = ""
    median_s: float = 0.0
    words_per_s: float = 0.0
    vs_native: float | None = None
    vs_pysplit: float | None = None
    breakdown: dict[str, Any] = field(default_factory=dict)


# ---- Spark variants --------------------------------------------------------------------------
def _split_in_python(batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow`` body: one output row per whitespace-separated word (Python ``str.split``)."""
    import pyarrow as pa

    for rb in batches:
        words: list[str] = []
        for line in rb.column(0).to_pylist():
            if line:
                words.extend(line.split())
        yield pa.RecordBatch.from_arrays([pa.array(words, pa.string())], names=["word"])


def _words(spark: Any, input_dir: Path, fpb: int, python_split: bool) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    lines = spark.readStream.format("text").option("maxFilesPerTrigger", fpb).load(str(input_dir))
    if python_split:
        return lines.mapInArrow(_split_in_python, "word STRING")
    words = lines.select(F.explode(F.split(F.col("value"), " ")).alias("word"))
    return words.where(F.col("word") != "")


def tally_of(files: list[Path]) -> Tally:
    """The checksums of the words of ``files`` counted together (one batch)."""
    counts: Counter[str] = Counter()
    for f in files:
        counts.update(f.read_text().split())
    return len(counts), sum(counts.values()), sum(zlib.crc32(w.encode()) * c for w, c in counts.items())


def verify_tallies(got: list[tuple[list[str], Tally]], input_dir: Path) -> tuple[bool, str]:
    """Each batch's checksums against those of the files Spark put in it; every file read once."""
    names = sorted(f.name for f in corpus_files(input_dir))
    read = sorted(name for files, _ in got for name in files)
    if read != names:
        return False, f"the batches read {read}, the input holds {names}"
    for i, (files, tally) in enumerate(got):
        want = tally_of([input_dir / f for f in files])
        if tally != want:
            return False, f"batch {i} ({', '.join(files)}): (groups, words, checksum) {tally}, expected {want}"
    return True, ""


def _source_files(ckpt: Path) -> dict[int, list[str]]:
    """The files of each batch, from the file source's log in the checkpoint (compacted or not)."""
    out: dict[int, list[str]] = {}
    for log in (ckpt / "sources" / "0").iterdir():
        if log.name.startswith("."):
            continue
        for line in log.read_text().splitlines()[1:]:  # after the version line
            entry = json.loads(line)
            out.setdefault(int(entry["batchId"]), []).append(Path(entry["path"]).name)
    return {b: sorted(set(files)) for b, files in out.items()}


def run_spark(spark: Any, progress: ProgressLog, kind: str, input_dir: Path, ckpt: Path, fpb: int) -> Any:
    """Run ``native``, ``pysplit``, ``nostate`` or ``floor`` to the end of the input.

    Returns seconds, the counts (for ``floor``: each batch's files and checksums) and a breakdown.
    """
    from pyspark.sql import functions as F  # noqa: N812

    counts: dict[str, int] = {}
    tallies: list[tuple[int, Tally]] = []

    def keep_latest(batch_df: Any, batch_id: int) -> None:
        for row in batch_df.collect():
            counts[row[0]] = int(row[1])

    def add_batch(batch_df: Any, batch_id: int) -> None:
        for row in batch_df.groupBy("word").count().collect():
            counts[row[0]] = counts.get(row[0], 0) + int(row[1])

    def force_batch(batch_df: Any, batch_id: int) -> None:
        # every group is computed (partial + final aggregation, a shuffle by word); only one row of
        # checksums over the groups comes back, so nothing per key reaches the driver
        grouped = batch_df.groupBy("word").count()
        row = grouped.agg(
            F.count(F.lit(1)), F.sum("count"), F.sum(F.crc32(F.col("word").cast("binary")) * F.col("count"))
        ).collect()[0]
        tallies.append((batch_id, (int(row[0]), int(row[1] or 0), int(row[2] or 0))))

    cpu0 = tree_cpu_seconds()
    t0 = time.perf_counter()
    words = _words(spark, input_dir, fpb, python_split=kind != "native")
    if kind == "nostate":
        writer = words.writeStream.foreachBatch(add_batch)
    elif kind == "floor":
        writer = words.writeStream.foreachBatch(force_batch)
    else:
        writer = words.groupBy("word").count().writeStream.outputMode("update").foreachBatch(keep_latest)
    query = writer.option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start()
    query.awaitTermination()
    seconds = time.perf_counter() - t0
    cpu = _cpu_delta(cpu0)
    q = progress.summary(str(query.id))
    got: Any = counts
    if kind == "floor":  # each batch's files, as the file source logged them in the checkpoint
        read = _source_files(ckpt)
        got = [(read.get(batch_id, []), tally) for batch_id, tally in tallies]
    return seconds, got, {"cpu_s": cpu, "batches": q["batches"], "spark_ms": q["spark_ms"]}


# ---- Trident variants ------------------------------------------------------------------------
def _factory(kind: str, store: str, url: str, table: str) -> Any:
    from weir.trident.backing import PostgresMapState, RedisMapState, SqliteMapState

    if store == "sqlite":
        family, args, kwargs = SqliteMapState, (url,), {"table": table}
    elif store == "redis":
        family, args, kwargs = RedisMapState, (url,), {"key_prefix": f"{table}:"}
    else:
        family, args, kwargs = PostgresMapState, (url,), {"table": table, "key_columns": {"word": "TEXT"}}
    make = family.opaque if kind == "opaque" else family.transactional
    return make(*args, **kwargs)


def null_factory(tally_path: Path) -> Any:
    """An opaque map state factory whose store keeps nothing but one line of checksums per write.

    Every ``multi_get`` misses; every ``multi_put`` appends ``txid groups sum checksum`` (one
    ``O_APPEND`` write) to ``tally_path``. The classes are made here so that they travel to the
    Python workers by value. The factory is a :class:`~weir.trident.backing.MapStateFactory`, so
    the planner treats it as weir's own map states (one keyspace, Spark-hash routing).
    """
    import os
    from dataclasses import dataclass as _dataclass

    from weir.trident.backing import MapStateFactory, MapStore
    from weir.trident.state import BackingMap, StateType

    class NullBackingMap(BackingMap[Any]):
        def __init__(self, path: str) -> None:
            self.path = path

        def multi_get(self, keys: Any) -> list[Any]:
            return [None] * len(keys)

        def multi_put(self, keys: Any, vals: Any) -> None:
            if not keys:
                return
            crc = zlib.crc32
            total = chk = 0
            txids = set()
            for k, v in zip(keys, vals, strict=True):
                total += v.curr
                chk += crc(k[0].encode()) * v.curr
                txids.add(v.curr_txid)
            (txid,) = txids
            line = f"{txid} {len(keys)} {total} {chk}\n".encode()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)

    @_dataclass(frozen=True)
    class NullStore(MapStore):
        path: str

        def backing_map(self, state_type: StateType) -> BackingMap[Any]:
            return NullBackingMap(self.path)

        def validate(self, state_type: StateType) -> None:
            pass

        def describe(self) -> str:
            return f"null store (checksums in {self.path})"

    return MapStateFactory(NullStore(str(tally_path)), StateType.OPAQUE)


def null_tallies(tally_path: Path, ckpt: Path) -> list[tuple[list[str], Tally]]:
    """The null store's checksums summed over the partitions of each txid, with each batch's files.

    Txids and the file source's batch ids both count up, one per batch: the n-th txid is the
    n-th batch.
    """
    per: dict[int, list[int]] = {}
    lines = tally_path.read_text().split("\n") if tally_path.exists() else []
    for line in filter(None, lines):
        txid, groups, total, chk = (int(x) for x in line.split())
        acc = per.setdefault(txid, [0, 0, 0])
        acc[0] += groups
        acc[1] += total
        acc[2] += chk
    read = _source_files(ckpt) if (ckpt / "sources" / "0").is_dir() else {}
    batches = [read[b] for b in sorted(read)]
    tallies = [(a[0], a[1], a[2]) for _, a in sorted(per.items())]
    if len(batches) != len(tallies):  # verify_tallies names the mismatch
        batches = [[] for _ in tallies]
    return list(zip(batches, tallies, strict=True))


def trident_topology(input_dir: Path, fpb: int, factory: Any) -> Any:
    """FileSpout → Python ``Split`` → ``group_by(word)`` → ``persistent_aggregate(Count)``, 2 partitions."""
    from weir.sources import FileSpout
    from weir.trident import Count, Function, TridentTopology

    class Split(Function):
        def execute(self, tup: Any, collector: Any) -> None:
            for word in tup.get_string(0).split():
                collector.emit([word])

    t = TridentTopology()
    (
        t.new_stream("lines", FileSpout(str(input_dir), files_per_batch=fpb))
        .each(["line"], Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(factory, Count(), "count")
        .parallelism_hint(2)
    )
    return t


def run_trident(
    spark: Any,
    progress: ProgressLog,
    variant: str,
    input_dir: Path,
    work: Path,
    fpb: int,
    urls: Mapping[str, str],
    expected_keys: list[str],
    grow: int = 1,
) -> Any:
    """Run one Trident variant; seconds, the counts read back from its map state, breakdown.

    ``grow`` is ``weir.batch.grow.max``: a batch takes up to ``fpb × grow`` ready files.
    """
    import weir

    kind = "opaque" if variant.startswith("to-") else "transactional"
    store = variant.split("-", 1)[1]
    table = f"wc_{uuid.uuid4().hex[:10]}"
    if store == "null":
        factory = null_factory(work / f"{table}.tallies")
    else:
        url = str(work / "trident.db") if store == "sqlite" else urls[store]
        factory = _factory(kind, store, url, table)
    name = f"twc-{table}"
    conf: dict[str, Any] = {"weir.state.dir": str(work), "weir.spark.master": "local[2]"}
    if grow > 1:
        conf["weir.batch.grow.max"] = grow
    cpu0 = tree_cpu_seconds()
    t0 = time.perf_counter()
    run = weir.submit(name, conf, trident_topology(input_dir, fpb, factory), spark=spark)
    status = run.process_available()
    seconds = time.perf_counter() - t0
    cpu = _cpu_delta(cpu0)
    if status.error:
        raise RuntimeError(f"weir run {name} failed: {status.error}")
    q = progress.summary(str(run.query.id))
    if store == "null":
        got = null_tallies(work / f"{table}.tallies", Path(run.rc.checkpoint_location))
        return seconds, got, {"cpu_s": cpu, "batches": q["batches"], "spark_ms": q["spark_ms"]}
    state = factory.make_state({}, 0, 1)
    counts: dict[str, int] = {}
    chunk = 5000
    for i in range(0, len(expected_keys), chunk):
        keys = expected_keys[i : i + chunk]
        for word, value in zip(keys, state.multi_get([[w] for w in keys]), strict=True):
            if value is not None:
                counts[word] = int(value)
    return seconds, counts, {"cpu_s": cpu, "batches": q["batches"], "spark_ms": q["spark_ms"]}


# ---- driver ----------------------------------------------------------------------------------
def format_table(rows: list[Result]) -> str:
    """A plain-text table: median seconds, every round, words/s and the ratios."""
    head = ["variant", "words", "median s", "runs (s)", "words/s", "vs native", "vs pysplit", "batches", "verified"]
    body = [
        [
            f"{r.variant}: {r.label}",
            f"{r.words:,}",
            f"{r.median_s:.1f}",
            "/".join(f"{x:.1f}" for x in r.runs_s),
            f"{r.words_per_s:,.0f}",
            "-" if r.vs_native is None else f"{r.vs_native:.2f}x",
            "-" if r.vs_pysplit is None else f"{r.vs_pysplit:.2f}x",
            str(r.batches),
            "yes" if r.verified else "NO",
        ]
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(head), "  ".join("-" * w for w in widths), *(line(b) for b in body)])


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit status 1 if any variant's counts were wrong."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--words", type=int, default=2_000_000, help="total words (2M default; 8M for the long run)")
    p.add_argument("--keys", type=int, default=20_000, help="distinct words (20k default; 200k, 2M)")
    p.add_argument("--files", type=int, default=20, help="input files (default 20)")
    p.add_argument("--files-per-batch", type=int, default=2, help="files per micro-batch (default 2)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"comma-separated subset of {', '.join(VARIANTS)} (floor and to-null: the stateless floor "
        "and Trident over a store keeping nothing, verified by per-batch checksums)",
    )
    p.add_argument("--repeat", type=int, default=3, help="interleaved rounds; the table shows the median (default 3)")
    p.add_argument("--no-warmup", action="store_true", help="skip the small warm-up run of each variant")
    p.add_argument("--out", help="JSON output path (default bench/results/trident_wordcount.json)")
    p.add_argument("--event-log", metavar="DIR", help="write Spark's event log here (stage timings: bench/stages.py)")
    p.add_argument(
        "--connect", action="store_true", help="the word count on classic PySpark and over Spark Connect, side by side"
    )
    args, _ = p.parse_known_args(argv)
    if args.connect:  # bench/trident_connect.py: the same corpus and topology, both sessions, one table
        import trident_connect

        return trident_connect.main([a for a in (argv if argv is not None else sys.argv[1:]) if a != "--connect"])
    args = p.parse_args(argv)
    chosen = [v.strip() for v in args.variants.split(",") if v.strip()]
    bad = [v for v in chosen if v not in VARIANTS]
    if bad:
        p.error(f"unknown variant(s) {bad}; choose from {', '.join(VARIANTS)}")
    if args.repeat < 1 or args.words < args.keys:
        p.error("--repeat must be >= 1 and --words >= --keys")

    work = Path(tempfile.mkdtemp(prefix="weir-bench-twc-"))
    stack = contextlib.ExitStack()
    results: dict[str, Result] = {v: Result(v, VARIANTS[v], args.words) for v in chosen}
    try:
        t = time.perf_counter()
        expected = generate_corpus(work / "input", args.words, args.keys, args.files, args.seed)
        warm_expected = generate_corpus(work / "warm", 20_000, 2_000, 2, args.seed + 1)
        n_words = sum(expected.values())
        keys = sorted(expected)
        print(
            f"corpus: {n_words:,} words, {len(expected):,} distinct, {args.files} files, "
            f"{args.files_per_batch} per batch ({time.perf_counter() - t:.1f} s)",
            flush=True,
        )
        conf = {"spark.sql.streaming.forceDeleteTempCheckpointLocation": "true"}
        if args.event_log:
            conf.update(event_log_conf(args.event_log))
        spark = local_spark("weir-bench-trident-wordcount", conf)
        progress = ProgressLog(spark)
        urls: dict[str, str] = {}
        if any(v.endswith("-redis") for v in chosen):
            urls["redis"] = stack.enter_context(redis_server())
        if any(v.endswith("-postgres") for v in chosen):
            urls["postgres"] = stack.enter_context(postgres_database())

        def run(v: str, input_dir: Path, fpb: int, tag: str, want: list[str]) -> Any:
            d = work / f"{tag}-{v}"
            d.mkdir(parents=True, exist_ok=True)
            if v in ("native", "pysplit", "nostate", "floor"):
                return run_spark(spark, progress, v, input_dir, d / "checkpoint", fpb)
            return run_trident(spark, progress, v, input_dir, d, fpb, urls, want)

        if not args.no_warmup:
            for v in chosen:
                secs, got, _ = run(v, work / "warm", 1, "warm", sorted(warm_expected))
                ok, _detail = verify_tallies(got, work / "warm") if v in TALLIED else verify(got, warm_expected)
                print(f"  warm-up {v:<12} {secs:6.1f} s  verified={'yes' if ok else 'NO'}", flush=True)

        for rnd in range(args.repeat):
            for v in chosen:
                secs, got, breakdown = run(v, work / "input", args.files_per_batch, f"r{rnd}", keys)
                ok, detail = verify_tallies(got, work / "input") if v in TALLIED else verify(got, expected)
                r = results[v]
                r.runs_s.append(round(secs, 2))
                r.runs_cpu_s.append(breakdown.get("cpu_s"))
                r.batches = breakdown.get("batches", 0)
                r.breakdown[f"round{rnd + 1}"] = breakdown
                if not ok:
                    r.verified, r.detail = False, detail
                print(
                    f"  round {rnd + 1} {v:<12} {secs:7.1f} s  {n_words / secs:>10,.0f} words/s  "
                    f"cpu {breakdown.get('cpu_s')} s  verified={'yes' if ok else 'NO: ' + detail}",
                    flush=True,
                )
    finally:
        stack.close()
        shutil.rmtree(work, ignore_errors=True)

    for r in results.values():
        r.median_s = round(statistics.median(r.runs_s), 2)
        r.words_per_s = r.words / r.median_s if r.median_s else 0.0
    for r in results.values():
        for ref, attr in (("native", "vs_native"), ("pysplit", "vs_pysplit")):
            if ref in results and results[ref].words_per_s:
                setattr(r, attr, r.words_per_s / results[ref].words_per_s)
    rows = list(results.values())
    print()
    print(format_table(rows))
    verdicts = []
    for (v, ref), need in TARGETS.items():
        if v in results and ref in results and results[ref].words_per_s:
            got = results[v].words_per_s / results[ref].words_per_s
            verdicts.append(f"target {v} >= {need}x {ref}: {got:.2f}x -> {'met' if got >= need else 'NOT met'}")
    for line in verdicts:
        print(line)

    import pyspark

    payload = {
        "benchmark": "trident_wordcount",
        "machine": {**machine(), "pyspark": pyspark.__version__},
        "params": {k: getattr(args, k) for k in ("words", "keys", "files", "files_per_batch", "seed", "repeat")},
        "targets": verdicts,
        "results": [asdict(r) for r in rows],
    }
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    else:
        out = write_results("trident_wordcount", json.loads(json.dumps(payload, default=str)))
    print(f"\nwrote {out}")
    return 0 if all(r.verified for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
