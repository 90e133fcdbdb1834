"""KafkaSpout against a real KRaft broker: offsets, batch limits, decoding, malformed records,
retention-cut ranges (transactional fails, opaque goes on), new partitions, aborted transactions,
and submit-time errors for missing topics and unreachable brokers."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from tests.kafka.conftest import create_topic, produce
from tests.servers import KafkaBroker, free_port
from weir.connectors.kafka.spout import IDS
from weir.errors import ConfigError, SourceError
from weir.sources import Guarantee, KafkaSpout, ReadLimit

pytestmark = [pytest.mark.services]


def pos(offset: dict[str, Any]) -> dict[str, Any]:
    """The offset's partition positions (without the topic ids it also holds)."""
    return {t: v for t, v in offset.items() if t != IDS}


def all_records(sp: KafkaSpout) -> list[tuple[Any, ...]]:
    start = sp.initial_offset()
    return list(sp.records(start, sp.latest_offset(start, ReadLimit())))


def test_records_carry_key_value_topic_partition_offset_timestamp_headers(kafka_broker: KafkaBroker) -> None:
    b = kafka_broker.bootstrap
    t = create_topic(b, 1)
    before = int(time.time() * 1000) - 60_000
    produce(b, t, [("k1", "hello"), (None, "no key")], headers=[("trace", b"abc"), ("bin", b"\xff")])
    rows = all_records(KafkaSpout(b, t))
    assert [r[:5] for r in rows] == [("k1", "hello", t, 0, 0), (None, "no key", t, 0, 1)]
    assert all(r[5] >= before for r in rows)
    assert json.loads(rows[0][6]) == [["trace", "abc"], ["bin", "\\xff"]]
    assert rows[0][7] is None  # not malformed
    raw = all_records(KafkaSpout(b, t, key_format="bytes", value_format="bytes"))
    assert [r[:2] for r in raw] == [(b"k1", b"hello"), (None, b"no key")]


def test_value_schema_and_malformed_records_are_named(kafka_broker: KafkaBroker) -> None:
    b = kafka_broker.bootstrap
    t = create_topic(b, 1)
    produce(
        b,
        t,
        [
            ("a", json.dumps({"word": "x", "n": 3})),
            ("b", "{not json"),
            ("c", json.dumps({"word": "y", "n": "many"})),
            ("d", json.dumps([1])),
        ],
    )
    rows = all_records(KafkaSpout(b, t, value_schema="word STRING, n BIGINT"))
    assert rows[0][:3] == ("a", "x", 3) and rows[0][-1] is None
    assert rows[1][:3] == (None, None, None)
    assert rows[1][-1].startswith(f"topic {t!r} partition 0 offset 1: value is not JSON")
    assert rows[2][-1].startswith(f"topic {t!r} partition 0 offset 2: field 'n' (BIGINT)")
    assert "not an object" in rows[3][-1]
    sp = KafkaSpout(b, t, value_format="json")
    with pytest.raises(SourceError, match=f"topic '{t}' partition 0 offset 1: value is not JSON"):
        for r in all_records(sp):
            sp.to_values(r)


def test_batches_share_the_limit_fairly_and_ranges_replay_identically(kafka_broker: KafkaBroker) -> None:
    b = kafka_broker.bootstrap
    t = create_topic(b, 3)
    for p, n in ((0, 50), (1, 5), (2, 30)):
        produce(b, t, [(f"k{i}", f"p{p}-{i}") for i in range(n)], partition=p)
    sp = KafkaSpout(b, t, max_records_per_batch=40)
    start = sp.initial_offset()
    assert pos(start) == {t: {"0": 0, "1": 0, "2": 0}}
    end = sp.latest_offset(start, sp.read_limit())
    assert sum(end[t].values()) == 40 and end[t]["1"] == 5 and abs(end[t]["0"] - end[t]["2"]) <= 1
    first = list(sp.records(start, end))
    assert len(first) == 40 and list(sp.records(start, end)) == first
    assert sp.partitions(start, end) == [({t: {p: 0}}, {t: {p: end[t][p]}}) for p in ("0", "1", "2")]
    assert sp.lag(end) == {(t, 0): 50 - end[t]["0"], (t, 1): 0, (t, 2): 30 - end[t]["2"]}
    seen = {r[1] for r in first}
    rest = list(sp.records(end, sp.latest_offset(end, ReadLimit())))
    assert len(rest) == 45 and seen.isdisjoint(r[1] for r in rest)


def test_start_latest_per_partition_and_by_timestamp(kafka_broker: KafkaBroker) -> None:
    b = kafka_broker.bootstrap
    t = create_topic(b, 2)
    produce(b, t, [("a", str(i)) for i in range(10)], partition=0)
    produce(b, t, [("a", str(i)) for i in range(4)], partition=1)
    assert pos(KafkaSpout(b, t, start="latest").initial_offset()) == {t: {"0": 10, "1": 4}}
    assert pos(KafkaSpout(b, t, start={t: {"0": 7, "1": -1}}).initial_offset()) == {t: {"0": 7, "1": 4}}
    assert pos(KafkaSpout(b, t, start={t: {"1": -2}}).initial_offset()) == {t: {"0": 0, "1": 0}}
    time.sleep(0.05)
    mark = int(time.time() * 1000)
    time.sleep(0.05)
    produce(b, t, [("a", "late")], partition=1)
    assert pos(KafkaSpout(b, t, start_timestamp_ms=mark).initial_offset()) == {t: {"0": 10, "1": 4}}
    with pytest.raises(ConfigError, match="start must be"):
        KafkaSpout(b, t, start="middle")


