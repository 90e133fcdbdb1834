"""The poll-ahead of Storm spouts, on the driver without Spark (a real SQLite store).

While batch *n*'s job and commit run, each spout task's thread already calls ``next_tuple`` for batch
*n + 1* (see :mod:`weir.runtime.spark.spoutthread`): the next batch starts from what it buffered,
every call into a spout task is made on that one thread and never two at once (Storm's executor
rule), ``topology.max.spout.pending`` still bounds the un-acked tuples, tuples polled ahead are not
in the spout log and go back to the source (``fail``) when the spout closes, and the driver tells
``process_available()`` whether the spouts have more.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from weir.runtime.spark.pacing import read_more
from weir.runtime.spark.spoutlog import SpoutDriver, SpoutOptions
from weir.state.factory import StateFactory
from weir.topology import BaseRichSpout, Fields, OutputFieldsDeclarer, StatefulBolt, TopologyBuilder
from weir.topology.spout_collector import SpoutOutputCollector

QUEUE: list[str] = []  # the "broker"
EVENTS: list[tuple[str, Any]] = []
THREADS: set[int] = set()


class OneThreadSpout(BaseRichSpout):
    """A queue spout that records its calls and fails the test if two of them ever overlap."""

    def __init__(self, raise_after: int | None = None) -> None:
        self.raise_after = raise_after

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields(["word"]))

    def open(self, conf: Any, context: Any, collector: SpoutOutputCollector) -> None:
        self.collector, self.held, self.busy = collector, set(), threading.Lock()
        self.polled = 0

    def _enter(self, name: str, arg: Any = None) -> Callable[[], None]:
        assert self.busy.acquire(blocking=False), f"{name} called while another call into the spout runs"
        THREADS.add(threading.get_ident())
        EVENTS.append((name, arg))
        time.sleep(0.001)  # widen the window an overlapping call would need
        return self.busy.release

    def next_tuple(self) -> None:
        done = self._enter("next_tuple")
        try:
            if self.raise_after is not None and self.polled >= self.raise_after:
                msg = "broker connection lost"
                raise ConnectionError(msg)
            if QUEUE:
                m = QUEUE.pop(0)
                self.held.add(m)
                self.polled += 1
                self.collector.emit([m], msg_id=m)
        finally:
            done()

    def ack(self, msg_id: Any) -> bool:
        done = self._enter("ack", msg_id)
        self.held.discard(msg_id)
        done()
        return True

    def fail(self, msg_id: Any) -> None:
        done = self._enter("fail", msg_id)
        if msg_id in self.held:
            self.held.discard(msg_id)
            QUEUE.insert(0, msg_id)
        done()

    def close(self) -> None:
        QUEUE[:0] = sorted(self.held)  # the connection drops: un-acked deliveries come back first
        self.held = set()


class Count(StatefulBolt):  # type: ignore[type-arg]
    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Any) -> None:
        self.collector.ack(tup)


@pytest.fixture(autouse=True)
def _fresh() -> None:
    QUEUE.clear()
    EVENTS.clear()
    THREADS.clear()


def _driver(tmp_path: Path, spout: Any, **opts: Any) -> SpoutDriver:
    b = TopologyBuilder()
    b.set_spout("queue", spout, 1)
    b.set_bolt("count", Count()).shuffle_grouping("queue")
    backend = StateFactory.from_url(f"sqlite:///{tmp_path / 'store.db'}").backend
    return SpoutDriver("t", {}, b.create_topology(), backend, SpoutOptions(**{"poll_ms": 5000, **opts}))


def _until(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60  # generous: the machine is loaded
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def words(batch: dict[str, list[list[tuple[Any, ...]]]]) -> list[str]:
    return [rec[2][0] for part in batch["queue"] for rec in part]


def test_the_next_batch_is_polled_ahead_on_the_spout_s_one_thread_and_logged_only_when_it_starts(
    tmp_path: Path,
) -> None:
    QUEUE.extend(f"m{i}" for i in range(10))
    d = _driver(tmp_path, OneThreadSpout(), batch_max=4)
    try:
        batch, failures = d.batch(1)
        assert not failures and words(batch) == ["m0", "m1", "m2", "m3"]
        _until(lambda: len(QUEUE) == 2, "the poll-ahead of batch 2")  # while "batch 1's job" runs
        logged = {k.decode() for k, _v in d.backend.scan("$spoutlog-t")} if d.backend else set()
        assert logged == {"queue/0/00000000000000000001"}, "tuples polled ahead must not be logged yet"
        d.committed(1)
        assert [a for n, a in EVENTS if n == "ack"] == ["m0", "m1", "m2", "m3"]
        batch, failures = d.batch(2)
        assert not failures and words(batch) == ["m4", "m5", "m6", "m7"]
        d.committed(2)
        batch, _ = d.batch(3)
        assert words(batch) == ["m8", "m9"]
        d.committed(3)
        assert THREADS and threading.get_ident() not in THREADS and len(THREADS) == 1, THREADS
        assert d.timings_now()["poll_ahead_s"] > 0
    finally:
        d.close()


def test_the_poll_ahead_keeps_topology_max_spout_pending(tmp_path: Path) -> None:
    QUEUE.extend(f"m{i}" for i in range(20))
    d = _driver(tmp_path, OneThreadSpout(), batch_max=10, max_pending=5)
    try:
        batch, _ = d.batch(1)
        assert words(batch) == [f"m{i}" for i in range(5)]
        time.sleep(0.3)  # room to poll ahead if the bound were not kept
        assert len(QUEUE) == 15, "polled ahead past topology.max.spout.pending"
        d.committed(1)  # the acks free the room: the poll-ahead takes up to 5 more
        _until(lambda: len(QUEUE) == 10, "the poll-ahead after the acks")
        batch, _ = d.batch(2)
        assert words(batch) == [f"m{i}" for i in range(5, 10)]
    finally:
        d.close()


def test_closing_fails_what_was_polled_ahead_so_the_source_redelivers_it(tmp_path: Path) -> None:
    QUEUE.extend(f"m{i}" for i in range(6))
    d = _driver(tmp_path, OneThreadSpout(), batch_max=3)
    d.batch(1)
    _until(lambda: not QUEUE, "the poll-ahead of batch 2")
    d.committed(1)
    d.close()
    assert [a for n, a in EVENTS if n == "fail"] == ["m3", "m4", "m5"]
    assert sorted(QUEUE) == ["m3", "m4", "m5"], "tuples polled ahead were not returned to the source"


def test_next_tuple_raising_ahead_fails_the_next_batch_naming_the_spout_and_task(tmp_path: Path) -> None:
    QUEUE.extend(f"m{i}" for i in range(6))
    d = _driver(tmp_path, OneThreadSpout(raise_after=3), batch_max=3)
    try:
        batch, failures = d.batch(1)
        assert not failures and words(batch) == ["m0", "m1", "m2"]
        d.committed(1)
        _, failures = d.batch(2)
        assert [(f.component, f.task) for f in failures] == [("queue", 0)]
        assert "ConnectionError in next_tuple of spout 'queue' task 0: broker connection lost" in failures[0].error
    finally:
        d.close()


def test_the_driver_says_whether_the_spouts_have_more_for_process_available(tmp_path: Path) -> None:
    QUEUE.extend(f"m{i}" for i in range(5))
    d = _driver(tmp_path, OneThreadSpout(), batch_max=3, poll_ahead=False)
    try:
        d.batch(1)
        d.committed(1)
        assert read_more(d.more_file) is True  # cut at weir.spout.batch.max.tuples: there may be more
        batch, _ = d.batch(2)
        assert words(batch) == ["m3", "m4"]
        d.committed(2)
        assert read_more(d.more_file) is False  # next_tuple emitted nothing: the source ran dry
    finally:
        d.close()
    assert json.dumps(read_more(d.more_file)) == "false"  # closed: the file is gone
    again = _driver(tmp_path, OneThreadSpout(), batch_max=3, poll_ahead=False)  # a restarted driver
    again.committed(2)  # a replay of a committed batch (nothing polled): there may be more
    assert read_more(again.more_file) is True
    again.close()


def test_a_redelivery_polled_ahead_and_acked_with_its_committed_batch_is_not_counted_again(tmp_path: Path) -> None:
    QUEUE.extend(f"m{i}" for i in range(6))
    first = _driver(tmp_path, OneThreadSpout(), batch_max=3, poll_ahead=False)
    first.batch(1)  # logged; then the driver dies: the broker requeues m0..m2
    first.close()
    assert QUEUE == [f"m{i}" for i in range(6)]
    second = _driver(tmp_path, OneThreadSpout(), batch_max=3)
    try:
        replay, _ = second.batch(1)
        assert words(replay) == ["m0", "m1", "m2"]
        _until(lambda: QUEUE == ["m3", "m4", "m5"], "the poll-ahead of the redelivered m0..m2")
        second.committed(1)  # acked through the redelivered deliveries the poll-ahead holds
        assert [a for n, a in EVENTS if n == "ack"] == ["m0", "m1", "m2"]
        nxt, _ = second.batch(2)
        assert words(nxt) == ["m3", "m4", "m5"], "a redelivery acked with its committed batch was emitted again"
    finally:
        second.close()
