"""Where one word-count batch's time goes, on classic PySpark and over Spark Connect.

Runs the Storm word count (``bench/storm_connect.py``'s driver) or the Trident word count
(``bench/trident_connect.py``'s) on a small corpus on both sessions, each with a Spark event log,
and prints per variant and per batch:

* the client's calls to the Connect server, by RPC (``ExecutePlan`` of a query or a command,
  ``AnalyzePlan``, ``Config``): how many and their summed wall time;
* the Spark jobs and stages the server (or the classic driver) ran: how many, their summed wall
  time (submission to completion), the executors' run time summed over tasks;
* the batch's wall time and what is left outside the jobs (planning, RPC, Python-side work).

Usage::

    .venv/bin/python bench/connect_profile.py storm --words 60000
    .venv/bin/python bench/connect_profile.py trident --words 60000

Prints a table and writes ``bench/results/connect_profile_<dialect>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # the test suite's Spark Connect server

from _common import event_log_conf, local_spark, machine, redis_server, write_results  # noqa: E402
from wordcount_corpus import generate_corpus  # noqa: E402

RPCS: dict[str, list[float]] = defaultdict(list)


def _patch_client() -> None:
    """Time every RPC the Connect client makes (by kind) into :data:`RPCS`."""
    from pyspark.sql.connect.client.core import SparkConnectClient

    def wrap(name: str, label: Any) -> None:
        orig = getattr(SparkConnectClient, name)

        def timed(self: Any, *a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            kind = label(a, kw) if callable(label) else label
            out = orig(self, *a, **kw)
            if not isinstance(out, Iterator):
                RPCS[kind].append(time.perf_counter() - t)
                return out
            return _timed_iter(out, kind, t)  # a streamed answer: its time is until the last response

        setattr(SparkConnectClient, name, timed)

    def exec_label(a: Any, kw: Any) -> str:
        req = a[0] if a else kw.get("req")
        return "ExecutePlan(command)" if req is not None and req.plan.HasField("command") else "ExecutePlan(query)"

    from pyspark.sql.connect.plan import LogicalPlan

    to_proto = LogicalPlan.to_proto

    def timed_to_proto(self: Any, *a: Any, **kw: Any) -> Any:  # the client making a plan's message
        t = time.perf_counter()
        try:
            return to_proto(self, *a, **kw)
        finally:
            RPCS["plan to proto (client)"].append(time.perf_counter() - t)

    LogicalPlan.to_proto = timed_to_proto  # type: ignore[method-assign]
    wrap("_execute_and_fetch_as_iterator", exec_label)
    wrap("_analyze", lambda a, kw: f"AnalyzePlan({kw.get('method', a[0] if a else '?')})")
    wrap("config", "Config")


def _timed_iter(it: Iterator[Any], kind: str, t: float) -> Iterator[Any]:
    try:
        yield from it
    finally:
        RPCS[kind].append(time.perf_counter() - t)


def _jobs(log_dir: Path) -> list[dict[str, Any]]:
    """Jobs of the newest event log in ``log_dir``: start, end, stages, summed stage wall and task run time."""
    logs = sorted((p for p in log_dir.iterdir() if p.is_file()), key=lambda p: p.stat().st_mtime)
    jobs: dict[int, dict[str, Any]] = {}
    stage_wall: dict[int, int] = {}
    task_run: dict[int, float] = defaultdict(float)
    with logs[-1].open() as fh:
        for line in fh:
            ev = json.loads(line)
            kind = ev.get("Event")
            if kind == "SparkListenerJobStart":
                jobs[ev["Job ID"]] = {"start": ev["Submission Time"], "stages": ev.get("Stage IDs", [])}
            elif kind == "SparkListenerJobEnd" and ev["Job ID"] in jobs:
                jobs[ev["Job ID"]]["end"] = ev["Completion Time"]
            elif kind == "SparkListenerStageCompleted":
                info = ev["Stage Info"]
                if "Submission Time" in info and "Completion Time" in info:
                    stage_wall[info["Stage ID"]] = info["Completion Time"] - info["Submission Time"]
            elif kind == "SparkListenerTaskEnd":
                task_run[ev["Stage ID"]] += (ev.get("Task Metrics") or {}).get("Executor Run Time", 0)
    out = []
    for j in jobs.values():
        ran = [s for s in j["stages"] if s in stage_wall]  # skipped stages never complete
        out.append(
            {
                "start": j["start"] / 1000,
                "end": j.get("end", j["start"]) / 1000,
                "stages": len(ran),
                "stage_wall_s": sum(stage_wall[s] for s in ran) / 1000,
                "task_run_s": sum(task_run[s] for s in ran) / 1000,
            }
        )
    return out


_PHASES = ("Started", "Analyzed", "ReadyForExecution", "Finished", "Closed")


def _operations(log_dir: Path) -> list[dict[str, float]]:
    """The Connect server's operations (one per ``ExecutePlan``) in the newest event log: each phase's time.

    The server posts ``SparkListenerConnectOperation<phase>`` events (received, analyzed, ready to
    run, results sent, closed); a classic session has none.
    """
    logs = sorted((p for p in log_dir.iterdir() if p.is_file()), key=lambda p: p.stat().st_mtime)
    ops: dict[str, dict[str, float]] = {}
    with logs[-1].open() as fh:
        for line in fh:
            if "ConnectOperation" not in line:
                continue
            ev = json.loads(line)
            phase = str(ev.get("Event", "")).rsplit("ConnectOperation", 1)[-1]
            if phase in _PHASES and "operationId" in ev:
                ops.setdefault(ev["operationId"], {})[phase] = ev["eventTime"] / 1000
    return [o for o in ops.values() if "Started" in o]


def _server_split(b: dict[str, Any], jobs: list[dict[str, Any]], ops: list[dict[str, float]]) -> dict[str, float]:
    """Where a batch's server time outside its jobs went: before the first job, after the last one."""
    mine = [o for o in ops if b["t0"] <= o["Started"] <= b["t1"]]
    out = {"analyze_s": 0.0, "plan_s": 0.0, "to_job_s": 0.0, "after_job_s": 0.0}
    for o in mine:
        js = [j for j in jobs if o["Started"] <= j["start"] <= o.get("Finished", b["t1"])]
        out["analyze_s"] += o.get("Analyzed", o["Started"]) - o["Started"]
        ready = o.get("ReadyForExecution", o.get("Analyzed", o["Started"]))
        out["plan_s"] += ready - o.get("Analyzed", o["Started"])
        if js:
            out["to_job_s"] += min(j["start"] for j in js) - ready
            out["after_job_s"] += o.get("Finished", o.get("Closed", ready)) - max(j["end"] for j in js)
    return out


