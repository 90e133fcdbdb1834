"""Kafka in topologies on Spark: a Storm topology counts a topic and writes it out exactly once
through KafkaBolt; a Trident topology writes through a Kafka state; a replayed batch publishes
nothing twice; malformed records go to the dead letters; a missing topic fails at submit."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.kafka.conftest import create_topic, produce
from tests.kafka.test_kafka_e2e import read_committed
from tests.servers import KafkaBroker
from tests.sources._spouts import CountByKey
from weir.demo import read_counts
from weir.errors import SourceError
from weir.sinks import KafkaBolt, KafkaStateFactory, KafkaStateUpdater, TransactionalPublisher
from weir.sources import KafkaSpout
from weir.topology import Fields, TopologyBuilder

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.services]


def test_storm_count_and_exactly_once_kafka_bolt(spark: Any, tmp_path: Path, kafka_broker: KafkaBroker) -> None:
    b = kafka_broker.bootstrap
    src, out = create_topic(b, 3), create_topic(b, 2)
    events = [(f"k{i % 5}", json.dumps({"word": f"w{i % 7}", "n": i})) for i in range(300)]
    produce(b, src, [*events[:150], ("bad", "{oops"), *events[150:]])
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(b, src, value_schema="word STRING, n BIGINT", max_records_per_batch=120))
    builder.set_bolt("count", CountByKey("word"), 2).fields_grouping("kafka", Fields("word"))
    builder.set_bolt("out", KafkaBolt(b, out, value_field="word", key_field="key"), 2).shuffle_grouping("kafka")
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.deadletter": str(tmp_path / "dead")}
    st = weir.submit("kstorm", conf, builder.create_topology(), spark=spark).process_available(timeout=900)
    assert st.batches == 3  # 301 records by 120
    assert read_counts(conf, "kstorm") == Counter(f"w{i % 7}" for i in range(300))
    assert Counter(read_committed(b, out)) == Counter((f"k{i % 5}", f"w{i % 7}") for i in range(300))
    dead = [json.loads(line) for f in sorted((tmp_path / "dead" / "kstorm").glob("*.jsonl")) for line in f.open()]
    assert len(dead) == 1 and dead[0]["component"] == "kafka"
    assert f"topic {src!r} partition" in dead[0]["error"] and "value is not JSON" in dead[0]["error"]


def test_trident_kafka_state_publishes_each_batch_once(spark: Any, tmp_path: Path, kafka_broker: KafkaBroker) -> None:
    from weir.trident import TridentTopology

    b = kafka_broker.bootstrap
    src, out = create_topic(b, 2), create_topic(b, 1)
    produce(b, src, [(f"k{i % 3}", f"v{i}") for i in range(200)])
    tid = f"trident-{uuid.uuid4().hex[:6]}"
    t = TridentTopology()
    t.new_stream("kafka", KafkaSpout(b, src, max_records_per_batch=90)).partition_persist(
        KafkaStateFactory(b, out, tid), ["key", "value"], KafkaStateUpdater(value_field="value", key_field="key")
    )
    conf = {"weir.state.dir": str(tmp_path / "state")}
    st = weir.submit("ktrident", conf, t, spark=spark).process_available(timeout=900)
    assert st.batches == 3
    got = read_committed(b, out)
    assert sorted(v for _, v in got) == sorted(f"v{i}" for i in range(200))
    # a replay of a published txid (as after a crash between Kafka's commit and Spark's) sends nothing
    pub = TransactionalPublisher.get(KafkaStateFactory(b, out, tid).settings, out, f"{tid}-0", "weir.progress")
    last = pub.last_marker()
    assert last is not None and pub.published(last)
    assert pub.publish(last, [("k", "again")]) == 0
    assert pub.publish(last + 1, [("k", "next")]) == 1
    assert [v for _, v in read_committed(b, out)].count("again") == 0


def test_a_missing_topic_fails_at_submit(tmp_path: Path, kafka_broker: KafkaBroker) -> None:
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(kafka_broker.bootstrap, "no-such-topic"))
    builder.set_bolt("count", CountByKey("key"), 1).shuffle_grouping("kafka")
    with pytest.raises(SourceError, match=r"topic\(s\) \['no-such-topic'\] do not exist"):
        weir.submit("kmissing", {"weir.state.dir": str(tmp_path / "s")}, builder.create_topology())
