"""``fail(msg_id)`` on Storm's tuple timeout: a batch retried past ``topology.message.timeout.secs``.

Against a real RabbitMQ broker: the first attempt of a batch outlives the message timeout and
fails; the retry calls ``fail`` for the batch's tuples (``basic.nack`` with requeue, so the broker
redelivers them), replays the same tuples from the spout log and commits. Every message ends counted
exactly once and acked on the broker exactly once, after its count was committed; none is left.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.servers import RabbitMQServer
from tests.storm_spouts._topology import SlowFirstAttempt, all_counts, rabbit_spout, topology

pytestmark = [pytest.mark.spark, pytest.mark.services]

N = 8


def test_a_batch_retried_past_the_message_timeout_fails_its_tuples_and_counts_them_once(
    spark: Any, rabbitmq_server: RabbitMQServer, redis_server: Any, postgres_url: str, tmp_path: Path
) -> None:
    import pika
    import redis

    name = "spouts_timeout"
    conn = pika.BlockingConnection(pika.URLParameters(rabbitmq_server.url))
    ch = conn.channel()
    ch.queue_declare("timeouts", durable=True)
    for i in range(N):
        ch.basic_publish("", "timeouts", f"m{i} w{i % 3}".encode(), pika.BasicProperties(message_id=f"m{i}"))
    conn.close()
    record = f"redis://127.0.0.1:{redis_server.port}/0"
    spout = rabbit_spout(rabbitmq_server.url, "timeouts", record, postgres_url, name)
    conf = {
        "weir.state.dir": str(tmp_path / "state"),
        "topology.state.provider.config": {"url": postgres_url},
        "topology.state.checkpoint.interval.ms": 300,
        "topology.message.timeout.secs": 1,
        "weir.batch.max.retries": 2,
    }
    run = weir.submit(name, conf, topology(spout, count=SlowFirstAttempt(str(tmp_path / "slow"), 2.5)), spark)
    rec = redis.Redis.from_url(record)
    run.start()
    try:
        deadline = time.monotonic() + 300
        while len(all_counts(postgres_url, name)) < N or rec.llen(f"{name}:acks") < N:
            assert run.query.isActive, f"the topology stopped: {run.status().error}"
            assert time.monotonic() < deadline, f"not done: {all_counts(postgres_url, name)}"
            time.sleep(0.3)
    finally:
        run.stop()
    assert all_counts(postgres_url, name) == {f"m{i}": 1 for i in range(N)}
    fails = [json.loads(x) for x in rec.lrange(f"{name}:fails", 0, -1)]
    assert fails and set(fails) <= {f"m{i}" for i in range(N)}, f"no fail() on the timed-out retry: {fails}"
    acks = [json.loads(x) for x in rec.lrange(f"{name}:acks", 0, -1)]
    assert Counter(m for m, _ in acks) == Counter({f"m{i}": 1 for i in range(N)}), f"acks: {acks}"
    assert all(committed == 1 for _, committed in acks), f"acked before committed: {acks}"
    conn = pika.BlockingConnection(pika.URLParameters(rabbitmq_server.url))
    q = conn.channel().queue_declare("timeouts", durable=True, passive=True).method
    conn.close()
    assert q.message_count == 0, f"{q.message_count} message(s) left in the queue"
