"""Equal messages on a Redis queue with the default id (the message itself), against a real Redis (no Spark).

A spout task that takes a message whose id it already holds (an equal message in a batch not
committed yet) keeps the copy in its processing list and emits it once the first one is acked: both
are counted, one batch apart, and nothing is left in the queue or the processing list.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from weir.connectors.redis.queue_spout import RedisQueueSpout
from weir.runtime.spark.spoutlog import SpoutDriver, SpoutOptions
from weir.state.factory import StateFactory
from weir.topology import StatefulBolt, TopologyBuilder

pytestmark = [pytest.mark.services]


class Count(StatefulBolt):  # type: ignore[type-arg]
    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Any) -> None:
        self.collector.ack(tup)


@pytest.mark.parametrize("poll_ahead", [True, False])
def test_equal_messages_are_each_counted_once(redis_server: Any, tmp_path: Path, poll_ahead: bool) -> None:
    import redis

    url = f"redis://127.0.0.1:{redis_server.port}/0"
    queue = f"eq-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(url)
    client.lpush(queue, "the cat", "a dog", "the cat", "the cat")  # the spout takes from the other end
    spout = RedisQueueSpout(url, queue, ["line"], processing=f"{queue}:p", max_per_call=10)
    b = TopologyBuilder()
    b.set_spout("queue", spout, 1)
    b.set_bolt("count", Count()).shuffle_grouping("queue")
    backend = StateFactory.from_url(f"sqlite:///{tmp_path / 'store.db'}").backend
    d = SpoutDriver("t", {}, b.create_topology(), backend, SpoutOptions(poll_ms=500, poll_ahead=poll_ahead))
    emitted: list[list[str]] = []
    try:
        for txid in range(1, 9):
            batch, failures = d.batch(txid)
            assert not failures, failures
            emitted.append([rec[2][0] for part in batch["queue"] for rec in part])
            d.committed(txid)
            if sum(map(len, emitted)) >= 4 and not client.llen(f"{queue}:p"):
                break
    finally:
        d.close()
    assert Counter(m for ms in emitted for m in ms) == Counter({"the cat": 3, "a dog": 1}), emitted
    assert all(Counter(ms)["the cat"] <= 1 for ms in emitted), f"one copy per batch: {emitted}"
    assert client.llen(queue) == 0 and client.llen(f"{queue}:p") == 0
    assert dict(backend.scan("$spoutlog-t")) == {}
    client.close()
