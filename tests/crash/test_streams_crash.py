"""SIGKILL a topology with a windowed Streams operator and stateful bolts in one consistent region.

The driver (its whole process group: JVM and Python workers) is killed at a chain of points — during
processing before the first complete checkpoint, inside the background (non-blocking) checkpoint
write, between the commits of two namespaces, after COMMITTED but before Spark's commit — and
restarted each time; on SQLite also inside the final mark's transaction (every run ends with one,
flushing the open windows), which the next run replays. The committed windows, per-key totals and
the window operator's own state must equal a failure-free run exactly, and every restart must reset
each window task to the right checkpoint (or to its initial state before the first one).
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from tests.crash._harness import run_driver
from tests.streams._topology import committed, model, write_inputs
from weir.state import StateFactory
from weir.streams.store import TaskCheckpoints

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("streams_driver.py")
NAME = "crashsw"
WINDOW = 5  # as in the driver

# (crash point, phase the coordinator record is left in, its txid, the checkpoint every window task
# must be reset to by the next run: None = reset_to_initial_state)
SQLITE_CHAIN = [
    ("during_processing@1@1", "PREPARING", 1, None),  # window task 1, before any complete checkpoint
    ("during_checkpoint@2@0", "PREPARING", 2, 1),  # inside window task 0's background checkpoint
    ("between_commits@3", "COMMITTING", 3, 3),  # rolled forward by recovery
    ("after_committed@4", "COMMITTED", 4, 4),  # Spark replays batch 4, which is skipped
    # the final mark's transaction (txid 7, after Spark's 6 batches): window task 0 flushed its open
    # window and dies writing that checkpoint; the next run replays the final mark (reset to 6)
    ("during_checkpoint@7@0", "PREPARING", 7, 6),
]
REDIS_CHAIN = [
    ("during_checkpoint@1@1", "PREPARING", 1, None),  # window task 1's first checkpoint write
    ("after_committing@3", "COMMITTING", 3, 3),  # rolled forward by recovery
]
N_FILES = 6


def _run(args: list[str], crash: str | None, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return run_driver([str(DRIVER), *args], crash, timeout)


def _record(url: str) -> dict[str, object]:
    data = StateFactory.from_url(url).backend.get(f"$checkpointspout-{NAME}", b"__state")
    assert data is not None
    return dict(json.loads(data))


def _first_restore(log: Path) -> dict[tuple[str, int], tuple[str, str] | None]:
    """Per (run label, window task): how the run's first batch restored the task, before its first
    checkpoint (None: no reset at all, a first start)."""
    first: dict[tuple[str, int], tuple[str, str] | None] = {}
    for line in log.read_text().splitlines():
        label, _pid, role, task, method, *arg = line.split()
        key = (label, int(task))
        if role != "task" or key in first:
            continue
        if method in ("reset", "reset_to_initial_state"):
            first[key] = (method, arg[0] if arg else "")
        elif method == "checkpoint":
            first[key] = None
    return first


def _task_calls(log: Path, label: str) -> dict[int, list[str]]:
    per: dict[int, list[str]] = defaultdict(list)
    for line in log.read_text().splitlines():
        lab, _pid, role, task, method, *_ = line.split()
        if lab == label and role == "task":
            per[int(task)].append(method)
    return per


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, list[tuple[str, str, int, int | None]]]:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}", SQLITE_CHAIN
    server = request.getfixturevalue("redis_server")
    server.flushall()
    return str(server.url), REDIS_CHAIN


def test_sigkill_chain_then_restart_commits_exactly_the_failure_free_result(
    store: tuple[str, list[tuple[str, str, int, int | None]]], tmp_path: Path
) -> None:
    url, chain = store
    batches = write_inputs(tmp_path / "in", N_FILES, 20)
    log = tmp_path / "calls.log"
    args = [str(tmp_path / "state"), str(tmp_path / "in"), url, str(log)]
    for i, (crash, phase, txid, _) in enumerate(chain):
        res = _run([*args, f"run{i}"], crash)
        assert res.returncode == -signal.SIGKILL, (
            f"the driver should have been killed at {crash}; rc={res.returncode}\n{res.stderr[-3000:]}"
        )
        rec = _record(url)
        assert (rec["phase"], rec["txid"]) == (phase, txid), f"after the crash at {crash}: {rec}"
    final = _run([*args, "final"], None)
    assert final.returncode == 0, final.stderr[-4000:]
    last = N_FILES + 1  # Spark's batches, then the final mark's transaction
    assert f"DONE txid={last}" in final.stdout

    # exactly what a failure-free run commits: every window, every total, the open windows flushed
    # once by the final mark
    expected = model(batches, WINDOW, final=True)
    assert all(not open_ for _n, open_ in expected["open"].values())
    assert committed(url, NAME) == expected

    # the first run initialised its tasks without any reset
    first = _task_calls(log, "run0")
    assert first and all("reset" not in m and "reset_to_initial_state" not in m for m in first.values())
    # every restart reset each window task to the latest complete checkpoint of the crash it follows
    restores = _first_restore(log)
    labels = [f"run{i}" for i in range(1, len(chain))] + ["final"]
    for (crash, _, _, expect), label in zip(chain, labels, strict=True):
        crashed_task = int(crash.split("@")[2]) if crash.count("@") == 2 else None
        for task in range(2):
            got = restores.get((label, task))
            if expect is None:
                if got is None and task != crashed_task:
                    continue  # this task had not started when the other one crashed: a first start
                assert got == ("reset_to_initial_state", ""), f"{label} task {task} after {crash}: {got}"
            else:
                assert got == ("reset", str(expect)), f"{label} task {task} after {crash}: {got}"

    backend = StateFactory.from_url(url).backend
    for task in range(2):
        ns = f"{NAME}-window-{task}"
        rec = backend.txids(ns)
        assert rec.prepared is None and rec.committed == last, (ns, rec)
        head = TaskCheckpoints(backend, ns, f"window task {task}").head()
        assert head is not None and [m.id for m in head.retained] == [N_FILES, last]
        # no chunk of a failed attempt or a retired checkpoint is left behind
        chunks = {k for k, _ in backend.scan(ns) if k.startswith(b"c/")}
        assert chunks == {k for m in head.retained for k in m.keys()}
    final_rec = _record(url)
    assert (final_rec["phase"], final_rec["txid"]) == ("COMMITTED", last)
