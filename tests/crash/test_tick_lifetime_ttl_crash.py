"""Seven SIGKILL chains in one driver process per step (``chains_driver.py``), each topology armed at
its own point (the crash barrier kills the driver once all reached theirs), a topology sitting out
the steps outside its chain: 4 driver starts instead of 23.

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
- Storm state TTL (``ttlwc``, ``ttl_driver.py``): a word count whose counts expire (the same batch
  clock, a 2.5 s TTL), killed with the sweep of the batch in flight prepared, committing and half
  committed; on SQLite the whole chain, on PostgreSQL (its own commit transaction per namespace) and
  Redis the step that splits a commit (their topologies start fresh in that step; every store's TTL
  rows and sweep are covered by tests/contract/test_ttl.py). The committed counts and stored rows
  equal the plain-Python model: nothing expired is resurrected by recovery, nothing is counted twice,
  and every expired key is gone from the store.
- Independent consistent regions (``regions``, ``streams_regions_driver.py``): a failure in region
  ``b`` resets only ``b``; region ``a`` keeps its prepared checkpoint and is not run again. Killed
  right after such a region-scoped rollback (step 0), restarted with the final run, where a later
  batch fails in ``b`` again without a crash: both regions' committed totals equal the input exactly.
- A Trident word count seeded with ``initial_state`` (``seedcrash``, ``trident_seed_driver.py``),
  killed inside the load at submit (step 1) after the first chunk of seeded cells was written (the
  marker stored); the final run (the same program, the same ``initial_state``) finishes the load
  from the staged rows before its first batch and counts on: exactly seed + words, never a
  half-loaded seed.
- The streamparse word count (``sp_crash``, ``streamparse_driver.py``: its spout reads and acks in a
  real Redis, its counts in weir state on Redis, a bolt writes the running counts into a Redis hash),
  killed inside a bolt task while a batch is processed, then between two spout acks after a commit
  (steps 0 and 1); the final run goes on until every line is acked: each line acked once, the hash
  and the committed state hold the exact counts.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.crash._harness import run_driver
from tests.crash._tick_topology import tick_state
from tests.crash.trident_seed_driver import SEED
from tests.crash.trident_ttl_driver import NAME as TTL_NAME
from tests.crash.trident_ttl_driver import model
from tests.crash.ttl_driver import NAME as STORM_TTL_NAME
from tests.crash.ttl_driver import expected as storm_ttl_expected
from tests.streamparse_compat._topology import acked, lines_for, load_lines, redis_counts
from tests.trident._support import Store, write_lines
from weir.demo import generate_corpus
from weir.runtime.spark.trident.bootstrap import MARKER_KEY
from weir.state import StateFactory
from weir.state import ttl as T
from weir.streams import load_checkpoint
from weir.trident.backing import SqliteMapState

pytestmark = [pytest.mark.crash, pytest.mark.slow, pytest.mark.spark, pytest.mark.services]

DRIVER = Path(__file__).with_name("chains_driver.py")
REPO = Path(__file__).resolve().parents[2]
Step = tuple[str, str | None, int]  # (crash point, phase the coordinator record is left in, its txid)

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

STORM_TTL_FILES = 6
STORM_TTL_CHAIN: list[Step] = [
    ("between_prepares@2@0", "PREPARING", 2),
    ("after_committing@3", "COMMITTING", 3),
    ("between_commits@5", "COMMITTING", 5),
]

REGION_BATCHES = [[1, 2, 3], [10, 11, 12], [20, 21, 22]]


@pytest.mark.timeout(1800)
def test_sigkill_in_tick_batches_after_hand_offs_and_with_expiries_in_flight_ends_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_server: Any, postgres_database: Any
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

    storm_ttl_corpus = tmp_path / "ttl-corpus"
    generate_corpus(str(storm_ttl_corpus), n_words=1800, n_distinct=400, n_files=STORM_TTL_FILES, seed=11)
    storm_ttl_files = [(storm_ttl_corpus / f"part-{i:05d}.txt").read_text().split() for i in range(STORM_TTL_FILES)]
    for i in range(STORM_TTL_FILES):  # Spark orders files by modification time (ms): one second apart, name order
        os.utime(storm_ttl_corpus / f"part-{i:05d}.txt", (1_700_000_000 + i, 1_700_000_000 + i))
    storm_want, storm_last_time = storm_ttl_expected(storm_ttl_files)
    assert 0 < len(storm_want) < len({w for f in storm_ttl_files for w in f})  # some words expired, some live
    redis_server.flushall()
    postgres_database.truncate_all()
    sp_url = f"redis://127.0.0.1:{redis_server.port}/0"
    sp_lines = lines_for(30)
    load_lines(sp_url, "crash", sp_lines)

    regions_in, regions_state = tmp_path / "regions-in", tmp_path / "regions-state"
    regions_log, markers = Path(f"{regions_state}.calls.log"), Path(f"{regions_state}.markers")
    regions_in.mkdir()
    markers.mkdir()
    for i, batch in enumerate(REGION_BATCHES):
        f = regions_in / f"f{i}.txt"
        f.write_text("".join(f"{v}\n" for v in batch))
        os.utime(f, (1_700_000_000 + i, 1_700_000_000 + i))
    regions_url = f"sqlite:///{tmp_path / 'regions.db'}"
    (markers / "fail-11").write_text("")  # b fails on 11 (batch 2) in step 0

    seed_state, seed_lines, seed_db = tmp_path / "seed-state", tmp_path / "seed-lines", tmp_path / "seed.db"
    write_lines(seed_lines, "f000.txt", ["w1 w1 new", "w1499 new"])
    seed_store = Store("sqlite", f"sqlite:///{seed_db}", "")

    tick_url = f"sqlite:///{tmp_path / 'tick.db'}"
    life_url = f"sqlite:///{tmp_path / 'life.db'}"
    ttl_state = tmp_path / "ttl-state"
    storm_ttl_urls = {
        STORM_TTL_NAME: f"sqlite:///{tmp_path / 'ttl.db'}",
        f"{STORM_TTL_NAME}_postgres": str(postgres_database.url),
        f"{STORM_TTL_NAME}_redis": str(redis_server.url),
    }
    # name -> (the chains_driver group, the URL of its coordinator record, its chain, its first step)
    chains: dict[str, tuple[list[str], str, list[Step], int]] = {
        "tickwc": (["tick", str(tmp_path / "tick-state"), str(tick_corpus), tick_url], tick_url, TICK_CHAIN, 0),
        "lifecrash": (
            ["lifetime", str(tmp_path / "life-state"), str(life_corpus), life_url],
            life_url,
            LIFETIME_CHAIN,
            0,
        ),
        TTL_NAME: (
            ["trident_ttl", str(ttl_state), str(ttl_lines), str(map_db)],
            f"sqlite:///{ttl_state / 'state.db'}",
            TTL_CHAIN,
            0,
        ),
    }
    chains["regions"] = (
        ["regions", str(regions_state), str(regions_in), regions_url],
        regions_url,
        [("after_region_rollback@2", "PREPARING", 2)],
        0,
    )
    for name, url in storm_ttl_urls.items():
        chain = STORM_TTL_CHAIN if name == STORM_TTL_NAME else STORM_TTL_CHAIN[-1:]
        group = [f"ttl:{name}", str(tmp_path / f"state-{name}"), str(storm_ttl_corpus), url]
        chains[name] = (group, url, chain, len(STORM_TTL_CHAIN) - len(chain))
    chains["sp_crash"] = (
        ["streamparse", str(tmp_path / "sp-state"), f"crash:{len(sp_lines)}", sp_url],
        sp_url,
        [("during_processing@2", None, 2), ("between_spout_acks@3", None, 3)],
        0,
    )
    # the seed is loaded at submit, on the driver's main thread: its group comes last (chains_driver.py);
    # killed there, it has no coordinator record yet (phase None)
    seed_url = f"sqlite:///{seed_state / 'state.db'}"
    chains["seedcrash"] = (
        ["seed", str(seed_state), str(seed_lines), str(seed_db)],
        seed_url,
        [("trident_bootstrap_between_chunks@0", None, 0)],
        1,
    )

    def runs(step: int, chain: list[Step], first: int) -> bool:
        return step == 3 or first <= step < first + len(chain)  # step 3: the final run, of every chain

    def argv(step: int) -> list[str]:
        return [str(DRIVER)] + [
            a for group, _, chain, first in chains.values() if runs(step, chain, first) for a in group
        ]

    for step in range(3):
        armed = {name: chain[step - first] for name, (_, _, chain, first) in chains.items() if runs(step, chain, first)}
        crash = {name: at[0] for name, at in armed.items()}
        res = run_driver(argv(step), crash, 600)
        assert res.returncode == -signal.SIGKILL, f"not killed at {crash}: rc={res.returncode}\n{res.stderr[-3000:]}"
        for name, (point, phase, txid) in armed.items():
            if phase is None:
                continue
            raw = StateFactory.from_url(chains[name][1]).backend.get(f"$checkpointspout-{name}", b"__state")
            assert raw is not None, name
            rec = json.loads(raw)
            assert (rec["phase"], rec["txid"]) == (phase, txid), f"{name}: after the crash at {point}: {rec}"
            if name == TTL_NAME or name in storm_ttl_urls:
                assert (rec["batch_txid"], rec["batch_ms"]) == (txid, txid * 1000), name
        if step == 0:  # regions: b failed on 11, a's cut of batch 2 was kept; the driver died right after
            regions_backend = StateFactory.from_url(regions_url).backend
            assert regions_backend.txids("regions-a-0").prepared == 2  # region a: prepared, kept
            assert regions_backend.txids("regions-b-0").prepared is None  # region b: rolled back
            processed = [int(v) for m, v in _calls(regions_log)["a"] if m == "process"]
            assert processed == [1, 2, 3, 10, 11, 12]  # a ran batch 2 once and prepared it
            # the final run: recovery rolls back both (the kept cut was prepared under the dead
            # driver's epoch) and batch 2 runs again in both regions; then b fails on 21 once
            regions_log.write_text("")
            (markers / "fail-21").write_text("")
        if step == 1:  # the seed: the first chunk of seeded cells only, the load's marker stored
            assert len(seed_store.read_all_table("seeded")) == 1000
            assert StateFactory.from_url(seed_url).backend.get("$checkpointspout-seedcrash", MARKER_KEY) is not None
        if step == 2:  # the TTL sweep, mid-way: of the two cells the commit of 6 deletes, one is gone
            cells = model(files)
            due = {w for w, (_, t) in cells.items() if t == TTL_FILES - 3}  # older ones: earlier commits
            stored = _keys(map_db)
            assert len(due) == 2 and len(due & stored) == 1, (due, stored)
            assert not {w for w, (_, t) in cells.items() if t < TTL_FILES - 3} & stored
    final = run_driver(argv(3), None, 600)
    assert final.returncode == 0, final.stderr[-4000:]
    assert f"tickwc DONE txid={TICK_FILES} " in final.stdout
    assert f"lifecrash DONE txid={LIFETIME_FILES} " in final.stdout
    assert f"{TTL_NAME} DONE txid={TTL_FILES} " in final.stdout

    # streamparse: every line acked once; the hash and the committed state hold the exact counts
    assert "sp_crash DONE" in final.stdout
    sp_expected = dict(Counter(w for line in sp_lines for w in line.split()))
    assert redis_counts(sp_url, "crash") == sp_expected
    sp_committed: dict[str, int] = {}
    sp_provider = StateFactory.from_url(sp_url)
    for i in range(2):
        for k, v in sp_provider.new_state(f"sp_crash-count_bolt-{i}"):
            sp_committed[k] = sp_committed.get(k, 0) + int(v)
    assert sp_committed == sp_expected
    assert acked(sp_url, "crash") == len(sp_lines)

    # the seed: the load finished from the staged rows, then the batch was counted on top
    assert "seedcrash DONE txid=1 batches=1" in final.stdout
    got_seed = Counter({k[0]: v for k, v in seed_store.read_all_table("seeded").items()})
    assert got_seed == Counter(SEED) + Counter({"w1": 2, "new": 2, "w1499": 1})
    assert StateFactory.from_url(seed_url).backend.get("$checkpointspout-seedcrash", MARKER_KEY) is None

    # regions: only b is reset by its second failure; both totals exact
    assert "regions DONE txid=3 " in final.stdout
    calls = _calls(regions_log)
    a_batch3 = [c for c in calls["a"] if c in {("process", "20"), ("process", "21"), ("process", "22")}]
    # a ran batch 3 once: its cut was kept on the retry (it may have been reset to 2 *before* batch 3,
    # when Spark gave the task to another Python worker — never because b failed)
    assert sorted(a_batch3) == [("process", "20"), ("process", "21"), ("process", "22")]
    first_21 = calls["b"].index(("process", "21"))
    after = calls["b"][first_21 + 1 :]
    # b failed on 21 and ran batch 3 again from checkpoint 2: reset to it by the worker that failed,
    # or restored from another Python worker's live instance still at checkpoint 2 (Spark chooses the
    # worker; no reset() call is needed then) — either way each tuple of batch 3 exactly once more
    assert ("reset", "2") in after or ("reset", "3") not in after
    assert sorted(c for c in after if c[0] == "process") == [("process", "20"), ("process", "21"), ("process", "22")]
    region_total = sum(sum(b) for b in REGION_BATCHES)
    for cid in ("a", "b"):
        ck = load_checkpoint(regions_url, "regions", cid, 0)
        assert ck is not None and ck.sequence_id == 3 and ck.get("total") == region_total, cid

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
    n_words = sum(life_expected.values())
    last = dict(provider.new_state("lifecrash-last-0"))
    assert last["inreg-0"] + last["inreg-1"] == n_words
    assert last["outreg-0"] + last["outreg-1"] == n_words
    assert sum(dict(provider.new_state(f"lifecrash-probe-{i}"))["n"] for i in range(2)) == n_words

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

    # Storm state TTL: on every store the live counts of the model, and nothing expired left stored
    for name, url in storm_ttl_urls.items():
        assert f"{name} DONE txid={STORM_TTL_FILES} " in final.stdout
        ttl_provider = StateFactory.from_url(url)
        counts: dict[str, int] = {}
        stored_words: set[str] = set()
        for task in range(2):
            ns = f"{name}-count-{task}"
            kv = ttl_provider.new_state(ns)
            counts.update(dict(kv))
            for skey, sval in ttl_provider.backend.scan(ns):
                if not T.is_reserved(skey):
                    stored_words.add(kv.key_serializer.deserialize(skey))
                    assert (T.expiry_of(sval) or 0) > storm_last_time, name  # nothing expired is left
        assert counts == storm_want, name
        assert stored_words == set(storm_want), name


def _keys(map_db: Path) -> set[str]:
    """The words stored in the map's table."""
    with sqlite3.connect(map_db) as conn:
        return {json.loads(k)[0] for (k,) in conn.execute('SELECT k FROM "ttl"')}


def _calls(log: Path) -> dict[str, list[tuple[str, str]]]:
    """The regions topology's call log: per component, its (method, argument) calls in order."""
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for line in log.read_text().splitlines():
        name, _pid, method, *arg = line.split()
        out[name].append((method, arg[0] if arg else ""))
    return out
