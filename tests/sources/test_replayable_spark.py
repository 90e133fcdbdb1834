"""ReplayableSpout on Spark: bounded batches under Trigger.AvailableNow, resume, pinned initial offsets."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.sources._spouts import MarkedNumbers, NamedPlainTypes, Numbers, PlainTypes, TypeRecorder, count_topology
from weir.demo import read_counts
from weir.sources.replayable import pin_initial_offset

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _expected(n: int, keys: int = 7) -> Counter[str]:
    return Counter(f"k{i % keys}" for i in range(n))


def test_available_now_runs_bounded_batches_then_resumes_where_it_stopped(spark: Any, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "available").write_text("500")
    conf = {"weir.state.dir": str(tmp_path / "state")}
    spout = Numbers(1000, max_records=300, log_dir=str(logs))

    first = weir.submit("nums", conf, count_topology({"nums": spout}), spark=spark).process_available(timeout=600)
    assert (first.batches, first.last_txid, first.tuples_in) == (2, 2, 500)  # 300 + 200
    assert read_counts(conf, "nums") == _expected(500)

    (logs / "available").write_text("1000")
    again = weir.submit("nums", conf, count_topology({"nums": spout}), spark=spark).process_available(timeout=600)
    assert (again.batches, again.last_txid, again.tuples_in) == (2, 4, 500)  # 800, 1000
    assert read_counts(conf, "nums") == _expected(1000)

    # Spark's offset log holds the spout's offsets as JSON; the initial offset was computed once
    offsets = tmp_path / "state" / "spark" / "nums" / "offsets"
    ends = [json.loads((offsets / str(i)).read_text().splitlines()[-1]) for i in range(4)]
    assert ends == [{"n": 300}, {"n": 500}, {"n": 800}, {"n": 1000}]
    assert len((logs / "initial.jsonl").read_text().splitlines()) == 1
    pinned = tmp_path / "state" / "spark" / "nums" / "weir" / "initial-offset" / "nums.json"
    assert json.loads(pinned.read_text()) == {"n": 0}
    # Spark told the spout which ranges are done (commit lags a batch and is advisory)
    commits = [json.loads(line) for line in (logs / "commit.jsonl").read_text().splitlines()]
    assert commits and all(c["n"] in (300, 500, 800, 1000) for c in commits)


def test_pinned_initial_offset_is_computed_once(spark: Any, tmp_path: Path) -> None:
    calls = []

    def compute() -> dict[str, Any]:
        calls.append(1)
        return {"z": 1, "a": {"y": 2, "b": 3}}

    path = str(tmp_path / "ckpt" / "weir" / "initial-offset" / "s.json")
    assert pin_initial_offset(spark, path, compute) == {"z": 1, "a": {"y": 2, "b": 3}}
    assert pin_initial_offset(spark, path, lambda: {"other": 0}) == {"a": {"b": 3, "y": 2}, "z": 1}
    assert len(calls) == 1
    assert Path(path).read_text() == '{"a": {"b": 3, "y": 2}, "z": 1}'
    Path(path).write_text("not json")
    with pytest.raises(weir.SourceError, match="delete the file to start afresh"):
        pin_initial_offset(spark, path, compute)


def _trident_count(spout: Any, db: str) -> Any:
    from weir.trident import Count, Sum, TridentTopology
    from weir.trident.backing import SqliteMapState

    t = TridentTopology()
    grouped = t.new_stream("nums", spout).group_by(["key"])
    grouped.persistent_aggregate(SqliteMapState.transactional(db, table="counts"), Count(), "count")
    grouped.persistent_aggregate(SqliteMapState.transactional(db, table="sums"), ["n"], Sum(), "sum")
    return t


def _table(db: str, table: str) -> dict[str, Any]:
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(db)) as c:
        return {json.loads(k)[0]: json.loads(v)[1] for k, v in c.execute(f'SELECT k, v FROM "{table}"')}  # noqa: S608


def test_trident_reads_a_marked_spout_in_sql_and_fails_on_a_malformed_record(spark: Any, tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.batch.max.retries": 0}
    good = MarkedNumbers(600, max_records=250)
    st = weir.submit("marked", conf, _trident_count(good, db), spark=spark).process_available(timeout=600)
    assert (st.batches, st.tuples_in) == (3, 600)
    assert _table(db, "counts") == dict(_expected(600))
    sums: Counter[str] = Counter()
    for i in range(600):
        sums[f"k{i % 7}"] += i
    assert _table(db, "sums") == dict(sums)  # the typed BIGINT column reached Sum without a Python pass

    db2 = str(tmp_path / "t2.db")
    conf2 = {"weir.state.dir": str(tmp_path / "state2"), "weir.batch.max.retries": 0}
    bad = MarkedNumbers(600, bad_at=420, max_records=250)
    run = weir.submit("marked2", conf2, _trident_count(bad, db2), spark=spark)
    with pytest.raises(weir.TopologyError) as err:
        run.process_available(timeout=600)
    text = str(err.value)
    assert "component 'nums'" in text and "txid 2" in text
    assert "SourceError: MarkedNumbers: malformed record: n=420 is not a number. " in text
    assert _table(db2, "counts") == dict(_expected(250))  # batch 1 committed; batch 2 wrote nothing


@pytest.mark.parametrize("spout_cls", [PlainTypes, NamedPlainTypes], ids=["by-position", "by-name"])
def test_storm_bolts_see_python_values_of_every_plain_column_type(spout_cls: Any, spark: Any, tmp_path: Path) -> None:
    """A spout's columns reach bolts as Python values (BINARY as bytes, nulls as None); to_values may use names."""
    from weir.topology import TopologyBuilder

    b = TopologyBuilder()
    b.set_spout("typed", spout_cls())
    b.set_bolt("record", TypeRecorder(), 1).shuffle_grouping("typed")
    conf = {"weir.state.dir": str(tmp_path / "state")}
    st = weir.submit("typed", conf, b.create_topology(), spark=spark).process_available(timeout=600)
    assert st.tuples_in == 3
    from weir.state import StateFactory

    provider = StateFactory.get_provider(conf)
    seen = dict(provider.new_state("typed-record-0", conf))
    types = ["str", "bytes", "bool", "int", "int", "int", "int", "float", "float"]
    assert seen["a"] == [
        [t, repr(v)] for t, v in zip(types, ("a", b"\x00\xff", True, -8, -16, -32, -(2**40), 1.5, 2.25), strict=True)
    ]
    assert seen["b"][1] == ["NoneType", "None"] and seen["b"][6] == ["int", repr(2**63 - 1)]
    assert seen["b"][8] == ["float", repr(1e300)]
    assert seen["c"] == [["str", "'c'"], ["bytes", "b''"]] + [["NoneType", "None"]] * 7


