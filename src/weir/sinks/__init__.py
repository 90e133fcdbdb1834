"""Sinks: exactly-once output of a topology to an external system.

:class:`KafkaBolt` (Storm) and :class:`KafkaStateFactory` / :class:`KafkaStateUpdater` (Trident
``partition_persist``) publish each transaction's records in one Kafka transaction with a progress
marker; see :mod:`weir.connectors.kafka.sink`.
"""

from typing import Any

_MOVED = dict.fromkeys(
    ("KafkaBolt", "KafkaState", "KafkaStateFactory", "KafkaStateUpdater", "TransactionalPublisher"),
    "weir.connectors.kafka.sink",
)


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        import importlib

        return getattr(importlib.import_module(_MOVED[name]), name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


__all__ = ["KafkaBolt", "KafkaState", "KafkaStateFactory", "KafkaStateUpdater", "TransactionalPublisher"]
