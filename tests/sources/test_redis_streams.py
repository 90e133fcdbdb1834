"""RedisStreamSpout against a real redis-server: offsets, limits, conversion, trimmed ranges."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

import pytest
import redis

from tests.servers import RedisCluster, RedisServer, free_port
from weir.errors import ConfigError, SourceError
from weir.sources import Guarantee, ReadLimit, RedisStreamSpout

pytestmark = pytest.mark.services


@pytest.fixture
def r(redis_server: RedisServer) -> redis.Redis:
    return redis.Redis(port=redis_server.port)


def key(name: str = "s") -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def fill(r: redis.Redis, stream: str, n: int, first: int = 1, seq: int = 0) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(first, first + n):
        pipe.xadd(stream, {"key": f"k{i % 5}", "n": str(i)}, id=f"{i}-{seq}")
    pipe.execute()


def read_all(spout: RedisStreamSpout, start: dict[str, Any], end: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [row for s, e in spout.partitions(start, end) for row in spout.records(s, e)]


# ---- offsets and limits ------------------------------------------------------------------------
def test_initial_offsets_per_start_option(r: redis.Redis, redis_server: RedisServer) -> None:
    a, missing = key(), key()
    fill(r, a, 20)
    r.xtrim(a, maxlen=15, approximate=False)  # 5 entries were gone before the topology started
    url = redis_server.url
    assert RedisStreamSpout(url, [a, missing], ["key"]).initial_offset() == {
        a: {"id": "0-0", "n": 5},
        missing: {"id": "0-0", "n": 0},
    }
    assert RedisStreamSpout(url, [a], ["key"], start="$").initial_offset() == {a: {"id": "20-0", "n": 20}}
    assert RedisStreamSpout(url, [a], ["key"], start="7-0").initial_offset() == {a: {"id": "7-0"}}


def test_latest_offset_takes_everything_or_a_fair_share(r: redis.Redis, redis_server: RedisServer) -> None:
    a, b = key("a"), key("b")
    fill(r, a, 50)
    fill(r, b, 3, seq=1)
    spout = RedisStreamSpout(redis_server.url, [a, b], ["key"])
    start = spout.initial_offset()
    assert spout.latest_offset(start, ReadLimit()) == {a: {"id": "50-0", "n": 50}, b: {"id": "3-1", "n": 3}}
    # 10 records: b has only 3, a gets the rest of the budget
    assert spout.latest_offset(start, ReadLimit(max_records=10)) == {a: {"id": "7-0", "n": 7}, b: {"id": "3-1", "n": 3}}
    fill(r, b, 47, first=4, seq=1)
    assert spout.latest_offset(start, ReadLimit(max_records=10)) == {a: {"id": "5-0", "n": 5}, b: {"id": "5-1", "n": 5}}
    # bytes: at least one entry even when it is larger than the budget
    one = spout.latest_offset(start, ReadLimit(max_bytes=1))
    assert sum(1 for s in (a, b) if one[s] != start[s]) == 1
    some = spout.latest_offset(start, ReadLimit(max_bytes=200))  # entries are 10-14 bytes
    taken = sum(some[s]["n"] for s in (a, b))
    assert 200 // 14 <= taken <= 200 // 10
    # nothing new: the start comes back
    end = spout.latest_offset(start, ReadLimit())
    assert spout.latest_offset(end, ReadLimit(max_records=5)) == end
    assert spout.partitions(end, end) == []


def test_a_limit_that_everything_fits_in_needs_no_fetch(
    r: redis.Redis, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = key("a"), key("b")
    fill(r, a, 30)
    fill(r, b, 20)
    spout = RedisStreamSpout(redis_server.url, [a, b], ["key"])
    start = spout.initial_offset()
    fetched: list[Any] = []
    real = spout._scan
    monkeypatch.setattr(spout, "_scan", lambda *a: fetched.append(a) or real(*a))
    assert spout.latest_offset(start, ReadLimit(max_records=50)) == spout.latest_offset(start, ReadLimit())
    assert fetched == []  # the ordinals said 50 entries are left: nothing to count
    assert spout.latest_offset(start, ReadLimit(max_records=49))[a]["n"] + 20 >= 49
    assert fetched


def test_a_large_limited_range_is_read_in_parallel_sub_ranges(r: redis.Redis, redis_server: RedisServer) -> None:
    a = key()
    fill(r, a, 25_000)
    spout = RedisStreamSpout(redis_server.url, a, ["n"], read_partitions=3)
    start = spout.initial_offset()
    end = spout.latest_offset(start, ReadLimit(max_records=20_000))
    parts = spout.partitions(start, end)
    bounds = [(p[0][a]["n"], p[1][a]["n"]) for p in parts]
    assert len(bounds) == 3 and bounds[0][0] == 0 and bounds[-1][1] == 20_000
    assert all(b[0] == a[1] for a, b in zip(bounds, bounds[1:])) and all(6000 <= e - s <= 7400 for s, e in bounds)
    rows = [int(x[0]) for s, e in parts for x in spout.records(s, e)]
    assert rows == list(range(1, 20_001))
    # a replay planned elsewhere (no hints) reads the same range in one partition
    from pyspark import cloudpickle

    copy = cloudpickle.loads(cloudpickle.dumps(spout))
    assert copy.partitions(start, end) == [(start, end)]
    # each sub-range checks its own count: a trim into the second one is found there
    r.xtrim(a, maxlen=25_000 - 10_000, approximate=False)
    assert len(list(spout.records(*parts[2]))) == bounds[2][1] - bounds[2][0]
    (s1, e1) = bounds[1]
    with pytest.raises(SourceError, match=rf"lost {10_000 - s1} of the {e1 - s1} entries in \({s1}-0, {e1}-0\]"):
        list(spout.records(*parts[1]))


def test_a_large_remainder_that_fits_is_still_split_for_parallel_reads(
    r: redis.Redis, redis_server: RedisServer
) -> None:
    a = key()
    fill(r, a, 12_000)
    spout = RedisStreamSpout(redis_server.url, a, ["n"], read_partitions=2)
    start = spout.initial_offset()
    end = spout.latest_offset(start, ReadLimit(max_records=50_000))
    assert end == {a: {"id": "12000-0", "n": 12_000}} == spout.latest_offset(start, ReadLimit())
    parts = spout.partitions(start, end)
    (a0, a1), (b0, b1) = [(p[0][a]["n"], p[1][a]["n"]) for p in parts]
    assert a0 == 0 and a1 == b0 and b1 == 12_000 and 5500 <= a1 <= 6500
    assert [int(x[0]) for s, e in parts for x in spout.records(s, e)] == list(range(1, 12_001))
    single = RedisStreamSpout(redis_server.url, a, ["n"], read_partitions=1)
    assert single.partitions(start, single.latest_offset(start, ReadLimit(max_records=50_000))) == [(start, end)]


def test_the_next_batch_is_counted_ahead_and_used_only_when_it_filled_the_batch(
    r: redis.Redis, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = key()
    fill(r, a, 250)
    spout = RedisStreamSpout(redis_server.url, a, ["n"], max_records_per_batch=100)
    scans: list[str] = []
    real = spout._scan
    monkeypatch.setattr(spout, "_scan", lambda *x: scans.append(threading.current_thread().name) or real(*x))
    lim = ReadLimit(max_records=100)
    start = spout.initial_offset()
    first = spout.latest_offset(start, lim)
    assert first == {a: {"id": "100-0", "n": 100}}
    spout._prefetched[1].join()  # the next batch (101..200) was counted in the background
    scans.clear()
    second = spout.latest_offset(first, lim)
    assert second == {a: {"id": "200-0", "n": 200}}
    assert "MainThread" not in scans  # taken from the count made ahead
    spout._prefetched[1].join()  # 201..250: it reached the stream's end, so it is not trusted
    fill(r, a, 30, first=251)
    scans.clear()
    third = spout.latest_offset(second, lim)
    assert third == {a: {"id": "280-0", "n": 280}}  # counted again: the 30 new entries are in
    # a start other than the one counted ahead is counted afresh
    assert spout.latest_offset(start, lim) == first
    no_ahead = RedisStreamSpout(redis_server.url, a, ["n"], max_records_per_batch=100, prefetch=False)
    no_ahead.latest_offset(start, lim)
    assert no_ahead._prefetched is None


def test_read_converts_types_and_adds_stream_and_id(r: redis.Redis, redis_server: RedisServer) -> None:
    a = key()
    r.xadd(a, {"key": "x", "n": "41", "flag": "true"}, id="1-0")
    r.xadd(a, {"key": "y", "n": "42"}, id="2-0")  # no flag: null
    r.xadd(a, {"key": "z", "n": "forty-three"}, id="3-0")  # malformed
    spout = RedisStreamSpout(
        redis_server.url, a, schema="key STRING, n BIGINT, flag BOOLEAN", stream_field="stream", id_field="id"
    )
    assert spout.fields == ["key", "n", "flag", "stream", "id"]
    assert spout.spark_schema().endswith("`stream` STRING, `id` STRING, `_corrupt_record` STRING")
    start = spout.initial_offset()
    rows = read_all(spout, start, spout.latest_offset(start, ReadLimit()))
    assert rows[0] == ("x", 41, True, a, "1-0", None)
    assert rows[1] == ("y", 42, None, a, "2-0", None)
    assert rows[2][:5] == (None,) * 5 and f"stream '{a}' entry 3-0: field 'n'" in rows[2][5]
    assert spout.to_values(rows[0]) == ("x", 41, True, a, "1-0")
    with pytest.raises(SourceError, match="malformed record: stream .* entry 3-0: field 'n'"):
        spout.to_values(rows[2])


def test_pages_are_converted_by_column_whatever_the_field_order(r: redis.Redis, redis_server: RedisServer) -> None:
    a = key()
    r.xadd(a, {"key": "x", "n": "1"}, id="1-0")
    r.xadd(a, {"n": "2", "key": "y"}, id="2-0")  # another field order
    r.xadd(a, {"extra": "e", "key": "z", "other": "o", "n": "3"}, id="3-0")  # more fields than asked for
    r.xadd(a, {"key": "w"}, id="4-0")  # n missing: null
    r.xadd(a, {"n": "5"}, id="5-0")  # key missing: null
    spout = RedisStreamSpout(redis_server.url, a, schema="key STRING, n BIGINT", page_size=3)
    rows = list(spout.records({a: {"id": "0-0", "n": 0}}, {a: {"id": "5-0", "n": 5}}))
    assert rows == [("x", 1, None), ("y", 2, None), ("z", 3, None), ("w", None, None), (None, 5, None)]

    # a value that is not UTF-8 marks only its own entry malformed; the rest of the page converts
    b = key()
    r.xadd(b, {"key": "ok1"}, id="1-0")
    r.xadd(b, {"key": b"\xff\xfe"}, id="2-0")
    r.xadd(b, {"key": "ok3"}, id="3-0")
    text = RedisStreamSpout(redis_server.url, b, ["key"])
    got = list(text.records({b: {"id": "0-0", "n": 0}}, {b: {"id": "3-0", "n": 3}}))
    assert got[0] == ("ok1", None) and got[2] == ("ok3", None)
    assert got[1][0] is None and f"stream '{b}' entry 2-0: field 'key'" in got[1][1]
    raw = RedisStreamSpout(redis_server.url, b, schema="key BINARY")
    assert [x[0] for x in raw.records({b: {"id": "0-0", "n": 0}}, {b: {"id": "3-0", "n": 3}})] == [
        b"ok1",
        b"\xff\xfe",
        b"ok3",
    ]


def test_reads_in_pages_and_exactly_the_range(r: redis.Redis, redis_server: RedisServer) -> None:
    a = key()
    fill(r, a, 95)
    spout = RedisStreamSpout(redis_server.url, a, ["n"], page_size=10)
    rows = list(spout.records({a: {"id": "10-0", "n": 10}}, {a: {"id": "90-0", "n": 90}}))
    assert [int(x[0]) for x in rows] == list(range(11, 91))


def test_start_dollar_reads_only_new_entries_and_new_streams_join_from_now(
    r: redis.Redis, redis_server: RedisServer
) -> None:
    a, b = key("a"), key("b")
    fill(r, a, 10)
    fill(r, b, 10)
    spout = RedisStreamSpout(redis_server.url, [a], ["n"], start="$")
    start = spout.initial_offset()
    fill(r, a, 3, first=11)
    end = spout.latest_offset(start, ReadLimit())
    assert [x[0] for x in read_all(spout, start, end)] == ["11", "12", "13"]
    # b joins the configuration later: with start="$" it starts at its end, nothing before is read
    grown = RedisStreamSpout(redis_server.url, [a, b], ["n"], start="$")
    end2 = grown.latest_offset(end, ReadLimit())
    assert end2[b] == {"id": "10-0", "n": 10}
    assert read_all(grown, end, end2) == []
    fill(r, b, 2, first=11)
    end3 = grown.latest_offset(end2, ReadLimit(max_records=100))
    assert [x[0] for x in read_all(grown, end2, end3)] == ["11", "12"]
    # the same with a limit that binds
    c = key("c")
    fill(r, c, 5)
    grown2 = RedisStreamSpout(redis_server.url, [a, b, c], ["n"], start="$")
    fill(r, a, 10, first=14)
    end4 = grown2.latest_offset(end3, ReadLimit(max_records=4))
    assert end4[c] == {"id": "5-0", "n": 5} and end4[a] == {"id": "17-0", "n": 17}
    assert [x[0] for x in read_all(grown2, end3, end4)] == ["14", "15", "16", "17"]


def test_clamp_compares_ids_as_numbers(redis_server: RedisServer) -> None:
    spout = RedisStreamSpout(redis_server.url, ["a"], ["n"])
    start, end, target = {"a": {"id": "9-0"}}, {"a": {"id": "100-0"}}, {"a": {"id": "10-0", "n": 3}}
    assert spout.clamp_offset(start, end, target) == {"a": {"id": "10-0", "n": 3}}
    assert spout.clamp_offset(start, {"a": {"id": "9-5"}}, target) == {"a": {"id": "9-5"}}
    assert spout.clamp_offset({"a": {"id": "20-0"}}, {"a": {"id": "30-0"}}, target) == {"a": {"id": "20-0"}}


# ---- trimmed ranges ------------------------------------------------------------------------------
def test_trim_inside_a_range_fails_a_transactional_batch_naming_stream_and_ids(
    r: redis.Redis, redis_server: RedisServer
) -> None:
    a = key()
    fill(r, a, 50)
    spout = RedisStreamSpout(redis_server.url, a, ["n"])
    start = {a: {"id": "10-0", "n": 10}}
    end = spout.latest_offset(start, ReadLimit())
    r.xtrim(a, maxlen=30, approximate=False)  # entries 11..20 of the range are gone
    with pytest.raises(SourceError) as err:
        list(spout.records(start, end))
    text = str(err.value)
    assert f"Redis stream '{a}'" in text and "lost 10 of the 40 entries in (10-0, 50-0]" in text
    assert "now starts at 21-0" in text and "OPAQUE" in text


def test_trim_inside_a_range_is_a_warning_for_an_opaque_spout(
    r: redis.Redis, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    a = key()
    fill(r, a, 50)
    spout = RedisStreamSpout(redis_server.url, a, ["n"], guarantee=Guarantee.OPAQUE)
    start = {a: {"id": "10-0", "n": 10}}
    end = spout.latest_offset(start, ReadLimit(max_records=20))  # planned before the trim: 11..30
    r.xtrim(a, maxlen=25, approximate=False)
    with caplog.at_level(logging.WARNING, logger="weir.sources"):
        rows = list(spout.records(start, end))
    assert [int(x[0]) for x in rows] == list(range(26, 31))
    assert "lost 15 of the 20 entries in (10-0, 30-0]" in caplog.text and "continuing" in caplog.text


def test_trims_that_remove_only_read_entries_are_not_losses(r: redis.Redis, redis_server: RedisServer) -> None:
    a = key()
    fill(r, a, 30)
    spout = RedisStreamSpout(redis_server.url, a, ["n"])
    start = spout.initial_offset()
    mid = spout.latest_offset(start, ReadLimit(max_records=20))
    assert len(list(spout.records(start, mid))) == 20
    r.xtrim(a, maxlen=10, approximate=False)  # removes 1..20 (all read) — and the start id itself
    end = spout.latest_offset(mid, ReadLimit(max_records=100))
    assert [int(x[0]) for x in spout.records(mid, end)] == list(range(21, 31))
    # a topology started after a trim does not count what was gone before it
    fresh = RedisStreamSpout(redis_server.url, a, ["n"])
    s0 = fresh.initial_offset()
    assert len(list(fresh.records(s0, fresh.latest_offset(s0, ReadLimit())))) == 10


def test_xdel_inside_the_window_still_detects_lost_ranges(r: redis.Redis, redis_server: RedisServer) -> None:
    a = key()
    fill(r, a, 30)
    r.xdel(a, "5-0")  # ordinals are no longer exact: the spout falls back to id checks
    spout = RedisStreamSpout(redis_server.url, a, ["n"])
    start = {a: {"id": "10-0"}}
    end = spout.latest_offset(start, ReadLimit(max_records=10))
    assert end == {a: {"id": "20-0"}}
    assert len(list(spout.records(start, end))) == 10
    r.xdel(a, "15-0")  # the largest deleted id falls inside the range
    with pytest.raises(SourceError, match=r"lost entries in \(10-0, 20-0\]"):
        list(spout.records(start, end))
    r.xtrim(a, maxlen=5, approximate=False)  # the range's last entry is gone
    with pytest.raises(SourceError, match=r"lost entries in \(10-0, 20-0\]"):
        list(spout.records(start, end))


def test_a_deleted_and_recreated_stream_is_reported(r: redis.Redis, redis_server: RedisServer) -> None:
    a = key()
    fill(r, a, 10)
    spout = RedisStreamSpout(redis_server.url, a, ["n"])
    end = spout.latest_offset(spout.initial_offset(), ReadLimit())
    r.delete(a)
    with pytest.raises(SourceError, match="lost 10 of the 10 entries.*stream is now empty or gone"):
        list(spout.records({a: {"id": "0-0", "n": 0}}, end))


# ---- connections and configuration ---------------------------------------------------------------
def test_an_unreachable_server_is_a_source_error_after_the_timeout() -> None:
    spout = RedisStreamSpout(f"redis://127.0.0.1:{free_port()}/0", "s", ["n"], connect_timeout_s=0.3)
    t0 = time.monotonic()
    with pytest.raises(SourceError, match=r"RedisStreamSpout\(redis://127.0.0.1:\d+/0, streams=\['s'\]\).*failed"):
        spout.initial_offset()
    assert time.monotonic() - t0 < 5


def test_a_server_restart_is_ridden_out(tmp_path: Any) -> None:
    with RedisServer(tmp_path / "redis", appendonly=True) as server:
        fill(redis.Redis(port=server.port), "s", 5)
        spout = RedisStreamSpout(server.url, "s", ["n"], connect_timeout_s=20)
        start = spout.initial_offset()
        server.kill()
        # the spout retries in a thread; the server comes back (from this thread: servers die with
        # the thread that started them)
        result: dict[str, Any] = {}
        reader = threading.Thread(target=lambda: result.update(end=spout.latest_offset(start, ReadLimit())))
        reader.start()
        time.sleep(0.7)
        server.start()
        reader.join(30)
        end = result["end"]
        assert [x[0] for x in spout.records(start, end)] == ["1", "2", "3", "4", "5"]


def test_redis_cluster_streams_on_several_nodes(redis_cluster: RedisCluster) -> None:
    client = redis.RedisCluster(host="127.0.0.1", port=redis_cluster.ports[0])
    names = [key("c") for _ in range(4)]
    for i, s in enumerate(names):
        for j in range(1, 4 + i):
            client.xadd(s, {"n": f"{i}:{j}"}, id=f"{j}-0")
    spout = RedisStreamSpout(redis_cluster.url, names, ["n"], stream_field="s")
    start = spout.initial_offset()
    end = spout.latest_offset(start, ReadLimit(max_records=8))
    rows = read_all(spout, start, end)
    assert len(rows) == 8 and {row[1] for row in rows} <= set(names)
    rest = read_all(spout, end, spout.latest_offset(end, ReadLimit()))
    assert len(rows) + len(rest) == 3 + 4 + 5 + 6
    client.close()


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"url": "http://x", "streams": "s"}, "cannot read url"),
        ({"streams": []}, "one or more distinct"),
        ({"streams": ["a", "a"]}, "one or more distinct"),
        ({"streams": "s", "start": "yesterday"}, "start must be"),
        ({"streams": "s", "page_size": 0}, "page_size"),
        ({"streams": "s", "read_partitions": 0}, "read_partitions"),
        ({"streams": "s", "max_records_per_batch": 0}, "max_records_per_batch"),
        ({"streams": "s", "guarantee": "opaque"}, "guarantee"),
        ({"streams": "s", "fields": None}, "declare the output"),
        ({"streams": "s", "id_field": "n"}, "declared twice"),
    ],
)
def test_configuration_errors(kwargs: dict[str, Any], needle: str) -> None:
    args = {"url": "redis://127.0.0.1:1/0", "fields": ["n"], **kwargs}
    with pytest.raises(ConfigError, match=needle):
        RedisStreamSpout(**args)


def test_the_spout_pickles_without_connections(r: redis.Redis, redis_server: RedisServer) -> None:
    from pyspark import cloudpickle

    a = key()
    fill(r, a, 3)
    spout = RedisStreamSpout(redis_server.url, a, ["n"])
    spout.initial_offset()  # opens a (process-wide) client
    copy = cloudpickle.loads(cloudpickle.dumps(spout))
    assert [x[0] for x in copy.records({a: {"id": "0-0", "n": 0}}, {a: {"id": "3-0", "n": 3}})] == ["1", "2", "3"]


# ---- resets under committed offsets ----------------------------------------------------------------
def test_a_stream_deleted_or_created_again_is_a_named_error_never_a_skip(
    r: redis.Redis, redis_server: RedisServer
) -> None:
    a = key()
    fill(r, a, 10)
    spout = RedisStreamSpout(redis_server.url, [a], ["key"])
    end = spout.latest_offset(spout.initial_offset(), ReadLimit())
    assert end == {a: {"id": "10-0", "n": 10}}
    r.delete(a)
    for limit in (ReadLimit(), ReadLimit(max_records=3)):
        with pytest.raises(SourceError, match=rf"Redis stream '{a}' was deleted under the committed position 10-0"):
            spout.latest_offset(end, limit)
    fill(r, a, 4)  # created again, shorter: its last id is below the committed one
    with pytest.raises(SourceError, match=rf"'{a}' was deleted and created again .* last generated id is 4-0"):
        spout.latest_offset(end, ReadLimit())
    r.delete(a)
    fill(r, a, 5, first=20)  # created again with larger ids: fewer entries were ever added than committed
    for limit in (ReadLimit(), ReadLimit(max_records=3)):
        with pytest.raises(SourceError, match=r"has had 5 entries added in all, the committed position is entry 10"):
            spout.latest_offset(end, limit)
    # trimming what was read is not a reset: the next entries are read
    b = key()
    fill(r, b, 10)
    b_spout = RedisStreamSpout(redis_server.url, [b], ["key"])
    b_end = b_spout.latest_offset({b: {"id": "0-0", "n": 0}}, ReadLimit())
    r.xtrim(b, maxlen=0, approximate=False)
    fill(r, b, 2, first=11)
    assert b_spout.latest_offset(b_end, ReadLimit()) == {b: {"id": "12-0", "n": 12}}
