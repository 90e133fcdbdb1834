"""The RabbitMQ broker SIGKILLed between ``next_tuple`` and the batch's commit (the driver side, no Spark).

Against a real broker, two spout tasks, the spout log in a real SQLite store. Task 0 emits and logs
its batch; task 1's ``next_tuple`` raises once (the attempt fails), then the broker is SIGKILLed:
task 0's deliveries are requeued while its entry is still uncommitted. While the broker is down the
retry fails with a :class:`~weir.errors.TransientSourceError` naming the broker (bounded reconnect).
Once it is back on the same port and data directory, task 1 connects again and gets task 0's
messages redelivered: they are not emitted twice, and task 1 acks them once task 0's entry is
committed (task 0's own acks died with its connection). At the end every message was emitted once,
acked on the broker once and only after its batch was committed, and the queue is empty. The second
test has one task and a committed batch whose acks die with the broker: they are sent when the
restarted broker redelivers the messages, which are not emitted again. Both run with the
poll-ahead on (the default), so the reconnect and the redeliveries happen on the spout's own thread
while the test waits for the broker.

The broker itself can lose the test's queue: RabbitMQ 3.10 sometimes comes back from a SIGKILL
without a durable queue declared just before it (about 1 restart in 8 under load here), messages
and all, and the spout's reconnect declares it again, empty (the spout warns and counts it in
``stats["vanished"]``). Then there is nothing to redeliver and the scenario did not happen: it is
run again on a new queue (at most three times), never silently passed.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers import RabbitMQServer
from weir.connectors.rabbitmq.spout import RabbitMQSpout
from weir.runtime.spark.spoutlog import SpoutDriver, SpoutOptions
from weir.state.factory import StateFactory
from weir.topology import StatefulBolt, TopologyBuilder

pytestmark = [pytest.mark.services, pytest.mark.slow]

N = 10
QUEUE = "broker_loss"
ATTEMPTS = 3  # runs of a scenario whose queue the broker lost in its restart (see the module docstring)
#: (message id, whether its batch was committed when the broker confirmed the ack)
ACKS: list[tuple[str, bool]] = []
COMMITTED: set[str] = set()  # ids of batches the test reported COMMITTED to the driver
RAISE: set[tuple[int, int]] = set()  # (task, call): next_tuple raises on that call of that task, once


class ProbeSpout(RabbitMQSpout):
    """The real spout; records every ack the broker confirmed, and raises once where told."""

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.task = context.task_index
        self.calls = 0
        super().open(conf, context, collector)

    def next_tuple(self) -> None:
        self.calls += 1
        if (self.task, self.calls) in RAISE:
            RAISE.discard((self.task, self.calls))
            msg = "next_tuple failed (injected)"
            raise RuntimeError(msg)
        super().next_tuple()

    def flush_acks(self) -> None:
        ids = list(self._acked_ids)
        super().flush_acks()  # raising: nothing was confirmed
        ACKS.extend((str(i), str(i) in COMMITTED) for i in ids)


class Count(StatefulBolt):  # type: ignore[type-arg]
    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Any) -> None:
        self.collector.ack(tup)


def _publish(url: str, queue: str = QUEUE) -> None:
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.queue_declare(queue, durable=True)
    ch.queue_purge(queue)
    ch.confirm_delivery()  # persistent and confirmed: on disk before the broker is killed
    for i in range(N):
        ch.basic_publish("", queue, f"m{i}".encode(), pika.BasicProperties(message_id=f"m{i}", delivery_mode=2))
    conn.close()


def _queue_depth(url: str, queue: str = QUEUE) -> int:
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    depth = int(conn.channel().queue_declare(queue, durable=True, passive=True).method.message_count)
    conn.close()
    return depth


def _ids(batch: dict[str, list[list[tuple[Any, ...]]]]) -> list[str]:
    return [rec[2][0] for part in batch["queue"] for rec in part]


class _Vanished(logging.Handler):
    """Counts the spout's warnings that the broker lost the queue (from any task instance, closed ones too)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "the queue no longer exists" in record.getMessage():
            self.count += 1


