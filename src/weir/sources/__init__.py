"""Spouts: Spark streaming sources whose progress Spark checkpoints.

Built on Spark's own sources: :class:`FileSpout`, :class:`RateSpout`, :class:`DataFrameSpout`.
Replayable by offset range (Spark Python data sources): :class:`ReplayableSpout` (write your own),
:class:`RedisStreamSpout` (Redis Streams), :class:`NatsSpout` (NATS JetStream) and
:class:`KafkaSpout` (Kafka topics).
"""

from typing import Any

from weir.sources.builtin import DataFrameSpout, FileSpout, RateSpout
from weir.sources.replayable import ReadLimit, ReplayableSpout
from weir.topology.components import Guarantee

_MOVED = {
    "KafkaSpout": "weir.connectors.kafka.spout",
    "NatsSpout": "weir.connectors.nats.spout",
    "RedisStreamSpout": "weir.connectors.redis.spout",
}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        import importlib

        return getattr(importlib.import_module(_MOVED[name]), name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


__all__ = [
    "DataFrameSpout",
    "FileSpout",
    "Guarantee",
    "KafkaSpout",
    "NatsSpout",
    "RateSpout",
    "ReadLimit",
    "RedisStreamSpout",
    "ReplayableSpout",
]
