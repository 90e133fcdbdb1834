"""How a failed Trident stage tells the driver: a typed ``TaskReport`` unless it must stop the Spark job.

A stage whose output reaches a state update in the same Spark job must stop the job when it fails
(the state tasks would commit the txid with part of its input), and so can only report through its
error's text. Every other stage ends its task and sends its report in the accumulator, as the
Storm dialect's tasks do; the driver's outcome is built from the reports (``outcome_of``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import StringType

import weir
from tests.trident._support import Split, word_files
from weir.errors import TopologyError
from weir.runtime.spark.executor import TaskReport
from weir.runtime.spark.trident._arrow import TridentTaskFailure, arrow_schema, build_array
from weir.runtime.spark.trident.planner import RunContext
from weir.runtime.spark.trident.tasks import OpStage
from weir.sources import FileSpout
from weir.trident import Count, Function, MemoryMapState, TridentTopology
from weir.trident.fields import FieldSpec

STR = StringType()


class Boom(Function):
    def execute(self, tup: Any, collector: Any) -> None:
        if "zebra" in tup.get_string(0):
            raise ValueError("no zebras allowed")
        collector.emit([tup.get_string(0)])


class Collected:
    """What a Spark accumulator does for a task: keeps what the task adds (here in this process)."""

    def __init__(self) -> None:
        self.value: list[TaskReport] = []

    def add(self, reports: list[TaskReport]) -> None:
        self.value.extend(reports)


def _stage(acc: Collected, *, stops_job: bool) -> OpStage:
    fields, copy = [FieldSpec("line", STR)], [FieldSpec("copy", STR)]
    return OpStage(
        topology="t",
        component="guard",
        txid=7,
        conf={},
        in_fields=fields,
        out_fields=fields + copy,
        acc=acc,
        stops_job=stops_job,
        kind="function",
        op=Boom(),
        in_idx=[0],
        in_names=["line"],
        new_fields=copy,
    )


def _lines(*lines: str) -> pa.RecordBatch:
    fields = [FieldSpec("line", STR)]
    schema = arrow_schema(fields)
    column = build_array(list(lines), fields[0], schema.field(0).type, "test")
    return pa.RecordBatch.from_arrays([column], schema=schema)


def test_a_stage_feeding_no_state_ends_its_task_and_reports_typed() -> None:
    acc = Collected()
    out = list(_stage(acc, stops_job=False)(iter([_lines("a cat"), _lines("the zebra"), _lines("never read")])))
    assert [b.to_pylist() for b in out] == [[{"line": "a cat", "copy": "a cat"}]]  # the task ends at the failure
    [rep] = acc.value
    assert (rep.component, rep.task, rep.txid, rep.ok, rep.fenced) == ("guard", 0, 7, False, False)
    assert rep.error == "ValueError: no zebras allowed" and rep.error_type == "ValueError"
    assert "raise ValueError" in rep.traceback and rep.n_in == 2
    assert rep.failure().component == "guard"


def test_a_stage_feeding_a_state_stops_the_job_and_sends_nothing_to_the_accumulator() -> None:
    acc = Collected()
    with pytest.raises(TridentTaskFailure, match="guard task 0 txid 7: ValueError: no zebras allowed"):
        list(_stage(acc, stops_job=True)(iter([_lines("the zebra")])))
    assert acc.value == []


def test_the_plan_marks_what_feeds_a_state_update(tmp_path: Path) -> None:
    topo = TridentTopology()
    lines = topo.new_stream("lines", FileSpout(str(tmp_path)))
    words = lines.each(["line"], Split(), ["word"]).name("split")
    counts = words.group_by(["word"]).persistent_aggregate(MemoryMapState.Factory(), Count(), "n")
    counts.new_values_stream().each(["word", "n"], Boom(), ["copy"]).name("after")
    lines.each(["line"], Boom(), ["copy"]).name("leaf")
    ctx = RunContext(topology="t", conf={}, nodes=topo.nodes, source=None)
    feeds = {n.name for n in topo.nodes if n.id in ctx.feeds_state}
    assert "split" in feeds and "lines" in feeds
    assert not feeds & {"leaf", "after"}
    assert not any(n.kind == "persist_agg" and n.id in ctx.feeds_state for n in topo.nodes)


@pytest.mark.spark
def test_a_failing_leaf_fails_the_batch_through_its_report_not_the_spark_job(spark: Any, tmp_path: Path) -> None:
    word_files(tmp_path / "lines", [["a cat", "the zebra"]])
    topo = TridentTopology()
    topo.new_stream("lines", FileSpout(str(tmp_path / "lines"))).each(["line"], Boom(), ["copy"]).name("leafboom")
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.batch.max.retries": 1}
    run = weir.submit("leafboom", conf, topo, spark=spark)
    with pytest.raises(TopologyError) as info:
        run.process_available()
    err = info.value
    assert (err.topology, err.component, err.txid) == ("leafboom", "leafboom", 1) and err.task is not None
    assert "failed txid 1 2 times" in str(err) and "ValueError: no zebras allowed" in str(err)
    assert "raise ValueError" in (err.remote_traceback or "")
    # the batch's Spark job ran to its end (a stopped job leaves no stats): the failure came as a report
    assert run.runner.last_stats.components["leafboom"].tasks >= 1
