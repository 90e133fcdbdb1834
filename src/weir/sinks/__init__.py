"""Sinks: exactly-once output of a topology to an external system.

:class:`KafkaBolt` (Storm) and :class:`KafkaStateFactory` / :class:`KafkaStateUpdater` (Trident
``partition_persist``) publish each transaction's records in one Kafka transaction with a progress
marker; they live in :mod:`weir.connectors.kafka.sink`, which offers them here (this package
imports no connector).
"""

from typing import Any

from weir.state import registry


def __getattr__(name: str) -> Any:
    # the sinks of external systems live in their connectors (weir/connectors/<system>/sink.py),
    # which offer them here through their registry descriptors; this package imports no connector
    value = registry.exported(__name__, name)
    globals()[name] = value
    return value


__all__ = ["KafkaBolt", "KafkaState", "KafkaStateFactory", "KafkaStateUpdater", "TransactionalPublisher"]
