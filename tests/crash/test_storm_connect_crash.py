"""SIGKILL a Spark Connect client driving a Storm word count at steps of the checkpoint protocol,
restart it, and check the committed counts in Redis equal a Python Counter exactly.

The coordinator runs in the client (the process killed); the tasks run on the Connect server, which
lives on: a killed driver's job may still be running there when the next driver recovers, and the
next driver's epoch fences it out.
"""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.crash._harness import run_driver
from weir.demo import generate_corpus
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.slow, pytest.mark.spark]

DRIVER = Path(__file__).with_name("storm_connect_driver.py")
N_FILES = 5  # one file per batch: txids 1..5

# (point, phase left in the coordinator record, its txid): the coordinator's steps, in the client
CHAIN = [
    ("after_preparing@2", "PREPARING", 2),
    ("after_committing@3", "COMMITTING", 3),
    ("during_recovery@3", "COMMITTING", 3),  # killed while rolling txid 3 forward
    ("after_committed@4", "COMMITTED", 4),  # the restarted driver replays batch 4: skipped
]


@pytest.mark.timeout(900)
def test_sigkill_a_connect_client_at_protocol_steps_then_restart_gives_exact_counts(
    spark_connect_url: str, redis_server: Any, tmp_path: Path
) -> None:
    redis_server.flushall()
    url = str(redis_server.url)
    corpus = tmp_path / "corpus"
    expected = generate_corpus(str(corpus), n_words=2_000, n_distinct=80, n_files=N_FILES, seed=7)
    backend = StateFactory.from_url(url).backend

    def record() -> dict[str, Any]:
        data = backend.get("$checkpointspout-crashcx", b"__state")
        assert data is not None
        return dict(json.loads(data))

    for crash, phase, txid in CHAIN:
        res = run_driver([str(DRIVER), str(tmp_path / "state"), str(corpus), url, spark_connect_url], crash)
        assert res.returncode == -signal.SIGKILL, f"not killed at {crash}: rc={res.returncode}\n{res.stderr[-3000:]}"
        rec = record()
        assert (rec["phase"], rec["txid"]) == (phase, txid), f"after the crash at {crash}: {rec}"
    final = run_driver([str(DRIVER), str(tmp_path / "state"), str(corpus), url, spark_connect_url], None)
    assert final.returncode == 0, final.stderr[-4000:]
    assert f"DONE txid={N_FILES}" in final.stdout
    got: Counter[str] = Counter()
    for i in range(2):
        got.update(dict(StateFactory.from_url(url).new_state(f"crashcx-count-{i}")))
        txids = backend.txids(f"crashcx-count-{i}")
        assert txids.prepared is None and txids.committed == N_FILES
    assert got == expected
    assert (record()["phase"], record()["txid"]) == ("COMMITTED", N_FILES)
    assert int(record()["epoch"]) == len(CHAIN) + 1
