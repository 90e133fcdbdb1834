"""SIGKILL the re-partition of a word count's state (2 → 5 → 3 tasks) at each step, restart, check exact counts.

The driver (``rescale_driver.py``) starts the coordinator as ``weir.submit`` does; it is killed with
its whole process group at a crash point of :mod:`weir.checkpoint.rescale`. After each kill the
store holds the old layout (marker ``staging``: the old namespaces untouched) or a complete new one
(marker ``switching``/``cleanup``: the staging namespaces); the restarted driver finishes the step
and every count is exact, each key in the namespace of the task its word's tuples go to.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from tests.crash._harness import run_driver
from weir._util import stable_hash
from weir.checkpoint.coordinator import CheckpointPhase, CheckPointState, CheckpointStore
from weir.checkpoint.rescale import RESCALE_KEY, staging_namespace, task_namespace
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.services]

DRIVER = Path(__file__).with_name("rescale_driver.py")
TOPO, COMP = "rsc", "count"
POINTS = ("rescale_staging", "rescale_staged", "rescale_switching", "rescale_switched")


def _words(n: int, seed: int) -> Counter[str]:
    rng = random.Random(seed)
    return Counter(rng.choice([f"w{i}" for i in range(60)]) for _ in range(n))


def _counts(url: str, namespaces: list[str]) -> dict[str, Counter[str]]:
    provider = StateFactory.from_url(url)
    return {ns: Counter(dict(provider.new_state(ns))) for ns in namespaces}


def _setup(url: str, tasks: int, counts: Counter[str], pending: Counter[str], phase: CheckpointPhase) -> None:
    """``counts`` committed at txid 1 by ``tasks`` word-count tasks; ``pending`` prepared as txid 2 (``phase``)."""
    provider = StateFactory.from_url(url)
    store = CheckpointStore(provider.backend, TOPO)
    epoch = store.acquire_epoch()
    for t in range(tasks):
        state = provider.new_state(task_namespace(TOPO, COMP, t))
        for w, c in counts.items():
            if stable_hash(w) % tasks == t:
                state.put(w, c)
        state.prepare_commit(1)
        state.commit(1)
        for w, c in pending.items():
            if stable_hash(w) % tasks == t:
                state.put(w, counts[w] + c)
        state.prepare_commit(2)
    store.save(CheckPointState(txid=2, phase=phase, parallelism={COMP: tasks}), epoch)


def _check_layout(url: str, tasks: int, expected: Counter[str]) -> None:
    got = _counts(url, [task_namespace(TOPO, COMP, t) for t in range(tasks)])
    total: Counter[str] = Counter()
    for t in range(tasks):
        for w, c in got[task_namespace(TOPO, COMP, t)].items():
            assert stable_hash(w) % tasks == t, (w, t)
            total[w] += c
    assert total == expected
    backend = StateFactory.from_url(url).backend
    assert [ns for ns in backend.namespaces() if ns.startswith(("$rescale-", f"{TOPO}-{COMP}-"))] == sorted(
        task_namespace(TOPO, COMP, t) for t in range(tasks)
    )
    rec = json.loads(backend.get(f"$checkpointspout-{TOPO}", b"__state") or b"{}")
    assert rec["parallelism"] == {COMP: tasks}
    assert backend.get(f"$checkpointspout-{TOPO}", RESCALE_KEY) is None
    for t in range(tasks):  # every case ends with txid 2 committed: the next batch's txid follows it
        assert backend.txids(task_namespace(TOPO, COMP, t)).prepared is None
        assert backend.txids(task_namespace(TOPO, COMP, t)).committed == 2


def _step(url: str, old: int, new: int, point: str, expected: Counter[str]) -> None:
    """Kill the rescale ``old`` → ``new`` at ``point``; check what it left; restart; check the new layout."""
    crashed = run_driver([str(DRIVER), url, TOPO, COMP, str(new)], f"{point}@2", timeout=120)
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    backend = StateFactory.from_url(url).backend
    marker = json.loads(backend.get(f"$checkpointspout-{TOPO}", RESCALE_KEY) or b"{}")
    assert marker["from"] == old and marker["to"] == new
    if marker["stage"] == "staging":  # the old layout is the truth and is untouched
        olds = _counts(url, [task_namespace(TOPO, COMP, t) for t in range(old)])
        assert sum(olds.values(), Counter()) == expected
    else:  # the new layout is complete in the staging namespaces
        staged = _counts(url, [staging_namespace(TOPO, COMP, t) for t in range(new)])
        assert sum(staged.values(), Counter()) == expected
    done = run_driver([str(DRIVER), url, TOPO, COMP, str(new)], None, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    _check_layout(url, new, expected)


# every step on SQLite; on Redis, the Redis Cluster and PostgreSQL the two that leave each layout (old, staged new)
CASES = [("sqlite", p) for p in POINTS] + [
    (store, p) for store in ("redis", "redis-cluster", "postgres") for p in ("rescale_staged", "rescale_switching")
]


@pytest.mark.parametrize(("provider_url", "point"), CASES, indirect=["provider_url"])
def test_rescale_survives_sigkill(provider_url: str, point: str) -> None:
    counts, pending = _words(3_000, 1), _words(500, 2)
    # grow 2 → 5 with txid 2 COMMITTING: the prepared sets are rolled forward first
    _setup(provider_url, 2, counts, pending, CheckpointPhase.COMMITTING)
    expected = counts + pending
    _step(provider_url, 2, 5, point, expected)
    # shrink 5 → 3 with a PREPARING txid 2: its prepared sets are discarded first
    provider = StateFactory.from_url(provider_url)
    store = CheckpointStore(provider.backend, TOPO)
    rec = store.load()
    assert rec is not None
    epoch = store.acquire_epoch()
    for t in range(5):
        state = provider.new_state(task_namespace(TOPO, COMP, t))
        state.put(f"w{t}", 10**6)  # a batch in flight, never committed
        state.prepare_commit(3)
    store.save(CheckPointState(txid=3, phase=CheckpointPhase.PREPARING, parallelism=rec.parallelism), epoch)
    _step_at(provider_url, 5, 3, point, expected, txid=3)


def _step_at(url: str, old: int, new: int, point: str, expected: Counter[str], *, txid: int) -> None:
    crashed = run_driver([str(DRIVER), url, TOPO, COMP, str(new)], f"{point}@{txid}", timeout=120)
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    done = run_driver([str(DRIVER), url, TOPO, COMP, str(new)], None, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    _check_layout(url, new, expected)


@pytest.mark.parametrize("provider_url", ["hbase"], indirect=True)
def test_rescale_survives_sigkill_on_hbase(provider_url: str) -> None:
    """One small case on HBase: killed while switching 2 → 5, then while staging 5 → 3; exact after each restart."""
    counts = _words(400, 3)
    _setup(provider_url, 2, counts, Counter(), CheckpointPhase.COMMITTED)
    _step(provider_url, 2, 5, "rescale_switching", counts)
    _step(provider_url, 5, 3, "rescale_staged", counts)


@pytest.mark.parametrize("point", ["rescale_staging", "rescale_staged", "rescale_switching", "rescale_switched"])
@pytest.mark.parametrize("provider_url", ["sqlite"], indirect=True)
def test_windowed_rescale_survives_sigkill(provider_url: str, point: str) -> None:
    """An event-time windowed per-key count, 2 → 3 tasks, killed at ``point`` and restarted: every window once."""
    from tests.spark.test_rescale import _readings, _window_batch

    provider = StateFactory.from_url(provider_url)
    batches, out = _readings(4, random.Random(11)), {}
    for txid, rows in enumerate(batches[:2], start=1):
        _window_batch(provider, 2, rows, txid, out)
    store = CheckpointStore(provider.backend, "rw")
    store.save(CheckPointState(txid=2, phase=CheckpointPhase.COMMITTED, parallelism={"win": 2}), store.acquire_epoch())
    crashed = run_driver([str(DRIVER), provider_url, "rw", "win", "3", "windowed"], f"{point}@2", timeout=120)
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    assert provider.backend.get("$checkpointspout-rw", RESCALE_KEY) is not None
    done = run_driver([str(DRIVER), provider_url, "rw", "win", "3", "windowed"], None, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    for txid, rows in enumerate(batches[2:], start=3):
        _window_batch(provider, 3, rows, txid, out)
    seen = [r for rows in batches for r in rows]
    wm = max(ts for _, ts in seen)
    expected = Counter((k, (ts + 999) // 1000 * 1000) for k, ts in seen)
    assert out == {f"{k}:{end}": [n] for (k, end), n in expected.items() if end <= wm}
    names = provider.backend.namespaces()
    assert not [ns for ns in names if ns.startswith(("$rescale-", "rw-win-3"))]
    assert provider.backend.get("$checkpointspout-rw", RESCALE_KEY) is None
