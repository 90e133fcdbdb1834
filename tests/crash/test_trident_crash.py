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
import subprocess
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.crash._harness import run_driver
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("trident_driver.py")
NAME = "tridentcrash"


def _run(
    state_dir: Path,
    corpus: Path,
    store: tuple[str, str, str],
    state_type: str,
    spout: str,
    crash: str | None,
    timeout: float = 400,
) -> subprocess.CompletedProcess[str]:
    kind, url, table = store
    return run_driver(
        [str(DRIVER), str(state_dir), str(corpus), kind, url, table, state_type, spout, NAME], crash, timeout
    )


def _record(state_dir: Path, name: str = NAME) -> dict[str, object]:
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


def test_sigkill_before_during_and_after_a_batch_gives_exact_counts(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Opaque and transactional map states, side by side in one driver per step (crash barrier)."""
    corpus = tmp_path / "corpus"
    expected, vocab = _corpus(corpus, 5, seed=11)
    topos = []
    for state_type in ("opaque", "transactional"):
        (tmp_path / state_type).mkdir()
        store = _store(request, "sqlite", tmp_path / state_type)
        topos.append(Topo(f"{NAME}_{state_type}", tmp_path / state_type / "state", store, state_type))
    _crash_then_finish(topos, corpus, "transactional", CHAIN, 5)
    for t in topos:
        got = _counts(t.store, t.state_type, vocab)
        assert {w: c for w, c in got.items() if c is not None} == dict(expected), t.state_type


# the server stores' topologies side by side in one driver per step (crash barrier); HBase's on its own
# (its server runs in the "hbase" xdist group)
@pytest.mark.parametrize(
    "stores",
    [
        [("redis", "opaque"), ("postgres", "transactional"), ("memcached", "opaque")],
        [("hbase", "opaque")],
    ],
    ids=["redis-opaque,postgres-transactional,memcached-opaque", "hbase-opaque"],
)
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


def test_opaque_state_is_exact_when_the_replayed_batch_has_other_tuples(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """An opaque spout's batch 2 holds other lines after the crash: the state counts what was committed."""
    corpus = tmp_path / "corpus"
    first = ["alpha beta gamma", "beta delta"]
    attempt = ["alpha beta beta", "epsilon zeta eta theta", "iota kappa lambda mu", "gamma gamma"]
    replay = ["alpha alpha", "nu", "delta"]
    last = ["beta omega"]
    _write(corpus, "f000.txt", first)
    mtime = _write(corpus, "f001.txt", attempt)
    _write(corpus, "f002.txt", last)
    store = _store(request, "sqlite", tmp_path)
    state_dir = tmp_path / "state"
    res = _run(state_dir, corpus, store, "opaque", "opaque", "trident_after_multi_update@2")
    assert res.returncode == -signal.SIGKILL, res.stderr[-3000:]
    rec = _record(state_dir)
    assert (rec["phase"], rec["txid"]) == ("PREPARING", 2)
    words_of = {w for line in first + attempt + replay + last for w in line.split()}
    partial = _counts(store, "opaque", sorted(words_of))
    assert any(partial.get(w) for w in ("epsilon", "zeta", "eta", "iota")), partial  # attempt 1 wrote some
    _write(corpus, "f001.txt", replay, mtime=mtime)  # the opaque spout replays batch 2 differently
    final = _run(state_dir, corpus, store, "opaque", "opaque", None)
    assert final.returncode == 0, final.stderr[-4000:]
    assert "DONE txid=3" in final.stdout
    expected = Counter(w for line in first + replay + last for w in line.split())
    got = _counts(store, "opaque", sorted(words_of))
    assert {w: c for w, c in got.items() if c is not None} == dict(expected)
