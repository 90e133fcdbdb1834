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

    def _record(self, mids: list[Any]) -> None:
        import redis

        c = redis.Redis.from_url(self.record_url)
        try:
            for mid in mids:
                committed = self._committed(str(mid))
                c.rpush(f"{self.topology_name}:acks", json.dumps([mid, committed]))
        finally:
            c.close()

    def _committed(self, mid: str) -> int:
        """The committed count of ``mid`` (the Storm topology's count bolt)."""
        return committed_count(self.pg_url, self.topology_name, mid)

    def _acked(self, mid: Any, ok: bool | None) -> bool | None:
        """An ack the spout buffered: recorded once :meth:`flush_acks` sent it."""
        if ok:
            self.__dict__.setdefault("_unsent", []).append(mid)
        return ok

    def _flush_and_record(self, flush: Any) -> None:
        """Send the buffered acks (``flush``), then record them; a failed send records nothing."""
        unsent, self.__dict__["_unsent"] = self.__dict__.get("_unsent", []), []
        flush()  # raising: the broker requeues them, weir acks them again on redelivery
        self._record(unsent)


class RecordingRedisQueueSpout(_Recording, RedisQueueSpout):
    """A :class:`RedisQueueSpout` recording its broker acks."""

    def __init__(self, url: str, queue: str, record_url: str, pg_url: str, topology: str) -> None:
        self._unsent: list[Any] = []
        super().__init__(url, queue, ["line"], id_field="id", message_id=lambda m: m.split(" ", 1)[0], max_per_call=7)
        self.record_url, self.pg_url, self.topology_name = record_url, pg_url, topology

    def ack(self, msg_id: Any) -> bool:
        return bool(self._acked(msg_id, super().ack(msg_id)))

    def flush_acks(self) -> None:
        self._flush_and_record(super().flush_acks)


def rabbit_spout(url: str, queue: str, record_url: str, pg_url: str, topology: str) -> Any:
    from weir.sources import RabbitMQSpout

    class RecordingRabbitMQSpout(_Recording, RabbitMQSpout):
        def ack(self, msg_id: Any) -> bool:
            return bool(self._acked(msg_id, super().ack(msg_id)))

        def flush_acks(self) -> None:
            self._flush_and_record(super().flush_acks)

        def fail(self, msg_id: Any) -> None:
            import redis

            super().fail(msg_id)
            c = redis.Redis.from_url(self.record_url)
            c.rpush(f"{self.topology_name}:fails", json.dumps(msg_id))
            c.close()

    # the default id, the AMQP message_id property (m<i>, also the body's first word): the only id the
    # spout's acked-id memory trusts when the killed broker redelivers a message whose ack it lost
    s = RecordingRabbitMQSpout(url, queue, ["line"], id_field="id")
    s.record_url, s.pg_url, s.topology_name = record_url, pg_url, topology
    return s


class SlowFirstAttempt(CountIds):
    """:class:`CountIds` whose first attempt of a batch outlives the message timeout, then raises."""

    def __init__(self, marker: str, seconds: float) -> None:
        self.marker, self.seconds = marker, seconds

    def execute(self, tup: Any) -> None:
        import os
        import time

        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL)  # the first task to get here, once
        except FileExistsError:
            super().execute(tup)
            return
        os.close(fd)
        time.sleep(self.seconds)
        msg = "the first attempt is slow and fails"
        raise RuntimeError(msg)


def topology(spout: Any, parallelism: int = 2, count: Any = None) -> Any:
    b = TopologyBuilder()
    b.set_spout("queue", spout, parallelism)
    b.set_bolt("count", count or CountIds(), 2).fields_grouping("queue", Fields("id"))
    return b.create_topology()


# ---- Trident over a Storm spout ----------------------------------------------------------------
def trident_factory(pg_url: str, table: str) -> Any:
    """An opaque PostgreSQL map state ``id -> count``."""
    from weir.trident.backing import PostgresMapState

    return PostgresMapState.factory("opaque", pg_url, table=table, key_columns={"id": "TEXT"}, value_type="BIGINT")


def trident_counts(pg_url: str, table: str, ids: list[str]) -> dict[str, int]:
    """The committed counts of ``ids`` in the Trident state (ids never counted are left out)."""
    state = trident_factory(pg_url, table).make_state({}, 0, 1)
    return {i: int(v) for i, v in zip(ids, state.multi_get([[i] for i in ids]), strict=True) if v is not None}


class TridentRecordingSpout(RecordingRedisQueueSpout):
    """A :class:`RecordingRedisQueueSpout` whose acks record the Trident state's committed count."""

    def __init__(self, url: str, queue: str, record_url: str, pg_url: str, topology: str, table: str, n: int) -> None:
        super().__init__(url, queue, record_url, pg_url, topology)
        self.table, self.n = table, n

    def _committed(self, mid: str) -> int:
        return trident_counts(self.pg_url, self.table, [mid]).get(mid, 0)


def trident_topology(spout: Any, pg_url: str, table: str) -> Any:
    """A Trident count per message id over ``spout``."""
    from weir.trident import Count, TridentTopology

    t = TridentTopology()
    t.new_stream("queue", spout).group_by(["id"]).persistent_aggregate(trident_factory(pg_url, table), Count(), "count")
    return t
