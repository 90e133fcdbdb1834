"""SIGKILL a Trident driver (its whole process group: JVM and Python workers too) before, during and
after a batch's state updates, restart it, and check the map state equals a Python Counter exactly.

The mid-job crash point ``trident_after_multi_update`` fires inside a Spark task, right after a state
partition's ``multi_update`` and before its ``commit``: that partition's new values are in the store,
the other partition's may or may not be, and the coordinator still says ``PREPARING``. The restart
replays the batch with the same txid; the values stored with txids make it exact.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.crash._harness import run_driver
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("trident_driver.py")
NAME = "tridentcrash"


def _record(state_dir: Path, name: str = NAME) -> dict[str, Any]:
    backend = StateFactory.from_url(f"sqlite:///{state_dir / 'state.db'}").backend
    data = backend.get(f"$checkpointspout-{name}", b"__state")
    assert data is not None
    return dict(json.loads(data))


def _counts(store: tuple[str, str, str], state_type: str, words: list[str]) -> dict[str, object]:
    from tests.crash.trident_driver import factory

    kind, url, table = store
    state = factory(kind, url, table, state_type).make_state({}, 0, 1)
    return dict(zip(words, state.multi_get([[w] for w in words]), strict=True))


_MTIME = [int(time.time()) - 50_000]


def _write(directory: Path, name: str, lines: list[str], mtime: int | None = None) -> int:
    """Write a file atomically with a modification time after every earlier file (Spark's order)."""
    directory.mkdir(parents=True, exist_ok=True)
    if mtime is None:
        _MTIME[0] += 1
        mtime = _MTIME[0]
    tmp = directory / f".{name}.tmp"
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.utime(tmp, (mtime, mtime))
    os.replace(tmp, directory / name)
    return mtime


def _corpus(directory: Path, n_files: int, seed: int) -> tuple[Counter[str], list[str]]:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(120)]
    expected: Counter[str] = Counter()
    for f in range(n_files):
        words = rng.choices(vocab, weights=[1 / (i + 1) for i in range(len(vocab))], k=400)
        expected.update(words)
        _write(directory, f"f{f:03d}.txt", [" ".join(words[i : i + 10]) for i in range(0, len(words), 10)])
    return expected, vocab


