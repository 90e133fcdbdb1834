"""SIGKILL a Trident driver that serves DRPC with requests in flight; restarted, it answers each exactly once.

The requests are in the store's queue before the driver starts, so its first batch (txid 1) takes
them, together with the corpus:

* ``drpc_after_request_log@1`` — the request log holds txid 1's requests, no stage has run: the
  restarted driver retries txid 1, takes exactly those requests from the log, answers after COMMITTED;
* ``after_committed@1`` — txid 1 is COMMITTED, its answers were never written: the restart skips the
  committed batch, and the next batch takes the requests left in the log and answers them.

Either way every request gets exactly the sum the corpus gives, and the queue and the log end empty.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.crash._harness import run_driver
from weir.drpc.store import Answer, Request, log_namespace, queue_namespace, results_namespace
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("drpc_driver.py")
NAME = "drpccrash"
LINES = ["the cat sat on the mat", "the dog and the man", "a cat a dog"]
QUESTIONS = ["cat dog the man", "the", "zebra", "mat mat"]


def _backend(state_dir: Path) -> Any:
    return StateFactory.from_url(f"sqlite:///{state_dir / 'state.db'}").backend


@pytest.mark.parametrize("crash", ["drpc_after_request_log@1", "after_committed@1"])
def test_requests_in_flight_are_answered_exactly_once_after_a_crash(tmp_path: Path, crash: str) -> None:
    state_dir, corpus = tmp_path / "state", tmp_path / "lines"
    state_dir.mkdir()
    corpus.mkdir()
    (corpus / "f0.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    counts = Counter(w for line in LINES for w in line.split())
    backend = _backend(state_dir)
    now = int(time.time() * 1000)
    asked = {uuid.uuid4().hex: q for q in QUESTIONS}
    queue = queue_namespace("words")
    backend.write_direct(  # what Client.execute writes, before the topology runs
        queue, {rid.encode(): Request("words", rid, q, now + 900_000, now).to_bytes() for rid, q in asked.items()}, None
    )
    first = run_driver([str(DRIVER), str(state_dir), str(corpus), NAME], crash, timeout=400)
    assert first.returncode == -9, f"the crash point did not fire:\n{first.stderr[-3000:]}"
    logged = {k: json.loads(v) for k, v in backend.scan(log_namespace(NAME))}
    assert [rec["txid"] for rec in logged.values()] == [1]  # the requests were logged under txid 1
    assert sorted(r[1] for rec in logged.values() for r in rec["requests"]) == sorted(asked)
    assert list(backend.scan(results_namespace("words"))) == []  # nothing answered before the crash

    answers: dict[str, Answer] = {}

    def collect() -> None:  # the clients' polling, while the restarted driver runs
        deadline = time.monotonic() + 380
        while len(answers) < len(asked) and time.monotonic() < deadline:
            for rid in asked:
                data = backend.get(results_namespace("words"), rid.encode())
                if data is not None:
                    answers[rid] = Answer.from_bytes(data, rid)
            time.sleep(0.2)
        (state_dir / "STOP").touch()

    poller = threading.Thread(target=collect)
    poller.start()
    second = run_driver([str(DRIVER), str(state_dir), str(corpus), NAME], None, timeout=400)
    poller.join()
    assert second.returncode == 0, second.stderr[-3000:]
    assert {rid: (a.status, a.tuples) for rid, a in answers.items()} == {
        rid: ("ok", [[sum(counts[w] for w in q.split())]]) for rid, q in asked.items()
    }
    if crash.startswith("after_committed"):  # answered by the batch after the committed one
        assert {a.txid for a in answers.values()} == {2}
    else:  # the retried txid 1 took exactly the logged requests
        assert {a.txid for a in answers.values()} == {1}
    assert list(backend.scan(log_namespace(NAME))) == []  # the log is pruned
    assert list(backend.scan(queue)) == []  # answered requests leave the queue
