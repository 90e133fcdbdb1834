"""Reproductions 3 and 5 of issue 25 as topologies on Spark against a real KRaft broker: a topic deleted
and created again between two runs stops the second with the named error and counts nothing more
(it used to skip 7,010 of 25,000 words, exit 0); a foreign progress marker under a KafkaBolt writer's
key stops the run by name and nothing is published (it used to publish 3,000 of 6,000 records)."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.kafka.conftest import create_topic, produce
from tests.kafka.test_kafka_e2e import read_committed
from tests.kafka.test_kafka_resets import _recreate
from tests.servers import KafkaBroker
from tests.sources._spouts import CountByKey
from weir.demo import read_counts
from weir.errors import WeirError
from weir.sinks import KafkaBolt
from weir.sources import KafkaSpout
from weir.topology import Fields, TopologyBuilder

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.services]


def test_a_topic_recreated_between_runs_stops_the_topology_by_name(
    spark: Any, tmp_path: Path, kafka_broker: KafkaBroker
) -> None:
    b = kafka_broker.bootstrap
    src = create_topic(b, 2)
    words = [f"w{i % 7}" for i in range(60)]
    produce(b, src, [(w, w) for w in words])

    def topology() -> Any:
        builder = TopologyBuilder()
        builder.set_spout("kafka", KafkaSpout(b, src, connect_timeout_s=30))
        builder.set_bolt("count", CountByKey("key"), 2).fields_grouping("kafka", Fields("key"))
        return builder.create_topology()

    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.restart.backoff.ms": 100}
    weir.submit("krecreate", conf, topology(), spark=spark).process_available(timeout=900)
    assert read_counts(conf, "krecreate") == Counter(words)
    _recreate(b, src, 2)
    produce(b, src, [(f"n{i}", f"n{i}") for i in range(90)])  # more records than before: only the id tells
    with pytest.raises(WeirError, match=rf"topic '{src}' was deleted and created again: its id is now"):
        weir.submit("krecreate", conf, topology(), spark=spark).process_available(timeout=900)
    assert read_counts(conf, "krecreate") == Counter(words)  # nothing counted after the error


def test_a_foreign_marker_stops_a_kafka_bolt_by_name_and_nothing_is_published(
    spark: Any, tmp_path: Path, kafka_broker: KafkaBroker
) -> None:
    b = kafka_broker.bootstrap
    src, out = create_topic(b, 1), create_topic(b, 1)
    markers = create_topic(b, 1, config={"cleanup.policy": "compact"})
    name = f"kforeign{uuid.uuid4().hex[:4]}"
    produce(b, src, [(f"k{i % 3}", f"v{i}") for i in range(40)])
    produce(b, markers, [(f"weir-{name}-out-0", '{"txid": 1000000}')])  # a plain producer's "marker"
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(b, src))
    builder.set_bolt("out", KafkaBolt(b, out, value_field="value", marker_topic=markers), 1).shuffle_grouping("kafka")
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.batch.max.retries": 0}
    with pytest.raises(
        WeirError, match=rf"progress marker at '{markers}' partition 0 offset 0 .* is not a weir marker"
    ):
        weir.submit(name, conf, builder.create_topology(), spark=spark).process_available(timeout=900)
    assert read_committed(b, out) == []
