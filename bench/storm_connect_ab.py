"""Benchmark: two versions of the Storm stages over Spark Connect, their batches interleaved in one process.

The per-batch difference between two versions of ``weir/runtime/spark/storm/connect.py`` is smaller
than the swing between two runs of ``bench/storm_connect.py`` on a shared machine. So this runs both
in one process against one Spark Connect server and one Redis: a word-count topology per version
(``storm_wordcount.py``'s: ``FileSpout`` → split, 2 tasks → stateful count, 2 tasks, fields
grouping), each batch run by the base version and by this tree's in turn (the order alternates per
batch), so both see the same load. The base version is the module at a git revision
(``git show REV:src/weir/runtime/spark/storm/connect.py``), loaded under another name and pickled
by value to the server's Python workers; the rest of weir is this tree's. Every count is checked.

Usage::

    .venv/bin/python bench/storm_connect_ab.py --base 657312a --words 600000 --files 40

Prints a table and writes ``bench/results/storm_connect_ab.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # the test suite's Spark Connect server

from _common import machine, redis_server, write_results  # noqa: E402
from wordcount_corpus import generate_corpus  # noqa: E402

MODULE = "src/weir/runtime/spark/storm/connect.py"


def _load(label: str, path: Path) -> Any:
    """The module at ``path`` as ``weir_bench_ab_<label>``, pickled by value (the workers cannot import it)."""
    from pyspark import cloudpickle

    spec = importlib.util.spec_from_file_location(f"weir_bench_ab_{label}", path)
    if spec is None or spec.loader is None:
        msg = f"cannot load {path}"
        raise RuntimeError(msg)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    cloudpickle.register_pickle_by_value(mod)
    return mod


def main(argv: list[str] | None = None) -> int:
    """Run both versions batch by batch; exit status 1 if a count was wrong."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, help="the git revision of the base version of the Connect stages")
    p.add_argument("--words", type=int, default=600_000)
    p.add_argument("--distinct", type=int, default=20_000)
    p.add_argument("--files", type=int, default=40)
    p.add_argument("--files-per-batch", type=int, default=2)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--out", help="JSON output path (default bench/results/storm_connect_ab.json)")
    args = p.parse_args(argv)
    from tests.servers import SparkConnectServer

    work = Path(tempfile.mkdtemp(prefix="weir-bench-ab-"))
    stack = contextlib.ExitStack()
    times: dict[str, list[float]] = {"base": [], "this tree": []}
    verified: dict[str, bool] = {}
    loads = [os.getloadavg()[0]]
    try:
        base_src = subprocess.run(
            ["git", "-C", str(HERE.parent), "show", f"{args.base}:{MODULE}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        (work / "base_connect.py").write_text(base_src)
        versions = {"base": _load("base", work / "base_connect.py"), "this tree": _load("tree", HERE.parent / MODULE)}
        expected = generate_corpus(work / "input", args.words, args.distinct, args.files, args.seed)
        redis_url = stack.enter_context(redis_server())
        server = stack.enter_context(SparkConnectServer(work / "connect"))
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.remote(server.url).create()
        stack.callback(spark.stop)
        from storm_wordcount import weir_topology

        import weir
        import weir.runtime.spark.storm.batch as batch_module
        from weir.state import StateFactory

        files = sorted(str(f) for f in (work / "input").iterdir())
        fpb = args.files_per_batch
        runs = {}
        for i, label in enumerate(versions):
            conf = {
                "weir.state.dir": str(work / f"state-{i}"),
                "topology.state.provider": "redis",
                "topology.state.provider.config": {"url": redis_url},
            }
            runs[label] = (weir.submit(f"ab{i}", conf, weir_topology(work / "input", fpb), spark=spark), conf)
        for bid, start in enumerate(range(0, len(files), fpb)):
            order = list(versions) if bid % 2 == 0 else list(reversed(versions))
            for label in order:
                batch_module.ConnectGraph = versions[label].ConnectGraph  # type: ignore[attr-defined]
                run, _ = runs[label]
                t = time.perf_counter()
                df = spark.read.text(files[start : start + fpb])

                def job(txid: int, epoch: int | None, attempt: int, _run: Any = run, _df: Any = df) -> Any:
                    return _run.runner.run(_df, "lines", txid, epoch)

                rep = run.coordinator.run_batch("bench", bid, job)
                if rep.attempts != 1:
                    msg = f"{label}: batch {bid} took {rep.attempts} attempts"
                    raise RuntimeError(msg)
                times[label].append(time.perf_counter() - t)
        loads.append(os.getloadavg()[0])
        for i, (label, (_, conf)) in enumerate(runs.items()):
            counts: dict[str, int] = {}
            for task in range(2):
                for word, c in StateFactory.get_state(f"ab{i}-count-{task}", conf):
                    counts[word] = c
            verified[label] = counts == dict(expected)
    finally:
        stack.close()
        shutil.rmtree(work, ignore_errors=True)
    rows = []
    for label, ts in times.items():
        later = ts[1:]  # the first batch of the process starts the server's Python workers
        rows.append(
            {
                "version": label,
                "batches": len(ts),
                "first_s": round(ts[0], 3),
                "median_s": round(statistics.median(later), 3),
                "mean_s": round(statistics.mean(later), 3),
                "verified": verified.get(label, False),
            }
        )
    print(f"batches of {args.files_per_batch} files, {args.words:,} words in all; base = {args.base}")
    print(f"{'version':<10} {'batches':>7} {'first s':>8} {'median s':>9} {'mean s':>7}  verified")
    for r in rows:
        print(
            f"{r['version']:<10} {r['batches']:>7} {r['first_s']:>8.3f} {r['median_s']:>9.3f} {r['mean_s']:>7.3f}  "
            f"{'yes' if r['verified'] else 'NO'}"
        )
    print(f"load average (1 min) at the start and the end: {loads[0]:.1f}, {loads[-1]:.1f}")
    data = {
        "benchmark": "storm_connect_ab",
        "machine": machine(),
        "args": vars(args),
        "results": rows,
        "loadavg_1m": [round(x, 2) for x in loads],
    }
    path = write_results("storm_connect_ab", data, args.out)
    print(f"wrote {path}")
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
