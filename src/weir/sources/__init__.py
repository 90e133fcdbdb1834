"""Spouts: Spark streaming sources whose progress Spark checkpoints.

Built on Spark's own sources: :class:`FileSpout`, :class:`RateSpout`, :class:`DataFrameSpout`.
Replayable by offset range (Spark Python data sources): :class:`ReplayableSpout` (write your own),
:class:`RedisStreamSpout` (Redis Streams), :class:`NatsSpout` (NATS JetStream) and
:class:`KafkaSpout` (Kafka topics). Storm spouts (``next_tuple``/``ack``/``fail``, run on the driver
with a spout log): :class:`RabbitMQSpout` (a RabbitMQ queue, manual acks) and :class:`RedisQueueSpout`
(a Redis list as a reliable queue). The spouts of external systems live in their connectors
(:mod:`weir.connectors.redis`, :mod:`weir.connectors.nats`, :mod:`weir.connectors.kafka`,
:mod:`weir.connectors.rabbitmq`), which offer them here (this package imports no connector).
"""

from typing import Any

from weir.sources.builtin import DataFrameSpout, FileSpout, RateSpout
from weir.sources.replayable import ReadLimit, ReplayableSpout
from weir.state import registry
from weir.topology.components import Guarantee


def __getattr__(name: str) -> Any:
    # the spouts of external systems live in their connectors (weir/connectors/<system>/spout.py),
    # which offer them here through their registry descriptors; this package imports no connector
    value = registry.exported(__name__, name)
    globals()[name] = value
    return value


__all__ = [
    "DataFrameSpout",
    "FileSpout",
    "Guarantee",
    "KafkaSpout",
    "NatsSpout",
    "RabbitMQSpout",
    "RateSpout",
    "ReadLimit",
    "RedisQueueSpout",
    "RedisStreamSpout",
    "ReplayableSpout",
]
