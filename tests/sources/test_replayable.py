"""ReplayableSpout: offsets, limits, the Spark reader adapter (driven as Spark drives it), schemas."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxRows

from tests.sources._spouts import Numbers
from weir.errors import ConfigError, SourceError
from weir.sources import Guarantee, ReadLimit, ReplayableSpout
from weir.sources.replayable import (
    _clamp,
    _Range,
    _SpoutReader,
    canonical_offset,
    source_name,
)
from weir.sources.schema import converter, parse_columns, to_ddl


def reader(spout: ReplayableSpout, initial: dict[str, Any] | None = None) -> _SpoutReader:
    return _SpoutReader(spout, "spout 'x'", initial if initial is not None else spout.initial_offset())


def rows_of(batches: Any) -> list[tuple[Any, ...]]:
    """The rows of the Arrow record batches a reader hands Spark."""
    return [tuple(row.values()) for b in batches for row in b.to_pylist()]


# ---- ReadLimit --------------------------------------------------------------------------------
def test_read_limit_cap_admits_at_most_max_records() -> None:
    assert ReadLimit(max_records=100).cap(250, 1000) == 350
    assert ReadLimit(max_records=100).cap(950, 1000) == 1000
    assert ReadLimit().cap(250, 1000) == 1000
    assert ReadLimit(max_records=5).cap(10, 3) == 10  # never backwards
    assert ReadLimit().unlimited and not ReadLimit(max_bytes=1).unlimited


# ---- offsets -----------------------------------------------------------------------------------
def test_canonical_offset_sorts_keys_at_every_level() -> None:
    off = canonical_offset({"b": 1, "a": {"z": "x", "c": [1, {"y": 2, "x": 1}]}}, "w")
    assert json.dumps(off) == '{"a": {"c": [1, {"x": 1, "y": 2}], "z": "x"}, "b": 1}'


@pytest.mark.parametrize(
    ("bad", "needle"),
    [([1], "must be a dict"), ({1: 2}, "keys must be strings"), ({"a": object()}, "is not JSON")],
)
def test_canonical_offset_refuses_non_json(bad: Any, needle: str) -> None:
    with pytest.raises(SourceError, match=needle):
        canonical_offset(bad, "spout 'x'")


def test_clamp_numbers_nested_and_missing_keys() -> None:
    assert _clamp({"n": 5}, {"n": 50}, {"n": 20}, "w") == {"n": 20}
    assert _clamp({"n": 5}, {"n": 10}, {"n": 20}, "w") == {"n": 10}
    assert _clamp({"n": 30}, {"n": 40}, {"n": 20}, "w") == {"n": 30}  # never before start
    assert _clamp({"p": {"a": 1}}, {"p": {"a": 9}}, {"p": {"a": 4}}, "w") == {"p": {"a": 4}}
    # a partition that appeared after the target: keep its start, or leave it out
    assert _clamp({"a": 1, "b": 2}, {"a": 3, "b": 5}, {"a": 9}, "w") == {"a": 3, "b": 2}
    assert _clamp({"a": 1}, {"a": 3, "c": 5}, {"a": 9}, "w") == {"a": 3}
    assert _clamp({"s": "x"}, {"s": "x"}, {"s": "x"}, "w") == {"s": "x"}
    with pytest.raises(SourceError, match="override"):
        _clamp({"s": "a"}, {"s": "c"}, {"s": "b"}, "w")


# ---- the reader adapter, driven as Spark drives it --------------------------------------------
def test_default_read_limit_follows_the_spout() -> None:
    assert isinstance(reader(Numbers(10)).getDefaultReadLimit(), ReadAllAvailable)
    assert reader(Numbers(10, max_records=3)).getDefaultReadLimit() == ReadMaxRows(3)
    s = Numbers(10)
    s.max_bytes_per_batch = 100
    assert reader(s).getDefaultReadLimit() == ReadMaxBytes(100)


def test_admission_control_bounds_each_batch_and_all_available_ignores_it() -> None:
    r = reader(Numbers(1000, max_records=300))
    start = r.initialOffset()
    assert r.latestOffset(start, ReadMaxRows(300)) == {"n": 300}
    assert r.latestOffset({"n": 900}, ReadMaxRows(300)) == {"n": 1000}
    assert r.latestOffset(start, ReadAllAvailable()) == {"n": 1000}  # the engine's limit wins


def test_available_now_stops_at_what_was_there_when_it_started(tmp_path: Any) -> None:
    spout = Numbers(1000, max_records=300, log_dir=str(tmp_path))
    (tmp_path / "available").write_text("500")
    r = reader(spout)
    r.prepareForTriggerAvailableNow()
    start = r.initialOffset()
    ends = []
    for _ in range(5):
        end = r.latestOffset(start, r.getDefaultReadLimit())
        (tmp_path / "available").write_text("1000")  # more data arrives during the run
        ends.append(end["n"])
        start = end
    assert ends == [300, 500, 500, 500, 500]  # the target (500) was fixed by the first call


def test_partitions_and_read_cover_the_range_once() -> None:
    r = reader(Numbers(100, keys=3))
    parts = r.partitions({"n": 10}, {"n": 30})
    assert [type(p) for p in parts] == [_Range, _Range]
    rows = [row for p in parts for row in rows_of(r.read(p))]
    assert [row[0] for row in rows] == list(range(10, 30))
    assert rows[0] == (10, "k1")
    assert r.partitions({"n": 30}, {"n": 30}) == []


def test_a_failing_read_names_the_spout_and_the_range() -> None:
    class Broken(Numbers):
        def read(self, start: dict[str, Any], end: dict[str, Any]) -> Any:
            yield (1, "a")
            raise KeyError("boom")

    r = reader(Broken(10))
    with pytest.raises(SourceError, match=r"spout 'x': read\(\{\"n\": 0\}, \{\"n\": 5\}\) failed: KeyError"):
        list(r.read(_Range(0, {"n": 0}, {"n": 5})))


def test_records_reach_spark_as_arrow_batches_of_the_declared_schema() -> None:
    import pyarrow as pa

    r = reader(Numbers(25_000))
    batches = list(r.read(_Range(0, {"n": 0}, {"n": 25_000})))
    assert [b.num_rows for b in batches] == [10_000, 10_000, 5_000]
    assert batches[0].schema == pa.schema([("n", pa.int64()), ("key", pa.string())])

    class Yields(Numbers):
        def read(self, start: dict[str, Any], end: dict[str, Any]) -> Any:
            yield pa.RecordBatch.from_pydict({"n": [7], "key": ["k"]})

    assert rows_of(reader(Yields(1)).read(_Range(0, {"n": 0}, {"n": 1}))) == [(7, "k")]


@pytest.mark.parametrize(
    ("record", "needle"),
    [
        ((1,), r"a record of 1 values \(1,\); the output has \['n', 'key'\]"),
        (("x", "k"), r"field 'n' \(int64\) cannot hold str 'x'"),
        ((2**70, "k"), r"field 'n' \(int64\) cannot hold int"),
    ],
)
def test_records_that_do_not_fit_the_schema_name_the_field(record: tuple[Any, ...], needle: str) -> None:
    class Bad(Numbers):
        def read(self, start: dict[str, Any], end: dict[str, Any]) -> Any:
            return [(1, "a"), record]

    with pytest.raises(SourceError, match=needle):
        list(reader(Bad(2)).read(_Range(0, {"n": 0}, {"n": 2})))


def test_commit_hook_errors_are_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    class BadCommit(Numbers):
        def commit(self, end: dict[str, Any]) -> None:
            raise RuntimeError("cannot ack")

    reader(BadCommit(10)).commit({"n": 5})
    assert "commit" in caplog.text and "cannot ack" in caplog.text


def test_reader_and_partitions_pickle_for_executors() -> None:
    from pyspark import cloudpickle

    r = reader(Numbers(10))
    r2 = cloudpickle.loads(cloudpickle.dumps(r))
    p = cloudpickle.loads(cloudpickle.dumps(_Range(0, {"n": 0}, {"n": 3})))
    assert rows_of(r2.read(p)) == [(0, "k0"), (1, "k1"), (2, "k2")]


# ---- declarations ------------------------------------------------------------------------------
def test_fields_default_to_string_and_schema_gives_types() -> None:
    class F(Numbers):
        schema = None
        fields = ("a", "b")

    assert F(1).spark_schema() == "`a` STRING, `b` STRING"
    assert Numbers(1).spark_schema() == "`n` BIGINT, `key` STRING"
    from weir.topology.components import OutputFieldsDeclarer

    d = OutputFieldsDeclarer()
    Numbers(1).declare_output_fields(d)
    assert list(d.streams["default"]) == ["n", "key"]


@pytest.mark.parametrize(
    ("schema", "fields", "needle"),
    [
        (None, None, "declare the output"),
        ("a STRING, b", None, "expected 'name TYPE'"),
        ("a DECIMAL(10,2)", None, "cannot produce"),
        ("a TIMESTAMP", None, "cannot produce"),
        ("a STRING, a INT", None, "declared twice"),
        ("a STRING", ["b"], "do not match"),
        (None, ["bad name"], "plain identifier"),
        (None, ["_corrupt_record"], "reserved"),
    ],
)
def test_bad_declarations_are_config_errors(schema: str | None, fields: list[str] | None, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        parse_columns(schema, fields, where="S")


@pytest.mark.parametrize("bad", [0, -1, True, "10", 1.5])
def test_limits_must_be_positive_ints(bad: Any) -> None:
    s = Numbers(1)
    s.max_records_per_batch = bad
    with pytest.raises(ConfigError, match="max_records_per_batch must be a positive int"):
        s.read_limit()


def test_corrupt_column_marks_malformed_rows() -> None:
    class WithErrors(Numbers):
        corrupt_column = True

    s = WithErrors(1)
    assert s.spark_schema().endswith("`_corrupt_record` STRING")
    assert s.to_values((1, "a", None)) == (1, "a")
    with pytest.raises(SourceError, match="malformed record: field n: bad"):
        s.to_values((None, None, "field n: bad"))


def test_converters() -> None:
    assert converter("STRING")(b"h\xc3\xa9") == "hé"
    assert converter("STRING")({"b": 1, "a": [True]}) == '{"a":[true],"b":1}'
    assert converter("BIGINT")(b" 42 ") == 42 and converter("BIGINT")(7.0) == 7
    assert converter("INT")(None) is None
    assert converter("DOUBLE")(b"2.5") == 2.5
    assert converter("BOOLEAN")(b"TRUE") is True and converter("BOOLEAN")(0) is False
    assert converter("BINARY")("x") == b"x"
    for typ, bad in [
        ("INT", b"2147483648"),
        ("TINYINT", 200),
        ("BIGINT", b"x"),
        ("BIGINT", 1.5),
        ("BIGINT", True),
        ("BOOLEAN", b"maybe"),
        ("STRING", b"\xff"),
        ("DOUBLE", b""),
    ]:
        with pytest.raises(ValueError):
            converter(typ)(bad)
    assert to_ddl(parse_columns("a long, b bool", None, where="S")) == "`a` BIGINT, `b` BOOLEAN"


def test_source_names_are_identifiers() -> None:
    assert source_name("word-count", "lines.1") == "weir_word_count__lines_1"


def test_guarantee_is_declared_per_class_and_instance() -> None:
    class Opaque(Numbers):
        guarantee = Guarantee.OPAQUE

    assert Numbers(1).guarantee is Guarantee.TRANSACTIONAL
    assert Opaque(1).guarantee is Guarantee.OPAQUE
