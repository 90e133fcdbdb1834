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
from collections import defaultdict
from pathlib import Path
from typing import Any

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
Step = tuple[str, str, int, int | None]
SQLITE_CHAIN: list[Step] = [
    ("during_processing@1@1", "PREPARING", 1, None),  # window task 1, before any complete checkpoint
    ("during_checkpoint@2@0", "PREPARING", 2, 1),  # inside window task 0's background checkpoint
    ("between_commits@3", "COMMITTING", 3, 3),  # rolled forward by recovery
    ("after_committed@4", "COMMITTED", 4, 4),  # Spark replays batch 4, which is skipped
    # the final mark's transaction (txid 7, after Spark's 6 batches): window task 0 flushed its open
    # window and dies writing that checkpoint; the next run replays the final mark (reset to 6)
    ("during_checkpoint@7@0", "PREPARING", 7, 6),
]
REDIS_CHAIN: list[Step] = [
    ("during_checkpoint@1@1", "PREPARING", 1, None),  # window task 1's first checkpoint write
    ("after_committing@3", "COMMITTING", 3, 3),  # rolled forward by recovery
]
N_FILES = 6


def _record(url: str, name: str) -> dict[str, object]:
    data = StateFactory.from_url(url).backend.get(f"$checkpointspout-{name}", b"__state")
    assert data is not None, name
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


# SQLite's chain and Redis's run in one driver per step: Redis's copy of the topology starts fresh
# in the driver run of SQLite's fourth step, and each is armed at its own point of the step (the
# crash barrier kills the driver once every armed copy reached its point): 6 driver starts, not 9.
@pytest.fixture
def stores(tmp_path: Path, redis_server: Any) -> dict[str, tuple[str, list[Step]]]:
    """Per topology name: its empty store and its chain."""
    redis_server.flushall()
    return {
        NAME: (f"sqlite:///{tmp_path / 'state.db'}", SQLITE_CHAIN),
        f"{NAME}_redis": (str(redis_server.url), REDIS_CHAIN),
    }


@pytest.mark.timeout(1800)
def test_sigkill_chain_then_restart_commits_exactly_the_failure_free_result(
    stores: dict[str, tuple[str, list[Step]]], tmp_path: Path
) -> None:
    batches = write_inputs(tmp_path / "in", N_FILES, 20)
    steps = max(len(chain) for _, chain in stores.values())
    joins = {name: steps - len(chain) for name, (_, chain) in stores.items()}  # the step it starts at

    def argv(step: int) -> list[str]:
        out = [str(DRIVER)]
        for name, (url, _) in stores.items():
            if joins[name] <= step:
                label = "final" if step == steps else f"run{step - joins[name]}"
                out += [
                    str(tmp_path / f"state-{name}"),
                    str(tmp_path / "in"),
                    url,
                    str(_log(tmp_path, name)),
                    label,
                    name,
                ]
        return out

    for step in range(steps):
        crash = {name: chain[step - joins[name]][0] for name, (_, chain) in stores.items() if joins[name] <= step}
        res = run_driver(argv(step), crash, 600)
        assert res.returncode == -signal.SIGKILL, (
            f"the driver should have been killed at {crash}; rc={res.returncode}\n{res.stderr[-3000:]}"
        )
        for name in crash:
            url, chain = stores[name]
            at, phase, txid, _ = chain[step - joins[name]]
            rec = _record(url, name)
            assert (rec["phase"], rec["txid"]) == (phase, txid), f"{name}: after the crash at {at}: {rec}"
    final = run_driver(argv(steps), None, 600)
    assert final.returncode == 0, final.stderr[-4000:]
    last = N_FILES + 1  # Spark's batches, then the final mark's transaction
    # exactly what a failure-free run commits: every window, every total, the open windows flushed
    # once by the final mark
    expected = model(batches, WINDOW, final=True)
    assert all(not open_ for _n, open_ in expected["open"].values())
    for name, (url, chain) in stores.items():
        assert f"{name} DONE txid={last}" in final.stdout
        _check(url, name, chain, _log(tmp_path, name), expected, last)


def _log(tmp_path: Path, name: str) -> Path:
    return tmp_path / f"calls-{name}.log"


def _check(url: str, name: str, chain: list[Step], log: Path, expected: Any, last: int) -> None:
    """Topology ``name``'s committed result, restores and checkpoints after its chain and final run."""
    assert committed(url, name) == expected, name
    # the first run initialised its tasks without any reset
    first = _task_calls(log, "run0")
    assert first and all("reset" not in m and "reset_to_initial_state" not in m for m in first.values()), name
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
                assert got == ("reset_to_initial_state", ""), f"{name} {label} task {task} after {crash}: {got}"
            else:
                assert got == ("reset", str(expect)), f"{name} {label} task {task} after {crash}: {got}"

    backend = StateFactory.from_url(url).backend
    for task in range(2):
        ns = f"{name}-window-{task}"
        rec = backend.txids(ns)
        assert rec.prepared is None and rec.committed == last, (ns, rec)
        head = TaskCheckpoints(backend, ns, f"window task {task}").head()
        assert head is not None and [m.id for m in head.retained] == [N_FILES, last], ns
        # no chunk of a failed attempt or a retired checkpoint is left behind
        chunks = {k for k, _ in backend.scan(ns) if k.startswith(b"c/")}
        assert chunks == {k for m in head.retained for k in m.keys()}, ns
    final_rec = _record(url, name)
    assert (final_rec["phase"], final_rec["txid"]) == ("COMMITTED", last), name
