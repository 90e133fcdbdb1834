"""A topology without state retries its batches through the coordinator's loop (``retry_batch``).

It has no coordinator (nothing to prepare, commit or roll back), but the same attempts, the same
``weir.batch.max.retries`` and the same "failed N times" error — without the claim that state was
rolled back, since there is none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import weir
from weir.errors import TopologyError
from weir.sources import FileSpout
from weir.topology import BasicBolt, Fields, TopologyBuilder

pytestmark = pytest.mark.spark


class FailsFirst(BasicBolt):
    """Fails on a line the first time it sees it (a marker file per line), or always; else passes it on."""

    def __init__(self, marks: str, *, always: bool = False) -> None:
        self.marks = marks
        self.always = always

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("line"))

    def execute(self, tup: Any, collector: Any) -> None:
        mark = Path(self.marks) / f"{tup.values[0]}.seen"
        if self.always or not mark.exists():
            mark.touch()
            msg = f"attempt failed on {tup.values[0]!r}"
            raise ValueError(msg)
        collector.emit([tup.values[0]])


def _run(spark: Any, tmp_path: Path, name: str, bolt: FailsFirst, retries: int) -> Any:
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "a.txt").write_text("alpha\n")
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(inp)))
    b.set_bolt("flaky", bolt, 1).shuffle_grouping("lines")
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.batch.max.retries": retries}
    run = weir.submit(name, conf, b.create_topology(), spark=spark)
    assert run.coordinator is None  # no stateful component: the stateless path
    return run


def test_a_failed_attempt_is_retried_and_counted(spark: Any, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    status = _run(spark, tmp_path, "flaky-once", FailsFirst(str(marks)), retries=1).process_available()
    assert (status.state, status.batches, status.retries, status.tuples_in) == ("stopped", 1, 1, 1)
    assert status.recent[-1]["attempts"] == 2


def test_every_attempt_failing_is_the_one_failed_n_times_error(spark: Any, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    run = _run(spark, tmp_path, "flaky-always", FailsFirst(str(marks), always=True), retries=2)
    with pytest.raises(TopologyError) as info:
        run.process_available()
    err = info.value
    assert "topology 'flaky-always': component 'flaky' task 0 failed txid 1 3 times" in str(err)
    assert "attempt failed on 'alpha'" in str(err) and "rolled back" not in str(err)
    assert (err.component, err.task, err.txid) == ("flaky", 0, 1)
