"""SIGKILL a topology whose state changes on tick tuples at protocol steps of tick batches; the restarted
runs replay those batches with the same ticks, and every tick's change is committed exactly once."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.crash._harness import run_driver
from tests.crash._tick_topology import tick_state
from weir.demo import generate_corpus
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("tick_driver.py")
N_FILES = 6  # one file per batch: txids 1..6; freq 2 s at the default 1000 ms interval: ticks at 2, 4, 6
CHAIN = [
    ("between_prepares@2@0", "PREPARING", 2),  # task 0 prepared its tick's flush, task 1 not yet
    ("after_prepared@4", "PREPARING", 4),  # both tasks prepared their flush: rolled back, replayed
    ("after_committing@6", "COMMITTING", 6),  # rolled forward: the tick of 6 must not run again
]


def _run(state_dir: Path, corpus: Path, url: str, crash: str | None) -> subprocess.CompletedProcess[str]:
    return run_driver([str(DRIVER), str(state_dir), str(corpus), url], crash)


@pytest.mark.timeout(900)
def test_sigkill_in_tick_batches_then_restart_commits_each_tick_once(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    expected = generate_corpus(str(corpus), n_words=3_000, n_distinct=100, n_files=N_FILES, seed=5)
    url = f"sqlite:///{tmp_path / 'state.db'}"
    state_dir = tmp_path / "state"
    backend = StateFactory.from_url(url).backend
    for crash, phase, txid in CHAIN:
        res = _run(state_dir, corpus, url, crash)
        assert res.returncode == -signal.SIGKILL, f"not killed at {crash}: rc={res.returncode}\n{res.stderr[-3000:]}"
        raw = backend.get("$checkpointspout-tickwc", b"__state")
        assert raw is not None
        rec = json.loads(raw)
        assert (rec["phase"], rec["txid"]) == (phase, txid), f"after the crash at {crash}: {rec}"
    final = _run(state_dir, corpus, url, None)
    assert final.returncode == 0, final.stderr[-4000:]
    assert f"DONE txid={N_FILES}" in final.stdout
    states = tick_state(StateFactory.from_url(url), "tickwc")
    for i, st in enumerate(states):
        assert st["flushes"] == 3, f"task {i}: {st}"  # ticks of txids 2, 4, 6, each committed once
        assert st["pending"] == 0  # the last batch ticked: everything is flushed
        assert sorted(k for k in st if k.startswith("tick-")) == ["tick-2", "tick-4", "tick-6"]
        assert all(st[f"tick-{t}"][1] == [2.0] for t in (2, 4, 6))  # the tick's one value: its frequency
        assert st["total"] == sum(st[f"tick-{t}"][0] for t in (2, 4, 6))
    assert sum(st["total"] for st in states) == sum(expected.values())
