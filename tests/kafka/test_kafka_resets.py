"""KafkaSpout against a real KRaft broker under everyday operations: a topic deleted and created again
under committed offsets is a named error (by its new topic id, or by offsets below the committed ones),
never a silent skip; a broker restarting while the initial offsets are listed is waited for, and
retriable broker answers are told from permanent ones."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.kafka.conftest import create_topic, produce
from tests.servers import KafkaBroker
from weir.connectors.kafka.client import is_retriable
from weir.connectors.kafka.spout import IDS
from weir.errors import SourceError, TransientSourceError
from weir.sources import KafkaSpout, ReadLimit

pytestmark = [pytest.mark.services]


def _recreate(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.delete_topics([topic], operation_timeout=60).values():
        f.result(120)
    deadline = time.monotonic() + 120
    while True:  # the deletion finishes in the background; creating too early answers TOPIC_ALREADY_EXISTS
        try:
            create_topic(bootstrap, partitions, name=topic)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_a_topic_deleted_and_created_again_is_a_named_error_never_a_skip(kafka_broker: KafkaBroker) -> None:
    b = kafka_broker.bootstrap
    t = create_topic(b, 2)
    produce(b, t, [("k", f"a{i}") for i in range(20)], partition=0)
    produce(b, t, [("k", f"b{i}") for i in range(5)], partition=1)
    sp = KafkaSpout(b, t, connect_timeout_s=30)
    start = sp.initial_offset()
    assert set(start) == {t, IDS} and start[t] == {"0": 0, "1": 0}
    end = sp.latest_offset(start, ReadLimit())
    assert end[t] == {"0": 20, "1": 5} and end[IDS] == start[IDS]
    assert len(list(sp.records(start, end))) == 25
    _recreate(b, t, 2)
    produce(b, t, [("k", f"new{i}") for i in range(30)], partition=0)  # longer than before: ids tell
    produce(b, t, [("k", "n")], partition=1)
    with pytest.raises(SourceError, match=rf"topic '{t}' was deleted and created again: its id is now") as info:
        sp.latest_offset(end, ReadLimit())
    assert not isinstance(info.value, TransientSourceError)
    assert "weir.spark.checkpoint.location" in str(info.value)
    # an offset without topic ids (written before weir kept them): the offsets below the committed ones tell
    legacy = {t: end[t]}
    with pytest.raises(SourceError, match=rf"topic '{t}' partition 1: the committed offset is 5 but the partition"):
        sp.latest_offset(legacy, ReadLimit())
    # a named topic deleted under committed offsets
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": b})
    for f in admin.delete_topics([t], operation_timeout=60).values():
        f.result(120)
    deadline = time.monotonic() + 60
    while True:
        try:
            sp.latest_offset(end, ReadLimit())
        except SourceError as exc:
            if "was deleted under the committed offsets" in str(exc):
                break
            if time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def test_a_broker_restarting_while_the_initial_offsets_are_listed_is_waited_for(kafka_broker: KafkaBroker) -> None:
    b = kafka_broker.bootstrap
    t = create_topic(b, 3)
    for p in range(3):
        produce(b, t, [("k", str(i)) for i in range(p + 2)], partition=p)
    expected = {t: {"0": 2, "1": 3, "2": 4}}
    got: list[Any] = []

    def start_offsets() -> None:
        for _ in range(10):  # what supervision does with a TransientSourceError: ask again after a back-off
            try:
                got.append(KafkaSpout(b, t, start="latest", connect_timeout_s=20).initial_offset())
                return
            except TransientSourceError as exc:
                got.append(exc)
                time.sleep(2)

    kafka_broker.stop(timeout=30)
    th = threading.Thread(target=start_offsets, daemon=True)
    th.start()
    time.sleep(3)
    kafka_broker.start()  # from this thread: the broker dies with the thread that started it (PDEATHSIG)
    th.join(300)
    assert got and isinstance(got[-1], dict), got
    assert {k: v for k, v in got[-1].items() if k != IDS} == expected


def test_retriable_broker_answers_are_told_from_permanent_ones() -> None:
    from confluent_kafka import KafkaError, KafkaException

    for code in ("FENCED_LEADER_EPOCH", "NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "REQUEST_TIMED_OUT"):
        assert is_retriable(KafkaException(KafkaError(getattr(KafkaError, code)))), code
    for code in ("TOPIC_AUTHORIZATION_FAILED", "SASL_AUTHENTICATION_FAILED", "INVALID_REQUEST"):
        assert not is_retriable(KafkaException(KafkaError(getattr(KafkaError, code)))), code
