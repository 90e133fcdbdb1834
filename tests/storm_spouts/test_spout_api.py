"""Storm spouts' API and the driver side of the spout log, without Spark (a real SQLite store).

The driver (:class:`~weir.runtime.spark.spoutlog.SpoutDriver`) is exercised directly: polling
``next_tuple``, the log entry written once per task per batch, replays of a logged batch, acks only
after ``committed``, redeliveries not counted twice, ``fail`` on an abandoned batch, a spout raising
in ``next_tuple`` (failure naming the component and task, the spout opened again).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from weir.errors import TopologyError
from weir.runtime.spark.spoutlog import SpoutDriver, SpoutOptions, check_storm_spouts
from weir.sources import RateSpout
from weir.state.factory import StateFactory
from weir.topology import BaseRichSpout, Fields, OutputFieldsDeclarer, Spout, StatefulBolt, TopologyBuilder
from weir.topology.spout_collector import SpoutOutputCollector
from weir.trident.guarantee import spout_type
from weir.trident.state.base import StateType

#: what every instance did, by name (the driver works on copies of the submitted spout)
EVENTS: list[tuple[str, int, Any]] = []
QUEUE: dict[int, list[str]] = {}  # the "broker": undelivered messages per task


class ListSpout(BaseRichSpout):
    """Delivers from :data:`QUEUE`, holds until ack, requeues on fail/close (a broker's behaviour)."""

    def __init__(self, raise_on: int | None = None) -> None:
        self.raise_on = raise_on

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields(["word"]))

    def open(self, conf: Any, context: Any, collector: SpoutOutputCollector) -> None:
        self.collector, self.task, self.held = collector, context.task_index, set()
        EVENTS.append(("open", self.task, None))

    def next_tuple(self) -> None:
        q = QUEUE.setdefault(self.task, [])
        if self.raise_on == self.task and q and ("raised", self.task, None) not in EVENTS:
            EVENTS.append(("raised", self.task, None))  # once: the instance opened again works
            msg = "broker connection lost"
            raise ConnectionError(msg)
        if q:
            m = q.pop(0)
            self.held.add(m)
            self.collector.emit([m], msg_id=m)

    def ack(self, msg_id: Any) -> bool:
        EVENTS.append(("ack", self.task, msg_id))
        if msg_id in self.held:
            self.held.discard(msg_id)
            return True
        return False

    def fail(self, msg_id: Any) -> None:
        EVENTS.append(("fail", self.task, msg_id))

    def close(self) -> None:
        EVENTS.append(("close", self.task, None))
        QUEUE.setdefault(self.task, [])[:0] = sorted(self.held)  # un-acked deliveries come back
        self.held = set()


class Count(StatefulBolt):  # type: ignore[type-arg]
    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Any) -> None:
        self.collector.ack(tup)


def _driver(tmp_path: Path, spout: Spout, parallelism: int = 1, **opts: Any) -> SpoutDriver:
    b = TopologyBuilder()
    b.set_spout("queue", spout, parallelism)
    b.set_bolt("count", Count()).shuffle_grouping("queue")
    backend = StateFactory.from_url(f"sqlite:///{tmp_path / 'store.db'}").backend
    options = SpoutOptions(**{"poll_ms": 5000, "poll_ahead": False, **opts})  # poll-ahead: test_poll_ahead.py
    return SpoutDriver("t", {}, b.create_topology(), backend, options)


@pytest.fixture(autouse=True)
def _fresh() -> None:
    EVENTS.clear()
    QUEUE.clear()


def words(batch: dict[str, list[list[tuple[Any, ...]]]]) -> list[str]:
    return [rec[2][0] for part in batch["queue"] for rec in part]


def test_a_batch_is_logged_before_the_job_and_acked_only_after_commit(tmp_path: Path) -> None:
    QUEUE[0] = ["a", "b", "c"]
    d = _driver(tmp_path, ListSpout(), batch_max=2)
    batch, failures = d.batch(1)
    assert not failures and words(batch) == ["a", "b"]
    assert [e for e in EVENTS if e[0] == "ack"] == []  # nothing acked before COMMITTED
    rows = dict(d.backend.scan("$spoutlog-t")) if d.backend else {}
    assert json.loads(rows[b"queue/0/00000000000000000001"])["tuples"] == [["default", ["a"], "a", None],
                                                                           ["default", ["b"], "b", None]]  # fmt: skip
    again, _ = d.batch(1)  # a retried attempt replays the log, next_tuple is not called
    assert words(again) == ["a", "b"] and QUEUE[0] == ["c"]
    d.committed(1)
    assert [e[2] for e in EVENTS if e[0] == "ack"] == ["a", "b"]
    assert dict(d.backend.scan("$spoutlog-t")) == {}  # pruned after the acks


