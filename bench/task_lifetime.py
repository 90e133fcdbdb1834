"""How often a task keeps its instance (Storm) and how often a Streams operator task needed a restore.

Runs ``tests/spark/_lifetime.py``'s topology (a Storm stateful bolt, a Streams operator in a consistent
region and one outside any region, 2 tasks each) over ``--batches`` one-file batches, on ``local[2]``
(state in SQLite) and on a Spark standalone master with two workers started here from the PySpark
install (separate executor JVMs and Python workers; state in a Redis started here). Per component it
counts the task-batches of committed batches and how each began: a Storm task that **kept** its
worker's prepared instance, or got a new one; a Streams task that found its **live** instance, took
the **handoff** of another worker on the machine, or was **restored** from the store (``reset``/
``initial``: only after a failure, or on another machine). Exactness is checked (exit status 1 if the
counts are wrong). Prints a table and writes ``bench/results/task_lifetime.json``.

Usage::

    python bench/task_lifetime.py                    # local[2] and the standalone cluster (~3 min)
    python bench/task_lifetime.py --masters local    # local[2] only
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from _common import free_port, machine, redis_server, write_results  # noqa: E402


@contextlib.contextmanager
def standalone_cluster(workdir: Path) -> Iterator[str]:
    """A standalone master and two 1-core workers on loopback; yields the master URL."""
    import pyspark

    home = Path(pyspark.__file__).parent
    env = dict(os.environ, SPARK_HOME=str(home), PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    port, ui = free_port(), free_port()
    procs: list[subprocess.Popen[bytes]] = []

    def start(*args: str, log: str) -> None:
        with open(workdir / log, "wb") as f:
            procs.append(subprocess.Popen([str(home / "bin" / "spark-class"), *args], env=env, stdout=f,
                                          stderr=subprocess.STDOUT, start_new_session=True))  # fmt: skip

    def workers() -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                return sum(1 for w in json.load(r).get("workers", []) if w.get("state") == "ALIVE")
        except (OSError, ValueError):
            return 0

    url = f"spark://127.0.0.1:{port}"
    start("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port), "--webui-port",
          str(ui), log="master.log")  # fmt: skip
    try:
        for i in range(2):
            start("org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "1", "--memory",
                  "1g", "--webui-port", str(free_port()), "--work-dir", str(workdir / f"work{i}"),
                  log=f"worker{i}.log")  # fmt: skip
        deadline = time.monotonic() + 120
        while workers() < 2:
            if time.monotonic() > deadline:
                msg = f"the standalone workers did not register (logs in {workdir})"
                raise RuntimeError(msg)
            time.sleep(0.5)
        yield url
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def run_once(master: str, url: str, batches: int, workdir: Path) -> dict[str, Any]:
    """Run the topology on ``master`` with state at ``url``; return the shares and whether it was exact."""
    from tests.spark._lifetime import lifetime_topology, shares

    import weir
    from weir.demo import generate_corpus
    from weir.state import StateFactory

    corpus = workdir / "in"
    expected = generate_corpus(str(corpus), n_words=300 * batches, n_distinct=80, n_files=batches, seed=9)
    conf: dict[str, Any] = {
        "weir.state.dir": str(workdir / "state"),
        "weir.spark.master": master,
        "topology.state.provider.config": {"url": url},
    }
    if not master.startswith("local"):
        conf["weir.spark.conf"] = {"spark.executorEnv.PYTHONPATH": str(ROOT)}
    st = weir.submit("lifetime", conf, lifetime_topology(str(corpus))).process_available(timeout=1200)
    provider = StateFactory.from_url(url)
    last = dict(provider.new_state("lifetime-last-0"))
    words = sum(expected.values())
    exact = (
        st.last_txid == batches
        and last.get("outreg-0", 0) + last.get("outreg-1", 0) == words
        and last.get("inreg-0", 0) + last.get("inreg-1", 0) == words
    )
    from weir.runtime.spark.session import stop_spark

    stop_spark()
    return {"master": master, "batches": batches, "exact": exact, "components": shares(st.components)}


def _row(name: str, r: dict[str, Any]) -> list[str]:
    c = r["components"]
    p, i, o = c["probe"], c["inreg"], c["outreg"]

    def restores(x: dict[str, int]) -> str:
        return f"{x.get('restore_reset', 0) + x.get('restore_initial', 0)}/{x['tasks']}"

    def how(x: dict[str, int]) -> str:
        return f"{x.get('restore_live', 0)} / {x.get('restore_handoff', 0)} / {x.get('restore_first', 0)}"

    return [name, f"{p.get('kept', 0)}/{p['tasks']}", how(i), restores(i), how(o), restores(o),
            "yes" if r["exact"] else "NO"]  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--masters", default="local,standalone", help="local and/or standalone (comma-separated)")
    ap.add_argument("--batches", type=int, default=12)
    args = ap.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    results: dict[str, Any] = {}
    for which in args.masters.split(","):
        with tempfile.TemporaryDirectory(prefix="weir-bench-lifetime-") as tmp:
            work = Path(tmp)
            if which == "local":
                results["local[2]"] = run_once("local[2]", f"sqlite:///{work / 'state.db'}", args.batches, work)
            elif which == "standalone":
                with redis_server() as url, standalone_cluster(work) as master:
                    results["standalone (2 workers)"] = run_once(master, url, args.batches, work)
            else:
                ap.error(f"unknown master {which!r}: use local or standalone")
    head = ["master", "Storm kept", "region: live/handoff/first", "region restores",
            "no region: live/handoff/first", "no-region restores", "exact"]  # fmt: skip
    rows = [head] + [_row(k, v) for k, v in results.items()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    path = write_results("task_lifetime", {"machine": machine(), "results": results})
    print(f"wrote {path}")
    return 0 if all(r["exact"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
