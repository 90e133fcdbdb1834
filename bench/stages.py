"""Where a benchmark's Spark time goes: stage timings from a Spark event log.

Run a benchmark with ``--event-log DIR`` (``bench/trident_wordcount.py`` and ``bench/latency.py``
take it), then::

    .venv/bin/python bench/stages.py DIR            # the newest log in DIR
    .venv/bin/python bench/stages.py DIR/app-...    # one log

For every job group of the query (a micro-batch runs one or more Spark jobs), the table lists each
kind of stage — named by the operators it runs (``mapInArrow``, ``HashAggregate``, ``Exchange``,
scans, ``foreachBatch``) — with how many ran, their summed wall time (submission to completion)
and the executors' run time and CPU time summed over their tasks. The last lines give the jobs'
count and wall time. Only reads the log; prints a table and writes JSON beside it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

_OPS = re.compile(
    r"\b(MapInArrow|PythonMapInArrow|ArrowEvalPython|BatchEvalPython|HashAggregate|ObjectHashAggregate|"
    r"SortAggregate|Exchange|FileScan \w+|Scan \w+|StateStoreSave|StateStoreRestore|Generate|"
    r"MapPartitions|PythonRDD|InMemoryTableScan|Project|Filter|CollectMetrics|WriteToDataSourceV2|"
    r"AppendData|Sort|BroadcastExchange|Union|CartesianProduct|TransformWithState\w*)\b"
)


def _log_file(path: Path) -> Path:
    if path.is_file():
        return path
    logs = sorted(
        (
            p
            for p in path.rglob("*")
            if p.is_file() and not p.name.startswith((".", "appstatus")) and p.suffix != ".json"
        ),
        key=lambda p: p.stat().st_mtime,
    )
    if not logs:
        raise SystemExit(f"no event log in {path}")
    return logs[-1]


def _stage_kind(info: dict[str, Any]) -> str:
    """A short label of what a stage runs: the operators of its RDD scopes, sorted, deduplicated."""
    names: list[str] = []
    for rdd in info.get("RDD Info", []):
        scope = rdd.get("Scope")
        label = ""
        if scope:
            try:
                label = json.loads(scope).get("name", "")
            except ValueError:
                label = ""
        label = label or rdd.get("Name", "")
        for m in _OPS.findall(label) or [label.split(" ")[0]]:
            if m and m not in names:
                names.append(m)
    return " + ".join(sorted(names)) or info.get("Stage Name", "?")


def analyse(path: Path) -> dict[str, Any]:
    """Stage and job timings of one event log."""
    stages: dict[int, dict[str, Any]] = {}
    task_run: dict[int, float] = defaultdict(float)
    task_cpu: dict[int, float] = defaultdict(float)
    jobs: dict[int, dict[str, Any]] = {}
    with path.open() as fh:
        for line in fh:
            ev = json.loads(line)
            kind = ev.get("Event")
            if kind == "SparkListenerTaskEnd":
                m = ev.get("Task Metrics") or {}
                sid = ev["Stage ID"]
                task_run[sid] += m.get("Executor Run Time", 0)
                task_cpu[sid] += m.get("Executor CPU Time", 0) / 1e6
            elif kind == "SparkListenerStageCompleted":
                info = ev["Stage Info"]
                if "Submission Time" not in info or "Completion Time" not in info:
                    continue
                stages[info["Stage ID"]] = {
                    "kind": _stage_kind(info),
                    "wall_ms": info["Completion Time"] - info["Submission Time"],
                    "tasks": info.get("Number of Tasks", 0),
                }
            elif kind == "SparkListenerJobStart":
                jobs[ev["Job ID"]] = {"start": ev["Submission Time"], "stages": ev.get("Stage IDs", [])}
            elif kind == "SparkListenerJobEnd" and ev["Job ID"] in jobs:
                jobs[ev["Job ID"]]["end"] = ev["Completion Time"]
    by_kind: dict[str, dict[str, float]] = defaultdict(lambda: {"n": 0, "wall_ms": 0.0, "run_ms": 0.0, "cpu_ms": 0.0})
    for sid, st in stages.items():
        k = by_kind[st["kind"]]
        k["n"] += 1
        k["wall_ms"] += st["wall_ms"]
        k["run_ms"] += task_run.get(sid, 0.0)
        k["cpu_ms"] += task_cpu.get(sid, 0.0)
    job_ms = sum(j["end"] - j["start"] for j in jobs.values() if "end" in j)
    return {
        "log": str(path),
        "stages": dict(sorted(by_kind.items(), key=lambda kv: -kv[1]["wall_ms"])),
        "jobs": len(jobs),
        "job_wall_ms": job_ms,
    }


def main(argv: list[str] | None = None) -> int:
    """Print the stage table of an event log."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path", help="an event log, or a directory of them (the newest is read)")
    args = p.parse_args(argv)
    log = _log_file(Path(args.path))
    res = analyse(log)
    print(f"{log.name}: {res['jobs']} jobs, {res['job_wall_ms'] / 1000:.1f} s of job wall time")
    print(f"{'stages':>6} {'wall s':>8} {'task run s':>10} {'task cpu s':>10}  operators")
    for kind, k in res["stages"].items():
        secs = f"{k['wall_ms'] / 1000:>8.2f} {k['run_ms'] / 1000:>10.2f} {k['cpu_ms'] / 1000:>10.2f}"
        print(f"{int(k['n']):>6} {secs}  {kind}")
    out = log.with_suffix(".stages.json")
    out.write_text(json.dumps(res, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