def test_a_spark_worker_reading_a_spout_freezes_its_long_lived_heap_the_driver_does_not(
    spark: Any, tmp_path: Path
) -> None:
    """Spark's reused workers run gc.collect() after each task: the worker's module objects are frozen first."""
    import gc

    from tests.sources._spouts import HeapProbe
    from weir.sources.replayable import _Range, _SpoutReader
    from weir.topology.context import TopologyContext

    before = gc.get_freeze_count()
    local = list(_SpoutReader(HeapProbe(), "probe", {"n": 0}).read(_Range(0, {"n": 0}, {"n": 1})))
    assert local[0].column(0).to_pylist() == [before]  # outside a Spark task: the heap is left alone
    assert gc.get_freeze_count() == before

    conf = {"weir.state.dir": str(tmp_path / "state")}
    df = HeapProbe().create_stream(spark, TopologyContext("probe", "heap", 0, 1, conf))
    seen: list[tuple[int, int]] = []
    q = (
        df.writeStream.foreachBatch(lambda batch, _i: seen.extend(tuple(r) for r in batch.collect()))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(600)
    assert len(seen) == 4
    assert all(frozen > 1000 for frozen, _pid in seen)  # pyspark, pyarrow and weir's modules, in every worker
    assert all(pid != os.getpid() for _frozen, pid in seen)
    assert gc.get_freeze_count() == before
