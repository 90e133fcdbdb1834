"""SIGKILL the change feed's driver at every step of its commits, restart it, and check the feed exactly.

After the final run the feed of each task namespace holds the committed change sets of the last
RETAIN txids — each changed key once per txid, with its value before and after — no more, no less:
no gap from a commit that was killed (recovery rolls it forward and logs it then), no duplicate
from a commit that was logged and killed before it was recorded.
"""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.crash._harness import run_driver
from tests.crash.changelog_driver import TASKS, TOPOLOGY, namespace, words_of
from weir._util import stable_hash
from weir.state import JsonSerializer, StateFactory

pytestmark = [pytest.mark.crash]

DRIVER = Path(__file__).with_name("changelog_driver.py")
TXIDS, RETAIN = 8, 4
# (point, phase the coordinator record is left in, its txid)
CHAIN = [
    ("after_prepared@2", "PREPARING", 2),
    ("changelog_logged@3", "COMMITTING", 3),  # inside the first namespace's commit transaction
    ("between_commits@4", "COMMITTING", 4),  # one namespace committed and logged, the other not
    ("during_recovery@4", "COMMITTING", 4),  # killed while rolling txid 4 forward
    ("changelog_logged@4", "COMMITTING", 4),  # killed again, inside recovery's commit of txid 4
    ("after_committing@6", "COMMITTING", 6),
    ("after_committed@7", "COMMITTED", 7),
]


# Redis: each txid counts WIDE more words and a commit runs in scripts of CHUNK entries, so the kills
# land between the chunks of one namespace's commit (each chunk's script logs what it moves)
WIDE, CHUNK = 300, 60
REDIS_CHAIN = [
    ("after_prepared@2", "PREPARING", 2),
    ("redis_between_commit_chunks@3", "COMMITTING", 3),  # the first namespace half committed and logged
    ("between_commits@4", "COMMITTING", 4),
    ("during_recovery@4", "COMMITTING", 4),
    ("redis_between_commit_chunks@4", "COMMITTING", 4),  # inside recovery's chunked commit of txid 4
    ("redis_between_commit_chunks@5", "COMMITTING", 5),
    ("after_committing@6", "COMMITTING", 6),
    ("after_committed@7", "COMMITTED", 7),
]


def expected_log(wide: int = 0) -> dict[int, list[tuple[int, str, Any, Any]]]:
    """Per task: (txid, key, before, after) of every change of txids TXIDS-RETAIN+1..TXIDS."""
    counts: Counter[str] = Counter()
    out: dict[int, list[tuple[int, str, Any, Any]]] = {t: [] for t in range(TASKS)}
    for txid in range(1, TXIDS + 1):
        before = dict(counts)
        for w in words_of(txid, wide):
            if w.startswith("-"):
                counts.pop(w[1:], None)
            else:
                counts[w] += 1
        for w in sorted({w.lstrip("-") for w in words_of(txid, wide)}):
            if txid > TXIDS - RETAIN:
                out[stable_hash(w) % TASKS].append((txid, w, before.get(w), counts.get(w)))
    return out


@pytest.fixture(params=["sqlite", "postgres", "redis", "redis-cluster"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    if request.param.startswith("redis"):
        server = request.getfixturevalue("redis_server" if request.param == "redis" else "redis_cluster")
        server.flushall()
        return str(server.url)
    db = request.getfixturevalue("postgres_database")
    db.truncate_all()
    return str(db.url)


@pytest.mark.timeout(600)
def test_sigkill_at_every_commit_step_leaves_the_feed_exact(store_url: str) -> None:
    redis = store_url.startswith("redis")
    args = [str(DRIVER), store_url, str(TXIDS), str(RETAIN)] + ([str(WIDE), str(CHUNK)] if redis else [])
    for crash, phase, txid in REDIS_CHAIN if redis else CHAIN:
        res = run_driver(args, crash, timeout=120)
        assert res.returncode == -signal.SIGKILL, f"not killed at {crash}: rc={res.returncode}\n{res.stderr[-3000:]}"
        data = StateFactory.from_url(store_url).backend.get(f"$checkpointspout-{TOPOLOGY}", b"__state")
        assert data is not None
        rec = json.loads(data)
        assert (rec["phase"], rec["txid"]) == (phase, txid), f"after the crash at {crash}: {rec}"
    final = run_driver(args, None, timeout=120)
    assert final.returncode == 0, final.stderr[-3000:]
    assert f"DONE txid={TXIDS}" in final.stdout
    backend: Any = StateFactory.from_url(store_url).backend
    ser = JsonSerializer()
    want = expected_log(WIDE if redis else 0)
    for t in range(TASKS):
        got = [
            (c.txid, ser.deserialize(c.key), None if c.before is None else ser.deserialize(c.before),
             None if c.after is None else ser.deserialize(c.after))
            for c in backend.log_changes(namespace(t), 0, 1_000)
        ]  # fmt: skip
        assert sorted(got) == sorted(want[t]), f"task {t}"
        rng = backend.log_range(namespace(t))
        assert rng is not None and rng.retain == RETAIN
        assert backend.txids(namespace(t)).committed == TXIDS
