"""Three SQLite chains in one driver process per step (``chains_driver.py``), each topology armed at
its own point (the crash barrier kills the driver once all three reached theirs): 4 driver starts
instead of 12.

- Ticks (``tickwc``): state that changes on tick tuples, killed at protocol steps of tick batches; the
  restarted runs replay those batches with the same ticks, and every tick's change is committed once.
- Task lifetime (``lifecrash``): Streams operators hand their state off between Python workers; killed
  where a batch's hand-off is written but the batch never commits, the restarted driver (a new epoch)
  must restore from the store, never from that hand-off, so every count stays exact.
- Trident state TTL (``tridentttl``): one file per batch, the batch clock ``txid * 1000`` and a 2.5 s
  TTL, so words expire batch after batch. Killed inside a state partition between ``multi_update``
  and ``commit`` of txid 4 (after its time was logged) with expired cells being rewritten; again while
  it replays that batch (recovery), after the other partition committed; then in the middle of the TTL
  sweep of txid 6's commit (one expired cell deleted, one left). The last run's recovered commit
  finishes the sweep: the store holds exactly the live words, each with the count of the plain-Python
  model (an expired count restarted from 1, never from its old value), and no expired cell.
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
from tests.crash._tick_topology import tick_state
from tests.crash.trident_ttl_driver import NAME as TTL_NAME
from tests.crash.trident_ttl_driver import model
from tests.trident._support import write_lines
from weir.demo import generate_corpus
from weir.state import StateFactory
from weir.trident.backing import SqliteMapState

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("chains_driver.py")
REPO = Path(__file__).resolve().parents[2]
Step = tuple[str, str, int]  # (crash point, phase the coordinator record is left in, its txid)

TICK_FILES = 6  # one file per batch: txids 1..6; freq 2 s at the default 1000 ms interval: ticks at 2, 4, 6
TICK_CHAIN: list[Step] = [
    ("between_prepares@2@0", "PREPARING", 2),  # task 0 prepared its tick's flush, task 1 not yet
    ("after_prepared@4", "PREPARING", 4),  # both tasks prepared their flush: rolled back, replayed
    ("after_committing@6", "COMMITTING", 6),  # rolled forward: the tick of 6 must not run again
]
LIFETIME_FILES = 5
LIFETIME_CHAIN: list[Step] = [
    ("between_prepares@2@0", "PREPARING", 2),  # a task prepared (and handed off) batch 2, then death
    ("after_prepared@3", "PREPARING", 3),  # every task prepared and handed off batch 3: rolled back
    ("after_committing@4", "COMMITTING", 4),  # rolled forward: the hand-off of 4 was of the committed batch
]
TTL_FILES = 6
TTL_CHAIN: list[Step] = [
    ("trident_after_multi_update@4@0", "PREPARING", 4),
    ("trident_after_partition_commit@4@1", "PREPARING", 4),  # killed again while recovering txid 4
    ("trident_ttl_during_sweep@6", "COMMITTING", 6),  # the commit of 6 deleted one expired cell of two
]


@pytest.mark.timeout(1800)
def test_sigkill_in_tick_batches_after_hand_offs_and_with_expiries_in_flight_ends_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the workers import the topologies (and the TTL driver's batch clock) from this checkout
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    tick_corpus, life_corpus = tmp_path / "tick-corpus", tmp_path / "life-corpus"
    tick_expected = generate_corpus(str(tick_corpus), n_words=3_000, n_distinct=100, n_files=TICK_FILES, seed=5)
    life_expected = generate_corpus(str(life_corpus), n_words=1_500, n_distinct=80, n_files=LIFETIME_FILES, seed=8)
    # TTL: words expire and are rewritten at txid 4 (killed) and 5; the commit of 4 sweeps one cell, of 6 two
    rng = random.Random(34)
    vocab = [f"w{i}" for i in range(12)]
    files = [rng.choices(vocab, k=8) for _ in range(TTL_FILES)]
    ttl_lines, map_db = tmp_path / "lines", tmp_path / "maps.db"
    for i, words in enumerate(files):
        write_lines(ttl_lines, f"f{i:03d}.txt", [" ".join(words)])

    tick_url = f"sqlite:///{tmp_path / 'tick.db'}"
    life_url = f"sqlite:///{tmp_path / 'life.db'}"
    ttl_state = tmp_path / "ttl-state"
    argv = [str(DRIVER)]
    argv += ["tick", str(tmp_path / "tick-state"), str(tick_corpus), tick_url]
    argv += ["lifetime", str(tmp_path / "life-state"), str(life_corpus), life_url]
    argv += ["trident_ttl", str(ttl_state), str(ttl_lines), str(map_db)]
    chains = {
        "tickwc": (tick_url, TICK_CHAIN),
        "lifecrash": (life_url, LIFETIME_CHAIN),
        TTL_NAME: (f"sqlite:///{ttl_state / 'state.db'}", TTL_CHAIN),
    }
    for step in range(3):
        crash = {name: chain[step][0] for name, (_, chain) in chains.items()}
        res = run_driver(argv, crash, 600)
        assert res.returncode == -signal.SIGKILL, f"not killed at {crash}: rc={res.returncode}\n{res.stderr[-3000:]}"
        for name, (url, chain) in chains.items():
            point, phase, txid = chain[step]
            raw = StateFactory.from_url(url).backend.get(f"$checkpointspout-{name}", b"__state")
            assert raw is not None, name
            rec = json.loads(raw)
            assert (rec["phase"], rec["txid"]) == (phase, txid), f"{name}: after the crash at {point}: {rec}"
            if name == TTL_NAME:
                assert (rec["batch_txid"], rec["batch_ms"]) == (txid, txid * 1000)
        if step == 2:  # the TTL sweep, mid-way: of the two cells the commit of 6 deletes, one is gone
            cells = model(files)
            due = {w for w, (_, t) in cells.items() if t == TTL_FILES - 3}  # older ones: earlier commits
            stored = _keys(map_db)
            assert len(due) == 2 and len(due & stored) == 1, (due, stored)
            assert not {w for w, (_, t) in cells.items() if t < TTL_FILES - 3} & stored
    final = run_driver(argv, None, 600)
    assert final.returncode == 0, final.stderr[-4000:]
    assert f"tickwc DONE txid={TICK_FILES} " in final.stdout
    assert f"lifecrash DONE txid={LIFETIME_FILES} " in final.stdout
    assert f"{TTL_NAME} DONE txid={TTL_FILES} " in final.stdout

    # ticks: each tick's change committed exactly once
    states = tick_state(StateFactory.from_url(tick_url), "tickwc")
    for i, st in enumerate(states):
        assert st["flushes"] == 3, f"task {i}: {st}"  # ticks of txids 2, 4, 6, each committed once
        assert st["pending"] == 0  # the last batch ticked: everything is flushed
        assert sorted(k for k in st if k.startswith("tick-")) == ["tick-2", "tick-4", "tick-6"]
        assert all(st[f"tick-{t}"][1] == [2.0] for t in (2, 4, 6))  # the tick's one value: its frequency
        assert st["total"] == sum(st[f"tick-{t}"][0] for t in (2, 4, 6))
    assert sum(st["total"] for st in states) == sum(tick_expected.values())

    # task lifetime: both operators' counts are exactly every word once, whatever worker ran which task when
    provider = StateFactory.from_url(life_url)
    words = sum(life_expected.values())
    last = dict(provider.new_state("lifecrash-last-0"))
    assert last["inreg-0"] + last["inreg-1"] == words
    assert last["outreg-0"] + last["outreg-1"] == words
    assert sum(dict(provider.new_state(f"lifecrash-probe-{i}"))["n"] for i in range(2)) == words

    # TTL: the store holds exactly the live words (counts written after txid 3, the cutoff of txid 6),
    # each exact: the swept cells are gone, nothing else is
    want = model(files)
    live = {w: n for w, (n, t) in want.items() if t > TTL_FILES - 3}
    assert _keys(map_db) == set(live)
    state = SqliteMapState.opaque(str(map_db), table="ttl").make_state({}, 0, 1)
    ttl_words = sorted(want)
    got = dict(zip(ttl_words, state.multi_get([[w] for w in ttl_words]), strict=True))
    assert {w: n for w, n in got.items() if n is not None} == live
    assert any(t <= TTL_FILES - 3 for _, t in want.values()) and live  # the corpus has both kinds


def _keys(map_db: Path) -> set[str]:
    """The words stored in the map's table."""
    with sqlite3.connect(map_db) as conn:
        return {json.loads(k)[0] for (k,) in conn.execute('SELECT k FROM "ttl"')}
