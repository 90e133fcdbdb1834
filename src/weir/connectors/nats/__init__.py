"""NATS JetStream: :class:`NatsSpout` (:mod:`.spout`), also offered as ``weir.sources.NatsSpout``.

This ``__init__`` registers the system with :mod:`weir.state.registry` (:data:`CONNECTOR`).
"""

from __future__ import annotations

from weir.state.registry import Connector, lazy_attrs, register

__all__ = ["CONNECTOR"]

CONNECTOR = register(
    Connector(name="nats", exports={"weir.sources": lazy_attrs("weir.connectors.nats.spout", "NatsSpout")})
)
