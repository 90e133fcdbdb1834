"""A Trident word count with ``weir.state.ttl.ms``, SIGKILLed with expiries in flight, ends exact.

The driver (``trident_ttl_driver.py``) runs one file per batch with the batch clock ``txid * 1000``
and a 2.5 s TTL, so words expire batch after batch. The first run is killed inside a state partition
between ``multi_update`` and ``commit`` of txid 4 (after its time was logged), with expired cells being
rewritten; the second while it replays that batch (recovery), after the other partition committed;
the third in the middle of the TTL sweep of txid 6's commit (one expired cell deleted, one left);
then the last run completes: the recovered commit finishes the sweep, so the store holds exactly the
live words, each with the count of the plain-Python model (an expired count restarted from 1, never
from its old value), and no expired cell.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
from pathlib import Path

import pytest

from tests.crash._harness import run_driver
from tests.crash.trident_ttl_driver import NAME, model
from tests.trident._support import write_lines
from weir.state import StateFactory
from weir.trident.backing import SqliteMapState

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("trident_ttl_driver.py")
REPO = Path(__file__).resolve().parents[2]
N_FILES = 6
CHAIN = [
    ("trident_after_multi_update@4@0", "PREPARING", 4),
    ("trident_after_partition_commit@4@1", "PREPARING", 4),  # killed again while recovering txid 4
    ("trident_ttl_during_sweep@6", "COMMITTING", 6),  # the commit of 6 deleted one expired cell of two
]


@pytest.mark.timeout(1800)
def test_sigkill_with_expiries_in_flight_ends_exact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))  # the clock
    # words expire and are rewritten at txid 4 (killed) and 5; the commit of 4 sweeps one cell, of 6 two
    rng = random.Random(34)
    vocab = [f"w{i}" for i in range(12)]
    files = [rng.choices(vocab, k=8) for _ in range(N_FILES)]
    corpus, state_dir, map_db = tmp_path / "lines", tmp_path / "state", tmp_path / "maps.db"
    for i, words in enumerate(files):
        write_lines(corpus, f"f{i:03d}.txt", [" ".join(words)])
    argv = [str(DRIVER), str(state_dir), str(corpus), str(map_db), "opaque"]
    backend = StateFactory.from_url(f"sqlite:///{state_dir / 'state.db'}").backend
    for crash, phase, txid in CHAIN:
        res = run_driver(argv, crash, 600)
        assert res.returncode == -signal.SIGKILL, f"rc={res.returncode} at {crash}\n{res.stderr[-3000:]}"
        rec = json.loads(backend.get(f"$checkpointspout-{NAME}", b"__state") or b"{}")
        assert (rec["phase"], rec["txid"]) == (phase, txid), f"after the crash at {crash}: {rec}"
        assert (rec["batch_txid"], rec["batch_ms"]) == (txid, txid * 1000)
        if phase == "COMMITTING":  # mid-sweep: of the two cells the commit of 6 deletes, one is gone
            cells = model(files)
            due = {w for w, (_, t) in cells.items() if t == N_FILES - 3}  # older ones: earlier commits
            stored = _keys(map_db)
            assert len(due) == 2 and len(due & stored) == 1, (due, stored)
            assert not {w for w, (_, t) in cells.items() if t < N_FILES - 3} & stored
    final = run_driver(argv, None, 600)
    assert final.returncode == 0, final.stderr[-4000:]
    assert f"DONE txid={N_FILES}" in final.stdout
    want = model(files)
    # the store holds exactly the live words (counts written after txid 3, the cutoff of txid 6), each
    # exact: the swept cells are gone, nothing else is
    live = {w: n for w, (n, t) in want.items() if t > N_FILES - 3}
    stored = _keys(map_db)
    assert stored == set(live)
    state = SqliteMapState.opaque(str(map_db), table="ttl").make_state({}, 0, 1)
    words = sorted(want)
    got = dict(zip(words, state.multi_get([[w] for w in words]), strict=True))
    assert {w: n for w, n in got.items() if n is not None} == live
    assert any(t <= N_FILES - 3 for _, t in want.values()) and live  # the corpus has both kinds


def _keys(map_db: Path) -> set[str]:
    """The words stored in the map's table."""
    with sqlite3.connect(map_db) as conn:
        return {json.loads(k)[0] for (k,) in conn.execute('SELECT k FROM "ttl"')}