def test_a_restarted_driver_replays_the_logged_batch_and_acks_on_redelivery(tmp_path: Path) -> None:
    QUEUE[0] = ["a", "b", "c", "d"]
    first = _driver(tmp_path, ListSpout(), batch_max=2)
    first.batch(1)
    # the driver dies: the broker requeues what it delivered
    first.tasks["queue"][0].close()
    assert QUEUE[0] == ["a", "b", "c", "d"]
    second = _driver(tmp_path, ListSpout(), batch_max=2)
    replay, _ = second.batch(1)
    assert words(replay) == ["a", "b"]  # the same tuples for the same txid
    second.committed(1)  # this instance does not hold a, b yet: they stay in the log, unsettled
    acks = [e[2] for e in EVENTS if e[0] == "ack"]
    assert acks == ["a", "b"]
    nxt, _ = second.batch(2)  # the broker redelivers a, b: acked now, not emitted again
    assert words(nxt) == ["c", "d"]
    assert [e[2] for e in EVENTS if e[0] == "ack"] == ["a", "b", "a", "b"]
    second.committed(2)
    assert QUEUE[0] == [] and dict(second.backend.scan("$spoutlog-t")) == {}


def test_next_tuple_raising_fails_the_batch_naming_component_and_task_and_opens_the_spout_again(
    tmp_path: Path,
) -> None:
    QUEUE[0], QUEUE[1] = ["a"], ["b"]
    d = _driver(tmp_path, ListSpout(raise_on=1), parallelism=2)
    _, failures = d.batch(1)
    assert [(f.component, f.task) for f in failures] == [("queue", 1)]
    assert "ConnectionError in next_tuple of spout 'queue' task 1: broker connection lost" in failures[0].error
    batch, failures = d.batch(1)  # the retry
    assert not failures and sorted(words(batch)) == ["a", "b"]
    assert [e[:2] for e in EVENTS if e[0] in ("open", "close")] == [("open", 0), ("open", 1), ("close", 1),
                                                                    ("open", 1)]  # fmt: skip


def test_an_abandoned_batch_fails_its_tuples_and_closes_the_spouts(tmp_path: Path) -> None:
    QUEUE[0] = ["a", "b"]
    d = _driver(tmp_path, ListSpout())
    d.batch(1)
    d.abandoned()
    assert [e for e in EVENTS if e[0] in ("fail", "close")] == [("fail", 0, "a"), ("fail", 0, "b"),
                                                                ("close", 0, None)]  # fmt: skip


def test_a_retry_past_the_message_timeout_fails_the_batch_s_tuples_then_replays_them(tmp_path: Path) -> None:
    QUEUE[0] = ["a", "b", "c"]
    d = _driver(tmp_path, ListSpout(), batch_max=2, timeout_ms=0)  # every retry is past the timeout
    d.batch(1)
    assert [e for e in EVENTS if e[0] == "fail"] == []  # the first attempt fails nothing
    again, _ = d.batch(1)  # the retry: Storm's tuple timeout, then the same tuples from the log
    assert words(again) == ["a", "b"]
    assert [e[2] for e in EVENTS if e[0] == "fail"] == ["a", "b"]
    d.committed(1)
    assert [e[2] for e in EVENTS if e[0] == "ack"] == ["a", "b"]
    (tmp_path / "p").mkdir()
    patient = _driver(tmp_path / "p", ListSpout(), batch_max=2)  # the default 30 s: a quick retry fails nothing
    QUEUE[0] = ["x"]
    patient.batch(1)
    patient.batch(1)
    assert [e[2] for e in EVENTS if e[0] == "fail"] == ["a", "b"]


class BufferingSpout(ListSpout):
    """Buffers its acks; :meth:`flush_acks` sends them, and fails (the broker is gone) the first time."""

    def open(self, conf: Any, context: Any, collector: SpoutOutputCollector) -> None:
        super().open(conf, context, collector)
        self.buffered: list[str] = []

    def ack(self, msg_id: Any) -> bool:
        EVENTS.append(("ack", self.task, msg_id))
        if msg_id in self.held:
            self.held.discard(msg_id)
            self.buffered.append(msg_id)
            return True
        return False

    def flush_acks(self) -> None:
        sent, self.buffered = self.buffered, []
        if ("flush_failed", self.task, None) not in EVENTS:
            EVENTS.append(("flush_failed", self.task, None))
            QUEUE.setdefault(self.task, [])[:0] = sent  # the broker requeues what was not acked
            msg = "connection reset"
            raise ConnectionError(msg)
        EVENTS.extend(("sent", self.task, m) for m in sent)


