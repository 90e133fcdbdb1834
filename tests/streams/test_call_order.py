"""The order of StateHandler calls, recorded, through batches, failures, crashes and restarts.

Everything runs in this process through :class:`weir.testing.OperatorTester` (real
coordinator, real task runner, memory store), so every sequence is deterministic.
"""

from __future__ import annotations

import pytest

from tests.streams._ops import Recorded, Summer, calls
from weir.runtime.spark.streams.operators import _LIVE, live_instance
from weir.streams import Checkpoint, OrderedStateHandlers
from weir.testing import OperatorTester

CUT = [("op", "drain"), ("a", "drain")]


def ckpt(n: int) -> list[tuple[object, ...]]:
    return [("op", "checkpoint", n), ("a", "checkpoint", n)]


def proc(*values: int) -> list[tuple[object, ...]]:
    return [("op", "process", v) for v in values]


HOOK_METHODS = ("region_checkpointed", "retire_checkpoint")


def test_first_batches_process_then_drain_then_checkpoint_with_no_reset() -> None:
    t = OperatorTester(Summer(), input_fields=["v"])
    r1 = t.run_batch([[1], [2]])
    r2 = t.run_batch([[3]])
    r3 = t.run_batch([[4]])
    assert [r.txid for r in (r1, r2, r3)] == [1, 2, 3]
    assert all(r.committed for r in (r1, r2, r3))
    # submitted from drain(): (tuples in the cut, running total)
    assert (r1.values(), r2.values(), r3.values()) == ([[2, 3]], [[1, 6]], [[1, 10]])
    assert calls("task") == [
        ("op", "prepare"), *proc(1, 2), *CUT, *ckpt(1),
        *proc(3), *CUT, *ckpt(2),
        *proc(4), *CUT, *ckpt(3),
    ]  # fmt: skip
    # never a reset on first initialisation
    assert not calls("task", methods=("reset", "reset_to_initial_state"))
    # the driver tells the start operator's handlers when the region has checkpointed; checkpoint 1
    # is retired (and deleted) when checkpoint 3 completes (weir.checkpoint.retain = 2)
    assert calls("hook", methods=HOOK_METHODS) == [
        ("op", "region_checkpointed", 1), ("a", "region_checkpointed", 1),
        ("op", "region_checkpointed", 2), ("a", "region_checkpointed", 2),
        ("op", "region_checkpointed", 3), ("a", "region_checkpointed", 3),
        ("op", "retire_checkpoint", 1), ("a", "retire_checkpoint", 1),
    ]  # fmt: skip
    # the driver-side hook instance is prepared, then closed (handlers in reverse order) and cleaned up
    assert calls("hook")[:1] == [("op", "prepare")]
    assert calls("hook")[-3:] == [("a", "close"), ("op", "close"), ("op", "cleanup")]
    # the task's instance is the same object through all three batches
    assert calls("task", methods=("prepare",)) == [("op", "prepare")]


def test_failure_before_the_first_checkpoint_resets_to_initial_state() -> None:
    t = OperatorTester(Summer(), input_fields=["v"])
    failed = t.run_batch([[1], [2]], fail=True)
    assert not failed.committed and failed.error is not None
    assert t.head() is None  # nothing committed: the region has no complete checkpoint
    again = t.run_batch([[1], [2]])
    assert again.txid == failed.txid == 1 and again.committed
    assert again.values() == [[2, 3]]  # not 6: the failed attempt's sums were reset
    assert calls("task") == [
        ("op", "prepare"), *proc(1, 2), *CUT, *ckpt(1),
        ("op", "reset_to_initial_state"), ("a", "reset_to_initial_state"),
        *proc(1, 2), *CUT, *ckpt(1),
    ]  # fmt: skip
    assert calls("hook", methods=HOOK_METHODS) == [("op", "region_checkpointed", 1), ("a", "region_checkpointed", 1)]


def test_crash_before_the_first_checkpoint_gives_the_new_instance_reset_to_initial_state() -> None:
    t = OperatorTester(Summer(), input_fields=["v"])
    t.run_batch([[5]], crash=True)  # the driver dies after the job: PREPARING(1), heads prepared
    t.crash()
    r = t.run_batch([[5]])
    assert r.txid == 1 and r.values() == [[1, 5]]
    assert calls("task") == [
        ("op", "prepare"), *proc(5), *CUT, *ckpt(1),
        # a new worker: a new instance, prepared, then reset (the task ran before, so not a first start)
        ("op", "prepare"), ("op", "reset_to_initial_state"), ("a", "reset_to_initial_state"),
        *proc(5), *CUT, *ckpt(1),
    ]  # fmt: skip


