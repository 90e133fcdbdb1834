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
from pathlib import Path
from typing import Any

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
Step = tuple[str, str, int]  # (crash point, phase the record is left in, its txid)
CHAIN: list[Step] = [
    ("between_prepares@2@0", "PREPARING", 2),
    ("after_committing@3", "COMMITTING", 3),
    ("between_commits@5", "COMMITTING", 5),
]


# SQLite runs the whole chain; PostgreSQL (a store with its own commit transaction per namespace) and
# Redis the step that splits a commit; every store's TTL rows and sweep are covered by
# tests/contract/test_ttl.py. Their topologies start fresh in the driver run of that step, beside
# SQLite's (the crash barrier kills the driver once all three reached it): 4 driver starts, not 8.
@pytest.fixture
def stores(tmp_path: Path, redis_server: Any, postgres_database: Any) -> dict[str, tuple[str, list[Step]]]:
    """Per topology name: its empty store and its chain (a suffix of CHAIN)."""
    redis_server.flushall()
    postgres_database.truncate_all()
    return {
        NAME: (f"sqlite:///{tmp_path / 'state.db'}", CHAIN),
        f"{NAME}_postgres": (str(postgres_database.url), CHAIN[-1:]),
        f"{NAME}_redis": (str(redis_server.url), CHAIN[-1:]),
    }


@pytest.mark.timeout(1800)
def test_sigkill_with_expiries_in_flight_ends_exact(
    stores: dict[str, tuple[str, list[Step]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "corpus"
    generate_corpus(str(corpus), n_words=1800, n_distinct=400, n_files=N_FILES, seed=11)
    files = [(corpus / f"part-{i:05d}.txt").read_text().split() for i in range(N_FILES)]
    for i in range(N_FILES):  # Spark orders files by modification time (ms): one second apart, name order
        os.utime(corpus / f"part-{i:05d}.txt", (1_700_000_000 + i, 1_700_000_000 + i))
    want, last_time = expected(files)
    assert 0 < len(want) < len({w for f in files for w in f})  # some words expired, some live
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    joins = {name: len(CHAIN) - len(chain) for name, (_, chain) in stores.items()}  # the step it starts at
    assert all(chain == CHAIN[joins[name] :] for name, (_, chain) in stores.items())

    def argv(step: int) -> list[str]:
        out = [str(DRIVER)]
        for name, (url, _) in stores.items():
            if joins[name] <= step:
                out += [str(tmp_path / f"state-{name}"), str(corpus), url, name]
        return out

    providers = {name: StateFactory.from_url(url) for name, (url, _) in stores.items()}
    for step, (crash, phase, txid) in enumerate(CHAIN):
        names = [n for n in stores if joins[n] <= step]
        res = run_driver(argv(step), crash, 600, barrier=names if len(names) > 1 else [])
        assert res.returncode == -signal.SIGKILL, f"rc={res.returncode} at {crash}\n{res.stderr[-3000:]}"
        for name in names:
            raw = providers[name].backend.get(f"$checkpointspout-{name}", b"__state")
            assert raw is not None, name
            rec = json.loads(raw)
            assert (rec["phase"], rec["txid"]) == (phase, txid), f"{name}: after the crash at {crash}: {rec}"
            assert (rec["batch_txid"], rec["batch_ms"]) == (txid, txid * 1000), name
    final = run_driver(argv(len(CHAIN)), None, 600)
    assert final.returncode == 0, final.stderr[-4000:]
    for name, provider in providers.items():
        assert f"{name} DONE txid={N_FILES}" in final.stdout
        got: dict[str, int] = {}
        stored: set[str] = set()
        for task in range(2):
            ns = f"{name}-count-{task}"
            state = provider.new_state(ns)
            got.update(dict(state))
            for skey, sval in provider.backend.scan(ns):
                if not T.is_reserved(skey):
                    stored.add(state.key_serializer.deserialize(skey))
                    assert (T.expiry_of(sval) or 0) > last_time, name  # nothing expired is left in the store
        assert got == want, name
        assert stored == set(want), name
