"""``run.process_available()`` with a Storm spout: batches until the spouts have nothing more.

A Storm spout's batches are paced by a stream that offers one more tick while the driver says a
spout task's poll was cut before its source ran dry (see :mod:`weir.runtime.spark.pacing`). With a
batch of at most 5 tuples, 37 messages on a real Redis list take several batches; every message is
counted exactly once and acked (the queue and the processing lists end empty), and no batch after
the source ran dry is made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import weir
from tests.servers import RedisServer
from tests.storm_spouts._topology import all_counts, topology
from weir.connectors.redis.queue_spout import RedisQueueSpout

pytestmark = [pytest.mark.spark, pytest.mark.services]

N = 37


def test_process_available_reads_every_message_in_batches_of_five(
    spark: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    import redis

    url = f"redis://127.0.0.1:{redis_server.port}/0"
    client = redis.Redis.from_url(url)
    client.delete("avail")
    client.lpush("avail", *[f"m{i} w{i % 4}" for i in range(N)])
    spout = RedisQueueSpout(url, "avail", ["line"], id_field="id", message_id=lambda m: m.split(" ", 1)[0])
    spout.max_per_call = 3
    state = tmp_path / "state"
    conf = {"weir.state.dir": str(state), "weir.spout.batch.max.tuples": 5, "weir.spark.master": "local[2]"}
    status = weir.submit("avail", conf, topology(spout), spark).process_available(timeout=600)
    assert status.error is None, status.error
    counts = all_counts(f"sqlite:///{state / 'state.db'}", "avail")
    assert counts == {f"m{i}": 1 for i in range(N)}, f"not every message counted exactly once: {sorted(counts)}"
    assert status.tuples_in == N
    # two tasks, at most 5 tuples each per batch: at least 4 batches, and at most one more (the empty poll)
    assert 4 <= status.batches <= N, status
    assert client.llen("avail") == 0, "messages left in the queue"
    left = {k.decode(): client.llen(k) for k in client.keys("avail:processing:*")}
    assert not any(left.values()), f"un-acked messages left in the processing lists: {left}"
    client.close()