def test_a_range_cut_by_retention_fails_transactional_and_goes_on_opaque(kafka_broker: KafkaBroker) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    b = kafka_broker.bootstrap
    t = create_topic(b, 1)
    produce(b, t, [("k", str(i)) for i in range(20)])
    sp = KafkaSpout(b, t)
    start = sp.initial_offset()
    end = sp.latest_offset(start, ReadLimit())
    admin = AdminClient({"bootstrap.servers": b})
    for f in admin.delete_records([TopicPartition(t, 0, 8)]).values():
        f.result(60)
    with pytest.raises(SourceError, match=rf"topic '{t}' partition 0: offsets 0\.\.7 of the batch's range \[0, 20\)"):
        list(sp.records(start, end))
    opaque = KafkaSpout(b, t, guarantee=Guarantee.OPAQUE)
    assert [r[1] for r in opaque.records(start, end)] == [str(i) for i in range(8, 20)]


def test_new_partitions_and_pattern_topics_are_picked_up(kafka_broker: KafkaBroker) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    b = kafka_broker.bootstrap
    prefix = f"pat{uuid.uuid4().hex[:6]}"
    t1 = create_topic(b, 1, name=f"{prefix}.a")
    produce(b, t1, [("k", "1")])
    sp = KafkaSpout(b, pattern=rf"{prefix}\..*")
    start = sp.initial_offset()
    assert pos(start) == {t1: {"0": 0}}
    admin = AdminClient({"bootstrap.servers": b})
    for f in admin.create_partitions([NewPartitions(t1, 2)]).values():
        f.result(60)
    t2 = create_topic(b, 1, name=f"{prefix}.b")
    produce(b, t1, [("k", "2")], partition=1)
    produce(b, t2, [("k", "3")])
    end = sp.latest_offset(start, ReadLimit())
    assert pos(end) == {t1: {"0": 1, "1": 1}, t2: {"0": 1}}
    assert sorted(r[1] for r in sp.records(start, end)) == ["1", "2", "3"]
    assert len(sp.partitions(start, end)) == 3


def test_aborted_transactions_are_skipped_and_open_ones_not_reached(kafka_broker: KafkaBroker) -> None:
    from confluent_kafka import Producer

    b = kafka_broker.bootstrap
    t = create_topic(b, 1)
    p = Producer({"bootstrap.servers": b, "transactional.id": f"tx-{t}"})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(t, key="k", value="aborted")
    p.abort_transaction(60)
    p.begin_transaction()
    p.produce(t, key="k", value="committed")
    p.commit_transaction(60)
    p.begin_transaction()
    p.produce(t, key="k", value="open")
    p.flush(30)
    sp = KafkaSpout(b, t)
    start = sp.initial_offset()
    end = sp.latest_offset(start, ReadLimit())
    assert [r[1] for r in sp.records(start, end)] == ["committed"]  # the open one lies past the stable offset
    p.commit_transaction(60)
    deadline = time.monotonic() + 60  # the commit markers are written just after commit_transaction returns
    while (end2 := sp.latest_offset(end, ReadLimit())) == end and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [r[1] for r in sp.records(end, end2)] == ["open"]


def test_missing_topic_unreachable_brokers_and_compacted_topics_fail_at_submit(kafka_broker: KafkaBroker) -> None:
    b = kafka_broker.bootstrap
    with pytest.raises(SourceError, match=r"topic\(s\) \['nope-.*'\] do not exist"):
        KafkaSpout(b, f"nope-{uuid.uuid4().hex[:6]}").check_reachable()
    with pytest.raises(SourceError, match="cannot reach the Kafka brokers"):
        KafkaSpout(f"127.0.0.1:{free_port()}", "x", connect_timeout_s=2).check_reachable()
    t = create_topic(b, 1, config={"cleanup.policy": "compact"})
    with pytest.raises(ConfigError, match="compacted"):
        KafkaSpout(b, t).check_reachable()
    KafkaSpout(b, t, guarantee=Guarantee.OPAQUE).check_reachable()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"topics": None}, "either topics"),
        ({"topics": "a", "pattern": "b"}, "either topics"),
        ({"topics": "a", "config": {"group.id": "g"}}, "set by weir"),
        ({"topics": "a", "value_format": "avro"}, "value_format"),
        ({"topics": "a", "value_format": "bytes", "value_schema": "a STRING"}, "value_schema"),
        ({"topics": "a", "guarantee": Guarantee.NON_TRANSACTIONAL}, "guarantee"),
        ({"topics": "a", "max_records_per_batch": 0}, "max_records_per_batch"),
        ({"topics": "a", "value_schema": "topic STRING"}, "topic"),
    ],
)
def test_bad_configuration_is_refused_when_built(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        KafkaSpout("127.0.0.1:9", **kwargs)
