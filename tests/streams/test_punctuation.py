"""Punctuation (seed 002: ``process`` and ``processPunctuation`` return for every tuple and mark of
the cut before ``drain()``): window and final marks received, forwarded and aligned, with the order
of calls recorded — several upstream tasks, two inputs, control and autonomous ports, replays after a
failure and a crash, the routing of marks to every consumer task, and punctuation-based windows.

Everything but the routing runs through :class:`weir.testing.OperatorTester` (the real
coordinator and task runner, a memory store), so the sequences are deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from tests.streams._ops import CALLS, calls
from weir.checkpoint.coordinator import Participants
from weir.errors import TopologyError
from weir.streams import Checkpoint, InputPort, Operator, OperatorContext, Punctuation, StateHandler, TumblingWindowSort
from weir.testing import OperatorTester
from weir.topology import Fields, OutputCollector, Tuple

W, F = Punctuation.WINDOW_MARKER, Punctuation.FINAL_MARKER
mark = OperatorTester.mark


class MarkOp(Operator, StateHandler):
    """Submits every value it processes; records tuples, marks, drain and checkpoint."""

    def __init__(self, control: tuple[str, ...] = (), autonomous: tuple[str, ...] = ()) -> None:
        self.control_ports = control
        self.autonomous_ports = autonomous

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("v"))

    def rec(self, *args: Any) -> None:
        CALLS.append(("task", self.context.task_index, *args))

    def prepare(self, conf: Mapping[str, Any], context: OperatorContext, collector: OutputCollector) -> None:
        super().prepare(conf, context, collector)
        self.seen: list[Any] = []

    def process(self, tup: Tuple) -> None:
        self.rec("process", tup.source_component, tup[0])
        self.seen.append(tup[0])
        self.submit([tup[0]])

    def process_punctuation(self, port: InputPort, mark: Punctuation) -> None:
        self.rec("punct", port.component, port.kind, mark.value)
        self.seen.append(f"{port.component}:{mark.value}")
        super().process_punctuation(port, mark)  # forwards a window mark

    def drain(self) -> None:
        self.rec("drain")

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        self.rec("checkpoint", checkpoint.sequence_id)
        checkpoint.write_object(list(self.seen))

    def reset(self, checkpoint: Checkpoint) -> None:
        self.rec("reset", checkpoint.sequence_id)
        self.seen = checkpoint.read_object()

    def reset_to_initial_state(self) -> None:
        self.rec("reset_to_initial_state")
        self.seen = []

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        pass


def task_calls(task: int) -> list[tuple[Any, ...]]:
    return [c[1:] for c in calls(None) if c[0] == "task" and c[1] == task]


def two_input_batch() -> dict[int, list[tuple[Any, ...]]]:
    """Two operator tasks; ``src`` has 2 upstream tasks, ``other`` 1. Arrival orders differ per task."""
    return {
        0: [
            ("src", "default", (1,), 0), mark(W, "src", 0, 2), ("src", "default", (2,), 0),  # 2 waits for src1's mark
            ("src", "default", (3,), 1), ("other", "default", ("x",), 0), mark(W, "src", 1, 2),
            mark(F, "src", 0, 2), mark(F, "other", 0, 1), ("src", "default", (4,), 1), mark(F, "src", 1, 2),
        ],
        1: [
            ("src", "default", (5,), 1), mark(W, "src", 1, 2), mark(W, "src", 0, 2),
            mark(F, "other", 0, 1), mark(F, "src", 1, 2), mark(F, "src", 0, 2),
        ],
    }  # fmt: skip


def test_marks_are_aligned_per_port_delivered_before_drain_and_forwarded_in_order() -> None:
    t = OperatorTester(MarkOp(), input_fields=["v"], inputs={"other": ["v"]}, parallelism=2)
    r = t.run_batch([], records=two_input_batch())
    assert r.committed
    assert task_calls(0) == [
        (0, "process", "src", 1), (0, "process", "src", 3), (0, "process", "other", "x"),
        (0, "punct", "src", "data", "window"),  # once every upstream task of the port sent it
        (0, "process", "src", 2),  # held behind src task 0's mark
        (0, "punct", "other", "data", "final"),
        (0, "process", "src", 4),
        (0, "punct", "src", "data", "final"),  # after both src tasks ended
        (0, "drain"), (0, "checkpoint", 1),
    ]  # fmt: skip
    assert task_calls(1) == [
        (1, "process", "src", 5), (1, "punct", "src", "data", "window"),
        (1, "punct", "other", "data", "final"), (1, "punct", "src", "data", "final"),
        (1, "drain"), (1, "checkpoint", 1),
    ]  # fmt: skip
    # forwarded: the window mark after the tuples before it, one final mark once every port ended
    assert r.sequence(task=0) == [[1], [3], ["x"], W, [2], [4], F]
    assert r.sequence(task=1) == [[5], W, F]
    # the marks are part of the cut: the checkpoint saw them
    ck = t.checkpoint(0)
    assert ck is not None and ck.read_object() == [1, 3, "x", "src:window", 2, "other:final", 4, "src:final"]


def test_a_failed_batch_and_a_crash_replay_the_same_marks_in_the_same_places() -> None:
    t = OperatorTester(MarkOp(), input_fields=["v"], inputs={"other": ["v"]}, parallelism=2)
    assert t.run_batch([], records={0: [("src", "default", (0,), 0)], 1: []}).committed
    CALLS.clear()
    bad = t.run_batch([], records=two_input_batch(), fail=True)
    assert not bad.committed
    first = [task_calls(0), task_calls(1)]
    CALLS.clear()
    again = t.run_batch([], records=two_input_batch())
    assert again.committed and again.txid == bad.txid == 2
    # the retry resets to checkpoint 1, then receives every tuple and mark exactly as the failed attempt
    assert task_calls(0) == [(0, "reset", 1), *first[0]]
    assert task_calls(1) == [(1, "reset", 1), *first[1]]
    assert again.sequence(task=0) == bad.sequence(task=0) == [[1], [3], ["x"], W, [2], [4], F]
    CALLS.clear()
    t.run_batch([], records=two_input_batch(), crash=True)  # prepared, then everything dies
    t.crash()
    CALLS.clear()
    after = t.run_batch([], records=two_input_batch())
    assert after.txid == 3 and after.sequence(task=1) == [[5], W, F]
    assert task_calls(1)[0] == (1, "reset", 2) and task_calls(1)[1:] == first[1][:-1] + [(1, "checkpoint", 3)]
    ck = t.checkpoint(0)
    assert ck is not None and ck.read_object() == [0, *[1, 3, "x", "src:window", 2, "other:final", 4, "src:final"] * 2]


def test_marks_on_control_ports_come_after_drain_and_on_autonomous_ports_after_checkpoint() -> None:
    t = OperatorTester(
        MarkOp(control=("ctl",), autonomous=("auto",)), input_fields=["v"], inputs={"ctl": ["v"], "auto": ["v"]}
    )
    recs = [
        ("ctl", "default", ("c",), 0), mark(W, "ctl"), ("auto", "default", ("a",), 0), mark(W, "auto"),
        ("src", "default", (1,), 0), mark(W, "src"), ("src", "default", (2,), 0),
    ]  # fmt: skip
    r = t.run_batch([], records={0: recs})
    assert r.committed
    assert task_calls(0) == [
        (0, "process", "src", 1), (0, "punct", "src", "data", "window"), (0, "process", "src", 2),
        (0, "drain"),
        (0, "process", "ctl", "c"), (0, "punct", "ctl", "control", "window"),
        (0, "checkpoint", 1),
        (0, "process", "auto", "a"), (0, "punct", "auto", "autonomous", "window"),
    ]  # fmt: skip
    # what drain() and the control ports submit is handed on once the cut is prepared, after what the
    # autonomous port submitted; each port's mark stays behind that port's tuples
    assert r.sequence() == [[1], W, [2], ["a"], W, ["c"], W]


def test_punctuation_based_window_survives_a_failure_and_the_final_mark_flushes_it() -> None:
    t = OperatorTester(TumblingWindowSort(None, ["v"]), input_fields=["v"])
    r1 = t.run_batch([[5], [3], W, [9], [1]])
    assert r1.sequence() == [[3, 0], [5, 0], W]
    bad = t.run_batch([[4], W, [2]], fail=True)
    assert bad.sequence() == [[1, 1], [4, 1], [9, 1], W]
    retry = t.run_batch([[4], W, [2]])  # the same marks: the same window, numbered the same
    assert retry.sequence() == bad.sequence()
    t.crash()
    end = t.run_batch([[7], F])
    assert end.sequence() == [[2, 2], [7, 2], F]
    ck = t.checkpoint()
    assert ck is not None and ck.read_object() == {"window": 3} and ck.read_object() == []


def test_count_window_forwards_window_marks_and_flushes_its_open_window_on_the_final_mark() -> None:
    t = OperatorTester(TumblingWindowSort(2, ["v"]), input_fields=["v"], parallelism=2)
    r = t.run_batch([[4], [3], [2], W, [1], [0], F])
    # round robin: task 0 gets 4, 2 | 0, task 1 gets 3 | 1; a count window ignores window marks
    assert r.sequence(task=0) == [[2, 0], [4, 0], W, [0, 1], F]  # the open window [0] flushed by F
    assert r.sequence(task=1) == [W, [1, 0], [3, 0], F]


def test_routing_sends_marks_to_every_consumer_task_in_their_place() -> None:
    from weir.runtime.spark.storm.batch import key_for_grouping
    from weir.runtime.spark.storm.task import records_of
    from weir.topology import TopologyBuilder
    from weir.topology.punctuation import MarkRecord

    b = TopologyBuilder()
    b.set_spout("src", _Src())
    b.set_bolt("op", MarkOp(), 3).fields_grouping("src", Fields("v"))
    sub = b.create_topology().components["op"].inputs[0]
    produced = [("T", "default", (1,), 0, None), ("P", "default", W, 0, None), ("T", "default", (2,), 0, None),
                ("P", "other", W, 0, None), ("P", "default", F, 0, None)]  # fmt: skip
    routed: dict[int, list[Any]] = {}
    for task, chunk in key_for_grouping(sub, [0], 3, producers=2)(0, iter(produced)):
        routed.setdefault(task, []).extend(records_of(chunk))
    for task in range(3):
        got = [r[2] for r in routed[task]]
        assert [g for g in got if isinstance(g, MarkRecord)] == [MarkRecord(W, 2), MarkRecord(F, 2)]
    where = {v: t for t, recs in routed.items() for r in recs if isinstance((v := r[2]), tuple)}
    for v, task in where.items():  # each tuple on its task, before / after the marks as produced
        seq = [r[2] for r in routed[task]]
        assert seq.index(v) == (0 if v == (1,) else 2)


def test_submit_punctuation_on_an_undeclared_stream_names_the_operator_and_task() -> None:
    class Bad(MarkOp):
        def process(self, tup: Tuple) -> None:
            self.submit_punctuation(W, stream="nope")

    r = OperatorTester(Bad(), input_fields=["v"]).run_batch([[1]])
    assert isinstance(r.error, TopologyError)
    assert "operator 'op' task 0: submit_punctuation on undeclared stream 'nope'" in str(r.error)


class _Src(__import__("weir.topology", fromlist=["Spout"]).Spout):
    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("v"))

    def create_stream(self, spark: Any, context: Any) -> Any:  # pragma: no cover - never called
        raise NotImplementedError


@pytest.mark.parametrize("parallelism", [1, 2])
def test_storm_bolts_forward_aligned_marks(parallelism: int) -> None:
    from weir.runtime.spark.storm.task import TaskSpec, run_task
    from weir.topology import BasicBolt
    from weir.topology.punctuation import MarkRecord

    class Double(BasicBolt):
        def declare_output_fields(self, declarer: Any) -> None:
            declarer.declare(Fields("v"))

        def execute(self, tup: Tuple, collector: Any) -> None:
            collector.emit([tup[0] * 2])

    spec = TaskSpec(
        "t", "double", Double(), 1, {"default": Fields("v")}, {("src", "default"): Fields("v")},
        consumed_streams=frozenset({"default"}), punctuation=True,
    )  # fmt: skip
    recs = [("src", "default", (1,), 0), ("src", "default", MarkRecord(W, parallelism), 0),
            ("src", "default", (2,), 0), ("src", "default", (3,), 1),
            ("src", "default", MarkRecord(W, parallelism), 1)]  # fmt: skip
    out = [(r[0], r[2]) for r in run_task(spec, 0, 1, None, recs) if r[0] in ("T", "P")]
    if parallelism == 2:  # 2 waits behind task 0's mark until task 1's mark arrives
        assert out == [("T", (2,)), ("T", (6,)), ("P", W), ("T", (4,))]
    else:  # one upstream task: every copy is a mark of its own
        assert out == [("T", (2,)), ("P", W), ("T", (4,)), ("T", (6,)), ("P", W)]


class _Die(BaseException):
    """The driver dies (escapes the coordinator like a SIGKILL would stop it)."""


class _Participants(Participants):
    def __init__(self) -> None:
        self.die_in_commit = False
        self.log: list[tuple[str, int]] = []

    def commit_all(self, txid: int, epoch: int, after_first: Any = None) -> None:
        if self.die_in_commit:
            raise _Die
        self.log.append(("commit", txid))

    def rollback_all(self, epoch: int, after_first: Any = None) -> None:
        self.log.append(("rollback", -1))


@pytest.mark.parametrize("dies", ["in_job", "in_commit"])
def test_the_final_transaction_moves_the_txid_base_only_with_its_commit(dies: str) -> None:
    """The final mark's transaction takes Spark's next batch id; its COMMITTING record moves
    ``txid_base`` on, so after a crash Spark's next batch gets the txid after it (rolled forward) or
    the same txid again (rolled back) — never a skip, never a gap."""
    from weir.checkpoint.coordinator import CheckpointStore, Coordinator, JobOutcome
    from weir.state import StateFactory

    backend = StateFactory.from_url("memory://final-rebase").backend
    parts = _Participants()

    def coordinator() -> Coordinator:
        c = Coordinator("fin", CheckpointStore(backend, "fin"), parts, {}, max_retries=0)  # type: ignore[arg-type]
        c.start()
        return c

    def ok(txid: int, epoch: int, attempt: int) -> JobOutcome:
        return JobOutcome()

    def die(txid: int, epoch: int, attempt: int) -> JobOutcome:
        raise _Die

    c = coordinator()
    assert [c.run_batch("q", b, ok).txid for b in (0, 1)] == [1, 2]
    parts.die_in_commit = dies == "in_commit"
    with pytest.raises(_Die):
        c.run_batch("q", 2, die if dies == "in_job" else ok, rebase=1)  # the final mark: txid 3
    parts.die_in_commit = False
    c = coordinator()
    after = c.run_batch("q", 2, ok)  # Spark's next batch (id 2) after the restart
    assert not after.skipped
    if dies == "in_commit":  # COMMITTING(3) is rolled forward; batch 2 is txid 4
        assert parts.log[-2:] == [("commit", 3), ("commit", 4)] and after.txid == 4
    else:  # PREPARING(3) is rolled back; batch 2 takes txid 3
        assert parts.log[-2:] == [("rollback", -1), ("commit", 3)] and after.txid == 3


def test_spouts_punctuate_by_row_at_the_end_of_each_batch_and_at_the_end_of_a_finite_run() -> None:
    from weir.runtime.spark.storm.batch import topology_punctuates
    from weir.runtime.spark.storm.task import TaskSpec, run_spout_task
    from weir.topology import TopologyBuilder

    class Marked(_Src):
        window_mark_each_batch = True

        def is_window_mark(self, row: Any) -> bool:
            return bool(row[0] == "--")

    spec = TaskSpec("t", "src", Marked(), 1, {"default": Fields("v")})
    out = [r[:3] for r in run_spout_task(spec, 0, 1, [("a",), ("--",), ("b",)], final=True) if r[0] != "R"]
    assert out == [
        ("T", "default", ("a",)), ("P", "default", W), ("T", "default", ("b",)),
        ("P", "default", W),  # window_mark_each_batch
        ("P", "default", F),  # the final transaction
    ]  # fmt: skip
    plain = TaskSpec("t", "src", _Src(), 1, {"default": Fields("v")})
    assert [r[0] for r in run_spout_task(plain, 0, 1, [("a",)])] == ["T", "R"]

    def topo(spout: Any, bolt: Any) -> Any:
        b = TopologyBuilder()
        b.set_spout("src", spout)
        b.set_bolt("b", bolt, 1).shuffle_grouping("src")
        return b.create_topology()

    from tests.streams._punct import Parse

    assert not topology_punctuates(topo(_Src(), Parse()))  # plain Storm: no aligner, no overhead
    assert topology_punctuates(topo(Marked(), Parse()))
    assert topology_punctuates(topo(_Src(), MarkOp()))
