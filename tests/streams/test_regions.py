"""Consistent-region features of seed 002, with the order of calls recorded: control and autonomous
input ports, permits for background threads, per-region drain_timeout / reset_timeout /
max_consecutive_reset_attempts, and StatefulWindowListener beside the window handlers.

Everything runs in this process through :class:`weir.testing.OperatorTester` (the real
coordinator and task runner, a memory store), so the sequences are deterministic.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from tests.streams._ops import CALLS, calls
from weir.errors import ConfigError, TopologyError
from weir.streams import (
    Checkpoint,
    Operator,
    OperatorContext,
    StatefulWindowListener,
    StateHandler,
    TumblingWindowSort,
    WindowEvent,
)
from weir.testing import OperatorTester
from weir.topology import Fields, OutputCollector, Tuple

# threads a test leaves holding a permit wait on this; released at the end of every test
_RELEASE = threading.Event()


@pytest.fixture(autouse=True)
def _release_threads() -> Any:
    _RELEASE.clear()
    yield
    _RELEASE.set()


class PortOp(Operator, StateHandler):
    """Records which port each tuple came in on; its state is the list of values it processed."""

    def __init__(
        self,
        control: tuple[str, ...] = (),
        autonomous: tuple[str, ...] = (),
        *,
        background: str = "",
        reset_delay: float = 0.0,
    ) -> None:
        self.control_ports = control
        self.autonomous_ports = autonomous
        self.background = background  # "finish": a thread holds a permit briefly; "hold": until _RELEASE
        self.reset_delay = reset_delay

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("v"))

    def rec(self, method: str, *args: Any) -> None:
        CALLS.append((self.role, "op", method, *args))

    def prepare(self, conf: Mapping[str, Any], context: OperatorContext, collector: OutputCollector) -> None:
        super().prepare(conf, context, collector)
        self.role = "hook" if context.hooks_only else "task"
        self.seen: list[Any] = []

    def process(self, tup: Tuple) -> None:
        self.rec("process", tup.source_component, tup[0])
        self.seen.append(tup[0])
        if self.background and tup.source_component == "src":
            region = self.context.consistent_region_context
            assert region is not None
            region.acquire_permit()  # taken on the processing thread, released by the background one
            threading.Thread(target=self._work, args=(tup[0],), daemon=True).start()

    def _work(self, v: Any) -> None:
        region = self.context.consistent_region_context
        assert region is not None
        try:
            if self.background == "hold":
                _RELEASE.wait(60)
            else:
                time.sleep(0.05)
            self.rec("background_done", v)
            self.submit([f"bg-{v}"])
        finally:
            region.release_permit()

    def drain(self) -> None:
        self.rec("drain")

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        self.rec("checkpoint", checkpoint.sequence_id)
        checkpoint.write_object(list(self.seen))

    def reset(self, checkpoint: Checkpoint) -> None:
        self.rec("reset", checkpoint.sequence_id)
        time.sleep(self.reset_delay)
        self.seen = checkpoint.read_object()

    def reset_to_initial_state(self) -> None:
        self.rec("reset_to_initial_state")
        self.seen = []

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        pass


def test_cut_order_is_data_ports_drain_control_ports_checkpoint() -> None:
    t = OperatorTester(PortOp(control=("ctl",)), input_fields=["v"], inputs={"ctl": ["v"]})
    # the control tuples arrive first, yet wait for drain(); the data tuples go first
    r = t.run_batch([[1], [2]], ports={"ctl": [["c1"], ["c2"]]})
    assert r.committed
    assert calls("task") == [
        ("op", "process", "src", 1), ("op", "process", "src", 2), ("op", "drain"),
        ("op", "process", "ctl", "c1"), ("op", "process", "ctl", "c2"), ("op", "checkpoint", 1),
    ]  # fmt: skip
    ckpt = t.checkpoint()
    assert ckpt is not None and ckpt.read_object() == [1, 2, "c1", "c2"]  # control tuples are in the cut


def test_autonomous_port_tuples_are_outside_the_cut() -> None:
    t = OperatorTester(PortOp(autonomous=("auto",)), input_fields=["v"], inputs={"auto": ["v"]})
    t.run_batch([[1]], ports={"auto": [["a1"]]})
    assert calls("task") == [
        ("op", "process", "src", 1), ("op", "drain"), ("op", "checkpoint", 1), ("op", "process", "auto", "a1"),
    ]  # fmt: skip
    first = t.checkpoint()
    assert first is not None and first.read_object() == [1]  # not in checkpoint 1 ...
    t.run_batch([[2]])
    second = t.checkpoint()
    assert second is not None and second.read_object() == [1, "a1", 2]  # ... but in the next one


def test_checkpoint_waits_until_background_threads_release_their_permits() -> None:
    t = OperatorTester(PortOp(background="finish"), input_fields=["v"])
    r = t.run_batch([[1], [2]])
    assert r.committed
    seq = calls("task")
    assert seq.index(("op", "drain")) < seq.index(("op", "checkpoint", 1))
    for v in (1, 2):  # both background threads finished (and released) before checkpoint()
        assert seq.index(("op", "background_done", v)) < seq.index(("op", "checkpoint", 1))
    assert sorted(v for v in r.values() if str(v[0]).startswith("bg-")) == [["bg-1"], ["bg-2"]]


def test_a_permit_held_past_drain_timeout_fails_the_cut_naming_the_region() -> None:
    t = OperatorTester(PortOp(background="hold"), input_fields=["v"], region_options={"drain_timeout": 0.2})
    r = t.run_batch([[1]])
    assert not r.committed and r.error is not None
    assert "drain_timeout of consistent region 0 (0.2 s)" in str(r.error)
    assert "1 permit(s) still held" in str(r.error)
    assert ("op", "checkpoint", 1) not in calls("task")
    assert t.head() is None  # nothing committed


def test_a_reset_slower_than_reset_timeout_fails_the_batch() -> None:
    t = OperatorTester(PortOp(reset_delay=0.3), input_fields=["v"], region_options={"reset_timeout": 0.1})
    assert t.run_batch([[1]]).committed
    assert not t.run_batch([[2]], fail=True).committed  # the next attempt resets to checkpoint 1 ...
    again = t.run_batch([[2]])
    assert not again.committed and again.error is not None
    assert "reset_timeout of consistent region 0 (0.1 s)" in str(again.error)  # ... too slowly
    assert calls("task", methods=("reset",)) == [("op", "reset", 1)]


def test_max_consecutive_reset_attempts_stops_the_topology() -> None:
    t = OperatorTester(PortOp(), input_fields=["v"], region_options={"max_consecutive_reset_attempts": 2})
    assert t.run_batch([[1]]).committed
    for _ in range(2):  # two resets in a row are allowed
        r = t.run_batch([[2]], fail=True)
        assert r.error is not None and "max_consecutive_reset_attempts" not in str(r.error)
    r = t.run_batch([[2]], fail=True)
    assert isinstance(r.error, TopologyError)
    assert "consistent region 0 (operators op) was reset 3 times in a row" in str(r.error)
    assert "max_consecutive_reset_attempts (2)" in str(r.error)
    # a success in between starts the count again
    t2 = OperatorTester(PortOp(), input_fields=["v"], region_options={"max_consecutive_reset_attempts": 1})
    assert t2.run_batch([[1]], fail=True).error is not None
    assert t2.run_batch([[1]]).committed
    r2 = t2.run_batch([[2]], fail=True)
    assert r2.error is not None and "max_consecutive_reset_attempts" not in str(r2.error)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"drain_timeout": 0}, "drain_timeout must be seconds > 0"),
        ({"reset_timeout": "fast"}, "reset_timeout must be seconds > 0"),
        ({"max_consecutive_reset_attempts": 0}, "max_consecutive_reset_attempts must be an int ≥ 1"),
        ({"drain_timout": 3}, "unknown option(s) ['drain_timout']"),
    ],
)
def test_bad_region_options_fail_at_submit(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match="consistent_region\\(\\) #0") as ei:
        OperatorTester(PortOp(), input_fields=["v"], region_options=options)
    assert message in str(ei.value)


def test_ports_must_be_inputs_and_of_one_kind() -> None:
    with pytest.raises(TopologyError, match="control_ports names 'nope', which is not one of its inputs"):
        OperatorTester(PortOp(control=("nope",)), input_fields=["v"])
    with pytest.raises(TopologyError, match="both a control and an autonomous port"):
        OperatorTester(PortOp(control=("x",), autonomous=("x",)), input_fields=["v"], inputs={"x": ["v"]})


class WindowStats(StatefulWindowListener[dict[str, Any]]):
    """Counts insertions, windows and the sum of the evicted values; records every event."""

    def initial_state(self, partition: Any) -> dict[str, Any]:
        return {"inserted": 0, "windows": 0, "evicted_sum": 0}

    def handle_event(
        self, event: WindowEvent, tuples: list[tuple[Any, ...]], partition: Any, state: dict[str, Any]
    ) -> None:
        CALLS.append(("task", "listener", event.value, [t[0] for t in tuples]))
        if event is WindowEvent.INSERTION:
            state["inserted"] += len(tuples)
        elif event is WindowEvent.TRIGGER:
            state["windows"] += 1
        else:
            state["evicted_sum"] += sum(t[0] for t in tuples)

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        CALLS.append(("task", "listener", "checkpoint", checkpoint.sequence_id))
        super().checkpoint(checkpoint)

    def reset(self, checkpoint: Checkpoint) -> None:
        CALLS.append(("task", "listener", "reset", checkpoint.sequence_id))
        super().reset(checkpoint)


def test_stateful_window_listener_gets_events_and_keeps_state_through_a_crash() -> None:
    op = TumblingWindowSort(2, ["v"], listeners=[WindowStats()])
    t = OperatorTester(op, input_fields=["v"])
    t.run_batch([[5], [3], [4]])
    assert calls("task") == [
        ("listener", "insertion", [5]), ("listener", "insertion", [3]),
        ("listener", "trigger", [3, 5]), ("listener", "eviction", [3, 5]),
        ("listener", "insertion", [4]), ("listener", "checkpoint", 1),
    ]  # fmt: skip
    ckpt = t.checkpoint()
    assert ckpt is not None
    ckpt.read_object(), ckpt.read_object()  # the operator's window number, then the window's tuples
    assert ckpt.read_object() == [[None, {"inserted": 3, "windows": 1, "evicted_sum": 8}]]
    t.crash()  # a new worker: the listener's state comes back from checkpoint 1
    CALLS.clear()
    r = t.run_batch([[1]])
    assert r.values() == [[1, 1], [4, 1]]
    assert calls("task")[:2] == [("listener", "reset", 1), ("listener", "insertion", [1])]
    last = t.checkpoint()
    assert last is not None
    last.read_object(), last.read_object()
    assert last.read_object() == [[None, {"inserted": 4, "windows": 2, "evicted_sum": 13}]]


# ---- independent regions -----------------------------------------------------------------------
class Named(Operator, StateHandler):
    """Sums its values; records calls under its name; raises on ``fail_on`` while ``FAILS`` says so."""

    def __init__(self, name: str, fail_on: Any = None) -> None:
        self.name = name
        self.fail_on = fail_on

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("v"))

    def prepare(self, conf: Mapping[str, Any], context: OperatorContext, collector: OutputCollector) -> None:
        super().prepare(conf, context, collector)
        self.role = "hook" if context.hooks_only else "task"
        self.total = 0

    def rec(self, method: str, *args: Any) -> None:
        CALLS.append((self.role, self.name, method, *args))

    def process(self, tup: Tuple) -> None:
        self.rec("process", tup[0])
        if tup[0] == self.fail_on and FAILS:
            FAILS.pop()
            raise RuntimeError(f"{self.name} cannot take {tup[0]}")
        self.total += tup[0]

    def drain(self) -> None:
        self.rec("drain")

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        self.rec("checkpoint", checkpoint.sequence_id)
        checkpoint.put("total", self.total)

    def reset(self, checkpoint: Checkpoint) -> None:
        self.rec("reset", checkpoint.sequence_id)
        self.total = checkpoint.get("total")

    def reset_to_initial_state(self) -> None:
        self.rec("reset_to_initial_state")
        self.total = 0

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        pass


FAILS: list[int] = []


def _two_regions(max_retries: int) -> tuple[Any, Any]:
    """Operators ``a`` (region 0) and ``b`` (region 1) fed by one pseudo spout, and a batch runner."""
    from weir.checkpoint.coordinator import CheckpointStore, Coordinator, JobOutcome, TaskFailure
    from weir.runtime.spark.config import RuntimeConfig
    from weir.runtime.spark.storm.task import TaskSpec
    from weir.runtime.spark.streams.operators import StreamsParticipants, run_operator_task
    from weir.runtime.spark.streams.testing import _InputSpout
    from weir.state import StateFactory
    from weir.topology import TopologyBuilder

    b = TopologyBuilder()
    b.set_spout("src", _InputSpout(["v"]))
    b.set_bolt("a", Named("a"), 1).shuffle_grouping("src")
    b.set_bolt("b", Named("b", fail_on=5), 1).shuffle_grouping("src")
    b.consistent_region("a")
    b.consistent_region("b")
    topo = b.create_topology()
    provider = StateFactory.from_url("memory://two-regions")
    rc = RuntimeConfig.from_conf("two", {})
    specs = [
        TaskSpec(
            topology="two", component_id=cid, component=topo.components[cid].obj, parallelism=1,
            outputs=dict(topo.components[cid].outputs), input_fields={("src", "default"): Fields("v")},
            component_tasks={"src": 1, "a": 1, "b": 1}, provider=provider, stateful=True,
            consumed_streams=frozenset(),
        )
        for cid in ("a", "b")
    ]  # fmt: skip
    parts = StreamsParticipants(specs, provider, rc, topo)
    store = CheckpointStore(provider.backend, "two")
    coord = Coordinator("two", store, parts, {"a": 1, "b": 1}, max_retries=max_retries)
    coord.start()

    def run(batch_id: int, values: list[int]) -> Any:
        def job(txid: int, epoch: int, attempt: int) -> JobOutcome:
            failures = []
            for spec in specs:
                recs = [("src", "default", (v,), 0) for v in values]
                for rec in run_operator_task(spec, 0, txid, epoch, recs):
                    if rec[0] == "R":
                        CALLS.append(("task", spec.component_id, "report", rec[1].extra.get("restore")))
                        if not rec[1].ok:
                            failures.append(TaskFailure(spec.component_id, 0, rec[1].error))
            return JobOutcome(failures=failures)

        return coord.run_batch("q", batch_id, job)

    return run, parts


def _total(cid: str) -> Any:
    from weir.streams import load_checkpoint

    ck = load_checkpoint("memory://two-regions", "two", cid, 0)
    return None if ck is None else (ck.sequence_id, ck.get("total"))


def test_a_failure_in_one_region_resets_only_that_region() -> None:
    run, _ = _two_regions(max_retries=2)
    run(0, [1, 2])
    CALLS.clear()
    FAILS.append(1)  # b fails on 5 once
    report = run(1, [5, 6])
    assert report.attempts == 2 and not report.skipped
    assert calls("task") == [
        ("a", "process", 5), ("a", "process", 6), ("a", "drain"), ("a", "checkpoint", 2), ("a", "report", "live"),
        ("b", "process", 5), ("b", "report", None),                       # attempt 1: b fails
        ("a", "report", "kept"),                                          # attempt 2: a keeps its cut
        ("b", "reset", 1), ("b", "process", 5), ("b", "process", 6), ("b", "drain"), ("b", "checkpoint", 2),
        ("b", "report", "reset"),
    ]  # fmt: skip
    assert _total("a") == (2, 14) and _total("b") == (2, 14)  # each value counted once in each region


def test_a_single_region_is_reset_whole() -> None:
    """Without several regions (the default), any failure resets every operator (as before)."""
    t = OperatorTester(PortOp(), input_fields=["v"], inputs={"ctl": ["v"]})
    assert t.run_batch([[1]]).committed
    assert not t.run_batch([[2]], fail=True).committed
    CALLS.clear()
    assert t.run_batch([[2]]).committed
    assert calls("task")[0] == ("op", "reset", 1)
