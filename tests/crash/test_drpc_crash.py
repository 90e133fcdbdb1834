"""SIGKILL a Trident driver that serves DRPC at every step of a request's life; each is answered exactly once.

One chain per store (SQLite, Redis, PostgreSQL: the topology's store holds the coordinator, the
queues, the request log, the answers and the word counts), each run of ``drpc_driver.py`` killed at
the next step:

1. ``drpc_after_request_log@1`` — requests *A* (queued before the start) are in the request log
   under txid 1, no stage has run: the restarted driver retries txid 1 with exactly those requests;
2. ``after_committed@1`` — txid 1 is COMMITTED, its answers never written: the restart skips the
   committed batch, and txid 2 takes *A* again from the log, with the new requests *B*;
3. ``drpc_after_answers@2`` — the answers of *A* and *B* are written, the requests still queued and
   logged: the next batch only dequeues them (each keeps its one answer) and takes the new *C*;
4. ``drpc_after_dequeue@3`` — *C* answered and dequeued, its log entry not deleted: the restart
   prunes it without running *C* again;
5. a last run answers a live ``Client.execute`` and prunes the log.

Every answer is the exact sum the corpus gives, from the txid that first answered it; the queue
and the log end empty, and the answers namespace holds only answers a client has still to read.
"""

from __future__ import annotations

import json
import signal
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.crash._harness import run_driver
from weir.drpc import Client
from weir.drpc.store import Answer, Request, log_namespace, queue_namespace, results_namespace
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("drpc_driver.py")
NAME = "drpccrash"
LINES = ["the cat sat on the mat", "the dog and the man", "a cat a dog"]
COUNTS = Counter(w for line in LINES for w in line.split())
ASKED = {"A": ["cat dog the man", "the", "zebra"], "B": ["mat mat", "a dog"], "C": ["sat on"]}


def _sum(question: str) -> int:
    return sum(COUNTS[w] for w in question.split())


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("provider_url", ["sqlite", "redis", "postgres"], indirect=True)
def test_requests_in_flight_are_answered_exactly_once_at_every_kill(tmp_path: Path, provider_url: str) -> None:
    state_dir, corpus = tmp_path / "state", tmp_path / "lines"
    state_dir.mkdir()
    corpus.mkdir()
    (corpus / "f0.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    kind = provider_url.split(":", 1)[0]
    if kind == "sqlite":
        url, argv = f"sqlite:///{state_dir / 'state.db'}", [str(DRIVER), str(state_dir), str(corpus), NAME]
    else:
        kind = "postgres" if kind.startswith("postgres") else kind
        url, argv = provider_url, [str(DRIVER), str(state_dir), str(corpus), NAME, kind, provider_url]
    backend = StateFactory.from_url(url).backend
    queue, results, log = queue_namespace("words"), results_namespace("words"), log_namespace(NAME)
    rids: dict[str, dict[str, str]] = {}

    def ask(group: str) -> None:  # what Client.execute writes
        now = int(time.time() * 1000)
        rids[group] = {uuid.uuid4().hex: q for q in ASKED[group]}
        reqs = {rid.encode(): Request("words", rid, q, now + 900_000, now).to_bytes() for rid, q in rids[group].items()}
        backend.write_direct(queue, reqs, None)

    def ids(*groups: str) -> list[str]:
        return sorted(rid for g in groups for rid in rids[g])

    def answers() -> dict[str, tuple[str, list[list[Any]], int | None]]:
        out = {}
        for k, v in backend.scan(results):
            a = Answer.from_bytes(v, k.decode())
            out[k.decode()] = (a.status, a.tuples, a.txid)
        return out

    def want(txids: dict[str, int]) -> dict[str, tuple[str, list[list[Any]], int | None]]:
        return {rid: ("ok", [[_sum(q)]], txids[g]) for g, t in txids.items() for rid, q in rids[g].items() if t}

    def logged() -> dict[int, list[str]]:
        return {
            rec["txid"]: sorted(r[1] for r in rec["requests"]) for rec in (json.loads(v) for _, v in backend.scan(log))
        }

    def phase() -> tuple[str, int]:
        rec = json.loads(backend.get(f"$checkpointspout-{NAME}", b"__state") or b"{}")
        return rec.get("phase"), rec.get("txid")

    def kill(point: str) -> None:
        res = run_driver(argv, point, timeout=400)
        assert res.returncode == -signal.SIGKILL, f"{kind}: the crash point {point} did not fire:\n{res.stderr[-3000:]}"

    ask("A")
    kill("drpc_after_request_log@1")
    assert (phase(), logged(), answers()) == (("PREPARING", 1), {1: ids("A")}, {})
    kill("after_committed@1")
    assert (phase(), logged(), answers()) == (("COMMITTED", 1), {1: ids("A")}, {})
    ask("B")
    kill("drpc_after_answers@2")
    assert (phase(), logged()) == (("COMMITTED", 2), {2: ids("A", "B")})
    assert answers() == want({"A": 2, "B": 2})  # written, while the requests are still queued
    assert sorted(k.decode() for k, _ in backend.scan(queue)) == ids("A", "B")
    ask("C")
    kill("drpc_after_dequeue@3")
    assert (phase(), logged()) == (("COMMITTED", 3), {3: ids("C")})
    assert answers() == want({"A": 2, "B": 2, "C": 3})  # A and B kept their answers of txid 2
    assert list(backend.scan(queue)) == []

    live: dict[str, Any] = {}

    def client() -> None:  # a client asks the restarted driver, then waits for the log to be pruned
        try:
            live["answer"] = Client(url).execute("words", "cat cat", timeout=300)
            deadline = time.monotonic() + 300
            while logged() and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            (state_dir / "STOP").touch()

    poller = threading.Thread(target=client)
    poller.start()
    final = run_driver(argv, None, timeout=400)
    poller.join()
    assert final.returncode == 0, final.stderr[-3000:]
    assert live == {"answer": 2 * COUNTS["cat"]}
    assert answers() == want({"A": 2, "B": 2, "C": 3})  # nothing ran twice; the client took its own
    assert logged() == {} and list(backend.scan(queue)) == []
