"""The exactly-once Kafka output against a real KRaft broker: a progress marker that another writer,
a plain producer or garbage put under this writer's key is refused by name and never trusted (nothing
is published after it); ``transaction.timeout.ms`` is the user's and is checked at submit against the
broker's ``transaction.max.timeout.ms`` and the supervision budget; a hanging transaction on the
output topic is named with its remedy."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

import weir
from tests.kafka.conftest import create_topic, produce
from tests.kafka.test_kafka_e2e import read_committed
from tests.servers import KafkaBroker
from tests.sources._spouts import CountByKey
from weir.connectors.kafka.sink import check_transaction_timeout
from weir.errors import ConfigError, StateError
from weir.sinks import KafkaBolt, TransactionalPublisher
from weir.sources import KafkaSpout
from weir.topology import Fields, TopologyBuilder

pytestmark = [pytest.mark.services]


def _setup(b: str) -> tuple[str, str, str]:
    out = create_topic(b, 1)
    markers = create_topic(b, 1, config={"cleanup.policy": "compact"})
    return out, markers, f"weir-t{uuid.uuid4().hex[:6]}-out-0"


def test_a_foreign_or_malformed_marker_is_refused_and_nothing_is_published(kafka_broker: KafkaBroker) -> None:
    b = kafka_broker.bootstrap
    settings = {"bootstrap.servers": b}
    out, markers, tid = _setup(b)
    # reproduction 5: a marker a plain producer wrote under this writer's key
    produce(b, markers, [(tid, '{"txid": 1000000}')])
    mine = TransactionalPublisher(settings, out, tid, markers, writer="deployment-a")
    with pytest.raises(
        StateError, match=rf"progress marker at '{markers}' partition 0 offset 0 .* is not a weir marker"
    ):
        mine.published(1)
    with pytest.raises(StateError, match="is not a weir marker"):
        mine.publish(1, [("k", "v")])
    # a marker that is not JSON at all
    produce(b, markers, [(tid, b"\xff not json")])
    with pytest.raises(StateError, match="is not JSON"):
        TransactionalPublisher(settings, out, tid, markers, writer="deployment-a").publish(1, [("k", "v")])
    # another deployment (same transactional id, its own writer id) publishes; this one refuses its progress
    theirs = TransactionalPublisher(settings, out, f"{tid}-2", markers, writer="deployment-b")
    assert theirs.publish(7, [("k", "theirs")]) == 1
    again = TransactionalPublisher(settings, out, f"{tid}-2", markers, writer="deployment-a")
    with pytest.raises(StateError, match=r"was written by writer 'deployment-b' .* not by this one \('deployment-a'"):
        again.publish(8, [("k", "mine")])
    assert read_committed(b, out) == [("k", "theirs")]  # nothing after any refusal
    # the writer's own markers are trusted across publishers (a restart)
    assert TransactionalPublisher(settings, out, f"{tid}-2", markers, writer="deployment-b").published(7)


def test_transaction_timeout_is_checked_against_the_broker_and_the_supervision_budget(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    b = kafka_broker.bootstrap
    where = "KafkaBolt(topic 'x')"
    with pytest.raises(ConfigError, match=r"above the brokers' transaction.max.timeout.ms = 900000"):
        check_transaction_timeout({"bootstrap.servers": b, "transaction.timeout.ms": "3600000"}, {}, where)
    with pytest.raises(ConfigError, match=r"below the checkpoint interval plus the supervision budget \(32000 ms"):
        check_transaction_timeout({"bootstrap.servers": b, "transaction.timeout.ms": "20000"}, {}, where)
    assert check_transaction_timeout({"bootstrap.servers": b, "transaction.timeout.ms": "120000"}, {}, where) == 120000
    # reproduction 6: refused at submit, before Spark runs a batch
    src = create_topic(b, 1)
    out = create_topic(b, 1)
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(b, src))
    builder.set_bolt("count", CountByKey("key"), 1).fields_grouping("kafka", Fields("key"))
    bolt = KafkaBolt(b, out, value_field="value", config={"transaction.timeout.ms": 3_600_000})
    builder.set_bolt("out", bolt, 1).shuffle_grouping("kafka")
    with pytest.raises(ConfigError, match="transaction.max.timeout.ms"):
        weir.submit("ktimeout", {"weir.state.dir": str(tmp_path / "s")}, builder.create_topology())
    from weir.sinks import KafkaStateFactory, KafkaStateUpdater
    from weir.trident import TridentTopology

    t = TridentTopology()
    factory = KafkaStateFactory(b, out, "tt-trident", config={"transaction.timeout.ms": "10000"})
    t.new_stream("kafka", KafkaSpout(b, src)).partition_persist(factory, ["key", "value"], KafkaStateUpdater("value"))
    with pytest.raises(ConfigError, match=r"KafkaStateFactory\(topic .*\): transaction.timeout.ms = 10000 is below"):
        weir.submit("ktimeout-trident", {"weir.state.dir": str(tmp_path / "t")}, t)
    # the user's timeout is what the producer uses (a publisher with 120 s works against this broker)
    pub = TransactionalPublisher(
        {"bootstrap.servers": b, "transaction.timeout.ms": "120000"}, out, f"tt-{uuid.uuid4().hex[:6]}", "weir.progress"
    )
    assert pub.transaction_timeout_ms == 120000
    assert pub.publish(1, [("k", "v")]) == 1


def test_a_hanging_transaction_on_the_output_topic_is_named(kafka_broker: KafkaBroker) -> None:
    from confluent_kafka import Producer

    b = kafka_broker.bootstrap
    out, markers, tid = _setup(b)
    pub = TransactionalPublisher({"bootstrap.servers": b}, out, tid, markers, writer="w")
    pub.check_stable(wait_s=1)
    stranger = Producer({"bootstrap.servers": b, "transactional.id": f"stranger-{tid}"})
    stranger.init_transactions(60)
    stranger.begin_transaction()
    stranger.produce(out, key="k", value="open")
    stranger.flush(30)
    with pytest.raises(StateError, match=r"a transaction is hanging on the output topic \(partition 0: last stable"):
        pub.check_stable(wait_s=1)
    stranger.abort_transaction(60)
    pub.check_stable(wait_s=1)
