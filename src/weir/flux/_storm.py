"""Storm class names a Flux file may keep: each maps onto the weir class (or factory) that does the same.

State providers need no entry: ``topology.state.provider`` in a Flux ``config`` already takes Storm's
provider class names (see docs/state.md). Kafka's spout is built the way Storm's Flux examples build
it — ``KafkaSpoutConfig$Builder(bootstrapServers, topics)`` with ``setProp`` config methods, then
``KafkaSpoutConfig(builder)`` and ``KafkaSpout(config)`` — and becomes a :class:`weir.sources.KafkaSpout`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["STORM_CLASSES", "KafkaSpoutConfig", "KafkaSpoutConfigBuilder", "kafka_spout"]


class KafkaSpoutConfigBuilder:
    """Storm's ``KafkaSpoutConfig.Builder``: bootstrap servers, topics and consumer properties."""

    def __init__(self, bootstrap_servers: str, topics: str | Sequence[str]) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        self.props: dict[str, Any] = {}
        self.first_poll = "earliest"

    def set_prop(self, key: str, value: Any) -> KafkaSpoutConfigBuilder:
        """A Kafka consumer property (``group.id``, ``auto.offset.reset``, ...)."""
        self.props[str(key)] = value
        return self

    def set_first_poll_offset_strategy(self, strategy: str) -> KafkaSpoutConfigBuilder:
        """``EARLIEST`` / ``UNCOMMITTED_EARLIEST``: from the beginning; ``LATEST`` / ``UNCOMMITTED_LATEST``: the end."""
        self.first_poll = "latest" if "LATEST" in str(strategy).upper() else "earliest"
        return self

    def build(self) -> KafkaSpoutConfig:
        """The built configuration."""
        return KafkaSpoutConfig(self)


class KafkaSpoutConfig:
    """Storm's ``KafkaSpoutConfig``, built from its builder."""

    def __init__(self, builder: KafkaSpoutConfigBuilder) -> None:
        self.builder = builder


def kafka_spout(config: KafkaSpoutConfig | KafkaSpoutConfigBuilder) -> Any:
    """Storm's ``new KafkaSpout(config)``: weir's :class:`~weir.sources.KafkaSpout` on the same topics."""
    from weir.sources import KafkaSpout

    b = config.builder if isinstance(config, KafkaSpoutConfig) else config
    # Storm's consumer group holds its offsets; weir keeps them in Spark's checkpoint and sets group.id itself
    props = {k: v for k, v in b.props.items() if k != "group.id"}
    return KafkaSpout(b.bootstrap_servers, b.topics, config=props or None, start=b.first_poll)


#: Storm's class name -> the dotted path of what weir runs in its place
STORM_CLASSES: dict[str, str] = {
    "org.apache.storm.kafka.spout.KafkaSpoutConfig$Builder": "weir.flux._storm.KafkaSpoutConfigBuilder",
    "org.apache.storm.kafka.spout.KafkaSpoutConfig.Builder": "weir.flux._storm.KafkaSpoutConfigBuilder",
    "org.apache.storm.kafka.spout.KafkaSpoutConfig": "weir.flux._storm.KafkaSpoutConfig",
    "org.apache.storm.kafka.spout.KafkaSpout": "weir.flux._storm.kafka_spout",
}
