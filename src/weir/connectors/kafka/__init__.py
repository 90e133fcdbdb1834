"""Kafka: client plumbing (:mod:`.client`), :class:`KafkaSpout` (:mod:`.spout`) and the sinks (:mod:`.sink`)."""
