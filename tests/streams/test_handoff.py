"""A task that moves to another Python worker continues from the state its last worker handed off;
a failed attempt or a new driver (epoch) never hands off, so the rules of Streams apply then."""

from __future__ import annotations

from pathlib import Path

from tests.streams._ops import Summer, calls
from weir.runtime.spark.streams.handoff import directory_override
from weir.runtime.spark.streams.operators import clear_live_instances, live_instance
from weir.testing import OperatorTester


def _total(t: OperatorTester) -> int:
    op = live_instance(t.provider.backend.describe(), "tester", "op", 0)
    assert op is not None
    return int(op.total)  # type: ignore[attr-defined]


def test_outside_a_region_a_moved_task_keeps_everything_it_processed(tmp_path: Path) -> None:
    with directory_override(str(tmp_path / "handoff")):
        t = OperatorTester(Summer(), input_fields=["v"], region=False)
        assert t.run_batch([[1], [2]]).committed
        clear_live_instances()  # the next batch's task runs in another worker of this machine
        r = t.run_batch([[3]])
        assert r.committed and r.reports[0].extra["restore"] == "handoff"
        assert _total(t) == 6  # nothing lost: no checkpoint was ever taken, yet the state moved
        assert ("op", "reset_to_initial_state") not in calls()
        assert t.run_batch([[4]]).reports[0].extra["restore"] == "live"
        assert _total(t) == 10


def test_a_failed_attempt_hands_off_nothing_and_the_retry_continues_from_the_batch_before(tmp_path: Path) -> None:
    with directory_override(str(tmp_path / "handoff")):
        t = OperatorTester(Summer(), input_fields=["v"], region=False)
        assert t.run_batch([[1], [2]]).committed
        failed = t.run_batch([[10], ["boom"]])
        assert not failed.committed
        clear_live_instances()  # the retry runs elsewhere: the failed attempt's state must not come back
        r = t.run_batch([[3]])
        assert r.committed and r.reports[0].extra["restore"] == "handoff"
        assert _total(t) == 6


def test_in_a_region_a_move_needs_no_restore_from_the_store(tmp_path: Path) -> None:
    with directory_override(str(tmp_path / "handoff")):
        t = OperatorTester(Summer(), input_fields=["v"], region=True)
        t.run_batch([[1], [2]])
        clear_live_instances()
        r = t.run_batch([[3]])
        assert r.reports[0].extra["restore"] == "handoff"
        assert r.values() == [[1, 6]]
        # the cut's own checkpoint was handed off: no checkpoint() beyond the region's one per batch
        assert calls(methods=("checkpoint", "reset")) == [
            ("op", "checkpoint", 1),
            ("a", "checkpoint", 1),
            ("op", "reset", 1),  # the new worker's instance, from the hand-off of checkpoint 1
            ("a", "reset", 1),
            ("op", "checkpoint", 2),
            ("a", "checkpoint", 2),
        ]


def test_a_new_driver_goes_back_to_the_last_checkpoint_as_in_streams(tmp_path: Path) -> None:
    with directory_override(str(tmp_path / "handoff")):
        t = OperatorTester(Summer(), input_fields=["v"], region=False, component_conf={"checkpoint.period.ms": 0})
        t.run_batch([[1]])  # checkpointed (period 0: every batch)
        t.crash()  # driver and workers lost: a new epoch
        r = t.run_batch([[2]])
        assert r.reports[0].extra["restore"] == "reset"
        assert _total(t) == 3


def test_a_hand_off_directory_others_can_read_is_not_used(tmp_path: Path) -> None:
    from weir.runtime.spark.streams.handoff import handoff_for_task

    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    with directory_override(str(shared)):
        assert handoff_for_task() is None  # a move then restores from the store, as without a hand-off
        t = OperatorTester(Summer(), input_fields=["v"], region=True)
        t.run_batch([[1]])
        clear_live_instances()
        assert t.run_batch([[2]]).reports[0].extra["restore"] == "reset"
    assert not (shared / "handoff.db").exists()
