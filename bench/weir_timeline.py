"""Benchmark aid: a wall-clock timeline of one weir Storm-API word count run (where the idle time is).

Runs ``bench/storm_wordcount.py``'s topology (``FileSpout`` → split ×2 → stateful count ×2, SQLite)
in one ``local[2]`` SparkSession with Spark's event log on: an uncharged warm-up on a small corpus,
then one timed run. From the event log and the query's progress it prints, in milliseconds since
``weir.submit``: each streaming trigger's phases (``durationMs``), each Spark job and stage (submitted,
completed) and each task (launch, finish, run time, CPU time), and a summary of where neither core
was busy (the wall time not covered by any running task). CPU seconds are the driver's process tree
(Spark's JVM, Python workers, the driver).

Usage::

    .venv/bin/python bench/weir_timeline.py --words 300000 --keys 20000 --files 6

Prints the timeline and writes ``bench/results/weir_timeline.json``.
"""

from __future__ import annotations

import argparse
import calendar
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import event_log_conf, local_spark, machine, write_results  # noqa: E402
from storm_wordcount import ProgressLog, run_weir  # noqa: E402
from wordcount_corpus import generate_corpus  # noqa: E402


def _events(log_dir: Path) -> list[dict[str, Any]]:
    files = sorted(p for p in log_dir.iterdir() if p.is_file())
    out: list[dict[str, Any]] = []
    for f in files:
        with f.open(encoding="utf-8") as fh:
            out.extend(json.loads(line) for line in fh if line.strip())
    return out


def _busy_ms(intervals: list[tuple[float, float]], lo: float, hi: float) -> tuple[float, float]:
    """Wall ms in [lo, hi] with at least one task running, and task-ms (sum over cores)."""
    edges = sorted({lo, hi, *(max(lo, min(hi, t)) for iv in intervals for t in iv)})
    busy = 0.0
    for a, b in zip(edges, edges[1:], strict=False):
        mid = (a + b) / 2
        if any(s <= mid < e for s, e in intervals):
            busy += b - a
    total = sum(max(0.0, min(hi, e) - max(lo, s)) for s, e in intervals)
    return busy, total


