"""Kafka: client plumbing (:mod:`.client`), :class:`KafkaSpout` (:mod:`.spout`) and the sinks (:mod:`.sink`).

- :mod:`weir.connectors.kafka.client` — the optional ``confluent_kafka`` import, client settings and
  the error translation shared by the spout and the sinks.
- :mod:`weir.connectors.kafka.spout` — :class:`KafkaSpout`, a replayable spout over topic offsets
  (also offered as ``weir.sources.KafkaSpout``).
- :mod:`weir.connectors.kafka.sink` — :class:`KafkaBolt`, :class:`KafkaStateFactory` and
  :class:`KafkaStateUpdater`: each transaction's records in one Kafka transaction (also offered
  from :mod:`weir.sinks`).

This ``__init__`` registers the system with :mod:`weir.state.registry` (:data:`CONNECTOR`); Kafka
holds no state of weir's, so the descriptor names only the exports.
"""

from __future__ import annotations

from weir.state.registry import Connector, lazy_attrs, register

__all__ = ["CONNECTOR"]

CONNECTOR = register(
    Connector(
        name="kafka",
        exports={
            "weir.sources": lazy_attrs("weir.connectors.kafka.spout", "KafkaSpout"),
            "weir.sinks": lazy_attrs(
                "weir.connectors.kafka.sink",
                "KafkaBolt",
                "KafkaState",
                "KafkaStateFactory",
                "KafkaStateUpdater",
                "TransactionalPublisher",
            ),
        },
    )
)
