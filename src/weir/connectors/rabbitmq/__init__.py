"""RabbitMQ (AMQP 0-9-1): :class:`RabbitMQSpout` (:mod:`.spout`), a Storm spout consuming with manual acks.

Also offered as ``weir.sources.RabbitMQSpout`` (``pip install 'weir[rabbitmq]'``). This ``__init__``
registers the system with :mod:`weir.state.registry` (:data:`CONNECTOR`).
"""

from __future__ import annotations

from weir.state.registry import Connector, lazy_attrs, register

__all__ = ["CONNECTOR"]

CONNECTOR = register(
    Connector(name="rabbitmq", exports={"weir.sources": lazy_attrs("weir.connectors.rabbitmq.spout", "RabbitMQSpout")})
)
