"""RabbitMQ (AMQP 0-9-1): a Storm spout consuming with manual acks (``pip install 'weir[rabbitmq]'``)."""

from weir.connectors.rabbitmq.spout import RabbitMQSpout

__all__ = ["RabbitMQSpout"]