def _profile_storm(session: Any, classic: bool, name: str, input_dir: Path, redis_url: str) -> list[dict[str, Any]]:
    from storm_wordcount import weir_topology

    import weir

    conf = {
        "weir.state.dir": str(input_dir.parent / f"state-{name}"),
        "topology.state.provider": "redis",
        "topology.state.provider.config": {"url": redis_url},
    }
    files = sorted(str(p) for p in input_dir.iterdir())
    run = weir.submit(name, conf, weir_topology(input_dir, 2), spark=session)
    batches = []
    for bid, start in enumerate(range(0, len(files), 2)):
        RPCS.clear()
        t0 = time.time()
        df = session.read.text(files[start : start + 2])
        batch = df.rdd if classic else df

        def job(txid: int, epoch: int | None, attempt: int, _b: Any = batch) -> Any:
            return run.runner.run(_b, "lines", txid, epoch)

        run.coordinator.run_batch("bench", bid, job)
        batches.append({"t0": t0, "t1": time.time(), "rpcs": {k: (len(v), sum(v)) for k, v in RPCS.items()}})
    return batches


def _profile_trident(session: Any, connect: bool, work: Path, input_dir: Path) -> list[dict[str, Any]]:
    """Trident: batches are timed by the server's jobs only (the query drives them), RPCs in total."""
    from trident_connect import drive

    RPCS.clear()
    t0 = time.time()
    _, nb, _, _ = drive(session, connect, work, input_dir, 2, "sqlite", {})
    return [{"t0": t0, "t1": time.time(), "batches": nb, "rpcs": {k: (len(v), sum(v)) for k, v in RPCS.items()}}]


