"""The executor-side stages run directly on Arrow batches, against in-memory states (no Spark).

These pin the per-partition protocol: ``make_state`` → ``begin_commit(txid)`` → one
``multi_update`` → ``commit(txid)``; untouched partitions are left alone; the journal makes an
opaque replay with different tuples exact.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import IntegerType, LongType, StringType

from tests.trident._support import Split
from weir.errors import StateError
from weir.runtime.spark.trident._arrow import TridentTaskFailure, parse_failure
from weir.runtime.spark.trident.state_tasks import JournalSpec, PersistAggStage, QueryStage, RouteStage, read_touches
from weir.runtime.spark.trident.tasks import AggStage, OpStage
from weir.state import StateFactory as KVStateFactory
from weir.trident import Count, MapGet, MemoryMapState, StateFactory, StateType
from weir.trident.fields import FieldSpec, decode_any, encode_any

STR, LONG, INT = StringType(), LongType(), IntegerType()


def batch(fields: Sequence[FieldSpec], rows: Sequence[Sequence[Any]]) -> pa.RecordBatch:
    from weir.runtime.spark.trident._arrow import arrow_schema, build_array

    schema = arrow_schema(fields)
    cols = list(zip(*rows, strict=True)) if rows else [[] for _ in fields]
    pairs = enumerate(zip(fields, cols, strict=True))
    return pa.RecordBatch.from_arrays(
        [build_array(list(c), f, schema.field(i).type, "test") for i, (f, c) in pairs], schema=schema
    )


def rows_out(batches: Iterator[pa.RecordBatch], fields: Sequence[FieldSpec]) -> list[tuple[Any, ...]]:
    out = []
    for b in batches:
        cols = [
            [decode_any(v) for v in b.column(i).to_pylist()] if f.is_any else b.column(i).to_pylist()
            for i, f in enumerate(fields)
        ]
        out.extend(zip(*cols, strict=True))
    return out


class Recording(StateFactory):
    """A MemoryMapState factory that also records the calls each partition's state receives."""

    calls: list[tuple[Any, ...]] = []

    def __init__(self, state_type: StateType = StateType.OPAQUE) -> None:
        self.inner = MemoryMapState.Factory(state_type)
        self.state_type = state_type

    def make_state(self, conf: Mapping[str, Any], partition_index: int, num_partitions: int) -> Any:
        inner = self.inner.make_state(conf, partition_index, num_partitions)
        calls = self.calls

        class Spy:
            def begin_commit(self, txid: Any) -> None:
                calls.append(("begin", partition_index, txid))
                inner.begin_commit(txid)

            def commit(self, txid: Any) -> None:
                calls.append(("commit", partition_index, txid))
                inner.commit(txid)

            def multi_update(self, keys: Any, updaters: Any) -> Any:
                calls.append(("multi_update", partition_index, len(keys)))
                return inner.multi_update(keys, updaters)

            def multi_get(self, keys: Any) -> Any:
                calls.append(("multi_get", partition_index, len(keys)))
                return inner.multi_get(keys)

        return Spy()


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    Recording.calls = []
    yield
    MemoryMapState.clear_all()


BASE = {"topology": "t", "txid": 5, "conf": {}}
IN = [FieldSpec("word", STR), FieldSpec("_weir_v", LONG), FieldSpec("_weir_p", INT)]
OUT = [FieldSpec("word", STR), FieldSpec("count", LONG)]


def persist(factory: Any, txid: int, rows: list[tuple[Any, ...]], **kw: Any) -> list[tuple[Any, ...]]:
    stage = PersistAggStage(
        **{**BASE, "txid": txid},
        component="counts",
        in_fields=IN,
        out_fields=OUT,
        factory=factory,
        n=2,
        state_id="counts",
        p_idx=2,
        mode="combiner",
        agg=Count(),
        key_idx=[0],
        value_idx=1,
        **kw,
    )
    return rows_out(stage(iter([batch(IN, rows)])), OUT)


def test_each_partition_is_updated_once_between_begin_and_commit() -> None:
    f = Recording()
    out = persist(f, 5, [("cat", 2, 0), ("dog", 1, 1), ("cat", 3, 0)])
    assert sorted(out) == [("cat", 5), ("dog", 1)]  # two partial rows of a key are combined first
    assert Recording.calls == [
        ("begin", 0, 5), ("multi_update", 0, 1), ("commit", 0, 5),
        ("begin", 1, 5), ("multi_update", 1, 1), ("commit", 1, 5),
    ]  # fmt: skip
    Recording.calls.clear()
    out = persist(f, 6, [("cat", 1, 0)])
    assert out == [("cat", 6)]
    assert [c for c in Recording.calls if c[1] == 1] == []  # a partition without tuples is not touched
    # a replay of txid 6 with other tuples: the opaque cell rebuilds from the value before txid 6
    assert persist(f, 6, [("cat", 4, 0)]) == [("cat", 9)]


