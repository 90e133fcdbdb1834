"""The supervisor's first start goes through the same classification as a failed query.

Two drivers started together race for Spark's new checkpoint (its ``metadata`` file) inside
``DataStreamWriter.start()``; the driver holding the newest epoch must start again, the older one
must stop with its :class:`FencedError`, and any other start failure is raised unchanged.
"""

from __future__ import annotations

from typing import Any

import pytest

from weir.errors import FencedError
from weir.runtime.spark.supervision import RestartPolicy, Supervisor

CONFLICT = "FileAlreadyExistsException: Rename destination file:/x/metadata already exists."


class _Query:
    def awaitTermination(self) -> None:  # noqa: N802 - PySpark's name
        return None


def _supervisor(failures: list[BaseException], verdict: Any) -> tuple[Supervisor, list[bool]]:
    calls: list[bool] = []

    def launch(restart: bool) -> None:
        calls.append(restart)
        if failures:
            raise failures.pop(0)

    def classify(exc: BaseException) -> Any:
        return verdict if CONFLICT in str(exc) else None

    sup = Supervisor("twins", RestartPolicy(3, 10), launch, _Query, lambda: None, lambda _r: None, classify=classify)
    return sup, calls


def test_a_start_lost_to_another_driver_is_tried_again_while_this_driver_is_newest() -> None:
    sup, calls = _supervisor([RuntimeError(CONFLICT), RuntimeError(CONFLICT)], "another driver still writes")
    sup.start()
    assert sup.wait(30)
    assert sup.error is None
    assert calls == [False, False, False]


def test_a_start_lost_by_the_older_driver_stops_with_its_fenced_error() -> None:
    fenced = FencedError("topology 'twins': another driver is running this topology")
    sup, calls = _supervisor([RuntimeError(CONFLICT)], fenced)
    with pytest.raises(FencedError, match="another driver") as info:
        sup.start()
    assert isinstance(info.value.__cause__, RuntimeError)
    assert calls == [False]


def test_any_other_start_failure_is_raised_unchanged() -> None:
    boom = ValueError("bad option")
    sup, calls = _supervisor([boom], "never used")
    with pytest.raises(ValueError, match="bad option"):
        sup.start()
    assert calls == [False]


def test_a_source_briefly_unavailable_at_start_is_retried_with_back_off_and_a_permanent_one_stops() -> None:
    from weir.errors import SourceError, TransientSourceError

    blip = TransientSourceError(
        "KafkaSpout(b:1, topics=['t']): listing the earliest offsets failed: FENCED_LEADER_EPOCH"
    )
    sup, calls = _supervisor([blip, blip], "never used")
    sup.start()
    assert sup.wait(30)
    assert sup.error is None
    assert calls == [False, False, False]
    reset = SourceError("KafkaSpout(b:1, topics=['t']): topic 't' was deleted and created again")
    sup, calls = _supervisor([reset], "never used")
    with pytest.raises(SourceError, match="created again"):
        sup.start()
    assert calls == [False]
    sup, calls = _supervisor([blip, blip, blip, blip], "never used")  # RestartPolicy(3, ...): the 4th is final
    with pytest.raises(TransientSourceError):
        sup.start()
    assert calls == [False] * 4


def test_retriable_source_errors_are_transient_as_objects_and_in_a_worker_traceback() -> None:
    from weir.errors import SourceError, TransientSourceError
    from weir.runtime.spark.supervision import transient_reason

    assert TransientSourceError("x").retriable and not SourceError("x").retriable
    assert transient_reason(TransientSourceError("broker restarting")) is not None
    assert transient_reason(SourceError("topic 't' was deleted and created again")) is None
    remote = RuntimeError(
        "[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Traceback (most recent call last):\n"
        "weir.errors.TransientSourceError: spout 'kafka': listing the latest offsets failed: LEADER_NOT_AVAILABLE"
    )
    assert transient_reason(remote) is not None
    # a Storm spout task whose broker stayed unreachable through every attempt of a batch (spoutlog.py)
    from weir.checkpoint.coordinator import TaskFailure, batch_failed_error

    err = "TransientSourceError in next_tuple of spout 'queue' task 1: RabbitMQSpout(...): cannot connect"
    assert transient_reason(batch_failed_error("t", 3, [TaskFailure("queue", 1, err)], 2)) is not None
    user = "RuntimeError in next_tuple of spout 'queue' task 1: a bug"
    assert transient_reason(batch_failed_error("t", 3, [TaskFailure("queue", 1, user)], 2)) is None


def test_spark_4s_non_empty_offset_log_at_batch_0_is_read_as_the_other_drivers_checkpoint() -> None:
    """Both drivers plan batch 0 on an empty offset log; the one that writes second fails with this.

    The text is Spark 4.3's, from a two-driver race (tests/security/test_two_drivers.py) in a CI run.
    """
    from weir.runtime.spark.runner import is_checkpoint_conflict

    lost = RuntimeError(
        "[STREAM_FAILED] Query [id = 863f5e4d, runId = 8f0c44c6] terminated with exception: "
        "[STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY] The checkpoint location file:/tmp/state/spark/twins/offsets "
        "should be empty on batch 0\nPlease either use a new checkpoint location, or delete the existing data in "
        "the checkpoint location. SQLSTATE: 42K03"
    )
    assert is_checkpoint_conflict(lost)
    assert is_checkpoint_conflict(RuntimeError(CONFLICT))
    assert not is_checkpoint_conflict(RuntimeError("[STREAM_FAILED] Query terminated with exception: boom"))
