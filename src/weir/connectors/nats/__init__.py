"""NATS JetStream: :class:`NatsSpout` (:mod:`.spout`)."""