def test_later_failures_reset_to_the_latest_complete_checkpoint() -> None:
    t = OperatorTester(Summer(), input_fields=["v"])
    t.run_batch([[1]])
    t.run_batch([[2]])
    bad = t.run_batch([[100]], fail=True)  # txid 3 fails after the operator checkpointed it
    assert bad.txid == 3 and not bad.committed
    retry = t.run_batch([[3]])
    assert retry.txid == 3 and retry.values() == [[1, 6]]  # 1 + 2 + 3: the 100 was rolled back
    t.run_batch([[4]], crash=True)  # txid 4 prepared, then the driver and the workers die
    t.crash()
    after = t.run_batch([[4]])
    assert after.txid == 4 and after.values() == [[1, 10]]
    assert calls("task") == [
        ("op", "prepare"), *proc(1), *CUT, *ckpt(1),
        *proc(2), *CUT, *ckpt(2),
        *proc(100), *CUT, *ckpt(3),
        ("op", "reset", 2), ("a", "reset", 2),  # the same instance, reset to the last complete cut
        *proc(3), *CUT, *ckpt(3),
        *proc(4), *CUT, *ckpt(4),
        ("op", "prepare"), ("op", "reset", 3), ("a", "reset", 3),  # new instance after the crash
        *proc(4), *CUT, *ckpt(4),
    ]  # fmt: skip
    # handler "a" got its list back from checkpoint 3 (1, 2, 3), not the failed attempt's 100
    op = live_instance(t.provider.backend.describe(), "tester", "op", 0)
    assert isinstance(op, Summer) and op.a.seen == [1, 2, 3, 4]


def test_a_stale_live_instance_is_reset_when_another_worker_ran_the_task_meanwhile() -> None:
    t = OperatorTester(Summer(), input_fields=["v"])
    t.run_batch([[1]])
    key = next(iter(_LIVE))
    worker_a = _LIVE.pop(key)  # batch 2 runs in another worker process (no live instance there)
    t.run_batch([[2]])
    _LIVE[key] = worker_a  # batch 3 is back on worker A, whose instance saw only batch 1
    r = t.run_batch([[3]])
    assert r.values() == [[1, 6]]
    assert calls("task") == [
        ("op", "prepare"), *proc(1), *CUT, *ckpt(1),
        ("op", "prepare"), ("op", "reset", 1), ("a", "reset", 1), *proc(2), *CUT, *ckpt(2),
        ("op", "reset", 2), ("a", "reset", 2), *proc(3), *CUT, *ckpt(3),
    ]  # fmt: skip


def test_an_exception_in_process_dirties_the_instance_and_the_retry_resets_it() -> None:
    t = OperatorTester(Summer(), input_fields=["v"])
    t.run_batch([[1]])
    bad = t.run_batch([[2], ["boom"], [3]])
    assert bad.error is not None and "cannot add 'boom'" in str(bad.error)
    assert "operator 'op' task 0" in bad.reports[0].error
    ok = t.run_batch([[2], [3]])
    assert ok.values() == [[2, 6]]
    assert calls("task")[-8:] == [("op", "reset", 1), ("a", "reset", 1), *proc(2, 3), *CUT, *ckpt(2)]


def test_non_blocking_prepare_comes_after_drain_and_checkpoint_runs_in_the_background() -> None:
    t = OperatorTester(Summer(non_blocking=True), input_fields=["v"])
    r = t.run_batch([[1], [2]])
    assert r.values() == [[2, 3]]
    assert calls("task") == [
        ("op", "prepare"), *proc(1, 2), *CUT,
        ("op", "prepare_for_non_blocking_checkpoint", 1), ("a", "prepare_for_non_blocking_checkpoint", 1),
        *ckpt(1),
    ]  # fmt: skip
    op = live_instance(t.provider.backend.describe(), "tester", "op", 0)
    assert isinstance(op, Summer)
    assert op.a.checkpoint_thread.startswith("weir-checkpoint-")  # not the task's thread
    ck = t.checkpoint()
    assert ck is not None and ck.read_object() == 3 and ck.read_object() == [1, 2]


