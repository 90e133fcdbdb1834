"""Spouts: Spark streaming sources whose progress Spark checkpoints.

Built on Spark's own sources: :class:`FileSpout`, :class:`RateSpout`, :class:`DataFrameSpout`.
Replayable by offset range (Spark Python data sources): :class:`ReplayableSpout` (write your own),
:class:`RedisStreamSpout` (Redis Streams), :class:`NatsSpout` (NATS JetStream) and
:class:`KafkaSpout` (Kafka topics).
Storm spouts (``next_tuple``/``ack``/``fail``, run on the driver with a spout log):
:class:`RabbitMQSpout` (a RabbitMQ queue, manual acks) and :class:`RedisQueueSpout` (a Redis list
as a reliable queue).
"""

from weir.connectors.rabbitmq import RabbitMQSpout
from weir.connectors.redis_queue import RedisQueueSpout
from weir.sources.builtin import DataFrameSpout, FileSpout, RateSpout
from weir.sources.kafka import KafkaSpout
from weir.sources.nats import NatsSpout
from weir.sources.redis_streams import RedisStreamSpout
from weir.sources.replayable import ReadLimit, ReplayableSpout
from weir.topology.components import Guarantee

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
