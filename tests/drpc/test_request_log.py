"""The DRPC request log, answers and registry on real stores (no Spark): expiry, replays, pruning, refusals."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from weir.drpc import Client, DRPCTimeoutError, DRPCUnknownFunctionError
from weir.drpc.store import (
    REGISTRY_NAMESPACE,
    Answer,
    Request,
    log_namespace,
    queue_namespace,
    registry_key,
    results_namespace,
)
from weir.errors import ConfigError, TopologyError
from weir.runtime.spark.trident import drpc as drpc_runtime
from weir.runtime.spark.trident.drpc import DrpcDriver, DrpcFunction, DrpcOptions
from weir.state import StateFactory

STORES = ["sqlite", "redis", "postgres"]


def _driver(backend: Any, topology: str = "t", batch_max: int = 1000) -> DrpcDriver:
    return DrpcDriver(topology, [DrpcFunction("f", ("sum",), True)], backend, DrpcOptions(batch_max))


def _enqueue(backend: Any, rid: str, args: str, deadline_ms: int, at_ms: int = 0) -> None:
    backend.write_direct(
        queue_namespace("f"), {rid.encode(): Request("f", rid, args, deadline_ms, at_ms).to_bytes()}, None
    )


@pytest.mark.parametrize("provider_url", STORES, indirect=True)
def test_take_logs_replays_expires_and_prunes(provider_url: str) -> None:
    backend = StateFactory.from_url(provider_url).backend
    driver = _driver(backend, batch_max=2)
    driver.register()
    now = int(time.time() * 1000)
    _enqueue(backend, "a", "x", now + 600_000, 1)
    _enqueue(backend, "b", "y", now + 600_000, 2)
    _enqueue(backend, "c", "z", now + 600_000, 3)
    _enqueue(backend, "old", "w", now - 1)  # its deadline has passed
    first = driver.take(5)
    assert [r.rid for r in first["f"]] == ["a", "b"]  # oldest first, weir.drpc.batch.max.requests = 2
    assert driver.take(5) == first  # a retried txid takes exactly the same requests
    expired = Answer.from_bytes(backend.get(results_namespace("f"), b"old"), "old")
    assert expired.status == "expired" and "deadline passed" in expired.error
    assert backend.get(queue_namespace("f"), b"old") is None
    # a new driver (after a crash: txid 5 committed, never answered) takes the logged requests again
    again = _driver(backend, batch_max=2)
    second = again.take(6)
    assert [r.rid for r in second["f"]] == ["a", "b"]  # the leftovers fill the batch's 2 requests
    assert [int(k) for k, _ in backend.scan(log_namespace("t"))] == [6]  # txid 5's entry moved to 6
    again.answered(6, {"f": {r.rid: Answer("ok", [[1]], txid=6, deadline_ms=r.deadline_ms) for r in second["f"]}})
    assert list(backend.scan(log_namespace("t"))) == []
    assert [k for k, _ in backend.scan(queue_namespace("f"))] == [b"c"]  # answered requests left the queue
    assert [r.rid for r in again.take(7)["f"]] == ["c"]
    # an answer already there is kept (exactly one answer per request)
    again.answered(6, {"f": {"a": Answer("ok", [[99]], txid=7)}})
    assert Answer.from_bytes(backend.get(results_namespace("f"), b"a"), "a").tuples == [[1]]
    # an answer nobody read is removed a minute after its deadline
    stale = Answer("ok", [[3]], txid=6, deadline_ms=now - drpc_runtime.UNREAD_KEEP_MS - 1)
    backend.write_direct(results_namespace("f"), {b"gone": stale.to_bytes()}, None)
    again._housekept = 0.0
    again.take(8)
    assert backend.get(results_namespace("f"), b"gone") is None
    assert backend.get(results_namespace("f"), b"a") is not None


@pytest.mark.parametrize("provider_url", ["sqlite"], indirect=True)
def test_registry_refusals_and_client_errors(provider_url: str) -> None:
    backend = StateFactory.from_url(provider_url).backend
    _driver(backend, "first").register()
    with pytest.raises(
        TopologyError,
        match=r"DRPC function 'f' is already served by topology 'first'.*delete '\$drpc' fn/f --key-class str",
    ):
        _driver(backend, "second").register()
    reg = json.loads(backend.get(REGISTRY_NAMESPACE, registry_key("f")))
    assert reg["topology"] == "first" and reg["single"] is True
    client = Client(provider_url)
    assert client.functions() == {"f": "first"}
    with pytest.raises(DRPCUnknownFunctionError, match=r"'g'.*'f' \(first\)"):
        client.execute("g", "x")
    with pytest.raises(ConfigError, match="args must be a str"):
        client.execute("f", 3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="store URL"):
        Client("nowhere")
    # nobody takes the request: a named timeout, and the request is withdrawn
    with pytest.raises(DRPCTimeoutError, match=r"function 'f', request \w+: no answer after 0\.\d s") as err:
        client.execute("f", "x", timeout=0.3)
    assert err.value.function == "f" and err.value.waited >= 0.3
    assert list(backend.scan(queue_namespace("f"))) == []


@pytest.mark.parametrize("provider_url", ["sqlite"], indirect=True)
def test_a_logged_request_past_its_deadline_after_a_crash_is_failed_not_run(provider_url: str) -> None:
    backend = StateFactory.from_url(provider_url).backend
    _enqueue(backend, "soon", "x", int(time.time() * 1000) + 300)
    assert [r.rid for r in _driver(backend).take(1)["f"]] == ["soon"]  # logged under txid 1, then the driver dies
    time.sleep(0.5)  # the deadline passes before the restart
    assert _driver(backend).take(2) == {}  # the restarted driver does not run it ...
    answer = Answer.from_bytes(backend.get(results_namespace("f"), b"soon"), "soon")
    assert answer.status == "expired" and answer.txid == 2  # ... it fails it
    assert list(backend.scan(log_namespace("t"))) == [] and list(backend.scan(queue_namespace("f"))) == []


@pytest.mark.parametrize("provider_url", STORES, indirect=True)
def test_a_driver_killed_inside_answered_is_finished_by_the_next_take(provider_url: str) -> None:
    """The state ``drpc_after_answers`` / ``drpc_after_dequeue`` leave: nothing runs twice, nothing stays."""
    backend = StateFactory.from_url(provider_url).backend
    now = int(time.time() * 1000)
    for rid in ("kept", "read", "gone", "open"):
        _enqueue(backend, rid, rid, now + 600_000)
    assert sorted(r.rid for r in _driver(backend).take(1)["f"]) == ["gone", "kept", "open", "read"]
    # the driver died inside answered(1): answers of "kept" and "read" written, nothing dequeued
    answers = {rid: Answer("ok", [[len(rid)]], txid=1, deadline_ms=now + 600_000) for rid in ("kept", "read")}
    backend.write_direct(results_namespace("f"), {k.encode(): a.to_bytes() for k, a in answers.items()}, None)
    # the client of "read" took its answer and withdrew; the client of "gone" gave up (timeout)
    backend.write_direct(results_namespace("f"), {b"read": None}, None)
    backend.write_direct(queue_namespace("f"), {b"read": None, b"gone": None}, None)
    _enqueue(backend, "new", "n", now + 600_000)
    restarted = _driver(backend)
    taken = restarted.take(2)
    assert sorted(r.rid for r in taken["f"]) == ["new", "open"]  # only what is still asked and unanswered
    assert sorted(k for k, _ in backend.scan(queue_namespace("f"))) == [b"new", b"open"]  # "kept" dequeued
    assert [k for k, _ in backend.scan(results_namespace("f"))] == [b"kept"]  # no answer nobody reads
    assert Answer.from_bytes(backend.get(results_namespace("f"), b"kept"), "kept").tuples == [[4]]
    restarted.answered(2, {"f": {r.rid: Answer("ok", [[0]], txid=2) for r in taken["f"]}})
    assert list(backend.scan(log_namespace("t"))) == [] and list(backend.scan(queue_namespace("f"))) == []
    assert sorted(k for k, _ in backend.scan(results_namespace("f"))) == [b"kept", b"new", b"open"]