def test_a_transactional_state_skips_a_replayed_txid() -> None:
    f = Recording(StateType.TRANSACTIONAL)
    assert persist(f, 1, [("cat", 2, 0)]) == [("cat", 2)]
    assert persist(f, 1, [("cat", 2, 0)]) == [("cat", 2)]
    assert persist(f, 2, [("cat", 1, 0)]) == [("cat", 3)]


def test_the_journal_makes_an_opaque_replay_with_other_keys_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    from weir.runtime.spark.trident.state_tasks import partitions_of

    def p(word: str) -> int:  # the state partition routing gives the word (stable hash)
        return partitions_of([(word,)], 2)[0]

    provider = KVStateFactory.from_url(f"memory://journal-{uuid.uuid4().hex[:8]}")
    journal = JournalSpec(provider, "$checkpointspout-t", "counts", None)
    f = Recording()
    persist(f, 1, [("cat", 1, p("cat")), ("dog", 1, p("dog"))], journal=journal)
    # attempt 1 of txid 2 writes cat, dog and emu, then the batch fails
    persist(f, 2, [("cat", 5, p("cat")), ("dog", 5, p("dog")), ("emu", 5, p("emu"))], journal=journal)
    touches = read_touches(provider, "$checkpointspout-t", "counts", 2, 2)
    assert sorted(k for ks in touches.values() for k in ks) == [("cat",), ("dog",), ("emu",)]
    assert read_touches(provider, "$checkpointspout-t", "counts", 2, 3) == {}  # another txid: nothing
    # the replay of txid 2 only has cat: dog and emu fall back to their value before txid 2. Spark
    # runs a task for every partition (state partition p = Spark partition p), with or without rows
    out = []
    for task in (0, 1):
        monkeypatch.setattr("weir.runtime.spark.trident.tasks.partition_id", lambda task=task: task)
        rows = [("cat", 2, task)] if p("cat") == task else []
        out += persist(f, 2, rows, journal=journal, touches=touches)
    assert out == [("cat", 3)]  # touched keys are not new values

    def stored(word: str) -> Any:  # each partition's own map (a memory map keeps partitions apart)
        return f.inner.make_state({}, p(word), 2).multi_get([[word]])[0]

    assert [stored("dog"), stored("emu"), stored("cat")] == [1, None, 3]
    persist(f, 3, [("dog", 1, p("dog"))], journal=journal)
    assert stored("dog") == 2


def test_route_stage_spreads_keys_by_a_stable_hash() -> None:
    from weir._util import stable_hash
    from weir.runtime.spark.trident.state_tasks import spark_routing_values

    fields = [FieldSpec("word", STR), FieldSpec("n", None)]
    out = fields + [FieldSpec("_weir_p", INT), FieldSpec("_weir_q", INT)]
    stage = RouteStage(**BASE, component="r", in_fields=fields, out_fields=out, how="key", n=4, key_idx=[0])
    rows = rows_out(stage(iter([batch(fields, [("a", 1), ("b", (1, 2)), ("a", None)])])), out)
    qs = spark_routing_values(4)
    assert [r[2] for r in rows] == [stable_hash(("a",)) % 4, stable_hash(("b",)) % 4, stable_hash(("a",)) % 4]
    assert all(r[3] == qs[r[2]] for r in rows) and rows[1][1] == (1, 2)


def test_function_stage_appends_fields_and_keeps_the_input() -> None:
    fields = [FieldSpec("id", LONG), FieldSpec("line", STR)]
    out = fields + [FieldSpec("word", None)]
    stage = OpStage(
        **BASE,
        component="split",
        in_fields=fields,
        out_fields=out,
        kind="function",
        op=Split(),
        in_idx=[1],
        in_names=["line"],
        new_fields=[FieldSpec("word", None)],
    )
    got = rows_out(stage(iter([batch(fields, [(1, "a b"), (2, ""), (3, "c")])])), out)
    assert got == [(1, "a b", "a"), (1, "a b", "b"), (3, "c", "c")]


def test_a_function_without_output_fields_passes_each_emitted_tuple_on() -> None:
    from weir.trident import Function

    class Twice(Function):
        def execute(self, tup: Any, collector: Any) -> None:
            collector.emit([])
            collector.emit([])

    fields = [FieldSpec("id", LONG)]
    stage = OpStage(
        **BASE,
        component="twice",
        in_fields=fields,
        out_fields=fields,
        kind="function",
        op=Twice(),
        in_idx=[0],
        in_names=["id"],
        new_fields=[],
    )
    assert rows_out(stage(iter([batch(fields, [(1,), (2,)])])), fields) == [(1,), (1,), (2,), (2,)]