def _store(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> tuple[str, str, str]:
    table = f"tc_{uuid.uuid4().hex[:8]}"
    if kind == "sqlite":
        return ("sqlite", f"sqlite:///{tmp_path / 'trident.db'}", table)
    if kind == "redis":
        return ("redis", request.getfixturevalue("redis_server").url, table)
    if kind == "memcached":
        return ("memcached", request.getfixturevalue("memcached_server").url, table)
    if kind == "hbase":
        return ("hbase", request.getfixturevalue("hbase_server").url("trident"), table)
    return ("postgres", request.getfixturevalue("postgres_url"), table)


@dataclass
class Topo:
    """One topology of a crash chain: its name, state directory (the coordinator's SQLite) and map state."""

    name: str
    state_dir: Path
    store: tuple[str, str, str]
    state_type: str


def _crash_then_finish(
    topos: list[Topo], corpus: Path, spout: str, chain: list[tuple[str, str, int]], n_batches: int
) -> None:
    """Run ``chain`` for every topology of ``topos`` in one driver process per step (the crash
    barrier when there are several), checking each one's record after each step and at the end."""
    argv = [str(DRIVER)]
    for t in topos:
        argv += [str(t.state_dir), str(corpus), *t.store, t.state_type, spout, t.name]
    barrier = [t.name for t in topos] if len(topos) > 1 else []
    for crash, phase, txid in chain:
        res = run_driver(argv, crash, 600, barrier=barrier)
        assert res.returncode == -signal.SIGKILL, (
            f"the driver should have been killed at {crash}; rc={res.returncode}\n{res.stderr[-3000:]}"
        )
        assert "DONE" not in res.stdout
        for t in topos:
            rec = _record(t.state_dir, t.name)
            assert (rec["phase"], rec["txid"]) == (phase, txid), f"{t.name}: after the crash at {crash}: {rec}"
    final = run_driver(argv, None, 600)
    assert final.returncode == 0, final.stderr[-4000:]
    for t in topos:
        assert (f"{t.name} DONE txid={n_batches}" if barrier else f"DONE txid={n_batches}") in final.stdout
        rec = _record(t.state_dir, t.name)
        assert (rec["phase"], rec["txid"]) == ("COMMITTED", n_batches), t.name
        assert int(rec["epoch"]) == len(chain) + 1, t.name  # every restart took a new epoch


# Each driver run first recovers what the previous run's crash left, then is killed at the next
# point: before the job, inside a state partition between multi_update and commit, and after the
# batch committed but before Spark committed its offsets (the batch replays and is skipped).
CHAIN = [
    ("after_preparing@2", "PREPARING", 2),
    ("trident_after_multi_update@3", "PREPARING", 3),
    ("after_committed@4", "COMMITTED", 4),
]


@dataclass
class Chain:
    """A topology of the merged test, its input, its crash steps and the step they start at."""

    topo: Topo
    corpus: Path
    spout: str
    steps: list[tuple[str, str, int]]
    first: int
    n_batches: int


def _chains_then_finish(chains: list[Chain], n_steps: int, between: Callable[[int], None]) -> None:
    """Per step, one driver process runs every chain armed in that step, each killed at its own point
    (the crash barrier), checks their records and calls ``between(step)``; then one driver runs every
    chain to the end. A chain sits out the steps outside its own."""

    def argv(step: int) -> list[str]:
        out = [str(DRIVER)]
        for c in chains:
            if step == n_steps or c.first <= step < c.first + len(c.steps):
                t = c.topo
                out += [str(t.state_dir), str(c.corpus), *t.store, t.state_type, c.spout, t.name]
        return out

    for step in range(n_steps):
        armed = {c.topo.name: (c, c.steps[step - c.first]) for c in chains if c.first <= step < c.first + len(c.steps)}
        crash = {name: at[0] for name, (_, at) in armed.items()}
        res = run_driver(argv(step), crash, 600)
        assert res.returncode == -signal.SIGKILL, (
            f"the driver should have been killed at {crash}; rc={res.returncode}\n{res.stderr[-3000:]}"
        )
        assert "DONE" not in res.stdout
        for name, (c, (point, phase, txid)) in armed.items():
            rec = _record(c.topo.state_dir, name)
            assert (rec["phase"], rec["txid"]) == (phase, txid), f"{name}: after the crash at {point}: {rec}"
        between(step)
    final = run_driver(argv(n_steps), None, 600)
    assert final.returncode == 0, final.stderr[-4000:]
    for c in chains:
        t = c.topo
        assert f"{t.name} DONE txid={c.n_batches} " in final.stdout, t.name
        rec = _record(t.state_dir, t.name)
        assert (rec["phase"], rec["txid"]) == ("COMMITTED", c.n_batches), t.name
        assert int(rec["epoch"]) == len(c.steps) + 1, t.name  # every restart took a new epoch


# Each driver run first recovers what the previous run's crash left, then is killed at the next
# point: before the job, inside a state partition between multi_update and commit, and after the
# batch committed but before Spark committed its offsets (the batch replays and is skipped).
CHAIN = [
    ("after_preparing@2", "PREPARING", 2),
    ("trident_after_multi_update@3", "PREPARING", 3),
    ("after_committed@4", "COMMITTED", 4),
]
SERVER_STORES = [("redis", "opaque"), ("postgres", "transactional"), ("memcached", "opaque")]


def test_sigkill_before_during_and_after_a_batch_on_every_store_and_an_opaque_replay_gives_exact_counts(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Three chains side by side, one driver per step, each topology armed at its own point (crash barrier).

    - SQLite, opaque and transactional map states: CHAIN (steps 0-2).
    - Redis (opaque), PostgreSQL (transactional), memcached (opaque): killed inside a state partition
      (step 2), then exact.
    - An opaque spout's batch 2 holds other lines after the crash (step 1; the file is rewritten before
      the final run): the state counts what was committed.
    4 driver starts instead of 8.
    """
    chains: list[Chain] = []
    corpus = tmp_path / "corpus"
    expected, vocab = _corpus(corpus, 5, seed=11)
    for state_type in ("opaque", "transactional"):
        (tmp_path / state_type).mkdir()
        store = _store(request, "sqlite", tmp_path / state_type)
        topo = Topo(f"{NAME}_{state_type}", tmp_path / state_type / "state", store, state_type)
        chains.append(Chain(topo, corpus, "transactional", CHAIN, 0, 5))
    server_corpus = tmp_path / "server-corpus"
    server_expected, server_vocab = _corpus(server_corpus, 3, seed=5)
    for kind, st in SERVER_STORES:
        topo = Topo(f"{NAME}_{kind}", tmp_path / f"state-{kind}", _store(request, kind, tmp_path), st)
        chains.append(
            Chain(topo, server_corpus, "transactional", [("trident_after_multi_update@2@1", "PREPARING", 2)], 2, 3)
        )

    # the opaque replay: batch 2 is another file's lines after the crash
    replay_corpus = tmp_path / "replay-corpus"
    first = ["alpha beta gamma", "beta delta"]
    attempt = ["alpha beta beta", "epsilon zeta eta theta", "iota kappa lambda mu", "gamma gamma"]
    replay = ["alpha alpha", "nu", "delta"]
    last = ["beta omega"]
    _write(replay_corpus, "f000.txt", first)
    mtime = _write(replay_corpus, "f001.txt", attempt)
    _write(replay_corpus, "f002.txt", last)
    (tmp_path / "replay").mkdir()
    replay_store = _store(request, "sqlite", tmp_path / "replay")
    replay_topo = Topo(f"{NAME}_replay", tmp_path / "replay" / "state", replay_store, "opaque")
    chains.append(Chain(replay_topo, replay_corpus, "opaque", [("trident_after_multi_update@2", "PREPARING", 2)], 1, 3))
    words_of = {w for line in first + attempt + replay + last for w in line.split()}

    def between(step: int) -> None:
        if step == 1:
            partial = _counts(replay_store, "opaque", sorted(words_of))
            assert any(partial.get(w) for w in ("epsilon", "zeta", "eta", "iota")), partial  # attempt 1 wrote some
            _write(replay_corpus, "f001.txt", replay, mtime=mtime)  # the opaque spout replays batch 2 differently

    _chains_then_finish(chains, len(CHAIN), between)

    for c in chains[:2]:
        got = _counts(c.topo.store, c.topo.state_type, vocab)
        assert {w: n for w, n in got.items() if n is not None} == dict(expected), c.topo.state_type
    for c in chains[2:5]:
        got = _counts(c.topo.store, c.topo.state_type, server_vocab)
        assert {w: n for w, n in got.items() if n is not None} == dict(server_expected), c.topo.store[0]
    replay_expected = Counter(w for line in first + replay + last for w in line.split())
    got = _counts(replay_store, "opaque", sorted(words_of))
    assert {w: n for w, n in got.items() if n is not None} == dict(replay_expected)


# HBase's on its own (its server runs in the "hbase" xdist group)
@pytest.mark.parametrize("stores", [[("hbase", "opaque")]], ids=["hbase-opaque"])
def test_sigkill_inside_a_state_partition_on_server_stores(
    request: pytest.FixtureRequest, tmp_path: Path, stores: list[tuple[str, str]]
) -> None:
    corpus = tmp_path / "corpus"
    expected, vocab = _corpus(corpus, 3, seed=5)
    topos = [
        Topo(
            NAME if len(stores) == 1 else f"{NAME}_{kind}",
            tmp_path / f"state-{kind}",
            _store(request, kind, tmp_path),
            st,
        )
        for kind, st in stores
    ]
    chain = [("trident_after_multi_update@2@1", "PREPARING", 2)]
    _crash_then_finish(topos, corpus, "transactional", chain, 3)
    for t in topos:
        got = _counts(t.store, t.state_type, vocab)
        assert {w: c for w, c in got.items() if c is not None} == dict(expected), t.store[0]
