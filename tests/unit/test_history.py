"""The coordinator's checkpoint history: stored with the record, bounded, JSON, crash-surviving.

The fakes of :mod:`tests.unit.test_coordinator` really prepare, commit and roll back two task
namespaces; here the coordinator also keeps its history, and the tests read the stored rows back.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.cli._support import run
from tests.unit.test_coordinator import (
    NAMESPACES,
    REPO,
    TOPO,
    Driver,
    _clean_env,
    committed_counts,
    expected_counts,
)
from weir.checkpoint import CheckpointPhase, CheckpointStore, checkpoint_namespace
from weir.checkpoint.history import HISTORY_PREFIX, CheckpointHistory, HistoryEntry, load_history
from weir.state.backend import Backend
from weir.state.config import parse_provider_config
from weir.state.factory import open_backend
from weir.state.memory import MemoryBackend

NS = checkpoint_namespace(TOPO)


class HistoryDriver(Driver):
    """A :class:`Driver` whose coordinator keeps ``size`` history entries."""

    def __init__(self, backend: Backend, *, size: int = 100, max_retries: int = 3) -> None:
        super().__init__(backend, max_retries=max_retries)
        self.store = CheckpointStore(backend, TOPO)
        self.coord.store = self.store
        self.coord.history = CheckpointHistory(backend, NS, size)
        self.coord.shape = {"dialect": "storm", "components": [{"id": "count", "kind": "bolt"}]}
        self.seen: list[HistoryEntry] = []
        self.coord.observers.append(lambda e: self.seen.append(HistoryEntry.from_json(e.to_json())))


def summary(backend: Backend) -> list[tuple[str, int, str]]:
    return [(e.kind, e.txid, e.status) for e in load_history(backend, NS)]


def test_each_batch_is_one_entry_with_its_phases_timings_and_counts() -> None:
    backend = MemoryBackend("history-1")
    d = HistoryDriver(backend).start()
    for b in range(3):
        d.batch(b)
    entries = load_history(backend, NS)
    assert [(e.seq, e.kind, e.txid, e.batch_id, e.status, e.attempts) for e in entries] == [
        (1, "batch", 1, 0, "committed", 1),
        (2, "batch", 2, 1, "committed", 1),
        (3, "batch", 3, 2, "committed", 1),
    ]
    e = entries[0]
    assert [p for p, _ in e.phases] == ["PREPARING", "COMMITTING", "COMMITTED"]
    times = [t for _, t in e.phases]
    assert times == sorted(times)
    assert e.tuples_in == 2  # the fake job reports two words per txid
    assert e.job_ms is not None and e.job_ms >= 0
    assert e.commit_ms is not None and e.commit_ms >= 0
    assert e.epoch == 1
    # the observers saw every phase of every entry, in order
    assert [(x.txid, x.status) for x in d.seen[:3]] == [(1, "preparing"), (1, "committing"), (1, "committed")]
    # rows are plain JSON objects (never pickle), the topology shape is stored beside them
    for key, value in backend.scan(NS):
        if key.startswith(HISTORY_PREFIX) or key == b"__topology":
            assert isinstance(json.loads(value), dict)
    assert json.loads(backend.get(NS, b"__topology") or b"")["components"][0]["id"] == "count"


def test_failed_attempts_are_recorded_with_component_task_error_and_traceback() -> None:
    backend = MemoryBackend("history-2")
    d = HistoryDriver(backend, max_retries=2).start()
    d.batch(0)
    d.job.fail = {(2, 0), (2, 1)}  # txid 2 fails twice, succeeds on the third attempt
    d.batch(1)
    e = load_history(backend, NS)[-1]
    assert (e.txid, e.status, e.attempts, e.failure_count) == (2, "committed", 3, 2)
    assert [p for p, _ in e.phases] == [
        "PREPARING",
        "ROLLED_BACK",
        "PREPARING",
        "ROLLED_BACK",
        "PREPARING",
        "COMMITTING",
        "COMMITTED",
    ]
    assert [(f["component"], f["task"], f["attempt"]) for f in e.failures] == [("count", 1, 1), ("count", 1, 2)]
    assert "ValueError: bad word (txid 2)" in e.failures[0]["traceback"]
    d.job.fail_always = True
    with pytest.raises(Exception, match="failed txid 3 3 times"):
        d.batch(2)
    last = load_history(backend, NS)[-1]
    assert (last.txid, last.status, last.attempts, last.failure_count) == (3, "failed", 3, 3)
    assert committed_counts(backend) == expected_counts([1, 2])


def test_history_is_bounded_and_older_rows_are_deleted() -> None:
    backend = MemoryBackend("history-3")
    d = HistoryDriver(backend, size=3).start()
    for b in range(5):
        d.batch(b)
    assert [e.txid for e in load_history(backend, NS)] == [3, 4, 5]
    assert sum(1 for k, _ in backend.scan(NS) if k.startswith(HISTORY_PREFIX)) == 3
    # a new driver with a smaller bound trims on its next entry; sequence numbers go on
    d2 = HistoryDriver(backend, size=2).start()
    d2.batch(5)
    assert [(e.seq, e.txid) for e in load_history(backend, NS)] == [(5, 5), (6, 6)]


def test_size_zero_keeps_no_history() -> None:
    backend = MemoryBackend("history-4")
    d = HistoryDriver(backend, size=0).start()
    d.batch(0)
    assert load_history(backend, NS) == []
    assert CheckpointStore(backend, TOPO).load() is not None


def test_a_corrupt_row_is_skipped_by_readers() -> None:
    backend = MemoryBackend("history-5")
    d = HistoryDriver(backend).start()
    d.batch(0)
    backend.write_direct(NS, {HISTORY_PREFIX + b"000000000099": b"\x80\x04not json"}, None)
    assert [e.txid for e in load_history(backend, NS)] == [1]


# ---- SIGKILL at each protocol step, then restart ----------------------------------------------
DRIVER_SCRIPT = textwrap.dedent(
    """
    import sys
    from weir.state.config import parse_provider_config
    from weir.state.factory import open_backend
    from tests.unit.test_history import HistoryDriver

    db, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    cfg = parse_provider_config(
        {"topology.state.provider": "sqlite", "topology.state.provider.config": {"url": "sqlite:///" + db}}
    )
    backend = open_backend(cfg, fresh=True)
    d = HistoryDriver(backend).start()
    for batch_id in range(first, last + 1):
        d.batch(batch_id)
    backend.close()
    print("done")
    """
)


def run_driver(db: Path, first: int, last: int, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", DRIVER_SCRIPT, str(db), str(first), str(last)],
        env=_clean_env(crash_at),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )


def sqlite_backend(db: Path) -> Backend:
    cfg = parse_provider_config(
        {"topology.state.provider": "sqlite", "topology.state.provider.config": {"url": f"sqlite:///{db}"}}
    )
    return open_backend(cfg, fresh=True)


ROLLED_BACK = [("recovery", 2, "rolled back"), ("batch", 2, "committed")]
ROLLED_FORWARD = [("recovery", 2, "rolled forward")]
CRASHES: dict[str, tuple[str, list[tuple[str, int, str]]]] = {
    # point: (status of txid 2's entry as the killed driver left it, what the next driver adds)
    "after_preparing": ("preparing", ROLLED_BACK),
    "after_prepared": ("preparing", ROLLED_BACK),
    "after_committing": ("committing", ROLLED_FORWARD),
    "between_commits": ("committing", ROLLED_FORWARD),
    "after_committed": ("committed", []),
}


@pytest.mark.crash
@pytest.mark.parametrize("point", list(CRASHES))
def test_history_survives_a_kill_at_each_step_and_shows_the_recovery(tmp_path: Path, point: str) -> None:
    db = tmp_path / "state.db"
    first = run_driver(db, 0, 3, crash_at=f"{point}@2")
    assert first.returncode == -signal.SIGKILL, first.stderr
    left, added = CRASHES[point]
    b = sqlite_backend(db)
    try:
        assert summary(b) == [("batch", 1, "committed"), ("batch", 2, left)]
    finally:
        b.close()
    again = run_driver(db, 1, 3)
    assert again.returncode == 0, again.stderr
    b = sqlite_backend(db)
    try:
        assert summary(b) == [
            ("batch", 1, "committed"),
            ("batch", 2, left),
            *added,
            ("batch", 3, "committed"),
            ("batch", 4, "committed"),
        ]
        entries = load_history(b, NS)
        assert [e.epoch for e in entries][-1] == 2
        rec = CheckpointStore(b, TOPO).load()
        assert rec is not None and (rec.phase, rec.txid) == (CheckpointPhase.COMMITTED, 4)
        assert committed_counts(b) == expected_counts(range(1, 5))
    finally:
        b.close()


# ---- the commands ----------------------------------------------------------------------------
def filled_store(tmp_path: Path) -> str:
    db = tmp_path / "state.db"
    b = sqlite_backend(db)
    try:
        d = HistoryDriver(b, max_retries=1).start()
        d.batch(0)
        d.job.fail = {(2, 0)}
        d.batch(1)
    finally:
        b.close()
    return f"sqlite:///{db}"


def test_weir_history_prints_a_table_and_the_failures(tmp_path: Path, capsys: Any) -> None:
    url = filled_store(tmp_path)
    r = run(capsys, "history", TOPO, "--url", url, "--tracebacks")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.startswith("seq"))
    rows = [ln.split() for ln in lines[header + 2 : header + 4]]
    assert [(row[0], row[1], row[2], row[4]) for row in rows] == [
        ("1", "batch", "1", "committed"),
        ("2", "batch", "2", "committed"),
    ]
    assert "component 'count' task 1: ValueError: bad word" in r.out
    assert 'File "bolt.py", line 7' in r.out  # the traceback
    j = run(capsys, "history", TOPO, "--url", url, "--json", "--last", "1")
    assert j.code == 0
    (only,) = j.json_lines()
    assert (only["txid"], only["attempts"], only["failure_count"]) == (2, 2, 1)


def test_weir_history_of_an_unknown_topology_says_why(tmp_path: Path, capsys: Any) -> None:
    url = filled_store(tmp_path)
    r = run(capsys, "history", "nope", "--url", url)
    assert r.code == 2
    assert "topology 'nope'" in r.err and "$checkpointspout-nope" in r.err


def test_state_inspect_shows_the_last_history_entries(tmp_path: Path, capsys: Any) -> None:
    url = filled_store(tmp_path)
    r = run(capsys, "state", "inspect", "--url", url, "--history", "1")
    assert r.code == 0, r.err
    assert f"checkpoint history of {TOPO!r} (last 1 of 2" in r.out
    tail = r.out.split("checkpoint history of", 1)[1]
    assert "committed" in tail and "ValueError: bad word" in tail
    assert NAMESPACES[0] not in tail
