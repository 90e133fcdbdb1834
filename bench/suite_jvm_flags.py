"""Benchmark: CPU of a crash-test Spark driver with and without the test suite's JVM flags.

``tests/conftest.py`` sets ``SPARK_SUBMIT_OPTS=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC`` (C1 only,
the serial collector) for every Spark JVM the tests start. This runs ``tests/crash/storm_driver.py``
(a clean run: 8 one-file batches of a generated corpus into SQLite, as the SIGKILL chain of
``tests/crash/test_storm_crash.py`` does between its kills) alternately with and without the flags,
and measures each run's wall time and the CPU time (user + sys) of its whole process tree (this
process is made a child subreaper, so the JVM and the Python workers are counted when they end).
CPU time is what the flags save; wall time on a shared machine follows the load. A third variant
adds the class-data-sharing archive of Spark's classes that ``tests/_jvm_cds.py`` makes for the
suite (made first if missing).

Usage::

    .venv/bin/python bench/suite_jvm_flags.py            # 2 runs of each
    .venv/bin/python bench/suite_jvm_flags.py --runs 3

Prints a table and writes ``bench/results/suite_jvm_flags.json``.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, median, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "tests" / "crash" / "storm_driver.py"
FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"  # tests/conftest.py SHORT_JVM_OPTS
PR_SET_CHILD_SUBREAPER = 36


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def one_run(corpus: Path, work: Path, opts: str) -> tuple[float, float]:
    """(wall s, CPU s of the whole tree) of one clean driver run with ``SPARK_SUBMIT_OPTS=opts``."""
    state = work / f"state-{time.monotonic_ns()}"
    env = {**os.environ, "SPARK_SUBMIT_OPTS": opts, "PYSPARK_PYTHON": sys.executable}
    env.pop("WEIR_CRASH_AT", None)
    before = _children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(state), str(corpus), f"sqlite:///{state / 'state.db'}"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    while True:  # reap what the driver left to this subreaper (the JVM, Python workers)
        try:
            os.wait()
        except ChildProcessError:
            break
    wall = time.perf_counter() - t0
    if proc.returncode != 0 or "DONE txid=8" not in proc.stdout:
        msg = f"storm_driver.py failed (rc={proc.returncode}, SPARK_SUBMIT_OPTS={opts!r}):\n{proc.stderr[-3000:]}"
        raise RuntimeError(msg)
    return wall, _children_cpu() - before


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2, help="runs of each variant, alternating (default 2)")
    args = ap.parse_args()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    from weir.demo import generate_corpus

    sys.path.insert(0, str(ROOT))
    from tests._jvm_cds import cds_opts

    variants = {"default JVM": "", "tests' flags": FLAGS, "flags + CDS": f"{FLAGS} {cds_opts(FLAGS)}"}
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
    with tempfile.TemporaryDirectory(prefix="weir-bench-jvm-") as tmp:
        work = Path(tmp)
        corpus = work / "corpus"
        generate_corpus(str(corpus), n_words=8_000, n_distinct=300, n_files=8, seed=3)
        for _ in range(args.runs):
            for name, opts in variants.items():
                got[name].append(one_run(corpus, work, opts))
    load = os.getloadavg()[0]
    print(f"{'variant':<14} {'SPARK_SUBMIT_OPTS':<42} {'CPU s (median)':>15} {'wall s (median)':>16}")
    rows: dict[str, Any] = {}
    for name, opts in variants.items():
        cpu = median([c for _, c in got[name]])
        wall = median([w for w, _ in got[name]])
        shown = (opts or "(none)").replace(str(Path.home()), "~")
        shown = shown if len(shown) <= 42 else shown[:39] + "..."
        print(f"{name:<14} {shown:<42} {cpu:15.1f} {wall:16.1f}")
        rows[name] = {"opts": opts, "runs": [{"wall_s": w, "cpu_s": c} for w, c in got[name]], "cpu_s": cpu}
    ratio = rows["tests' flags"]["cpu_s"] / rows["default JVM"]["cpu_s"]
    cds_ratio = rows["flags + CDS"]["cpu_s"] / rows["tests' flags"]["cpu_s"]
    print(f"\nCPU with the tests' flags: {ratio:.2f}x of the default (load average at the end: {load:.1f})")
    print(f"CPU with the flags and the CDS archive: {cds_ratio:.2f}x of the flags alone")
    path = write_results(
        "suite_jvm_flags",
        {"machine": machine(), "variants": rows, "cpu_ratio": ratio, "cds_cpu_ratio": cds_ratio, "load": load},
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