def main(argv: list[str] | None = None) -> int:
    """Profile both variants of one word count; print the breakdown."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dialect", choices=("storm", "trident"))
    p.add_argument("--words", type=int, default=60_000)
    p.add_argument("--files", type=int, default=12)
    p.add_argument("--out", help="JSON output path (default bench/results/connect_profile_<dialect>.json)")
    args = p.parse_args(argv)
    from tests.servers import SparkConnectServer

    _patch_client()
    load0 = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="weir-connect-profile-"))
    stack = contextlib.ExitStack()
    result: dict[str, Any] = {}
    try:
        generate_corpus(work / "input", args.words, 5_000, args.files, 7)
        generate_corpus(work / "warm", 5_000, 500, 2, 8)
        redis_url = stack.enter_context(redis_server())
        logs = {v: work / f"events-{v}" for v in ("classic", "connect")}
        classic = local_spark("weir-connect-profile", event_log_conf(str(logs["classic"])))
        stack.callback(classic.stop)
        server = stack.enter_context(SparkConnectServer(work / "connect", conf=event_log_conf(str(logs["connect"]))))
        from weir.runtime.spark.session import get_spark

        connect = get_spark(
            "local[2]", "weir-connect-profile", {"spark.sql.shuffle.partitions": "2"}, remote=server.url
        )
        stack.callback(connect.stop)
        for v, s in (("classic", classic), ("connect", connect)):
            if args.dialect == "storm":
                _profile_storm(s, v == "classic", f"w{v}", work / "warm", redis_url)
                batches = _profile_storm(s, v == "classic", f"p{v}", work / "input", redis_url)
            else:
                _profile_trident(s, v == "connect", work, work / "warm")
                batches = _profile_trident(s, v == "connect", work, work / "input")
            time.sleep(3)  # the event log's last lines
            jobs = _jobs(logs[v])
            ops = _operations(logs[v])
            rows = []
            for b in batches:
                js = [j for j in jobs if b["t0"] <= j["start"] <= b["t1"]]
                n = b.get("batches", 1)
                rows.append(
                    {
                        "wall_s": (b["t1"] - b["t0"]) / n,
                        "jobs": len(js) / n,
                        "stages": sum(j["stages"] for j in js) / n,
                        "job_wall_s": sum(j["end"] - j["start"] for j in js) / n,
                        "stage_wall_s": sum(j["stage_wall_s"] for j in js) / n,
                        "task_run_s": sum(j["task_run_s"] for j in js) / n,
                        "rpcs": {k: (c / n, t / n) for k, (c, t) in b["rpcs"].items()},
                        "server": {k: t / n for k, t in _server_split(b, jobs, ops).items()} if ops else {},
                    }
                )
            result[v] = rows
            if args.dialect == "trident":  # the query's start and its first (cold) job against the others
                b = batches[0]
                js = sorted((j for j in jobs if b["t0"] <= j["start"] <= b["t1"]), key=lambda j: j["start"])
                if js:
                    later = js[1:] or js
                    rows[0]["to_first_job_s"] = js[0]["start"] - b["t0"]
                    rows[0]["first_job_s"] = js[0]["end"] - js[0]["start"]
                    rows[0]["later_job_s"] = sum(j["end"] - j["start"] for j in later) / len(later)
                    rows[0]["later_gap_s"] = (js[-1]["start"] - js[0]["start"]) / (len(js) - 1) if len(js) > 1 else 0.0
    finally:
        stack.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.dialect} word count, per batch (averages; trident: over the query's batches)")
    print(f"load average (1 min) at the start and the end: {load0:.1f}, {os.getloadavg()[0]:.1f}")
    print(f"{'variant':<8} {'wall s':>7} {'jobs':>5} {'stages':>6} {'job s':>6} {'stage s':>7} {'task s':>6}  RPCs")
    for v, rows in result.items():
        for r in rows[1:] if len(rows) > 1 else rows:  # the first batch opens files, workers
            rpcs = ", ".join(f"{k} {c:g}×/{t:.2f}s" for k, (c, t) in sorted(r["rpcs"].items()))
            print(
                f"{v:<8} {r['wall_s']:>7.2f} {r['jobs']:>5g} {r['stages']:>6g} {r['job_wall_s']:>6.2f} "
                f"{r['stage_wall_s']:>7.2f} {r['task_run_s']:>6.2f}  {rpcs}"
            )
            if r.get("server"):  # the Connect server's operation events
                print("         server: " + ", ".join(f"{k[:-2]} {t:.3f} s" for k, t in r["server"].items()))
    if args.dialect == "trident":
        print("per query: submit to first job, the first job, the later jobs (mean), start to start of later jobs")
        for v, rows in result.items():
            r = rows[0]
            if "first_job_s" in r:
                print(
                    f"{v:<8} to first job {r['to_first_job_s']:.2f} s, first job {r['first_job_s']:.2f} s, "
                    f"later jobs {r['later_job_s']:.2f} s, batch every {r['later_gap_s']:.2f} s"
                )
    data = {"benchmark": f"connect_profile_{args.dialect}", "machine": machine(), "args": vars(args), "results": result}
    if args.out:
        path = Path(args.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2) + "\n")
    else:
        path = write_results(f"connect_profile_{args.dialect}", data)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