def test_non_blocking_tuples_flow_before_the_checkpoint_finishes_and_the_batch_waits_for_it() -> None:
    from weir.runtime.spark.streams.operators import run_operator_task

    t = OperatorTester(Summer(non_blocking=True), input_fields=["v"])
    t.run_batch([[1]])
    op = live_instance(t.provider.backend.describe(), "tester", "op", 0)
    assert isinstance(op, Summer)
    op.a.checkpoint_delay = 0.5
    op.a.checkpoint_done.clear()
    epoch = t.coordinator.epoch
    gen = run_operator_task(t.spec, 0, 2, epoch, [("src", "default", (2,), 0)])
    first = next(gen)
    # the drained tuple is handed on while handler "a" is still writing its checkpoint
    assert first[0] == "T" and list(first[2]) == [1, 3]
    assert not op.a.checkpoint_done.is_set()
    assert t.provider.backend.txids("tester-op-0").prepared is None
    report = next(gen)
    # the task reports only once every checkpoint write is durable and the head is prepared
    assert report[0] == "R" and report[1].ok, report
    assert op.a.checkpoint_done.is_set()
    assert t.provider.backend.txids("tester-op-0").prepared == 2
    assert report[1].extra["checkpoint"] == 2 and report[1].extra["wait_ms"] > 0
    assert report[1].extra["pause_ms"] < report[1].extra["checkpoint_ms"]


def test_operator_driven_checkpoints_outside_a_region() -> None:
    t = OperatorTester(Summer(every=2), input_fields=["v"], region=False)
    r = t.run_batch([[1], [2], [3], [4], [5]])
    assert r.committed and r.values() == []  # outside a region: no drain, so nothing submitted
    assert calls("task") == [
        ("op", "prepare"),
        *proc(1, 2), *ckpt(1), ("op", "created", 1),
        *proc(3, 4), *ckpt(2), ("op", "created", 2),
        *proc(5),
    ]  # fmt: skip
    head = t.head()
    assert head is not None and [m.id for m in head.retained] == [1, 2]
    t.crash()
    t.run_batch([[6]])
    # a restarted operator restarts from its latest checkpoint (2: total 1+2+3+4 = 10); 5 is lost,
    # as in Streams outside a consistent region
    assert calls("task")[-4:] == [("op", "prepare"), ("op", "reset", 2), ("a", "reset", 2), ("op", "process", 6)]
    op = live_instance(t.provider.backend.describe(), "tester", "op", 0)
    assert isinstance(op, Summer) and op.total == 16
    assert not calls("hook", methods=("region_checkpointed",))  # not a region
    assert calls("hook", methods=("retire_checkpoint",)) == []


def test_operator_driven_checkpoint_inside_a_region_fails_the_batch_clearly() -> None:
    t = OperatorTester(Summer(every=1), input_fields=["v"])
    r = t.run_batch([[1]])
    assert r.error is not None
    assert "create_checkpoint() is not allowed in a consistent region" in str(r.error)


def test_periodic_checkpointing_outside_a_region() -> None:
    t = OperatorTester(Summer(), input_fields=["v"], region=False, component_conf={"checkpoint.period.ms": 0})
    for v in (1, 2, 3):
        t.run_batch([[v]])
    # every batch (period 0), no drain outside a region; ids count 1, 2, 3 per operator task
    assert calls("task") == [("op", "prepare"), *proc(1), *ckpt(1), *proc(2), *ckpt(2), *proc(3), *ckpt(3)]
    head = t.head()
    assert head is not None and [m.id for m in head.retained] == [2, 3] and not head.region
    assert calls("hook", methods=HOOK_METHODS) == [("op", "retire_checkpoint", 1), ("a", "retire_checkpoint", 1)]


def test_a_long_period_takes_no_checkpoint_and_a_restart_resets_to_initial_state() -> None:
    t = OperatorTester(Summer(), input_fields=["v"], region=False, component_conf={"checkpoint.period.ms": 3_600_000})
    t.run_batch([[1]])
    t.run_batch([[2]])
    assert calls("task") == [("op", "prepare"), *proc(1), *proc(2)]  # the instance carries the state
    t.crash()
    t.run_batch([[3]])
    assert calls("task")[-4:] == [
        ("op", "prepare"), ("op", "reset_to_initial_state"), ("a", "reset_to_initial_state"), ("op", "process", 3),
    ]  # fmt: skip


