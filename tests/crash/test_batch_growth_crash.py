"""SIGKILL across a grown batch (``weir.batch.grow.max``): the restart replays the batch's logged range.

Files: the first run reads 8 one-file batches' worth of backlog with batches grown to 4 files and is
killed with txid 2 (files 5-8) prepared; the restarts run with growth off, so a replay that
re-decided its size would read one file. It reads the four files Spark's offset log holds for txid
2, and the final counts are exact. A replayable spout: killed inside its third, slow-started batch
(40 records), restarted with growth off, the batch is replayed with its 40 records.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from pathlib import Path

import pytest

from tests.crash._harness import run_driver
from weir.demo import generate_corpus
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("storm_driver.py")
# (crash point, weir.batch.grow.max of that run, the coordinator record the crash leaves)
CHAIN = [
    ("after_preparing@2", 4, ("PREPARING", 2)),  # txid 1 = files 1-4 committed, txid 2 = files 5-8
    ("between_commits@2", 1, ("COMMITTING", 2)),  # replayed with growth off: still files 5-8
]


@pytest.mark.timeout(900)
def test_sigkill_across_a_grown_batch_replays_its_logged_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = tmp_path / "corpus"
    expected = generate_corpus(str(corpus), n_words=4_000, n_distinct=200, n_files=8, seed=11)
    url = f"sqlite:///{tmp_path / 'state.db'}"
    state_dir = tmp_path / "state"
    backend = StateFactory.from_url(url).backend

    def record() -> tuple[object, object]:
        data = backend.get("$checkpointspout-crashwc", b"__state")
        assert data is not None
        rec = json.loads(data)
        return rec["phase"], rec["txid"]

    for crash, grow, left in CHAIN:
        monkeypatch.setenv("WEIR_TEST_GROW", str(grow))
        res = run_driver([str(DRIVER), str(state_dir), str(corpus), url], crash)
        assert res.returncode == -signal.SIGKILL, f"not killed at {crash}: rc={res.returncode}\n{res.stderr[-3000:]}"
        assert record() == left, f"after the crash at {crash}"
    monkeypatch.setenv("WEIR_TEST_GROW", "1")
    final = run_driver([str(DRIVER), str(state_dir), str(corpus), url], None)
    assert final.returncode == 0, final.stderr[-4000:]
    assert "DONE txid=2 " in final.stdout, final.stdout  # nothing left after the replayed 4-file batch
    assert record() == ("COMMITTED", 2)
    provider = StateFactory.from_url(url)
    got: Counter[str] = Counter()
    for i in range(2):
        for k, v in provider.new_state(f"crashwc-count-{i}"):
            got[k] += v
    assert got == expected
    # Spark's file log: batch 0 (txid 1) and batch 1 (txid 2) hold four files each, all eight once
    sources = state_dir / "spark" / "crashwc" / "sources" / "0"
    batches = [[json.loads(x)["path"] for x in (sources / str(b)).read_text().splitlines()[1:]] for b in (0, 1)]
    assert [len(b) for b in batches] == [4, 4]
    assert sorted(os.path.basename(p) for b in batches for p in b) == sorted(os.listdir(corpus))


GROWTH_DRIVER = Path(__file__).with_name("growth_driver.py")
# (crash point, weir.batch.grow.max of that run, the coordinator record the crash leaves)
REPLAYABLE_CHAIN = [
    ("after_preparing@3", 8, ("PREPARING", 3)),  # batches of 10, 20, then 40 records (30..70) prepared
    ("between_commits@3", 1, ("COMMITTING", 3)),  # growth off: the replay still reads 30..70
]


@pytest.mark.timeout(900)
def test_sigkill_across_a_slow_started_batch_replays_its_logged_range(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    backend = StateFactory.from_url(f"sqlite:///{state_dir / 'state.db'}").backend

    def record() -> tuple[object, object]:
        data = backend.get("$checkpointspout-growwc", b"__state")
        assert data is not None
        rec = json.loads(data)
        return rec["phase"], rec["txid"]

    for crash, grow, left in REPLAYABLE_CHAIN:
        res = run_driver([str(GROWTH_DRIVER), str(state_dir), str(grow)], crash)
        assert res.returncode == -signal.SIGKILL, f"not killed at {crash}: rc={res.returncode}\n{res.stderr[-3000:]}"
        assert record() == left, f"after the crash at {crash}"
    final = run_driver([str(GROWTH_DRIVER), str(state_dir), "1"], None)
    assert final.returncode == 0, final.stderr[-4000:]
    # txid 3 was 30..70 (replayed as logged); then 80 records in batches of 10: txids 4..11
    assert "DONE txid=11 " in final.stdout, final.stdout
    assert record() == ("COMMITTED", 11)
    provider = StateFactory.from_url(f"sqlite:///{state_dir / 'state.db'}")
    got: Counter[str] = Counter()
    for i in range(2):
        for k, v in provider.new_state(f"growwc-count-{i}"):
            got[k] += v
    assert got == Counter(f"k{i % 7}" for i in range(150))
    offsets = state_dir / "spark" / "growwc" / "offsets"
    ends = [json.loads((offsets / str(b)).read_text().splitlines()[-1])["n"] for b in range(11)]
    assert ends == [10, 30, 70, *range(80, 151, 10)]
