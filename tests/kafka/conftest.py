"""Kafka fixtures: one single-node KRaft broker for the session, helpers to make topics and produce."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.servers import KafkaBroker, require_service

try:
    import confluent_kafka  # noqa: F401
except ImportError:  # pragma: no cover - the 'kafka' extra is part of 'dev'
    HAVE_CLIENT = False
else:
    HAVE_CLIENT = True


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """A single-node KRaft broker (broker and controller) on free loopback ports."""
    require_service(HAVE_CLIENT, "confluent-kafka is not installed (pip install 'weir[kafka]')")
    broker = KafkaBroker()
    try:
        broker.start()
        yield broker
    finally:
        broker.close()


def create_topic(bootstrap: str, partitions: int = 1, replication: int = 1, name: str | None = None,
                 config: dict[str, str] | None = None) -> str:
    """Create a topic (random name unless given) and wait until it exists."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = name or f"t-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, replication, config=config or {})],
                                  operation_timeout=60, request_timeout=60)
    for f in futures.values():
        f.result(120)
    return topic


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | str | None, bytes | str | None]],
            partition: int | None = None, headers: list[tuple[str, bytes]] | None = None) -> None:
    """Write ``(key, value)`` records (idempotent producer, acks=all) and wait for every ack."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    errors: list[str] = []

    def done(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for k, v in records:
        kw = {} if partition is None else {"partition": partition}
        p.produce(topic, key=k, value=v, headers=headers, on_delivery=done, **kw)
        p.poll(0)
    assert p.flush(120) == 0
    assert not errors, errors
