"""SIGKILL a Trident driver that serves DRPC at every step of a request's life; each is answered exactly once.

One chain for three stores (SQLite, Redis, PostgreSQL: the topology's store holds the coordinator,
the queues, the request log, the answers and the word counts): each run of ``drpc_driver.py`` runs
one topology per store side by side and is killed once every one of them has reached the next step
(the crash barrier of :mod:`weir._faults`), so each store's topology dies exactly there:

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
The same chain runs with the driver a Spark Connect client (SQLite store): every kill point is in
the client, where the coordinator, the request log and the answers are; the server lives on.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.crash._harness import run_driver
from weir.drpc import Client
from weir.drpc.store import Answer, Request, log_namespace, queue_namespace, results_namespace
from weir.state import StateFactory
from weir.state.factory import close_backends

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("drpc_driver.py")
NAME = "drpccrash"  # one topology per store: drpccrash_sqlite, drpccrash_redis, drpccrash_postgres
LINES = ["the cat sat on the mat", "the dog and the man", "a cat a dog"]
COUNTS = Counter(w for line in LINES for w in line.split())
ASKED = {"A": ["cat dog the man", "the", "zebra"], "B": ["mat mat", "a dog"], "C": ["sat on"]}


def _sum(question: str) -> int:
    return sum(COUNTS[w] for w in question.split())


@pytest.fixture
def stores(tmp_path: Path, redis_server: Any, postgres_database: Any) -> Iterator[dict[str, str]]:
    """An empty store of each kind (emptied after the test too: a store-wide DRPC registration must not
    meet later tests of this worker), by kind."""
    empties: list[Callable[[], None]] = [redis_server.flushall, postgres_database.truncate_all]
    for empty in empties:
        empty()
    close_backends()
    try:
        yield {
            "sqlite": f"sqlite:///{tmp_path / 'sqlite' / 'state' / 'state.db'}",
            "redis": redis_server.url,
            "postgres": postgres_database.url,
        }
    finally:
        close_backends()
        for empty in empties:
            with contextlib.suppress(Exception):
                empty()


class Chain:
    """One store's topology: its requests, and what the test reads back from its store."""

    def __init__(self, kind: str, url: str, root: Path, name: str | None = None) -> None:
        self.kind, self.url, self.name = kind, url, name or f"{NAME}_{kind}"
        self.state_dir, corpus = root / "state", root / "lines"
        self.state_dir.mkdir(parents=True)
        corpus.mkdir()
        (corpus / "f0.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
        self.argv = [str(self.state_dir), str(corpus), self.name, kind, url]
        self.backend = StateFactory.from_url(url).backend
        self.queue, self.results, self.log = (
            queue_namespace("words"),
            results_namespace("words"),
            log_namespace(self.name),
        )
        self.rids: dict[str, dict[str, str]] = {}

    def ask(self, group: str) -> None:  # what Client.execute writes
        now = int(time.time() * 1000)
        self.rids[group] = {uuid.uuid4().hex: q for q in ASKED[group]}
        reqs = {
            rid.encode(): Request("words", rid, q, now + 900_000, now).to_bytes() for rid, q in self.rids[group].items()
        }
        self.backend.write_direct(self.queue, reqs, None)

    def ids(self, *groups: str) -> list[str]:
        return sorted(rid for g in groups for rid in self.rids[g])

    def answers(self) -> dict[str, tuple[str, list[list[Any]], int | None]]:
        out = {}
        for k, v in self.backend.scan(self.results):
            a = Answer.from_bytes(v, k.decode())
            out[k.decode()] = (a.status, a.tuples, a.txid)
        return out

    def want(self, txids: dict[str, int]) -> dict[str, tuple[str, list[list[Any]], int | None]]:
        return {rid: ("ok", [[_sum(q)]], txids[g]) for g, t in txids.items() for rid, q in self.rids[g].items() if t}

    def logged(self) -> dict[int, list[str]]:
        recs = (json.loads(v) for _, v in self.backend.scan(self.log))
        return {rec["txid"]: sorted(r[1] for r in rec["requests"]) for rec in recs}

    def phase(self) -> tuple[str, int]:
        rec = json.loads(self.backend.get(f"$checkpointspout-{self.name}", b"__state") or b"{}")
        return rec.get("phase"), rec.get("txid")

    def queued(self) -> list[str]:
        return sorted(k.decode() for k, _ in self.backend.scan(self.queue))


@pytest.mark.timeout(1800)
def test_requests_in_flight_are_answered_exactly_once_at_every_kill(tmp_path: Path, stores: dict[str, str]) -> None:
    chains = [Chain(kind, url, tmp_path / kind) for kind, url in stores.items()]
    _kill_chain(chains, [str(DRIVER)] + [a for c in chains for a in c.argv])


@pytest.mark.timeout(1800)
def test_requests_in_flight_over_spark_connect_are_answered_exactly_once_at_every_kill(
    tmp_path: Path, spark_connect_url: str
) -> None:
    """The same chain with the driver a Spark Connect client (SQLite store): the coordinator, the request
    log and the answers are the client's, the query runs on the server, which lives on; every kill point
    is in the client."""
    url = f"sqlite:///{tmp_path / 'sqlite' / 'state' / 'state.db'}"
    chain = Chain("sqlite", url, tmp_path / "sqlite", name=f"{NAME}_connect")
    _kill_chain([chain], [str(DRIVER), "--remote", spark_connect_url, *chain.argv])


def _kill_chain(chains: list[Chain], argv: list[str]) -> None:
    """SIGKILL ``argv`` (one driver for every chain's topology) at each step, checking each store after it."""

    def kill(point: str) -> None:
        res = run_driver(argv, point, timeout=600, barrier=[c.name for c in chains])
        assert res.returncode == -signal.SIGKILL, f"the crash point {point} did not fire:\n{res.stderr[-3000:]}"

    for c in chains:
        c.ask("A")
    kill("drpc_after_request_log@1")
    for c in chains:
        assert (c.kind, c.phase(), c.logged(), c.answers()) == (c.kind, ("PREPARING", 1), {1: c.ids("A")}, {})
    kill("after_committed@1")
    for c in chains:
        assert (c.kind, c.phase(), c.logged(), c.answers()) == (c.kind, ("COMMITTED", 1), {1: c.ids("A")}, {})
        c.ask("B")
    kill("drpc_after_answers@2")
    for c in chains:
        assert (c.kind, c.phase(), c.logged()) == (c.kind, ("COMMITTED", 2), {2: c.ids("A", "B")})
        assert c.answers() == c.want({"A": 2, "B": 2}), c.kind  # written, while the requests are still queued
        assert c.queued() == c.ids("A", "B"), c.kind
        c.ask("C")
    kill("drpc_after_dequeue@3")
    for c in chains:
        assert (c.kind, c.phase(), c.logged()) == (c.kind, ("COMMITTED", 3), {3: c.ids("C")})
        assert c.answers() == c.want({"A": 2, "B": 2, "C": 3}), c.kind  # A and B kept their answers of txid 2
        assert c.queued() == [], c.kind

    live: dict[str, Any] = {}

    def client(c: Chain) -> None:  # a client asks the restarted driver, then waits for the log to be pruned
        try:
            live[c.kind] = Client(c.url).execute("words", "cat cat", timeout=300)
            deadline = time.monotonic() + 300
            while c.logged() and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            (c.state_dir / "STOP").touch()

    pollers = [threading.Thread(target=client, args=(c,)) for c in chains]
    for t in pollers:
        t.start()
    final = run_driver(argv, None, timeout=600)
    for t in pollers:
        t.join()
    assert final.returncode == 0, final.stderr[-3000:]
    assert live == {c.kind: 2 * COUNTS["cat"] for c in chains}
    for c in chains:
        assert c.answers() == c.want({"A": 2, "B": 2, "C": 3}), c.kind  # nothing ran twice; the client took its own
        assert (c.kind, c.logged(), c.queued()) == (c.kind, {}, [])
