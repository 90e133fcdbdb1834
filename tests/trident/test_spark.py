"""Trident topologies end to end on the shared local Spark session, against durable stores."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.trident._support import (
    LocationDBFactory,
    LocationUpdater,
    QueryLocation,
    Split,
    Store,
    location_calls,
    locations,
    record,
    recorded,
    values_of,
    word_files,
    write_lines,
)
from weir.errors import TopologyError
from weir.sources import FileSpout
from weir.trident import (
    Aggregator,
    Count,
    Filter,
    Function,
    MapGet,
    ReducerAggregator,
    SnapshotGet,
    Sum,
    TridentTopology,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BATCHES = [
    ["the cat sat on the mat", "the dog"],
    ["a cat and a dog", "the end"],
    ["cat cat cat", "zebra"],
]
QUERIES = [["cat dog"], ["the zebra"], ["cat nope"]]


def conf_for(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"weir.state.dir": str(tmp_path / "state"), "weir.batch.max.retries": 0, **extra}


def test_word_count_with_state_query_and_new_values(spark: Any, store: Store, tmp_path: Path) -> None:
    lines_dir, query_dir = tmp_path / "lines", tmp_path / "queries"
    expected = word_files(lines_dir, BATCHES)
    word_files(query_dir, QUERIES)
    rec = str(tmp_path / "record.db")
    topo = TridentTopology()
    counts = (
        topo.new_stream("lines", FileSpout(str(lines_dir)))
        .each(["line"], Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(store.factory("opaque", "wc"), Count(), "count")
        .parallelism_hint(2)
    )
    record(counts.new_values_stream(), rec, "new_values")
    queried = (
        topo.new_stream("queries", FileSpout(str(query_dir)))
        .each(["line"], Split(), ["word"])
        .state_query(counts, ["word"], MapGet(), ["count"])
        .project(["word", "count"])
    )
    record(queried, rec, "answers")
    run = weir.submit("wc", conf_for(tmp_path), topo, spark=spark)
    status = run.process_available()
    assert status.batches == len(BATCHES) and status.last_txid == len(BATCHES)
    assert status.tuples_in == sum(len(b) for b in BATCHES) + len(QUERIES)
    assert store.counts("wc") == expected
    # new values: per batch, every word of the batch with its count after the batch
    running: Counter[str] = Counter()
    want_new = []
    for txid, lines in enumerate(BATCHES, start=1):
        words: Counter[str] = Counter(w for line in lines for w in line.split())
        running.update(words)
        want_new += [(txid, w, running[w]) for w in words]
    got_new = sorted((t, *v) for t, _, v in recorded(rec, "new_values"))
    assert got_new == sorted(want_new)
    # queries of batch t see the counts after batch t (states are written before anything reads them)
    running.clear()
    want_answers = []
    for txid, (lines, queries) in enumerate(zip(BATCHES, QUERIES, strict=True), start=1):
        running.update(w for line in lines for w in line.split())
        want_answers += [(txid, w, running.get(w)) for q in queries for w in q.split()]
    assert sorted((t, *v) for t, _, v in recorded(rec, "answers")) == sorted(want_answers, key=str)
    # a second submit (a restart) continues with the next txid and stays exact
    word_files(lines_dir, [*BATCHES, ["cat"]])
    write_lines(query_dir, "f003.txt", ["cat"])
    status = weir.submit("wc", conf_for(tmp_path), topo, spark=spark).process_available()
    assert status.last_txid == len(BATCHES) + 1
    assert store.counts("wc") == expected + Counter(["cat"])


class Upper(Function):
    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup.get_string(0).upper(), len(tup.get_string(0))])


class LongWord(Filter):
    def is_keep(self, tup: Any) -> bool:
        return len(tup[0]) > 2


class Longest(ReducerAggregator[str]):
    def init(self) -> str:
        return ""

    def reduce(self, curr: str, tup: Any) -> str:
        return max(curr, tup[0], key=lambda w: (len(w), w))


class CharCount(ReducerAggregator[int]):
    def init(self) -> int:
        return 0

    def reduce(self, curr: int, tup: Any) -> int:
        return curr + len(tup[0])


class Stats(Aggregator[dict[str, int]]):
    def init(self, batch_id: int, collector: Any) -> dict[str, int]:
        return {"n": 0, "chars": 0}

    def aggregate(self, val: dict[str, int], tup: Any, collector: Any) -> None:
        val["n"] += 1
        val["chars"] += len(tup[0])

    def complete(self, val: dict[str, int], collector: Any) -> None:
        collector.emit([val["n"], val["chars"]])


def test_stream_operations(spark: Any, sqlite_store: Store, tmp_path: Path) -> None:
    lines_dir = tmp_path / "lines"
    word_files(lines_dir, BATCHES)
    rec = str(tmp_path / "record.db")
    topo = TridentTopology()
    lines = topo.new_stream("lines", FileSpout(str(lines_dir)))
    words = lines.each(["line"], Split(), ["word"])
    long_words = words.each(["word"], LongWord()).each(["word"], Upper(), ["upper:str", "len:int"])
    record(long_words, rec, "each", ["word", "upper", "len"])
    record(words.map(lambda t: (t["word"], 1), "w, one:int").filter(lambda t: t[0] != "the"), rec, "map")
    record(lines.flat_map(lambda t: [(w,) for w in t[0].split()[:1]], ["first"]), rec, "flat_map")
    grouped = words.each(["word"], Upper(), ["u", "n:int"]).group_by(["word"])
    record(grouped.aggregate(Count(), ["c"]), rec, "group_count")  # Spark SQL
    record(grouped.aggregate(["n"], Sum(), ["chars"]), rec, "group_sum")  # Spark SQL on a typed field
    record(grouped.aggregate(["u"], Sum(), ["cat"]), rec, "group_sum_py")  # Python: strings concatenate
    record(words.aggregate(["word"], Longest(), ["longest"]), rec, "longest")
    record(words.aggregate(["word"], Stats(), ["n", "chars"]), rec, "stats")
    record(words.global_().partition_aggregate(Count(), ["c"]), rec, "partition_count")
    record(
        words.partition_by(["word"]).parallelism_hint(3).partition_aggregate(["word"], Stats(), ["n", "ch"]),
        rec,
        "partition_stats",
    )
    record(words.broadcast().parallelism_hint(2).partition_aggregate(Count(), ["c"]), rec, "broadcast")
    record(words.shuffle().parallelism_hint(2).partition_aggregate(Count(), ["c"]), rec, "shuffle")
    firsts = lines.each(["line"], Split(), ["w"]).project(["w"])
    record(topo.merge(firsts, words.project(["word"]), output_fields=["x"]), rec, "merge")
    lengths = words.each(["word"], Upper(), ["up", "len:int"]).project(["word", "len"])
    record(topo.join(words.project(["word"]), ["word"], lengths, ["word"], ["word", "len"]), rec, "join")
    f = sqlite_store.factory
    by_word = words.group_by(["word"])
    record(
        by_word.persistent_aggregate(f("opaque", "chars"), ["word"], CharCount(), "chars").new_values_stream(),
        rec,
        "reduced",
    )  # a reducer: the key's tuples are folded in its state partition
    untyped = words.each(["word"], Upper(), ["u", "n"]).group_by(["word"])  # n is untyped: Python combiner
    untyped.persistent_aggregate(f("transactional", "sums"), ["n"], Sum(), "chars").parallelism_hint(3)
    words.persistent_aggregate(f("opaque", "longest"), ["word"], Longest(), "longest")  # global reducer
    total = words.persistent_aggregate(f("opaque", "total"), Count(), "total")
    record(total.new_values_stream(), rec, "total")
    record(lines.state_query(total, [], SnapshotGet(), ["total"]).project(["total"]), rec, "snapshot_get")
    status = weir.submit("ops", conf_for(tmp_path), topo, spark=spark).process_available()
    assert status.batches == 3 and status.tuples_in == sum(len(b) for b in BATCHES)

    per_batch = {t: [w for line in lines_ for w in line.split()] for t, lines_ in enumerate(BATCHES, start=1)}
    everything = [w for ws in per_batch.values() for w in ws]

    def by_txid(table: str) -> dict[int, list[tuple[Any, ...]]]:
        out: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
        for t, _, v in recorded(rec, table):
            out[t].append(tuple(v))
        return {t: sorted(v, key=str) for t, v in out.items()}

    assert values_of(recorded(rec, "each")) == sorted((w, w.upper(), len(w)) for w in everything if len(w) > 2)
    assert values_of(recorded(rec, "map")) == sorted((w, 1) for w in everything if w != "the")
    assert values_of(recorded(rec, "flat_map")) == sorted((line.split()[0],) for b in BATCHES for line in b)
    for t, ws in per_batch.items():
        c = Counter(ws)
        assert by_txid("group_count")[t] == sorted(c.items(), key=str)
        assert by_txid("group_sum")[t] == sorted(((w, n * len(w)) for w, n in c.items()), key=str)
        assert by_txid("group_sum_py")[t] == sorted(((w, w.upper() * n) for w, n in c.items()), key=str)
        assert by_txid("longest")[t] == [(max(ws, key=lambda w: (len(w), w)),)]
        assert by_txid("stats")[t] == [(len(ws), sum(map(len, ws)))]
        assert by_txid("partition_count")[t] == [(len(ws),)]  # global_(): one partition
        stats = by_txid("partition_stats")[t]
        assert sum(s[0] for s in stats) == len(ws) and len(stats) <= 3
        assert by_txid("broadcast")[t] == [(len(ws),), (len(ws),)]  # every partition sees every tuple
        spread = by_txid("shuffle")[t]  # round robin over 2 partitions
        assert len(spread) == 2 and sum(c for (c,) in spread) == len(ws) and min(spread)[0] >= 1
        assert by_txid("merge")[t] == sorted(((w,) for w in ws + ws), key=str)
        assert by_txid("join")[t] == sorted(((w, len(w)) for w in ws for v in ws if v == w), key=str)
        assert by_txid("total")[t] == [(sum(len(per_batch[i]) for i in range(1, t + 1)),)]
        assert by_txid("snapshot_get")[t] == [(sum(len(per_batch[i]) for i in range(1, t + 1)),)] * len(BATCHES[t - 1])
    assert sqlite_store.read_all("total") == {("$__GLOBAL_KEY__$",): len(everything)}
    chars = Counter({w: n * len(w) for w, n in Counter(everything).items()})
    assert sqlite_store.counts("chars") == chars and sqlite_store.counts("sums") == chars
    assert sqlite_store.read_all("longest") == {("$__GLOBAL_KEY__$",): max(everything, key=lambda w: (len(w), w))}
    running: Counter[str] = Counter()
    for t, ws in per_batch.items():
        running.update({w: n * len(w) for w, n in Counter(ws).items()})
        assert by_txid("reduced")[t] == sorted(((w, running[w]) for w in set(ws)), key=str)


def test_partition_persist_and_state_query_with_location_db(spark: Any, tmp_path: Path) -> None:
    updates, lookups = tmp_path / "updates", tmp_path / "lookups"
    write_lines(
        updates,
        "f000.json",
        [
            '{"userid": 1, "location": "Paris"}',
            '{"userid": 2, "location": "Oslo"}',
            '{"userid": 3, "location": "Rome"}',
        ],
    )
    write_lines(updates, "f001.json", ['{"userid": 2, "location": "Bergen"}'])
    write_lines(lookups, "f000.json", ['{"userid": 1}', '{"userid": 2}', '{"userid": 9}'])
    write_lines(lookups, "f001.json", ['{"userid": 2}'])
    db = str(tmp_path / "locations.db")
    rec = str(tmp_path / "record.db")
    topo = TridentTopology()
    located = (
        topo.new_stream("locations", FileSpout(str(updates), format="json", schema="userid BIGINT, location STRING"))
        .partition_by(["userid"])
        .partition_persist(LocationDBFactory(db), ["userid", "location"], LocationUpdater(), ["userid", "location"])
        .parallelism_hint(2)
    )
    record(located.new_values_stream(), rec, "persisted")
    static = topo.new_static_state(LocationDBFactory(db)).parallelism_hint(2)
    answers = topo.new_stream("lookups", FileSpout(str(lookups), format="json", schema="userid BIGINT")).state_query(
        static, ["userid"], QueryLocation(), ["location:str"]
    )
    record(answers, rec, "answers")
    weir.submit("loc", conf_for(tmp_path), topo, spark=spark).process_available()
    assert locations(db) == {1: "Paris", 2: "Bergen", 3: "Rome"}
    assert values_of(recorded(rec, "persisted")) == [(1, "Paris"), (2, "Bergen"), (2, "Oslo"), (3, "Rome")]
    got = sorted((t, *v) for t, _, v in recorded(rec, "answers"))
    assert got == sorted([(1, 1, "Paris"), (1, 2, "Oslo"), (1, 9, None), (2, 2, "Bergen")], key=str)
    calls = location_calls(db)
    # per batch and state partition with tuples: begin_commit(txid), ONE bulk update, commit(txid)
    for p in (0, 1):
        mine = [(what, txid) for what, txid, _, q in calls if q == p and what != "bulk_get"]
        assert len(mine) % 3 == 0
        for i in range(0, len(mine), 3):
            (b, t1), (s, _), (c, t2) = mine[i : i + 3]
            assert (b, s, c) == ("begin", "bulk_set", "commit") and t1 == t2
    sets = [n for what, _, n, _ in calls if what == "bulk_set"]
    assert sum(sets) == 4 and len(sets) <= 3
    # one bulk read per state partition per batch
    gets = [n for what, _, n, _ in calls if what == "bulk_get"]
    assert sum(gets) == 4 and len(gets) <= 3


class Boom(Function):
    def execute(self, tup: Any, collector: Any) -> None:
        if "zebra" in tup.get_string(0):
            raise ValueError("no zebras allowed")
        collector.emit([tup.get_string(0)])


def test_a_failing_function_stops_the_topology_naming_component_task_and_txid(
    spark: Any, sqlite_store: Store, tmp_path: Path
) -> None:
    word_files(tmp_path / "lines", BATCHES)
    topo = TridentTopology()
    (
        topo.new_stream("lines", FileSpout(str(tmp_path / "lines")))
        .each(["line"], Boom(), ["copy"])
        .name("guard")
        .group_by(["copy"])
        .persistent_aggregate(sqlite_store.factory("opaque", "guarded"), Count(), "n")
    )
    run = weir.submit("boom", conf_for(tmp_path), topo, spark=spark)
    with pytest.raises(TopologyError) as info:
        run.process_available()
    err = info.value
    assert err.component == "guard" and err.txid == 3 and err.task is not None and err.task >= 0
    assert "no zebras allowed" in str(err) and "ValueError" in (err.remote_traceback or "")
    assert sum(sqlite_store.counts("guarded").values()) == 4  # batches 1 and 2 were committed


def test_routing_values_agree_with_spark_hash(spark: Any) -> None:
    from weir.runtime.spark.trident.state_tasks import spark_int_hash, spark_routing_values

    rows = spark.range(50).selectExpr("CAST(id AS INT) AS i", "hash(CAST(id AS INT)) AS h").collect()
    assert [spark_int_hash(r.i) for r in rows] == [r.h for r in rows]
    for n in (2, 3, 5):
        qs = spark_routing_values(n)
        df = spark.createDataFrame([(q,) for q in qs], "q int").repartition(n, "q")
        parts = df.rdd.glom().collect()
        assert [sorted(p) for p in parts] == [[(qs[i],)] for i in range(n)]


def test_memory_map_state_non_transactional_and_cached_maps_on_spark(spark: Any, tmp_path: Path) -> None:
    """Seed 004's example unchanged — ``persistent_aggregate(MemoryMapState.Factory(), Count(), …)`` with a
    query stream — beside a ``NonTransactionalMap`` (``allow_inexact``) and an opaque map behind a
    ``CachedMap`` of 2 keys (evicting all the time), all in one run: exact counts in each."""
    from weir.errors import NotDurableWarning
    from weir.trident import MemoryMapState
    from weir.trident.backing import SqliteMapState

    lines_dir, query_dir = tmp_path / "lines", tmp_path / "queries"
    expected = word_files(lines_dir, BATCHES)
    word_files(query_dir, QUERIES)
    db = f"sqlite:///{tmp_path / 'maps.db'}"
    rec = str(tmp_path / "record.db")
    topo = TridentTopology()
    words = topo.new_stream("lines", FileSpout(str(lines_dir))).each(["line"], Split(), ["word:str"])
    counts = words.group_by(["word"]).persistent_aggregate(MemoryMapState.Factory(), Count(), "count")
    words.group_by(["word"]).persistent_aggregate(
        SqliteMapState.non_transactional(db, table="nontx"), Count(), "count", allow_inexact=True
    )
    words.group_by(["word"]).persistent_aggregate(
        SqliteMapState.opaque(db, table="cached", cache_size=2), Count(), "count"
    ).parallelism_hint(2)
    queried = (
        topo.new_stream("queries", FileSpout(str(query_dir)))
        .each(["line"], Split(), ["word"])
        .state_query(counts, ["word"], MapGet(), ["count"])
        .project(["word", "count"])
    )
    record(queried, rec, "answers")
    with pytest.warns(NotDurableWarning, match="MemoryMapState.Factory"):
        run = weir.submit("memwc", conf_for(tmp_path), topo, spark=spark)
    status = run.process_available()
    assert status.batches == len(BATCHES)
    # the memory state answered the queries of batch t with the counts after batch t
    running: Counter[str] = Counter()
    want = []
    for txid, (lines, queries) in enumerate(zip(BATCHES, QUERIES, strict=True), start=1):
        running.update(w for line in lines for w in line.split())
        want += [(txid, w, running.get(w)) for q in queries for w in q.split()]
    assert sorted((t, *v) for t, _, v in recorded(rec, "answers")) == sorted(want, key=str)
    nontx, cached = Store("sqlite", db, "x"), Store("sqlite", db, "x")
    assert Counter({k[0]: v for k, v in nontx.read_all_table("nontx").items()}) == expected
    assert Counter({k[0]: v for k, v in cached.read_all_table("cached").items()}) == expected
    # the memory state lives for the run: a restart (new submit) starts from nothing
    write_lines(lines_dir, "f003.txt", ["cat"])
    write_lines(query_dir, "f003.txt", ["cat the"])
    with pytest.warns(NotDurableWarning):
        weir.submit("memwc", conf_for(tmp_path), topo, spark=spark).process_available()
    last = sorted((t, *v) for t, _, v in recorded(rec, "answers") if t == len(BATCHES) + 1)
    assert last == [(4, "cat", 1), (4, "the", None)]
    assert Counter({k[0]: v for k, v in cached.read_all_table("cached").items()}) == expected + Counter(["cat"])