def main(argv: list[str] | None = None) -> int:
    """Run the timeline; exit status 1 when the count was wrong."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--words", type=int, default=300_000)
    p.add_argument("--keys", type=int, default=20_000)
    p.add_argument("--files", type=int, default=6)
    p.add_argument("--files-per-batch", type=int, default=2)
    p.add_argument("--grow-max", type=int, default=8)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--java-opts", default="", help="spark.driver.extraJavaOptions of the session (JVM flags)")
    p.add_argument("--runs", type=int, default=1, help="timed runs in the session; the timeline is the last one's")
    p.add_argument("--out", help="JSON output path (default bench/results/weir_timeline.json)")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="weir-timeline-"))
    try:
        logs = work / "eventlog"
        conf = event_log_conf(str(logs))
        if args.java_opts:
            conf["spark.driver.extraJavaOptions"] = args.java_opts
        spark = local_spark("weir-timeline", conf)
        progress = ProgressLog(spark)
        corpus = work / "corpus"
        expected = generate_corpus(corpus, n_words=args.words, n_distinct=args.keys, n_files=args.files, seed=args.seed)
        warm = work / "warm"
        generate_corpus(warm, n_words=min(20_000, args.words), n_distinct=min(500, args.keys), n_files=2, seed=1)
        run_weir(spark, progress, f"warm-{uuid.uuid4().hex[:6]}", warm, work / "warm-state", 2, None)
        runs = []
        for i in range(args.runs):
            wall0 = time.time() * 1000
            secs, got, bd = run_weir(
                spark,
                progress,
                f"timeline-{uuid.uuid4().hex[:6]}",
                corpus,
                work / f"state-{i}",
                args.files_per_batch,
                None,
                args.grow_max,
            )
            runs.append({"s": round(secs, 2), "cpu_s": bd["cpu_s"], "cpu_by_kind": bd["cpu_by_kind"]})
            print(
                f"run {i + 1}: {secs:.2f} s, {args.words / secs:,.0f} words/s, cpu {bd['cpu_s']} s {bd['cpu_by_kind']}"
            )
        end = wall0 + secs * 1000
        time.sleep(1.0)  # let the event log flush
        spark.stop()
        evs = _events(logs)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    rows: list[tuple[float, str]] = []
    tasks: list[tuple[float, float]] = []
    task_rows = []
    for e in evs:
        kind = e.get("Event", "")
        if kind == "SparkListenerJobStart" and e["Submission Time"] >= wall0:
            rows.append((e["Submission Time"] - wall0, f"job {e['Job ID']} start ({len(e['Stage Infos'])} stages)"))
        elif kind == "SparkListenerJobEnd" and e["Completion Time"] >= wall0:
            rows.append((e["Completion Time"] - wall0, f"job {e['Job ID']} end"))
        elif kind == "SparkListenerStageCompleted":
            si = e["Stage Info"]
            if si.get("Submission Time", 0) >= wall0:
                rows.append(
                    (
                        si["Submission Time"] - wall0,
                        f"  stage {si['Stage ID']} submitted ({si['Number of Tasks']} tasks) {si['Stage Name'][:50]}",
                    )
                )
                rows.append((si["Completion Time"] - wall0, f"  stage {si['Stage ID']} completed"))
        elif kind == "SparkListenerTaskEnd":
            ti = e["Task Info"]
            if ti["Launch Time"] >= wall0:
                m = e.get("Task Metrics") or {}
                tasks.append((ti["Launch Time"] - wall0, ti["Finish Time"] - wall0))
                task_rows.append(
                    {
                        "stage": e["Stage ID"],
                        "launch_ms": ti["Launch Time"] - wall0,
                        "finish_ms": ti["Finish Time"] - wall0,
                        "run_ms": m.get("Executor Run Time"),
                        "cpu_ms": round((m.get("Executor CPU Time") or 0) / 1e6),
                        "deser_ms": m.get("Executor Deserialize Time"),
                        "locality": ti.get("Locality"),
                    }
                )
        elif kind.endswith("QueryProgressEvent"):
            pr = e["progress"]
            ts = calendar.timegm(time.strptime(pr["timestamp"][:19], "%Y-%m-%dT%H:%M:%S")) * 1000.0
            ts += int(pr["timestamp"][20:23])
            if ts >= wall0:
                n_rows = sum(src.get("numInputRows", 0) for src in pr.get("sources", []))
                rows.append((ts - wall0, f"trigger start, batch {pr['batchId']} rows {n_rows}"))
                rows.append(
                    (
                        ts - wall0 + pr.get("durationMs", {}).get("triggerExecution", 0),
                        f"trigger end {pr.get('durationMs')}",
                    )
                )
        elif kind.endswith("QueryStartedEvent"):
            ts = calendar.timegm(time.strptime(e["timestamp"][:19], "%Y-%m-%dT%H:%M:%S")) * 1000.0
            ts += int(e["timestamp"][20:23])
            if ts >= wall0:
                rows.append((ts - wall0, "query started"))
    rows.sort()
    for t, what in rows:
        print(f"{t:9.0f} ms  {what}")
    for tr in task_rows:
        print(
            f"  task stage {tr['stage']}: {tr['launch_ms']:.0f}-{tr['finish_ms']:.0f} ms run {tr['run_ms']} cpu "
            f"{tr['cpu_ms']} deser {tr['deser_ms']} {tr['locality']}"
        )
    busy, task_ms = _busy_ms(tasks, 0, end - wall0)
    total = end - wall0
    print()
    print(f"run {total:.0f} ms wall, {bd['cpu_s']} CPU s, {bd['batches']} batches; submit {bd['submit_s']} s")
    print(f"a task running: {busy:.0f} ms; no task running: {total - busy:.0f} ms; task-ms on 2 cores {task_ms:.0f}")
    print(f"coordinator: job {bd['job_ms']} ms, commit {bd['commit_ms']} ms; spark phases {bd['spark_ms']}")
    ok = dict(got) == dict(expected)
    print(f"verified={'yes' if ok else 'NO'}")
    data = {
        "benchmark": "weir_timeline",
        "words": args.words,
        "machine": machine(),
        "wall_ms": round(total),
        "task_busy_ms": round(busy),
        "idle_ms": round(total - busy),
        "java_opts": args.java_opts,
        "runs": runs,
        "breakdown": bd,
        "timeline": [{"ms": round(t), "event": w} for t, w in rows],
        "tasks": task_rows,
        "verified": ok,
    }
    if args.out:
        out = Path(args.out)
        out.write_text(json.dumps(data, indent=2) + "\n")
    else:
        out = write_results("weir_timeline", data)
    print(f"wrote {out}")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
