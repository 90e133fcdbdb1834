"""State TTL under SIGKILL: a word count whose counts expire, killed with expiries in flight.

The driver (``ttl_driver.py``) runs one file per batch with the batch clock ``txid * 1000`` and a
2.5 s TTL, so rare words expire batch after batch. Each run is killed at a protocol step (the sweep of
the batch in flight prepared, committing, half committed), restarted, and the last run completes: the
committed counts and the stored rows must equal the plain-Python model exactly — nothing expired is
resurrected by recovery, nothing is counted twice, and every expired key is gone from the store.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.crash._harness import run_driver
from tests.crash.ttl_driver import NAME, expected
from weir.demo import generate_corpus
from weir.state import StateFactory
from weir.state import ttl as T

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("ttl_driver.py")
REPO = Path(__file__).resolve().parents[2]
N_FILES = 6
CHAIN = [
    ("between_prepares@2@0", "PREPARING", 2),
    ("after_committing@3", "COMMITTING", 3),
    ("between_commits@5", "COMMITTING", 5),
]


# SQLite runs the whole chain; PostgreSQL (a store with its own commit transaction per namespace) and
# Redis the step that splits a commit; every store's TTL rows and sweep are covered by
# tests/contract/test_ttl.py
@pytest.fixture(params=["sqlite", "postgres", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    if request.param == "redis":
        server = request.getfixturevalue("redis_server")
        server.flushall()
        return str(server.url)
    db = request.getfixturevalue("postgres_database")
    db.truncate_all()
    return str(db.url)


def _run(state_dir: Path, corpus: Path, url: str, crash: str | None) -> subprocess.CompletedProcess[str]:
    return run_driver([str(DRIVER), str(state_dir), str(corpus), url], crash, 600)


@pytest.mark.timeout(1800)
def test_sigkill_with_expiries_in_flight_ends_exact(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "corpus"
    generate_corpus(str(corpus), n_words=1800, n_distinct=400, n_files=N_FILES, seed=11)
    files = [(corpus / f"part-{i:05d}.txt").read_text().split() for i in range(N_FILES)]
    for i in range(N_FILES):  # Spark orders files by modification time (ms): one second apart, name order
        os.utime(corpus / f"part-{i:05d}.txt", (1_700_000_000 + i, 1_700_000_000 + i))
    want, last_time = expected(files)
    assert 0 < len(want) < len({w for f in files for w in f})  # some words expired, some live
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    state_dir = tmp_path / "state"
    provider = StateFactory.from_url(store_url)
    for crash, phase, txid in CHAIN if store_url.startswith("sqlite") else CHAIN[-1:]:
        res = _run(state_dir, corpus, store_url, crash)
        assert res.returncode == -signal.SIGKILL, f"rc={res.returncode} at {crash}\n{res.stderr[-3000:]}"
        raw = provider.backend.get(f"$checkpointspout-{NAME}", b"__state")
        assert raw is not None
        rec = json.loads(raw)
        assert (rec["phase"], rec["txid"]) == (phase, txid), f"after the crash at {crash}: {rec}"
        assert (rec["batch_txid"], rec["batch_ms"]) == (txid, txid * 1000)
    final = _run(state_dir, corpus, store_url, None)
    assert final.returncode == 0, final.stderr[-4000:]
    assert f"DONE txid={N_FILES}" in final.stdout
    got: dict[str, int] = {}
    stored: set[str] = set()
    for task in range(2):
        ns = f"{NAME}-count-{task}"
        state = provider.new_state(ns)
        got.update(dict(state))
        for skey, sval in provider.backend.scan(ns):
            if not T.is_reserved(skey):
                stored.add(state.key_serializer.deserialize(skey))
                assert (T.expiry_of(sval) or 0) > last_time  # nothing expired is left in the store
    assert got == want
    assert stored == set(want)
