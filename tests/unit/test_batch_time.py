"""The batch time state TTL decides expiry from: taken once per transaction, kept for its replays.

The coordinator records it with ``PREPARING(n)`` (``batch_ms``, ``batch_txid``); a retried batch and a
batch replayed after a crash (recovery rolled ``PREPARING(n)`` back) see the same time, so they see
the same expiries. Uses the fake driver of ``test_coordinator`` over a real in-process store.
"""

from __future__ import annotations

import pytest

from tests.unit.test_coordinator import TOPO, Crash, Driver, stored
from weir.checkpoint import JobOutcome
from weir.state import ttl
from weir.state.kv import TransactionalKeyValueState
from weir.state.memory import MemoryBackend


class Clock:
    """A clock the test drives: each call returns the next scripted time."""

    def __init__(self, *times: int) -> None:
        self.times = list(times)
        self.calls: list[int] = []

    def __call__(self, txid: int) -> int:
        self.calls.append(txid)
        return self.times.pop(0)


def seen_times(driver: Driver) -> list[tuple[int, int | None, int]]:
    """Wrap the driver's job: record (txid, recorded txid, recorded time) as each attempt's tasks see it."""
    seen: list[tuple[int, int | None, int]] = []
    job = driver.job

    def run(txid: int, epoch: int, attempt: int) -> JobOutcome:
        seen.append((txid, *ttl.batch_time(driver.backend, TOPO)))
        return job(txid, epoch, attempt)

    driver.coord_job = run  # type: ignore[attr-defined]
    return seen


def batch(driver: Driver, batch_id: int) -> None:
    driver.coord.run_batch("q1", batch_id, driver.coord_job)  # type: ignore[attr-defined]


def test_a_retried_batch_keeps_its_time_and_time_never_goes_back() -> None:
    backend = MemoryBackend("batch-time-retry")
    d = Driver(backend)
    d.coord.clock = Clock(5000, 4000, 9000)
    seen = seen_times(d)
    d.job.fail = {(1, 0)}  # txid 1 fails once, then succeeds
    d.start()
    batch(d, 0)
    batch(d, 1)  # the clock went back to 4000: the batch keeps 5000
    batch(d, 2)
    assert seen == [(1, 1, 5000), (1, 1, 5000), (2, 2, 5000), (3, 3, 9000)]
    assert d.coord.clock.calls == [1, 2, 3]  # type: ignore[attr-defined]
    rec = stored(backend)
    assert (rec.batch_txid, rec.batch_ms) == (3, 9000)


def test_a_batch_replayed_after_a_crash_sees_the_time_of_its_first_attempt() -> None:
    backend = MemoryBackend("batch-time-crash")
    first = Driver(backend)
    first.coord.clock = Clock(1000, 2000)
    seen1 = seen_times(first)
    first.job.crash = 2
    first.start()
    batch(first, 0)
    with pytest.raises(Crash):
        batch(first, 1)  # dies with txid 2 PREPARING at time 2000
    second = Driver(backend)
    second.coord.clock = Clock(7777, 8888)
    seen2 = seen_times(second)
    second.start()
    batch(second, 1)  # recovery rolls txid 2 back; its replay keeps time 2000
    batch(second, 2)
    assert seen1 == [(1, 1, 1000), (2, 2, 2000)]
    assert seen2 == [(2, 2, 2000), (3, 3, 7777)]


def test_a_task_state_decides_expiry_at_the_recorded_batch_time() -> None:
    backend = MemoryBackend("batch-time-state")
    d = Driver(backend)
    d.coord.clock = Clock(1000, 3000)
    ns = f"{TOPO}-ttl-0"
    times: list[int] = []

    def job(txid: int, epoch: int, attempt: int) -> JobOutcome:
        s = TransactionalKeyValueState(backend, ns, epoch=epoch, topology=TOPO)
        if txid == 1:
            s.put("k", "v", ttl=2000)  # expires at 3000
        times.append(s.batch_time_ms())
        s.prepare_commit(txid)  # the coordinator commits it
        return JobOutcome()

    d.participants.namespaces = [ns]
    d.start()
    d.coord.run_batch("q1", 0, job)
    assert dict(TransactionalKeyValueState(backend, ns)) == {"k": "v"}  # an outside reader at time 1000
    d.coord.run_batch("q1", 1, job)
    assert times == [1000, 3000]
    assert dict(TransactionalKeyValueState(backend, ns)) == {}
    assert [k for k, _ in backend.scan(ns) if not ttl.is_reserved(k)] == []
