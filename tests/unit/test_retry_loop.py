"""The one retry loop of a batch (:func:`weir.checkpoint.coordinator.retry_batch`) without Spark.

The coordinator runs every stateful batch through it (its PREPARING / rollback steps are the loop's
``before`` / ``failed`` hooks); a topology without state runs its batches through it with no hooks
(:meth:`weir.runtime.spark.runner.TopologyRun._stateless`, exercised on Spark in
``tests/spark/test_storm_e2e.py``). Both end with the same "failed N times" error.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from weir.checkpoint.coordinator import BatchReport, JobOutcome, TaskFailure, retry_batch
from weir.errors import TopologyError

SRC = Path(__file__).resolve().parents[2] / "src" / "weir"


def _flaky(failures: int) -> tuple[list[int], object]:
    calls: list[int] = []

    def job(attempt: int) -> JobOutcome:
        calls.append(attempt)
        if attempt < failures:
            return JobOutcome(failures=[TaskFailure("split", 1, f"ValueError: attempt {attempt}", "tb")])
        return JobOutcome(stats={"tuples_in": 7})

    return calls, job


def test_a_job_that_fails_then_succeeds_is_retried_with_hooks_around_each_attempt() -> None:
    calls, job = _flaky(2)
    events: list[tuple[str, int]] = []
    report = BatchReport(txid=5)
    outcome = retry_batch(
        "wc",
        5,
        3,
        report,
        job,  # type: ignore[arg-type]
        before=lambda a: events.append(("before", a)),
        failed=lambda a, o: events.append(("failed", a)),
    )
    assert outcome.ok and outcome.stats == {"tuples_in": 7}
    assert calls == [0, 1, 2]
    assert events == [("before", 0), ("failed", 0), ("before", 1), ("failed", 1), ("before", 2)]
    assert report.attempts == 3
    assert report.stats == {"tuples_in": 7}


@pytest.mark.parametrize(("rolled_back", "said"), [(True, True), (False, False)])
def test_a_job_failing_every_attempt_raises_the_one_failed_n_times_error(rolled_back: bool, said: bool) -> None:
    calls, job = _flaky(99)
    report = BatchReport(txid=9)
    failed: list[int] = []
    with pytest.raises(TopologyError) as info:
        retry_batch(
            "wc",
            9,
            2,
            report,
            job,
            failed=lambda a, o: failed.append(a),
            rolled_back=rolled_back,  # type: ignore[arg-type]
        )
    err = info.value
    assert calls == [0, 1, 2] and failed == [0, 1, 2] and report.attempts == 3
    assert "topology 'wc': component 'split' task 1 failed txid 9 3 times (weir.batch.max.retries=2)" in str(err)
    assert "ValueError: attempt 2" in str(err)  # the last attempt's failure
    assert ("State was rolled back" in str(err)) is said
    assert (err.topology, err.component, err.task, err.txid) == ("wc", "split", 1, 9)
    assert err.remote_traceback == "tb"


def test_no_other_retry_loop_is_left_in_the_runtime() -> None:
    """Every caller of ``batch_failed_error`` is the loop itself: no path retries batches on its own."""
    callers = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "batch_failed_error":
                callers.append(path.relative_to(SRC).as_posix())
    assert callers == ["checkpoint/coordinator.py"]
    runner = (SRC / "runtime" / "spark" / "runner.py").read_text(encoding="utf-8")
    assert runner.count("retry_batch(") == 2  # a stateless batch and a stateless final mark