def test_acks_are_flushed_before_the_log_forgets_them_and_a_failed_flush_acks_on_redelivery(tmp_path: Path) -> None:
    QUEUE[0] = ["a", "b", "c"]
    d = _driver(tmp_path, BufferingSpout(), batch_max=2)
    d.batch(1)
    d.committed(1)  # the flush fails: a and b stay in the log, unsettled
    log = {k: json.loads(v) for k, v in d.backend.scan("$spoutlog-t")} if d.backend else {}
    assert log[b"queue/0/00000000000000000001"]["unsettled"] == ["a", "b"]
    nxt, _ = d.batch(2)  # the broker redelivers a, b: acked and flushed now, not emitted again
    assert words(nxt) == ["c"]
    assert [e[2] for e in EVENTS if e[0] == "sent"] == ["a", "b"]
    d.committed(2)
    assert [e[2] for e in EVENTS if e[0] == "sent"] == ["a", "b", "c"]
    assert dict(d.backend.scan("$spoutlog-t")) == {}


def test_max_spout_pending_bounds_a_task_s_batch(tmp_path: Path) -> None:
    QUEUE[0] = list("abcdefg")
    d = _driver(tmp_path, ListSpout(), max_pending=3)
    batch, _ = d.batch(1)
    assert words(batch) == ["a", "b", "c"]


def test_options_and_refusals_at_submit() -> None:
    assert SpoutOptions.from_conf({"topology.max.spout.pending": 5}, 200, 30) == SpoutOptions(5, 10_000, 200, 30_000)
    with pytest.raises(Exception, match="topology.max.spout.pending"):
        SpoutOptions.from_conf({"topology.max.spout.pending": 0}, 1000)
    b = TopologyBuilder()
    b.set_spout("q", ListSpout())
    b.set_spout("rate", RateSpout())
    b.set_bolt("count", Count()).shuffle_grouping("q").shuffle_grouping("rate")
    with pytest.raises(TopologyError, match="cannot share a topology"):
        check_storm_spouts("t", b.create_topology())

    class Neither(Spout):
        def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
            declarer.declare(["x"])

    b = TopologyBuilder()
    b.set_spout("n", Neither())
    b.set_bolt("count", Count()).shuffle_grouping("n")
    with pytest.raises(TopologyError, match="implements neither next_tuple"):
        check_storm_spouts("t", b.create_topology())


def test_the_collector_takes_storm_s_call_shapes_and_refuses_mistakes() -> None:
    c = SpoutOutputCollector("t", "s", 0, {"default": ("w",), "other": ("a", "b"), "d": ("x",)}, frozenset({"d"}))
    c.emit(["x"])
    c.emit(["y"], "id1")
    c.emit("other", ["a", "b"], msg_id=7)
    c.emit_direct(1, "d", ["z"])
    assert c.take() == [("default", ("x",), None, None), ("default", ("y",), "id1", None),
                        ("other", ("a", "b"), 7, None), ("d", ("z",), None, 1)]  # fmt: skip
    with pytest.raises(TopologyError, match="undeclared stream 'nope'"):
        c.emit("nope", ["x"])
    with pytest.raises(TopologyError, match="spout 's', task 0: emit of 2 value"):
        c.emit(["x", "y"], msg_id=1)
    with pytest.raises(TopologyError, match="declared direct"):
        c.emit("d", ["x"])


def test_a_storm_spout_is_transactional_through_the_log_for_trident_s_table() -> None:
    from weir.trident import Count, TridentTopology
    from weir.trident.state import MemoryMapState

    assert ListSpout().is_storm_spout() and not RateSpout().is_storm_spout()
    assert spout_type(ListSpout()) is StateType.TRANSACTIONAL
    t = TridentTopology()
    t.new_stream("s", ListSpout()).group_by(["word"]).persistent_aggregate(
        MemoryMapState.Factory("non_transactional"), Count(), "count"
    )
    want = (
        r"spout 's' is transactional \(a Storm spout, non-transactional in Storm; weir replays its batches from "
        r"the spout log\) and the state is non-transactional"
    )
    with pytest.raises(TopologyError, match=want):
        t.check_guarantees()


def test_a_trident_storm_spout_must_be_the_topology_s_only_spout(tmp_path: Path) -> None:
    import weir
    from weir.trident import Count, TridentTopology
    from weir.trident.backing import SqliteMapState

    t = TridentTopology()
    t.new_stream("s", ListSpout()).group_by(["word"]).persistent_aggregate(
        SqliteMapState.factory("opaque", f"sqlite:///{tmp_path / 'm.db'}", table="m"), Count(), "count"
    )
    t.new_stream("rate", RateSpout())
    with pytest.raises(TopologyError, match="Trident stream 's' reads a Storm spout .* must be the topology's only"):
        weir.submit("t", {"weir.state.dir": str(tmp_path), "weir.spark.master": "local[1]"}, t)