@contextlib.contextmanager
def _watch_vanished() -> Iterator[_Vanished]:
    handler = _Vanished()
    logger = logging.getLogger("weir.sources")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def _vanished(d: SpoutDriver, watch: _Vanished) -> bool:
    """Whether a spout task of ``d`` found its queue gone after the restart (the broker lost it)."""
    tasks = d.tasks["queue"]
    return watch.count > 0 or any(isinstance(t.spout, RabbitMQSpout) and t.spout.stats["vanished"] for t in tasks)


@pytest.mark.timeout(1500)
def test_broker_killed_before_commit_redeliveries_are_settled_once(
    rabbitmq_server: RabbitMQServer, tmp_path: Path
) -> None:
    for attempt in range(ATTEMPTS):
        if _broker_killed_before_commit(rabbitmq_server, tmp_path / str(attempt), f"{QUEUE}_{attempt}"):
            return
    pytest.fail(f"the broker lost the test's queue in {ATTEMPTS} restarts out of {ATTEMPTS}")


def _broker_killed_before_commit(rabbitmq_server: RabbitMQServer, tmp_path: Path, queue: str) -> bool:
    """The scenario of the first test; ``False`` when the broker lost the queue in its restart."""
    with _watch_vanished() as watch:
        return _broker_killed_before_commit_run(rabbitmq_server, tmp_path, queue, watch)


def _broker_killed_before_commit_run(
    rabbitmq_server: RabbitMQServer, tmp_path: Path, queue: str, watch: _Vanished
) -> bool:
    tmp_path.mkdir()
    ACKS.clear()
    COMMITTED.clear()
    RAISE.clear()
    url = rabbitmq_server.url
    _publish(url, queue)
    spout = ProbeSpout(url, queue, ["line"], prefetch=3, max_per_call=3, connect_timeout_s=2)
    b = TopologyBuilder()
    b.set_spout("queue", spout, 2)
    b.set_bolt("count", Count()).shuffle_grouping("queue")
    backend = StateFactory.from_url(f"sqlite:///{tmp_path / 'store.db'}").backend
    d = SpoutDriver("t", {}, b.create_topology(), backend, SpoutOptions(batch_max=3, poll_ms=3000))
    emitted: dict[int, list[str]] = {}  # txid -> ids of its last attempt

    RAISE.add((1, 1))
    batch, failures = d.batch(1)
    assert [(f.component, f.task) for f in failures] == [("queue", 1)]
    first = _ids(batch)
    assert first, "task 0 emitted nothing"
    rabbitmq_server.kill()  # task 0's deliveries are emitted and logged, not committed, not acked
    try:
        _, failures = d.batch(1)  # the retry while the broker is down: task 1 cannot connect
        assert [(f.component, f.task) for f in failures] == [("queue", 1)]
        assert "TransientSourceError" in failures[0].error and "connect_timeout_s=2" in failures[0].error
        assert f"127.0.0.1:{rabbitmq_server.port}" in failures[0].error
    finally:
        rabbitmq_server.start()  # the same node, port and data directory

    txid = 1
    for _ in range(40):
        batch, failures = d.batch(txid)
        if failures:  # a broker still starting its listener: retried, as the coordinator does
            continue
        emitted[txid] = _ids(batch)
        COMMITTED.update(emitted[txid])
        d.committed(txid)
        txid += 1
        done = sum(len(v) for v in emitted.values()) >= N and not dict(backend.scan("$spoutlog-t"))
        if done and len(ACKS) >= N:
            break
    tasks = d.tasks["queue"]
    stats = [t.spout.stats if isinstance(t.spout, RabbitMQSpout) else {} for t in tasks]
    vanished = _vanished(d, watch)
    d.close()
    if vanished:
        return False

    assert emitted[1][: len(first)] == first  # the same tuples for the same txid, from the log
    all_ids = Counter(i for ids in emitted.values() for i in ids)
    assert all_ids == Counter({f"m{i}": 1 for i in range(N)}), f"not emitted exactly once: {emitted}"
    assert Counter(i for i, _c in ACKS) == Counter({f"m{i}": 1 for i in range(N)}), f"acks: {ACKS}"
    assert all(c for _i, c in ACKS), f"acked before the batch was committed: {ACKS}"
    assert sum(s.get("losses", 0) for s in stats) >= 1 and sum(s.get("redelivered", 0) for s in stats) >= 1, stats
    assert dict(backend.scan("$spoutlog-t")) == {}
    assert _queue_depth(url, queue) == 0  # nothing left un-acked (closing requeues what is) nor undelivered
    return True


