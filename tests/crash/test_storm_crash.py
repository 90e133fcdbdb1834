"""SIGKILL the driver (its whole process group: JVM and Python workers too) at every step of the
checkpoint protocol, restart it, and check the committed counts equal a Python Counter exactly."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.crash._harness import run_driver, storm_counts
from weir.demo import generate_corpus
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("storm_driver.py")
REPO = Path(__file__).resolve().parents[2]
N_FILES = 8  # one file per batch: txids 1..8

# Each run of the driver first recovers what the previous run's crash left, then gets killed at the
# next point; the record each crash must leave is checked before the next run. A final clean run
# completes. (point, phase left in the coordinator record, its txid)
CHAIN = [
    ("during_processing@1@1", "PREPARING", 1),
    ("after_preparing@2", "PREPARING", 2),
    ("between_prepares@3@0", "PREPARING", 3),
    ("after_prepared@4", "PREPARING", 4),
    ("after_committing@5", "COMMITTING", 5),
    ("during_recovery@5", "COMMITTING", 5),  # killed while rolling txid 5 forward
    ("between_commits@6", "COMMITTING", 6),
    ("after_committed@7", "COMMITTED", 7),  # before Spark commits its offsets: batch replays, is skipped
]
# on the 3-master Redis Cluster (the record's and the namespaces' keys live on different masters) and
# on HBase (a check-and-put commit point, then an apply that recovery finishes), the steps that write
# to the store: prepares, the COMMITTING record, recovery, the commits. Every other step of CHAIN is
# the coordinator's, the same on every store (SQLite runs them all).
STORE_CHAIN = [
    ("between_prepares@2@0", "PREPARING", 2),
    ("after_committing@4", "COMMITTING", 4),
    ("during_recovery@4", "COMMITTING", 4),
    ("between_commits@6", "COMMITTING", 6),
]


def _record(url: str, name: str) -> dict[str, object]:
    backend = StateFactory.from_url(url).backend
    data = backend.get(f"$checkpointspout-{name}", b"__state")
    assert data is not None, name
    return dict(json.loads(data))


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[Path, Counter[str]]:
    d = tmp_path / "corpus"
    expected = generate_corpus(str(d), n_words=8_000, n_distinct=300, n_files=N_FILES, seed=3)
    return d, expected


# Every store's topology runs in one driver process per step, each armed at its own point of the step
# (the crash barrier kills the driver once all have reached theirs), then sits out until the final run:
# 9 driver starts for all four chains instead of 17. A topology's (store URL, chain, first step):
# SQLite runs CHAIN whole; the Redis Cluster's and HBase's topologies STORE_CHAIN in the last four
# steps; a user's StateProvider by dotted path (Redis hashes, a Lua commit) with the coordinator record
# in ``weir.coordinator.url`` is killed between prepares and between commits in steps 2 and 3 (an
# idle step of the other stores). "hbase" in the test's name keeps it in the HBase group.
@pytest.mark.timeout(1800)  # nine Spark driver starts; HBase's adds a JVM round trip per state read
def test_sigkill_at_every_protocol_step_on_sqlite_redis_cluster_hbase_and_a_custom_provider_gives_exact_counts(
    corpus: tuple[Path, Counter[str]],
    redis_cluster: Any,
    hbase_server: Any,
    redis_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.spark._custom_provider import read_namespace

    input_dir, expected = corpus
    redis_cluster.flushall()  # a 3-master cluster: namespaces and the record spread over slots
    hbase_server.truncate("state")
    redis_server.flushall()
    custom = "crashwc_custom"
    monkeypatch.setenv("WEIR_TEST_PROVIDER", "tests.spark._custom_provider.RedisHashProvider")
    monkeypatch.setenv("WEIR_TEST_COORDINATOR_URL", str(redis_server.url))
    monkeypatch.setenv("WEIR_TEST_PROVIDER_FOR", custom)
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    custom_chain = [("between_prepares@3@0", "PREPARING", 3), ("between_commits@6", "COMMITTING", 6)]
    topologies: dict[str, tuple[str, list[tuple[str, str, int]], int]] = {
        "crashwc": (f"sqlite:///{tmp_path / 'state.db'}", CHAIN, 0),
        custom: (str(redis_server.url), custom_chain, 2),
        "crashwc_cluster": (str(redis_cluster.url), STORE_CHAIN, len(CHAIN) - len(STORE_CHAIN)),
        "crashwc_hbase": (str(hbase_server.url("state")), STORE_CHAIN, len(CHAIN) - len(STORE_CHAIN)),
    }

    def step_of(name: str, step: int) -> tuple[str, str, int] | None:
        _, chain, first = topologies[name]
        return chain[step - first] if first <= step < first + len(chain) else None

    def argv(names: list[str]) -> list[str]:
        out = [str(DRIVER)]
        for name in names:
            out += [str(tmp_path / f"state-{name}"), str(input_dir), topologies[name][0], name]
        return out

    for step in range(len(CHAIN)):
        armed = {name: at for name in topologies if (at := step_of(name, step)) is not None}
        crash = {name: at[0] for name, at in armed.items()}
        res = run_driver(argv(list(armed)), crash, 600)
        assert res.returncode == -signal.SIGKILL, (
            f"the driver should have been killed at {crash}; rc={res.returncode}\n{res.stderr[-3000:]}"
        )
        assert "DONE" not in res.stdout
        for name, (point, phase, txid) in armed.items():
            rec = _record(topologies[name][0], name)
            assert (rec["phase"], rec["txid"]) == (phase, txid), f"{name}: after the crash at {point}: {rec}"
    final = run_driver(argv(list(topologies)), None, 600)
    assert final.returncode == 0, final.stderr[-4000:]
    for name, (url, chain, _) in topologies.items():
        assert f"{name} DONE txid={N_FILES}" in final.stdout
        if name == custom:  # Redis hashes of the user's provider; the record in weir.coordinator.url
            got: Counter[str] = Counter()
            for i in range(2):
                got.update(read_namespace(url, f"{name}-count-{i}"))
            assert got == expected, name
            assert not (tmp_path / f"state-{name}" / "state.db").exists()  # the record never went to SQLite
        else:
            assert storm_counts(url, name) == expected, name
            backend = StateFactory.from_url(url).backend
            for i in range(2):
                rec = backend.txids(f"{name}-count-{i}")
                assert rec.prepared is None, f"namespace {name}-count-{i} still has prepared txid {rec.prepared}"
                assert rec.committed == N_FILES
        final_rec = _record(url, name)
        assert (final_rec["phase"], final_rec["txid"]) == ("COMMITTED", N_FILES), name
        # every restart took a new epoch: the first driver's epoch is long fenced out
        assert int(final_rec["epoch"]) == len(chain) + 1, name