def test_retire_checkpoint_follows_weir_checkpoint_retain() -> None:
    t = OperatorTester(Summer(), input_fields=["v"], conf={"weir.checkpoint.retain": 3})
    for v in range(1, 7):
        t.run_batch([[v]])
    head = t.head()
    assert head is not None and [m.id for m in head.retained] == [4, 5, 6]
    assert calls("hook", methods=("retire_checkpoint",)) == [
        ("op", "retire_checkpoint", 1), ("a", "retire_checkpoint", 1),
        ("op", "retire_checkpoint", 2), ("a", "retire_checkpoint", 2),
        ("op", "retire_checkpoint", 3), ("a", "retire_checkpoint", 3),
    ]  # fmt: skip
    # retired checkpoints are gone from the store; retained ones read back
    assert t.checkpoint(checkpoint_id=3) is None
    ck = t.checkpoint(checkpoint_id=4)
    assert isinstance(ck, Checkpoint) and ck.read_object() == 10 and ck.get("total") == 10
    assert [r[0] for r in t.provider.backend.scan("tester-op-0") if r[0].startswith(b"c/")] == [
        m.keys()[0] for m in head.retained
    ]


def test_region_checkpointed_only_for_start_operators() -> None:
    from dataclasses import replace

    t = OperatorTester(Summer(), input_fields=["v"])
    t.spec.placement = replace(t.spec.placement, is_start=False)
    t.run_batch([[1]])
    t.run_batch([[2]])
    t.run_batch([[3]])
    assert calls("hook", methods=HOOK_METHODS) == [("op", "retire_checkpoint", 1), ("a", "retire_checkpoint", 1)]


class Grouped(Summer):
    """Registers an OrderedStateHandlers group of two recorders after ``a``."""

    def prepare(self, conf, context, collector):  # type: ignore[no-untyped-def]
        super().prepare(conf, context, collector)
        self.b, self.c = Recorded("b"), Recorded("c")
        self.b.role = self.c.role = self.role
        context.register_state_handler(OrderedStateHandlers([self.b, self.c]))


def test_several_handlers_are_called_in_registration_order_and_read_back_in_order() -> None:
    t = OperatorTester(Grouped(), input_fields=["v"])
    t.run_batch([[1]])
    t.run_batch([[2]], fail=True)
    t.run_batch([[2]])
    task = calls("task")
    assert task[: 1 + 1 + 4 + 4] == [
        ("op", "prepare"), ("op", "process", 1),
        ("op", "drain"), ("a", "drain"), ("b", "drain"), ("c", "drain"),
        ("op", "checkpoint", 1), ("a", "checkpoint", 1), ("b", "checkpoint", 1), ("c", "checkpoint", 1),
    ]  # fmt: skip
    assert [c for c in task if c[1] == "reset"] == [(h, "reset", 1) for h in ("op", "a", "b", "c")]
    hooks = calls("hook")
    assert hooks[-5:] == [("c", "close"), ("b", "close"), ("a", "close"), ("op", "close"), ("op", "cleanup")]


def test_two_tasks_keep_separate_checkpoints() -> None:
    t = OperatorTester(Summer(), input_fields=["v"], parallelism=2, fields_grouping=["v"])
    t.run_batch([[1], [2], [3], [4]])
    t.crash()
    r = t.run_batch([[5], [6]])
    totals = {task: v for task, _, v in r.outputs}
    ck0, ck1 = t.checkpoint(0), t.checkpoint(1)
    assert ck0 is not None and ck1 is not None
    assert ck0.read_object() + ck1.read_object() == 21
    assert sum(v[1] for v in totals.values()) == 21
    assert sorted(c[1:] for c in calls("task", methods=("reset",)) if c[0] == "op") == [("reset", 1), ("reset", 1)]


@pytest.mark.parametrize("retain", [1, 2])
def test_handler_is_a_context_manager_and_retain_one_keeps_only_the_latest(retain: int) -> None:
    with Recorded("solo") as h:
        h.rec("inside")
    assert calls("task") == [("solo", "inside"), ("solo", "close")]
    t = OperatorTester(Summer(), input_fields=["v"], conf={"weir.checkpoint.retain": retain})
    for v in range(3):
        t.run_batch([[v]])
    head = t.head()
    assert head is not None and [m.id for m in head.retained] == [1, 2, 3][-retain:]
