"""States partitioned by Spark's own hash: the aggregate's shuffle places each key in its state partition."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.trident._support import Split, record, recorded, word_files
from weir.runtime.spark.trident.state_tasks import spark_key_hash, spark_partitions_of
from weir.sources import FileSpout
from weir.trident import Count, MapGet, StateFactory, TridentTopology
from weir.trident.backing import SqliteMapState

pytestmark = pytest.mark.spark

BATCHES = [["the cat sat on the mat", "the dog"], ["a cat and a dog", "the end", "héllo wörld 日本"]]
QUERIES = [["cat the nope"], ["dog héllo end"]]


def test_weir_computes_sparks_hash_of_strings_ints_and_bigints(spark: Any) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    strs = ["", "a", "ab", "abc", "abcd", "abcde", "héllo", "日本語テキスト", "\x7f\x80", "emoji 😀 x", "x" * 37]
    rows = [(s, i * 7919 - 20, i * 10**10) for i, s in enumerate(strs)]
    rows += [(None, -(2**31), -(2**63)), ("z", None, None), ("q", 2**31 - 1, -1)]
    df = spark.createDataFrame(rows, "s string, i int, l bigint")
    got = df.select(
        "s",
        "i",
        "l",
        F.hash("s").alias("hs"),
        F.hash("i").alias("hi"),
        F.hash("l").alias("hl"),
        F.hash("s", "i", "l").alias("h3"),
        F.pmod(F.hash("s", "i"), F.lit(3)).alias("p"),
    ).collect()
    assert len(got) == len(rows)
    for r in got:
        assert spark_key_hash((r.s,), ["string"]) == r.hs, r
        assert spark_key_hash((r.i,), ["int"]) == r.hi, r
        assert spark_key_hash((r.l,), ["bigint"]) == r.hl, r
        assert spark_key_hash((r.s, r.i, r.l), ["string", "int", "bigint"]) == r.h3, r
        assert spark_partitions_of([(r.s, r.i)], ["string", "int"], 3) == [r.p], r


class PartitionLocal(StateFactory):
    """An opaque SQLite map whose partition ``p`` keeps its keys in its own table ``part<p>``:
    a key read from another partition than the one that wrote it is not found."""

    def __init__(self, path: str) -> None:
        self.path = path

    def make_state(self, conf: Mapping[str, Any], partition_index: int, num_partitions: int) -> Any:
        factory = SqliteMapState.opaque(self.path, table=f"part{partition_index}")
        return factory.make_state(conf, partition_index, num_partitions)


class NewPartitionLocal(PartitionLocal):
    """The same, declaring that its keys may go to any partition (a new state: nothing stored yet)."""

    shared_keyspace = True


@pytest.mark.parametrize("factory", [NewPartitionLocal, PartitionLocal])
def test_counts_land_in_their_partition_and_queries_find_them(spark: Any, tmp_path: Path, factory: type) -> None:
    """A ``shared_keyspace`` factory gets Spark's hash partitions; any other keeps the stable hash."""
    from pyspark.sql import functions as F  # noqa: N812

    from weir._util import stable_hash

    lines, queries = tmp_path / "lines", tmp_path / "queries"
    expected = word_files(lines, BATCHES)
    word_files(queries, QUERIES)
    db, rec = str(tmp_path / "local.db"), str(tmp_path / "rec.db")
    topo = TridentTopology()
    counts = (
        topo.new_stream("lines", FileSpout(str(lines)))
        .each(["line"], Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(factory(db), Count(), "count")
        .parallelism_hint(3)  # not the session's shuffle partitions: the batch's job uses 3
    )
    answers = (
        topo.new_stream("queries", FileSpout(str(queries)))
        .each(["line"], Split(), ["word"])  # an any-typed field: hashed in Python on the query side
        .state_query(counts, ["word"], MapGet(), ["count"])
        .project(["word", "count"])
    )
    record(answers, rec, "answers")
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.batch.max.retries": 0}
    status = weir.submit("routing", conf, topo, spark=spark).process_available()
    assert status.last_txid == len(BATCHES)
    assert spark.conf.get("spark.sql.shuffle.partitions") != "3"  # the user's session is untouched
    # every key is stored in partition pmod(hash(word), 3), as Spark SQL itself computes it, or in
    # stable_hash((word,)) % 3 for a factory that keeps partitions apart
    words = spark.createDataFrame([(w,) for w in expected], "word string")
    want_part = {r.word: r.p for r in words.select("word", F.pmod(F.hash("word"), F.lit(3)).alias("p")).collect()}
    if not factory.shared_keyspace:
        want_part = {w: stable_hash((w,)) % 3 for w in expected}
    with sqlite3.connect(db) as conn:
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'part%'")]
        stored = {t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in tables}
    assert sum(stored.values()) == len(expected)
    assert stored == {f"part{p}": n for p, n in Counter(want_part.values()).items()}
    assert len(stored) == 3
    # queries of batch t see the counts after batch t: found in the partition that wrote them
    running: Counter[str] = Counter()
    want = []
    for txid, (batch, qs) in enumerate(zip(BATCHES, QUERIES, strict=True), start=1):
        running.update(w for line in batch for w in line.split())
        want += [(txid, w, running.get(w)) for q in qs for w in q.split()]
    assert sorted((t, *v) for t, _, v in recorded(rec, "answers")) == sorted(want, key=str)


def test_the_batch_job_shuffles_once_into_the_state_partitions(spark: Any, tmp_path: Path) -> None:
    from weir.runtime.spark.executor import ReportAccumulatorParam
    from weir.runtime.spark.trident.planner import BatchPlanner, RunContext
    from weir.runtime.spark.trident.runner import TridentSource

    lines = tmp_path / "lines"
    word_files(lines, BATCHES)
    topo = TridentTopology()
    spout = FileSpout(str(lines))
    (
        topo.new_stream("lines", spout)
        .each(["line"], Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(SqliteMapState.opaque(str(tmp_path / "m.db"), table="wc"), Count(), "count")
        .parallelism_hint(3)
    )
    ctx = RunContext(topology="t", conf={}, nodes=topo.nodes, source=TridentSource("t", {}, [("lines", spout)]))
    session = spark.newSession()  # what the query's own clone is to the user's session
    session.conf.set("spark.sql.adaptive.enabled", "false")  # as weir sets it in the clone
    batch = session.read.text(str(lines))
    planner = BatchPlanner(ctx, batch, 1, None, spark.sparkContext.accumulator([], ReportAccumulatorParam()))
    planner.run()
    (action,) = planner.actions()
    plan = planner.compile(action).df._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Exchange") == 1, plan  # the aggregate's own, into the 3 state partitions
    assert "hashpartitioning(word" in plan and ", 3)" in plan, plan
    assert "RouteStage" not in plan, plan
    with sqlite3.connect(tmp_path / "m.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM wc").fetchone()[0] == len(
            {w for b in BATCHES for line in b for w in line.split()}
        )


def test_a_task_holding_several_state_partitions_fails_clearly(spark: Any, tmp_path: Path) -> None:
    """Adaptive execution coalescing the state partitions into fewer tasks is caught, not written."""
    from weir.errors import StateError
    from weir.runtime.spark.trident.state_tasks import PersistAggStage
    from weir.trident.fields import FieldSpec

    rows = [("the",), ("cat",), ("sat",), ("mat",), ("dog",), ("end",)]
    parts = spark_partitions_of(rows, ["string"], 3)
    assert len(set(parts)) > 1
    rows = [r for _, r in sorted(zip(parts, rows, strict=True))]  # partitions 0.. in order, as Spark reads them
    import pyarrow as pa
    from pyspark.sql.types import LongType, StringType

    batch = pa.RecordBatch.from_pylist([{"word": w, "n": 1} for (w,) in rows])
    typed = [FieldSpec("word", StringType()), FieldSpec("n", LongType())]
    stage = PersistAggStage(
        topology="t",
        component="wc",
        txid=1,
        conf={},
        in_fields=typed,
        out_fields=[FieldSpec("word", StringType()), FieldSpec("count", LongType())],
        n=3,
        state_id="wc",
        p_idx=-1,
        factory=SqliteMapState.opaque(str(tmp_path / "m.db"), table="wc"),
        agg=Count(),
        key_idx=[0],
        value_idx=1,
        key_kinds=["string"],
    )
    with pytest.raises(StateError, match=r"state 'wc': Spark task 0 holds keys of state partitions \[.*\] of 3"):
        list(stage.run(0, iter([batch]), [0, 0]))
    with sqlite3.connect(tmp_path / "m.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM wc").fetchone()[0] == 0  # nothing written


def test_a_replay_touches_each_journaled_key_in_the_partition_that_now_holds_it(tmp_path: Path) -> None:
    """Touches journaled under another placement (an older weir, another parallelism) are placed again:
    a key is never touched by one task while another task updates it in the same batch."""
    import json

    import pyarrow as pa
    from pyspark.sql.types import LongType, StringType

    from weir.runtime.spark.trident.state_tasks import PersistAggStage
    from weir.trident.fields import FieldSpec

    word = next(w for w in ("cat", "dog", "emu", "yak", "owl") if spark_partitions_of([(w,)], ["string"], 3)[0] != 0)
    task = spark_partitions_of([(word,)], ["string"], 3)[0]
    db = str(tmp_path / "m.db")
    typed = [FieldSpec("word", StringType()), FieldSpec("n", LongType())]

    def stage(txid: int, touches: dict[int, list[tuple[Any, ...]]]) -> PersistAggStage:
        return PersistAggStage(
            topology="t",
            component="wc",
            txid=txid,
            conf={},
            in_fields=typed,
            out_fields=[FieldSpec("word", StringType()), FieldSpec("count", LongType())],
            n=3,
            state_id="wc",
            p_idx=-1,
            factory=SqliteMapState.opaque(db, table="wc"),
            agg=Count(),
            key_idx=[0],
            value_idx=1,
            key_kinds=["string"],
            touches=touches,
        )

    def rows(n: int) -> Any:
        return iter([pa.RecordBatch.from_pylist([{"word": word, "n": n}])])

    list(stage(4, {}).run(task, rows(7), [0, 0]))  # batch 4: count 7
    list(stage(5, {}).run(task, rows(3), [0, 0]))  # batch 5's failed attempt: 10, journaled in partition 0
    # the replay of batch 5 holds 2 of the word: its task updates it, partition 0's task must not touch it
    list(stage(5, {0: [(word,)]}).run(task, rows(2), [0, 0]))
    list(stage(5, {0: [(word,)]}).run(0, iter([]), [0, 0]))
    with sqlite3.connect(db) as conn:
        (cell,) = conn.execute("SELECT v FROM wc").fetchone()
    assert json.loads(cell) == [5, 9, 7]
