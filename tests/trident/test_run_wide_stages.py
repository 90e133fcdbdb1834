"""Trident's Python stages are planned once per run and take each batch's txid from its Spark job."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.trident._support import Split, record, recorded, word_files
from weir.runtime.spark.trident.tasks import OpStage
from weir.sources import FileSpout
from weir.trident import Count, Function, TridentTopology
from weir.trident.backing import SqliteMapState
from weir.trident.fields import FieldSpec

BATCHES = [["a b", "b"], ["c a"], ["b d d"]]


class TxidOf(Function):
    """Emits the txid its operation context names (the batch the task belongs to)."""

    def prepare(self, conf: Any, context: Any) -> None:
        self.txid = context.txid

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([self.txid])


@pytest.mark.spark
def test_one_udf_per_stage_for_the_run_and_each_batch_its_own_txid(spark: Any, tmp_path: Path) -> None:
    lines = tmp_path / "lines"
    word_files(lines, BATCHES[:1])
    rec = str(tmp_path / "rec.db")
    db = str(tmp_path / "map.db")
    topo = TridentTopology()
    words = topo.new_stream("lines", FileSpout(str(lines))).each(["line"], Split(), ["word:str"])
    record(words.each(["word"], TxidOf(), ["txid:int"]), rec, "seen", ["word", "txid"])
    words.group_by(["word"]).persistent_aggregate(SqliteMapState.opaque(db, table="wc"), Count(), "count")
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.batch.max.retries": 0}
    run = weir.submit("runwide", conf, topo, spark=spark)
    assert run.process_available().last_txid == 1
    udfs = dict(run.runner.ctx.udfs)
    assert udfs, "the run's Python stages were not planned once"
    word_files(lines, BATCHES)
    status = run.process_available()
    assert status.last_txid == len(BATCHES)
    # later batches reuse the very same UDFs: nothing was pickled or sent to the JVM again
    assert run.runner.ctx.udfs.keys() == udfs.keys()
    assert all(run.runner.ctx.udfs[k] is v for k, v in udfs.items())
    # ... and yet every task saw its own batch's txid: the Function's context, the recording
    # state's begin_commit and the opaque cells stored in the map
    want = sorted((t, [w, t]) for t, batch in enumerate(BATCHES, 1) for line in batch for w in line.split())
    assert sorted((t, v) for t, _, v in recorded(rec, "seen")) == want
    last = {w: t for t, batch in enumerate(BATCHES, 1) for line in batch for w in line.split()}
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT * FROM wc").fetchall()
    cells = {r[0]: r[-1] for r in rows}
    assert len(cells) == len(last)
    counts = Counter(w for batch in BATCHES for line in batch for w in line.split())
    for word, txid in last.items():
        stored = next(v for k, v in cells.items() if f'"{word}"' in str(k))
        assert json.loads(stored)[:2] == [txid, counts[word]], (word, stored)  # opaque cell [txid, curr, prev]


def test_a_run_wide_stage_outside_a_batch_job_names_the_missing_property() -> None:
    stage = OpStage(
        topology="t",
        component="split",
        txid=None,
        conf={},
        in_fields=[FieldSpec("line", None)],
        out_fields=[FieldSpec("line", None)],
        kind="filter",
        op=lambda tup: True,
        in_idx=[0],
        in_names=["line"],
    )
    with pytest.raises(RuntimeError, match=r"split: .*'weir\.batch' local property"):
        list(stage(iter([])))


@pytest.mark.spark
def test_tuples_in_counts_spouts_read_by_a_python_stage_and_by_spark_sql(spark: Any, tmp_path: Path) -> None:
    lines, raw = tmp_path / "lines", tmp_path / "raw"
    word_files(lines, BATCHES)
    word_files(raw, [["x", "y"], ["x"], ["z", "z", "z"]])
    topo = TridentTopology()
    # read by one Python stage: its reports count the rows
    topo.new_stream("lines", FileSpout(str(lines))).each(["line"], Split(), ["word:str"]).group_by(
        ["word"]
    ).persistent_aggregate(SqliteMapState.opaque(str(tmp_path / "a.db"), table="wc"), Count(), "count")
    # read by Spark SQL only: an observed count
    topo.new_stream("raw", FileSpout(str(raw))).group_by(["line"]).persistent_aggregate(
        SqliteMapState.opaque(str(tmp_path / "b.db"), table="lc"), Count(), "count"
    )
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.batch.max.retries": 0}
    status = weir.submit("counted", conf, topo, spark=spark).process_available()
    assert status.batches == len(BATCHES)
    assert status.tuples_in == sum(len(b) for b in BATCHES) + 6
