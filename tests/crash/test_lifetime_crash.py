"""SIGKILL a topology whose Streams operators hand their state off between Python workers, at points
where a batch's hand-off is written but the batch never commits: the restarted driver (a new epoch)
must restore from the store, never from that hand-off, so every count stays exact."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.crash._harness import run_driver
from weir.demo import generate_corpus
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("lifetime_driver.py")
N_FILES = 5
CHAIN = [
    ("between_prepares@2@0", "PREPARING", 2),  # a task prepared (and handed off) batch 2, then death
    ("after_prepared@3", "PREPARING", 3),  # every task prepared and handed off batch 3: rolled back
    ("after_committing@4", "COMMITTING", 4),  # rolled forward: the hand-off of 4 was of the committed batch
]


def _run(state_dir: Path, corpus: Path, url: str, crash: str | None) -> subprocess.CompletedProcess[str]:
    return run_driver([str(DRIVER), str(state_dir), str(corpus), url], crash)


@pytest.mark.timeout(900)
def test_sigkill_after_hand_offs_of_uncommitted_batches_then_restart_is_exact(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    expected = generate_corpus(str(corpus), n_words=1_500, n_distinct=80, n_files=N_FILES, seed=8)
    url = f"sqlite:///{tmp_path / 'state.db'}"
    state_dir = tmp_path / "state"
    backend = StateFactory.from_url(url).backend
    for crash, phase, txid in CHAIN:
        res = _run(state_dir, corpus, url, crash)
        assert res.returncode == -signal.SIGKILL, f"not killed at {crash}: rc={res.returncode}\n{res.stderr[-3000:]}"
        raw = backend.get("$checkpointspout-lifecrash", b"__state")
        assert raw is not None
        rec = json.loads(raw)
        assert (rec["phase"], rec["txid"]) == (phase, txid), f"after the crash at {crash}: {rec}"
    final = _run(state_dir, corpus, url, None)
    assert final.returncode == 0, final.stderr[-4000:]
    assert f"DONE txid={N_FILES}" in final.stdout
    provider = StateFactory.from_url(url)
    words = sum(expected.values())
    last = dict(provider.new_state("lifecrash-last-0"))
    # both operators' counts: exactly every word once, whatever worker ran which task when
    assert last["inreg-0"] + last["inreg-1"] == words
    assert last["outreg-0"] + last["outreg-1"] == words
    assert sum(dict(provider.new_state(f"lifecrash-probe-{i}"))["n"] for i in range(2)) == words
