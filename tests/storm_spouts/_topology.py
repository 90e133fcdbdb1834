"""Storm spouts over RabbitMQ and a Redis list into a stateful count per message id and per word.

Each message is ``"<id> <word> <word> ..."``. The count bolt (fields grouping on the id) keeps
``id -> times counted`` in its state; exactly-once means every id ends at 1. The spouts below are
the real connectors with one addition for the tests: every ack that reached the broker is recorded
in a Redis list (``<queue>:acks``) with whether the message's count was committed at that moment.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pyspark import cloudpickle

from weir.connectors.redis.queue_spout import RedisQueueSpout
from weir.topology import Fields, StatefulBolt, TopologyBuilder

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class CountIds(StatefulBolt):  # type: ignore[type-arg]
    """``message id -> count`` (a word count keyed by the message's id)."""

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Any) -> None:
        mid = tup.get_value_by_field("id")
        self.state.put(mid, (self.state.get(mid) or 0) + 1)
        self.collector.ack(tup)


def committed_count(pg_url: str, topology: str, mid: str, parallelism: int = 2) -> int:
    """The committed count of ``mid`` (read straight from the store)."""
    from weir.state.factory import StateFactory

    provider = StateFactory.from_url(pg_url)
    return sum(int(provider.new_state(f"{topology}-count-{i}").get(mid) or 0) for i in range(parallelism))


def all_counts(pg_url: str, topology: str, parallelism: int = 2) -> dict[str, int]:
    from weir.state.factory import StateFactory

    provider = StateFactory.from_url(pg_url)
    out: dict[str, int] = {}
    for i in range(parallelism):
        for k, v in provider.new_state(f"{topology}-count-{i}"):
            out[k] = out.get(k, 0) + int(v)
    return out


class _Recording:
    """Mixin: record every broker ack (and whether its count was committed then) in a Redis list."""

    record_url: str
    pg_url: str
    topology_name: str

    def _record(self, mid: Any) -> None:
        import redis

        c = redis.Redis.from_url(self.record_url)
        try:
            committed = committed_count(self.pg_url, self.topology_name, str(mid))
            c.rpush(f"{self.topology_name}:acks", json.dumps([mid, committed]))
        finally:
            c.close()


class RecordingRedisQueueSpout(_Recording, RedisQueueSpout):
    """A :class:`RedisQueueSpout` recording its broker acks."""

    def __init__(self, url: str, queue: str, record_url: str, pg_url: str, topology: str) -> None:
        super().__init__(url, queue, ["line"], id_field="id", message_id=lambda m: m.split(" ", 1)[0], max_per_call=7)
        self.record_url, self.pg_url, self.topology_name = record_url, pg_url, topology

    def ack(self, msg_id: Any) -> bool:
        ok = super().ack(msg_id)
        if ok:
            self._record(msg_id)
        return ok


def rabbit_spout(url: str, queue: str, record_url: str, pg_url: str, topology: str) -> Any:
    from weir.sources import RabbitMQSpout

    class RecordingRabbitMQSpout(_Recording, RabbitMQSpout):
        def ack(self, msg_id: Any) -> bool:
            ok = super().ack(msg_id)
            if ok:
                self._record(msg_id)
            return ok

    s = RecordingRabbitMQSpout(
        url, queue, ["line"], id_field="id", message_id=lambda body, props: body.split(" ", 1)[0]
    )
    s.record_url, s.pg_url, s.topology_name = record_url, pg_url, topology
    return s


def topology(spout: Any, parallelism: int = 2) -> Any:
    b = TopologyBuilder()
    b.set_spout("queue", spout, parallelism)
    b.set_bolt("count", CountIds(), 2).fields_grouping("queue", Fields("id"))
    return b.create_topology()