@pytest.mark.timeout(1500)
def test_acks_lost_with_the_broker_are_sent_when_it_redelivers(rabbitmq_server: RabbitMQServer, tmp_path: Path) -> None:
    """One task; the broker is SIGKILLed and restarted after ``next_tuple``, before the commit.

    The commit's acks cannot reach the broker: with the poll-ahead, the spout's thread has already
    seen the connection die and connected again (its held tags are void, ``ack`` returns ``False``);
    without it, ``flush_acks`` fails (its ``basic.qos`` round trip cannot succeed). Either way the
    ids stay in the log as unsettled, and when the broker redelivers them the spout acks them
    without emitting them.
    """
    for attempt in range(ATTEMPTS):
        if _acks_lost_with_the_broker(rabbitmq_server, tmp_path / str(attempt), attempt):
            return
    pytest.fail(f"the broker lost the test's queue in {ATTEMPTS} restarts out of {ATTEMPTS}")


def _acks_lost_with_the_broker(rabbitmq_server: RabbitMQServer, tmp_path: Path, attempt: int) -> bool:
    """The scenario of the second test; ``False`` when the broker lost the queue in its restart."""
    with _watch_vanished() as watch:
        return _acks_lost_with_the_broker_run(rabbitmq_server, tmp_path, attempt, watch)


def _acks_lost_with_the_broker_run(
    rabbitmq_server: RabbitMQServer, tmp_path: Path, attempt: int, watch: _Vanished
) -> bool:
    import json

    tmp_path.mkdir()
    ACKS.clear()
    COMMITTED.clear()
    RAISE.clear()
    url = rabbitmq_server.url
    # a queue of its own: the spout remembers the ids it acked per queue (RECENT_ACKS), and the
    # first test acked these ids on QUEUE
    queue = f"{QUEUE}_acks_{attempt}"
    _publish(url, queue)
    spout = ProbeSpout(url, queue, ["line"], prefetch=4, max_per_call=4, connect_timeout_s=120)
    b = TopologyBuilder()
    b.set_spout("queue", spout, 1)
    b.set_bolt("count", Count()).shuffle_grouping("queue")
    backend = StateFactory.from_url(f"sqlite:///{tmp_path / 'store.db'}").backend
    d = SpoutDriver("t", {}, b.create_topology(), backend, SpoutOptions(batch_max=4, poll_ms=3000))
    batch, failures = d.batch(1)
    assert not failures
    first = _ids(batch)
    assert first
    rabbitmq_server.kill_and_restart()  # the same node, port and data directory
    COMMITTED.update(first)
    d.committed(1)  # the acks die with the connection: kept in the log until redelivered
    log = [json.loads(v) for _k, v in backend.scan("$spoutlog-t")]
    if ACKS:  # the poll-ahead got the redeliveries before the commit: acked through the new connection
        assert sorted(ACKS) == sorted((i, True) for i in first) and log == [], (ACKS, log)
    else:
        assert [sorted(e["unsettled"]) for e in log] == [sorted(first)], log
    emitted = {1: first}
    for txid in range(2, 12):
        batch, failures = d.batch(txid)
        assert not failures, failures
        emitted[txid] = _ids(batch)
        COMMITTED.update(emitted[txid])
        d.committed(txid)
        if len(ACKS) >= N and not dict(backend.scan("$spoutlog-t")):
            break
    stats = d.tasks["queue"][0].spout.stats if isinstance(d.tasks["queue"][0].spout, RabbitMQSpout) else {}
    vanished = _vanished(d, watch)
    d.close()
    if vanished:
        return False
    assert Counter(i for ids in emitted.values() for i in ids) == Counter({f"m{i}": 1 for i in range(N)}), emitted
    assert Counter(i for i, _c in ACKS) == Counter({f"m{i}": 1 for i in range(N)}), f"acks: {ACKS}"
    assert all(c for _i, c in ACKS), f"acked before the batch was committed: {ACKS}"
    assert stats["losses"] == 1 and stats["redelivered"] >= len(first) and stats["reacked"] == 0, stats
    assert _queue_depth(url, queue) == 0
    return True
