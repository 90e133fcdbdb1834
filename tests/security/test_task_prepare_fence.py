"""A store emptied while a batch's tasks run refuses their prepares (issue 25, "task prepares fenced exactly").

The driver stamps its epoch on every task namespace at start (``Backend.claim``) and each task
prepares with exactly that epoch (``Backend.write_prepared_owned``, in the same atomic step as the
write). Here a bolt empties the store (Redis ``FLUSHALL``) in the middle of batch 2: the task's
prepare is refused with :class:`StateLossError`, the run stops with it, and the emptied store holds
no prepared change set, no committed count and no coordinator record afterwards. (Before, the
prepares were accepted into the emptied store and left uncommitted change sets behind.)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import weir
from weir.errors import StateLossError
from weir.topology import Fields, StatefulBolt, TopologyBuilder

from ..servers import RedisServer, redis_command
from ..sources._spouts import Numbers

pytestmark = [pytest.mark.spark, pytest.mark.services]

TRIGGER = 150  # in batch 2 (100 records a batch)


class FlushingCount(StatefulBolt):
    """Counts per key; empties the store when it sees record ``TRIGGER`` (a store lost mid-batch)."""

    def __init__(self, port: int) -> None:
        self.port = port

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("key", "count"))

    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute(self, tup: Any) -> None:
        if tup["n"] == TRIGGER:
            redis_command(self.port, "FLUSHALL")
        self.counts.put(tup["key"], self.counts.get(tup["key"], 0) + 1)
        self.collector.ack(tup)


@pytest.mark.timeout(1200)
def test_a_store_emptied_during_a_batch_refuses_the_tasks_prepares_and_keeps_nothing(
    spark: Any, tmp_path: Path
) -> None:
    with RedisServer() as server:
        conf = {
            "weir.state.dir": str(tmp_path / "state"),
            "weir.spark.master": "local[2]",
            "topology.state.provider.config": {"url": server.url},
            "topology.state.checkpoint.interval.ms": 100,
            "weir.batch.max.retries": 1,
        }
        b = TopologyBuilder()
        b.set_spout("numbers", Numbers(300, keys=7, max_records=100))
        b.set_bolt("count", FlushingCount(server.port), 2).fields_grouping("numbers", Fields("key"))
        started = time.monotonic()
        with pytest.raises(StateLossError) as info:
            weir.submit("emptied", conf, b.create_topology(), spark=spark).process_available(timeout=900)
        assert time.monotonic() - started < 900
        text = str(info.value)
        assert "emptied" in text and "lost" in text, text
        keys = {k.decode() for k in _keys(server)}
        assert not [k for k in keys if k.endswith("$prepare")], keys  # no change set was left behind
        assert not [k for k in keys if k.startswith("emptied-count-") and "$" not in k], keys  # no counts
        assert "$checkpointspout-emptied" not in keys, keys  # no coordinator record after the loss


def _keys(server: RedisServer) -> list[bytes]:
    import redis

    client = redis.Redis(port=server.port)
    try:
        return list(client.scan_iter(count=1000))
    finally:
        client.close()
