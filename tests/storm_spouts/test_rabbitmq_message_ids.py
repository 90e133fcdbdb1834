"""Which RabbitMQ deliveries are one message: ids, the acked-id memory, and repeated bodies (real broker, no Spark).

The driver remembers the ids it acked per broker and queue (``RECENT_ACKS``) so that a copy the
broker redelivers after losing the ack is acked again, not counted. That memory is trusted only for
the AMQP ``message_id`` property of a ``redelivered`` delivery; a message without ``message_id``
gets an id of its own delivery, never its body, so two messages with the same body are both counted.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.servers import RabbitMQServer
from weir.connectors.rabbitmq.spout import RabbitMQSpout
from weir.runtime.spark.spoutlog import SpoutDriver, SpoutOptions
from weir.state.factory import StateFactory
from weir.topology import StatefulBolt, TopologyBuilder

pytestmark = [pytest.mark.services]


class Count(StatefulBolt):  # type: ignore[type-arg]
    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Any) -> None:
        self.collector.ack(tup)


def _channel(url: str, queue: str) -> tuple[Any, Any]:
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.queue_declare(queue, durable=True)
    ch.confirm_delivery()
    return conn, ch


def _publish(url: str, queue: str, bodies: list[str], ids: list[str | None]) -> None:
    import pika

    conn, ch = _channel(url, queue)
    for body, mid in zip(bodies, ids, strict=True):
        ch.basic_publish("", queue, body.encode(), pika.BasicProperties(message_id=mid, delivery_mode=2))
    conn.close()


def _make_redelivered(url: str, queue: str, n: int) -> None:
    """Take ``n`` messages on another connection and close it unacked: the broker requeues them ``redelivered``."""
    conn, ch = _channel(url, queue)
    got = 0
    for method, _props, _body in ch.consume(queue, inactivity_timeout=10):
        assert method is not None, "the broker delivered nothing within 10 s"
        got += 1
        if got == n:
            break
    conn.close()


def _depth(url: str, queue: str) -> int:
    conn, ch = _channel(url, queue)
    depth = int(ch.queue_declare(queue, durable=True, passive=True).method.message_count)
    conn.close()
    return depth


def _driver(url: str, queue: str, tmp_path: Path, **kw: Any) -> SpoutDriver:
    """A spout driver (one task) on ``queue``; a second one in the test shares the process's acked-id memory."""
    spout = RabbitMQSpout(url, queue, ["line"], id_field="id", prefetch=10, max_per_call=10, **kw)
    b = TopologyBuilder()
    b.set_spout("queue", spout, 1)
    b.set_bolt("count", Count()).shuffle_grouping("queue")
    backend = StateFactory.from_url(f"sqlite:///{tmp_path / 'store.db'}").backend
    return SpoutDriver("t", {}, b.create_topology(), backend, SpoutOptions(batch_max=10, poll_ms=2000))


def _run(d: SpoutDriver, first: int, batches: int) -> list[tuple[str, str]]:
    """``batches`` batches from txid ``first``, each committed: the (body, id) emitted."""
    out = []
    for txid in range(first, first + batches):
        batch, failures = d.batch(txid)
        assert not failures, failures
        out += [(rec[2][0], rec[2][1]) for part in batch["queue"] for rec in part]
        d.committed(txid)
    return out


def _stats(d: SpoutDriver) -> dict[str, int]:
    spout = d.tasks["queue"][0].spout
    assert isinstance(spout, RabbitMQSpout)
    return dict(spout.stats)


@pytest.mark.timeout(300)
def test_same_body_twice_without_message_id_is_counted_twice(rabbitmq_server: RabbitMQServer, tmp_path: Path) -> None:
    url, queue = rabbitmq_server.url, f"ids_body_{uuid.uuid4().hex[:8]}"
    _publish(url, queue, ["the cat", "the cat", "a dog"], [None, None, None])
    d = _driver(url, queue, tmp_path)
    try:
        got = _run(d, 1, 2)
    finally:
        d.close()  # stops consuming: the next copy is made redelivered by another consumer
    assert Counter(b for b, _i in got) == Counter({"the cat": 2, "a dog": 1}), got
    assert len({i for _b, i in got}) == 3, f"each delivery has an id of its own: {got}"
    # the same body again, redelivered, after this process acked "the cat": a new message, counted
    _publish(url, queue, ["the cat"], [None])
    _make_redelivered(url, queue, 1)
    d = _driver(url, queue, tmp_path)
    try:
        again = _run(d, 3, 2)
        stats = _stats(d)
    finally:
        d.close()
    assert [b for b, _i in again] == ["the cat"], again
    assert stats["redelivered"] == 1 and stats["reacked"] == 0, stats
    assert _depth(url, queue) == 0


@pytest.mark.timeout(300)
def test_a_redelivered_copy_of_an_acked_message_id_is_acked_not_counted(
    rabbitmq_server: RabbitMQServer, tmp_path: Path
) -> None:
    url, queue = rabbitmq_server.url, f"ids_prop_{uuid.uuid4().hex[:8]}"
    _publish(url, queue, ["the cat", "the cat"], ["m1", "m2"])
    d = _driver(url, queue, tmp_path)
    try:
        got = _run(d, 1, 2)
    finally:
        d.close()
    assert sorted(got) == [("the cat", "m1"), ("the cat", "m2")], got  # same body, two ids: both counted
    # the broker lost m1's ack (as a killed broker does): a copy of m1 comes back redelivered; and m3,
    # redelivered too but never acked by this process, is a message to count
    _publish(url, queue, ["the cat", "a dog"], ["m1", "m3"])
    _make_redelivered(url, queue, 2)
    d = _driver(url, queue, tmp_path)
    try:
        again = _run(d, 3, 2)
        stats = _stats(d)
    finally:
        d.close()
    assert again == [("a dog", "m3")], f"a redelivered copy of an acked message_id was counted again: {again}"
    assert stats["redelivered"] == 2 and stats["reacked"] == 1, stats
    assert _depth(url, queue) == 0


@pytest.mark.timeout(300)
def test_an_id_from_a_message_id_function_is_never_acked_from_memory(
    rabbitmq_server: RabbitMQServer, tmp_path: Path
) -> None:
    """A user's ``message_id=`` function may repeat an id (a body field): the memory does not trust it."""
    url, queue = rabbitmq_server.url, f"ids_fn_{uuid.uuid4().hex[:8]}"
    _publish(url, queue, ["k1 the cat"], [None])

    def by_field(body: str, _props: Any) -> str:
        return body.split(" ", 1)[0]

    d = _driver(url, queue, tmp_path, message_id=by_field)
    try:
        assert _run(d, 1, 2) == [("k1 the cat", "k1")]
    finally:
        d.close()
    _publish(url, queue, ["k1 the cat"], [None])
    _make_redelivered(url, queue, 1)
    d = _driver(url, queue, tmp_path, message_id=by_field)
    try:
        again = _run(d, 3, 2)
        stats = _stats(d)
    finally:
        d.close()
    assert again == [("k1 the cat", "k1")], again  # counted: a repeated function id is not trusted
    assert stats["redelivered"] == 1 and stats["reacked"] == 0, stats
    assert _depth(url, queue) == 0
