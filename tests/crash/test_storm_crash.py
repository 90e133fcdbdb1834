"""SIGKILL the driver (its whole process group: JVM and Python workers too) at every step of the
checkpoint protocol, restart it, and check the committed counts equal a Python Counter exactly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.crash._harness import run_driver
from weir.demo import generate_corpus
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("storm_driver.py")
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


def _run(
    state_dir: Path, corpus: Path, url: str, crash: str | None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return run_driver([str(DRIVER), str(state_dir), str(corpus), url], crash, timeout)


def _record(url: str, name: str = "crashwc") -> dict[str, object]:
    backend = StateFactory.from_url(url).backend
    data = backend.get(f"$checkpointspout-{name}", b"__state")
    assert data is not None
    return dict(json.loads(data))


def _counts(url: str, name: str = "crashwc") -> Counter[str]:
    provider = StateFactory.from_url(url)
    got: Counter[str] = Counter()
    for i in range(2):
        for k, v in provider.new_state(f"{name}-count-{i}"):
            got[k] += v
    return got


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[Path, Counter[str]]:
    d = tmp_path / "corpus"
    expected = generate_corpus(str(d), n_words=8_000, n_distinct=300, n_files=N_FILES, seed=3)
    return d, expected


def _sigkill_chain(
    chain: list[tuple[str, str, int]], stores: dict[str, str], input_dir: Path, expected: Counter[str], tmp_path: Path
) -> None:
    """Run ``chain`` for the topologies ``stores`` maps (name -> store URL), all in one driver process.

    Each run is killed once every topology has reached the step (the crash barrier when there are
    several); each store's record is checked after each step, and counts, namespaces and record at the end.
    """
    argv = [str(DRIVER)]
    for name, url in stores.items():
        argv += [str(tmp_path / f"state-{name}"), str(input_dir), url] + ([name] if len(stores) > 1 else [])
    barrier = list(stores) if len(stores) > 1 else []
    for crash, phase, txid in chain:
        res = run_driver(argv, crash, 600, barrier=barrier)
        assert res.returncode == -signal.SIGKILL, (
            f"the driver should have been killed at {crash}; rc={res.returncode}\n{res.stderr[-3000:]}"
        )
        assert "DONE" not in res.stdout
        for name, url in stores.items():
            rec = _record(url, name)
            assert (rec["phase"], rec["txid"]) == (phase, txid), f"{name}: after the crash at {crash}: {rec}"
    final = run_driver(argv, None, 600)
    assert final.returncode == 0, final.stderr[-4000:]
    for name, url in stores.items():
        assert (f"{name} DONE txid={N_FILES}" if barrier else f"DONE txid={N_FILES}") in final.stdout
        assert _counts(url, name) == expected, name
        backend = StateFactory.from_url(url).backend
        for i in range(2):
            rec = backend.txids(f"{name}-count-{i}")
            assert rec.prepared is None, f"namespace {name}-count-{i} still has prepared txid {rec.prepared}"
            assert rec.committed == N_FILES
        final_rec = _record(url, name)
        assert (final_rec["phase"], final_rec["txid"]) == ("COMMITTED", N_FILES), name
        # every restart took a new epoch: the first driver's epoch is long fenced out
        assert int(final_rec["epoch"]) == len(chain) + 1, name


@pytest.mark.timeout(1800)  # nine Spark driver starts
def test_sigkill_at_every_protocol_step_then_restart_gives_exact_counts(
    corpus: tuple[Path, Counter[str]], tmp_path: Path
) -> None:
    input_dir, expected = corpus
    _sigkill_chain(CHAIN, {"crashwc": f"sqlite:///{tmp_path / 'state.db'}"}, input_dir, expected, tmp_path)


# standalone Redis shares weir.connectors.redis with the cluster and is crash-tested by the sources and
# Trident chains; the cluster (slots, hash tags, MOVED) is the harder case for this chain. Both stores'
# topologies run in one driver per step (the crash barrier: two topologies, so local[2] keeps a slot free
# while the first one's task waits at between_prepares); "hbase" in the name keeps it in the HBase group.
@pytest.mark.timeout(1800)  # five Spark driver starts; HBase's adds a JVM round trip per state read
def test_sigkill_at_the_store_steps_on_redis_cluster_and_hbase_gives_exact_counts(
    corpus: tuple[Path, Counter[str]], redis_cluster: Any, hbase_server: Any, tmp_path: Path
) -> None:
    input_dir, expected = corpus
    redis_cluster.flushall()  # a 3-master cluster: namespaces and the record spread over slots
    hbase_server.truncate("state")
    stores = {"crashwc_cluster": str(redis_cluster.url), "crashwc_hbase": str(hbase_server.url("state"))}
    _sigkill_chain(STORE_CHAIN, stores, input_dir, expected, tmp_path)


def test_sigkill_with_a_custom_provider_and_the_record_in_redis(
    corpus: tuple[Path, Counter[str]], redis_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's StateProvider by dotted path (Redis hashes, a Lua commit), the coordinator record in
    ``weir.coordinator.url``: killed between prepares and between commits, then exact."""
    from tests.spark._custom_provider import read_namespace

    input_dir, expected = corpus
    redis_server.flushall()
    url = redis_server.url
    root = str(Path(__file__).parent.parent.parent)
    monkeypatch.setenv("WEIR_TEST_PROVIDER", "tests.spark._custom_provider.RedisHashProvider")
    monkeypatch.setenv("WEIR_TEST_COORDINATOR_URL", url)
    monkeypatch.setenv("PYTHONPATH", root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    state_dir = tmp_path / "state"
    for crash, phase, txid in [("between_prepares@3@0", "PREPARING", 3), ("between_commits@6", "COMMITTING", 6)]:
        res = _run(state_dir, input_dir, url, crash)
        assert res.returncode == -signal.SIGKILL, f"rc={res.returncode}\n{res.stderr[-3000:]}"
        rec = _record(url)
        assert (rec["phase"], rec["txid"]) == (phase, txid), f"after the crash at {crash}: {rec}"
    final = _run(state_dir, input_dir, url, None)
    assert final.returncode == 0, final.stderr[-4000:]
    assert f"DONE txid={N_FILES}" in final.stdout
    got: Counter[str] = Counter()
    for i in range(2):
        got.update(read_namespace(url, f"crashwc-count-{i}"))
    assert got == expected
    assert not (state_dir / "state.db").exists()  # the record never went to SQLite
