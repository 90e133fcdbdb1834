"""SIGKILL a Spark Connect client driving a Trident word count at steps of the checkpoint protocol,
restart it, and check the map state in Redis equals a Python Counter exactly.

The coordinator runs in the client (the process killed, with its whole process group); the streaming
query and its tasks run on the Connect server, which lives on. Each restart first recovers what the
previous crash left, then is killed at the next step:

- ``after_prepared@2``: batch 2's job ran on the server (every state partition committed txid 2
  in its task), the client died before ``COMMITTING``: the restart rolls back to ``COMMITTED(1)``
  and replays txid 2, which the values stored with txids make a no-op for the keys already written;
- ``after_committing@3``: ``COMMITTING(3)`` stored: rolled forward on restart;
- ``after_committed@4``: ``COMMITTED(4)`` stored before Spark committed the batch's offsets: the
  batch is replayed and skipped.
"""

from __future__ import annotations

import json
import random
import signal
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.crash._harness import run_driver
from tests.crash.test_trident_crash import _write
from weir.state import StateFactory
from weir.trident.backing import RedisMapState

pytestmark = [pytest.mark.crash, pytest.mark.slow, pytest.mark.spark]

DRIVER = Path(__file__).with_name("trident_connect_driver.py")
NAME = "tridentcx"
N_FILES = 5  # one file per batch: txids 1..5 (the last run has a new batch after the skipped replay)

CHAIN = [
    ("after_prepared@2", "PREPARING", 2),
    ("after_committing@3", "COMMITTING", 3),
    ("after_committed@4", "COMMITTED", 4),
]


def _corpus(directory: Path) -> tuple[Counter[str], list[str]]:
    rng = random.Random(13)
    vocab = [f"w{i}" for i in range(60)]
    expected: Counter[str] = Counter()
    for f in range(N_FILES):
        words = rng.choices(vocab, weights=[1 / (i + 1) for i in range(len(vocab))], k=200)
        expected.update(words)
        _write(directory, f"f{f:03d}.txt", [" ".join(words[i : i + 10]) for i in range(0, len(words), 10)])
    return expected, vocab


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("state_type", ["opaque"])
def test_sigkill_a_connect_client_at_protocol_steps_then_restart_gives_exact_counts(
    spark_connect_url: str, redis_server: Any, tmp_path: Path, state_type: str
) -> None:
    url = str(redis_server.url)
    table = f"tcx_{uuid.uuid4().hex[:8]}"
    corpus = tmp_path / "corpus"
    expected, vocab = _corpus(corpus)
    state_dir = tmp_path / "state"
    args = [str(DRIVER), str(state_dir), str(corpus), url, table, state_type, spark_connect_url]

    def record() -> dict[str, Any]:
        backend = StateFactory.from_url(f"sqlite:///{state_dir / 'state.db'}").backend
        data = backend.get(f"$checkpointspout-{NAME}", b"__state")
        assert data is not None
        return dict(json.loads(data))

    for crash, phase, txid in CHAIN:
        res = run_driver(args, crash, timeout=900)
        assert res.returncode == -signal.SIGKILL, f"not killed at {crash}: rc={res.returncode}\n{res.stderr[-3000:]}"
        assert "DONE" not in res.stdout
        rec = record()
        assert (rec["phase"], rec["txid"]) == (phase, txid), f"after the crash at {crash}: {rec}"
    final = run_driver(args, None, timeout=900)
    assert final.returncode == 0, final.stderr[-4000:]
    assert f"DONE txid={N_FILES}" in final.stdout
    rec = record()
    assert (rec["phase"], rec["txid"]) == ("COMMITTED", N_FILES)
    assert int(rec["epoch"]) == len(CHAIN) + 1  # every restart took a new epoch
    state = RedisMapState.factory(state_type, url, key_prefix=f"{table}:").make_state({}, 0, 1)
    got = dict(zip(vocab, state.multi_get([[w] for w in vocab]), strict=True))
    assert {w: c for w, c in got.items() if c is not None} == dict(expected)
    # every stored cell carries a committed txid (nothing from a txid past the last committed one)
    import redis

    client = redis.Redis.from_url(url)
    try:
        cells = [json.loads(client.get(k)) for k in client.scan_iter(match=f"{table}:*")]
    finally:
        client.close()
    assert cells and all(1 <= int(c[0]) <= N_FILES for c in cells), cells[:5]
