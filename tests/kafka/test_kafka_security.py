"""SASL and TLS pass-through against a real broker: a KRaft node whose only client listener used here
is ``SASL_SSL`` (mechanism PLAIN, a certificate made with ``openssl``). KafkaSpout reads through it and
a Trident topology publishes through it exactly once, with the client settings passed through; a
wrong password fails at submit with the broker's reason and the password redacted."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.kafka.conftest import SecureKafkaBroker, create_topic, produce
from weir.errors import SourceError, StateError
from weir.sinks import KafkaStateFactory, KafkaStateUpdater, TransactionalPublisher
from weir.sources import KafkaSpout, ReadLimit

pytestmark = [pytest.mark.services]


def read_committed_secure(broker: SecureKafkaBroker, topic: str) -> list[tuple[str, str]]:
    """Every record of ``topic`` (one partition) as a read_committed consumer on the SASL_SSL listener sees it."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": broker.secure_bootstrap,
            **broker.client_config(),
            "group.id": "check",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    out: list[tuple[str, str]] = []
    try:
        tp = TopicPartition(topic, 0)
        low, high = c.get_watermark_offsets(tp, timeout=30, cached=False)
        c.assign([TopicPartition(topic, 0, 0)])
        for _ in range(120 if high > low else 0):  # empty: the position would stay -1001 (see read_committed)
            if c.position([tp])[0].offset >= high:
                break
            out += [(m.key().decode(), m.value().decode()) for m in c.consume(1000, 0.5) if m.error() is None]
    finally:
        c.close()
    return out


def test_spout_reads_through_sasl_ssl(secure_kafka_broker: SecureKafkaBroker) -> None:
    b = secure_kafka_broker
    t = create_topic(b.bootstrap, 2)
    produce(b.bootstrap, t, [(f"k{i}", f"v{i}") for i in range(50)])
    sp = KafkaSpout(b.secure_bootstrap, t, config=b.client_config())
    sp.check_reachable()
    start = sp.initial_offset()
    end = sp.latest_offset(start, ReadLimit())
    rows = [r for s, e in sp.partitions(start, end) for r in sp.records(s, e)]
    assert sorted(r[1] for r in rows) == sorted(f"v{i}" for i in range(50))
    # the same listener without credentials is refused: the settings really went through
    plain = KafkaSpout(
        b.secure_bootstrap,
        t,
        config={"security.protocol": "SSL", "ssl.ca.location": str(b.ca_path)},
        connect_timeout_s=5,
    )
    with pytest.raises(SourceError, match="cannot reach the Kafka brokers"):
        plain.check_reachable()


def test_trident_publishes_exactly_once_through_sasl_ssl(
    spark: Any, tmp_path: Path, secure_kafka_broker: SecureKafkaBroker
) -> None:
    from weir.trident import TridentTopology

    b = secure_kafka_broker
    src, out = create_topic(b.bootstrap, 2), create_topic(b.bootstrap, 1)
    produce(b.bootstrap, src, [(f"k{i % 3}", f"v{i}") for i in range(120)])
    cfg = b.client_config()
    tid = f"secure-{uuid.uuid4().hex[:6]}"
    t = TridentTopology()
    t.new_stream("kafka", KafkaSpout(b.secure_bootstrap, src, config=cfg, max_records_per_batch=70)).partition_persist(
        KafkaStateFactory(b.secure_bootstrap, out, tid, config=cfg),
        ["key", "value"],
        KafkaStateUpdater(value_field="value", key_field="key"),
    )
    st = weir.submit("ksecure", {"weir.state.dir": str(tmp_path / "state")}, t, spark=spark).process_available(
        timeout=900
    )
    assert st.batches == 2
    got = read_committed_secure(b, out)
    assert sorted(v for _, v in got) == sorted(f"v{i}" for i in range(120))
    assert all(k == f"k{int(v[1:]) % 3}" for k, v in got)


def test_a_wrong_password_fails_clearly_with_the_password_redacted(
    tmp_path: Path, secure_kafka_broker: SecureKafkaBroker
) -> None:
    b = secure_kafka_broker
    t = create_topic(b.bootstrap, 1)
    wrong = "Wr0ng-pa55word"
    builder_spout = KafkaSpout(b.secure_bootstrap, t, config=b.client_config(wrong), connect_timeout_s=6)
    from weir.trident import TridentTopology

    topo = TridentTopology()
    topo.new_stream("kafka", builder_spout).partition_persist(
        KafkaStateFactory(b.secure_bootstrap, t, "never", config=b.client_config(wrong)),
        ["key", "value"],
        KafkaStateUpdater(value_field="value", key_field="key"),
    )
    with pytest.raises(SourceError) as err:  # at submit, before any Spark query starts
        weir.submit("kwrongpw", {"weir.state.dir": str(tmp_path / "s")}, topo)
    text = str(err.value)
    assert "cannot reach the Kafka brokers at " + b.secure_bootstrap in text
    assert "Authentication failed" in text and "check sasl.mechanism, sasl.username and sasl.password" in text
    assert wrong not in text
    # the exactly-once writer says the same, redacted
    settings = KafkaStateFactory(b.secure_bootstrap, t, "w", config=b.client_config(wrong)).settings
    pub = TransactionalPublisher(settings, t, f"wrong-{uuid.uuid4().hex[:6]}", timeout_s=6)
    with pytest.raises(StateError) as err2:
        pub.published(1)
    assert "Authentication failed" in str(err2.value) and wrong not in str(err2.value)