def test_a_failing_user_function_names_its_component_and_task() -> None:
    fields = [FieldSpec("line", STR)]
    stage = OpStage(
        **BASE,
        component="each-1:Boom",
        in_fields=fields,
        out_fields=fields,
        kind="filter",
        op=lambda t: 1 / 0,
        in_idx=[0],
        in_names=["line"],
    )
    with pytest.raises(TridentTaskFailure) as info:
        list(stage(iter([batch(fields, [("x",)])])))
    got = parse_failure(f"py4j ... {info.value} ... more text")
    assert got is not None
    assert (got.component, got.task, got.txid, got.ok) == ("each-1:Boom", 0, 5, False)
    assert got.error is not None and "ZeroDivisionError" in got.error and "1 / 0" in got.traceback


def test_declared_types_are_checked_with_a_clear_message() -> None:
    fields = [FieldSpec("line", STR)]
    out = [FieldSpec("n", LONG)]
    stage = OpStage(
        **BASE,
        component="m",
        in_fields=fields,
        out_fields=out,
        kind="map",
        op=lambda t: t[0],
        in_idx=[0],
        in_names=["line"],
    )
    with pytest.raises(TridentTaskFailure, match="declared bigint but got str"):
        list(stage(iter([batch(fields, [("x",)])])))


def test_query_stage_reads_each_partition_once() -> None:
    f = Recording()
    persist(f, 1, [("cat", 2, 0), ("dog", 1, 1)])
    Recording.calls.clear()
    fields = [FieldSpec("word", STR), FieldSpec("_weir_p", INT), FieldSpec("_weir_q", INT)]
    out = [FieldSpec("word", STR), FieldSpec("count", LONG)]
    stage = QueryStage(
        **BASE,
        component="q",
        in_fields=fields,
        out_fields=out,
        factory=f,
        n=2,
        state_id="counts",
        p_idx=1,
        qf=MapGet(),
        in_idx=[0],
        in_names=["word"],
        keep=1,
        new_fields=[FieldSpec("count", LONG)],
    )
    got = rows_out(stage(iter([batch(fields, [("cat", 0, 0), ("dog", 1, 0), ("cat", 0, 0), ("emu", 1, 0)])])), out)
    assert sorted(got, key=str) == sorted([("cat", 2), ("cat", 2), ("dog", 1), ("emu", None)], key=str)
    assert Recording.calls == [("multi_get", 0, 2), ("multi_get", 1, 2)]


def test_aggregator_stages() -> None:
    from tests.trident.test_api import Emit, First

    fields = [FieldSpec("k", STR), FieldSpec("v", LONG)]
    data = batch(fields, [("a", 1), ("b", 2), ("a", 3)])
    out = [FieldSpec("k", STR), FieldSpec("first", None)]
    red = AggStage(
        **BASE,
        component="r",
        in_fields=fields,
        out_fields=out,
        mode="reducer",
        agg=First(),
        key_idx=[0],
        in_idx=[1],
        in_names=["v"],
    )
    assert sorted(rows_out(red(iter([data])), out)) == [("a", 1), ("b", 2)]
    out2 = [FieldSpec("n", LONG), FieldSpec("tag", None)]
    agg = AggStage(
        **BASE,
        component="a",
        in_fields=fields,
        out_fields=out2,
        mode="aggregator",
        agg=Emit(),
        in_idx=[1],
        in_names=["v"],
        emit_if_empty=True,
    )
    assert rows_out(agg(iter([data])), out2) == [(3, "x")]
    assert rows_out(agg(iter([])), out2) == [(0, "x")]  # a global aggregate of an empty batch still completes
    out3 = [FieldSpec("c", None)]
    cnt = AggStage(
        **BASE,
        component="c",
        in_fields=fields,
        out_fields=out3,
        mode="combiner",
        agg=Count(),
        in_idx=[],
        in_names=[],
        emit_if_empty=True,
    )
    assert rows_out(cnt(iter([])), out3) == [(0,)]


def test_make_state_failures_name_the_state() -> None:
    class Broken(StateFactory):
        def make_state(self, conf: Mapping[str, Any], partition_index: int, num_partitions: int) -> Any:
            raise ConnectionError("down")

    with pytest.raises(TridentTaskFailure, match="state 'counts'.*make_state.*down") as info:
        persist(Broken(), 1, [("cat", 1, 0)])
    assert isinstance(info.value.__cause__, StateError)


def test_encode_any_for_journal_keys() -> None:
    assert decode_any(encode_any((7, [("a", 1), ("b", None)]))) == (7, [("a", 1), ("b", None)])
