"""Sinks: exactly-once output of a topology to an external system.

:class:`KafkaBolt` (Storm) and :class:`KafkaStateFactory` / :class:`KafkaStateUpdater` (Trident
``partition_persist``) publish each transaction's records in one Kafka transaction with a progress
marker; see :mod:`weir.sinks.kafka`.
"""

from weir.sinks.kafka import KafkaBolt, KafkaState, KafkaStateFactory, KafkaStateUpdater, TransactionalPublisher

__all__ = ["KafkaBolt", "KafkaState", "KafkaStateFactory", "KafkaStateUpdater", "TransactionalPublisher"]
