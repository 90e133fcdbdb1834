"""SIGKILL across a grown batch (``weir.batch.grow.max``): the restart replays the batch's logged range.

Both topologies below run side by side in one driver process per step, each killed at its own point.

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

from tests.crash._harness import run_driver, storm_counts
from weir.demo import generate_corpus
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("growth_driver.py")
# (crash point, weir.batch.grow.max of that run, the coordinator record the crash leaves), per topology:
# the word count of files (crashwc) and the count of a replayable spout (growwc) run side by side in one
# driver per step, each armed at its own point (the crash barrier): 3 driver starts, not 6
CHAINS: dict[str, list[tuple[str, int, tuple[str, int]]]] = {
    "crashwc": [
        ("after_preparing@2", 4, ("PREPARING", 2)),  # txid 1 = files 1-4 committed, txid 2 = files 5-8
        ("between_commits@2", 1, ("COMMITTING", 2)),  # replayed with growth off: still files 5-8
    ],
    "growwc": [
        ("after_preparing@3", 8, ("PREPARING", 3)),  # batches of 10, 20, then 40 records (30..70) prepared
        ("between_commits@3", 1, ("COMMITTING", 3)),  # growth off: the replay still reads 30..70
    ],
}


@pytest.mark.timeout(900)
def test_sigkill_across_a_grown_batch_and_a_slow_started_one_replays_their_logged_ranges(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    expected = generate_corpus(str(corpus), n_words=4_000, n_distinct=200, n_files=8, seed=11)
    urls = {"crashwc": f"sqlite:///{tmp_path / 'state.db'}", "growwc": f"sqlite:///{tmp_path / 'grow' / 'state.db'}"}
    wc_state, grow_state = tmp_path / "state", tmp_path / "grow"

    def record(name: str) -> tuple[object, object]:
        data = StateFactory.from_url(urls[name]).backend.get(f"$checkpointspout-{name}", b"__state")
        assert data is not None, name
        rec = json.loads(data)
        return rec["phase"], rec["txid"]

    def argv(grow: dict[str, int]) -> list[str]:
        return [str(DRIVER), str(grow_state), str(grow["growwc"]), str(wc_state), str(corpus), urls["crashwc"]] + [
            str(grow["crashwc"])
        ]

    for step in range(2):
        crash = {name: chain[step][0] for name, chain in CHAINS.items()}
        res = run_driver(argv({name: chain[step][1] for name, chain in CHAINS.items()}), crash)
        assert res.returncode == -signal.SIGKILL, f"not killed at {crash}: rc={res.returncode}\n{res.stderr[-3000:]}"
        for name, chain in CHAINS.items():
            assert record(name) == chain[step][2], f"{name}: after the crash at {chain[step][0]}"
    final = run_driver(argv({"crashwc": 1, "growwc": 1}), None)
    assert final.returncode == 0, final.stderr[-4000:]

    # files: the first run read 8 one-file batches' worth of backlog with batches grown to 4 files, the
    # restarts ran with growth off, so a replay that re-decided its size would read one file
    assert "crashwc DONE txid=2 " in final.stdout, final.stdout  # nothing left after the replayed 4-file batch
    assert record("crashwc") == ("COMMITTED", 2)
    assert storm_counts(urls["crashwc"], "crashwc") == expected
    # Spark's file log: batch 0 (txid 1) and batch 1 (txid 2) hold four files each, all eight once
    sources = wc_state / "spark" / "crashwc" / "sources" / "0"
    batches = [[json.loads(x)["path"] for x in (sources / str(b)).read_text().splitlines()[1:]] for b in (0, 1)]
    assert [len(b) for b in batches] == [4, 4]
    assert sorted(os.path.basename(p) for b in batches for p in b) == sorted(os.listdir(corpus))

    # the replayable spout: txid 3 was 30..70 (replayed as logged); then 80 records in batches of 10
    assert "growwc DONE txid=11 " in final.stdout, final.stdout
    assert record("growwc") == ("COMMITTED", 11)
    assert storm_counts(urls["growwc"], "growwc") == Counter(f"k{i % 7}" for i in range(150))
    offsets = grow_state / "spark" / "growwc" / "offsets"
    ends = [json.loads((offsets / str(b)).read_text().splitlines()[-1])["n"] for b in range(11)]
    assert ends == [10, 30, 70, *range(80, 151, 10)]
