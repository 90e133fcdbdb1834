"""NatsSpout against a real nats-server with JetStream: offsets, limits, conversion, removed ranges."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from typing import Any

import pytest

from tests.servers import NatsServer, free_port
from weir.errors import ConfigError, SourceError
from weir.sources import Guarantee, NatsSpout, ReadLimit

pytestmark = pytest.mark.services


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _js(url: str) -> tuple[Any, Any]:
    import nats

    nc = await nats.connect(url)
    return nc, nc.jetstream()


def make_stream(url: str, *, subjects: list[str] | None = None, **limits: Any) -> str:
    name = f"S{uuid.uuid4().hex[:10].upper()}"

    async def go() -> None:
        nc, js = await _js(url)
        await js.add_stream(name=name, subjects=subjects or [f"{name.lower()}.>"], **limits)
        await nc.close()

    run(go())
    return name


def publish(url: str, stream: str, payloads: list[bytes], subject: str | None = None) -> None:
    async def go() -> None:
        nc, js = await _js(url)
        for i, p in enumerate(payloads):
            await js.publish(subject or f"{stream.lower()}.{i % 2}", p)
        await nc.close()

    run(go())


def delete_msg(url: str, stream: str, seq: int) -> None:
    async def go() -> None:
        nc, js = await _js(url)
        await js.delete_msg(stream, seq)
        await nc.close()

    run(go())


def pos(offset: dict[str, Any]) -> dict[str, Any]:
    """The offset's sequence and stream (without the stream's creation time it also holds)."""
    return {k: v for k, v in offset.items() if k != "created"}


def off(stream: str, seq: int) -> dict[str, Any]:
    return {"seq": seq, "stream": stream}


def nums(n: int, first: int = 1) -> list[bytes]:
    return [json.dumps({"key": f"k{i % 5}", "n": i}).encode() for i in range(first, first + n)]


# ---- offsets and limits --------------------------------------------------------------------------
def test_initial_offsets_per_start_option(nats_server: NatsServer) -> None:
    url = nats_server.url
    s = make_stream(url, max_msgs=10)
    publish(url, s, nums(15))  # 1..5 were removed by the limit before the topology started
    assert pos(NatsSpout(url, s).initial_offset()) == off(s, 5)
    assert pos(NatsSpout(url, s, start="new").initial_offset()) == off(s, 15)
    assert pos(NatsSpout(url, s, start=3).initial_offset()) == off(s, 2)
    empty = make_stream(url)
    assert pos(NatsSpout(url, empty).initial_offset()) == off(empty, 0)


def test_latest_offset_honours_records_and_bytes(nats_server: NatsServer) -> None:
    url = nats_server.url
    s = make_stream(url)
    publish(url, s, [b"x" * 10] * 100)
    spout = NatsSpout(url, s)
    start = spout.initial_offset()
    assert pos(spout.latest_offset(start, ReadLimit())) == off(s, 100)
    assert pos(spout.latest_offset(start, ReadLimit(max_records=30))) == off(s, 30)
    assert pos(spout.latest_offset(off(s, 90), ReadLimit(max_records=30))) == off(s, 100)
    by_bytes = spout.latest_offset(start, ReadLimit(max_bytes=500))["seq"]
    assert 5 <= by_bytes <= 50  # from the stream's average stored message size
    assert pos(spout.latest_offset(start, ReadLimit(max_bytes=1))) == off(s, 1)  # at least one
    assert pos(spout.latest_offset(off(s, 100), ReadLimit(max_records=5))) == off(s, 100)
    assert spout.partitions(off(s, 100), off(s, 100)) == []


def test_read_json_with_subject_and_sequence(nats_server: NatsServer) -> None:
    url = nats_server.url
    s = make_stream(url)
    publish(url, s, [*nums(3), b"not json", b"[1, 2]", json.dumps({"key": "z", "n": "x"}).encode()])
    spout = NatsSpout(url, s, format="json", schema="key STRING, n BIGINT", subject_field="subject", seq_field="seq")
    assert spout.fields == ["key", "n", "subject", "seq"]
    rows = list(spout.records(off(s, 0), spout.latest_offset(off(s, 0), ReadLimit())))
    sub = s.lower()
    assert rows[:3] == [("k1", 1, f"{sub}.0", 1, None), ("k2", 2, f"{sub}.1", 2, None), ("k3", 3, f"{sub}.0", 3, None)]
    assert rows[3][:4] == (None,) * 4 and f"stream '{s}' sequence 4" in rows[3][4]
    assert "not an object" in rows[4][4]
    assert "sequence 6" in rows[5][4] and "invalid literal" in rows[5][4]


def test_read_raw_payloads_typed_by_the_schema(nats_server: NatsServer) -> None:
    url = nats_server.url
    s = make_stream(url)
    publish(url, s, [b"hello", b"\xff\x00"])
    assert [r[0] for r in NatsSpout(url, s).records(off(s, 0), off(s, 1))] == ["hello"]
    binary = NatsSpout(url, s, schema="data BINARY")
    assert [r[0] for r in binary.records(off(s, 0), off(s, 2))] == [b"hello", b"\xff\x00"]
    bad = list(NatsSpout(url, s).records(off(s, 1), off(s, 2)))
    assert bad[0][0] is None and "utf-8" in bad[0][1]


def test_read_is_exactly_the_range_in_several_pulls(nats_server: NatsServer) -> None:
    url = nats_server.url
    s = make_stream(url)
    publish(url, s, nums(120))
    spout = NatsSpout(url, s, format="json", fields=["n"], fetch_batch=7)
    rows = list(spout.records(off(s, 20), off(s, 95)))
    assert [int(r[0]) for r in rows] == list(range(21, 96))
    again = list(spout.records(off(s, 20), off(s, 95)))
    assert again == rows  # a replay reads the same records


def test_a_large_range_is_read_in_parallel_sub_ranges(nats_server: NatsServer) -> None:
    url = nats_server.url
    s = make_stream(url)
    publish(url, s, [str(i).encode() for i in range(1, 12_001)])
    spout = NatsSpout(url, s, read_partitions=4)
    parts = spout.partitions(off(s, 0), off(s, 12_000))
    assert [(a["seq"], b["seq"]) for a, b in parts] == [(0, 6000), (6000, 12_000)]  # ≥ 5000 each
    assert [int(r[0]) for a, b in parts for r in spout.records(a, b)] == list(range(1, 12_001))
    assert spout.partitions(off(s, 10), off(s, 20)) == [(off(s, 10), off(s, 20))]


def test_subject_filter_reads_only_that_subject(nats_server: NatsServer) -> None:
    url = nats_server.url
    s = make_stream(url)
    publish(url, s, nums(20))  # subjects alternate .0 / .1
    spout = NatsSpout(url, s, subject=f"{s.lower()}.1", format="json", fields=["n"])
    end = spout.latest_offset(off(s, 0), ReadLimit())
    assert [int(r[0]) for r in spout.records(off(s, 0), end)] == list(range(2, 21, 2))


# ---- removed ranges --------------------------------------------------------------------------------
def test_messages_removed_by_limits_fail_a_transactional_batch(nats_server: NatsServer) -> None:
    url = nats_server.url
    s = make_stream(url, max_msgs=50)
    publish(url, s, nums(20))
    spout = NatsSpout(url, s)
    assert len(list(spout.records(off(s, 0), off(s, 20)))) == 20
    publish(url, s, nums(100, first=21))  # the stream keeps 71..120: 21..70 are gone
    with pytest.raises(SourceError) as err:
        list(spout.records(off(s, 20), off(s, 120)))
    text = str(err.value)
    assert f"NATS stream '{s}'" in text and "lost sequence(s) 21..70 of range (20, 120]" in text
    assert "now starts at sequence 71" in text and "OPAQUE" in text


def test_removed_messages_are_a_warning_for_an_opaque_spout(
    nats_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = nats_server.url
    s = make_stream(url, max_msgs=50)
    publish(url, s, nums(120))
    spout = NatsSpout(url, s, format="json", fields=["n"], guarantee=Guarantee.OPAQUE)
    with caplog.at_level(logging.WARNING, logger="weir.sources"):
        rows = list(spout.records(off(s, 20), off(s, 120)))
    assert [int(r[0]) for r in rows] == list(range(71, 121))
    assert "lost sequence(s) 21..70" in caplog.text and "continuing" in caplog.text


def test_a_deleted_message_inside_a_range_is_found(nats_server: NatsServer) -> None:
    url = nats_server.url
    s = make_stream(url)
    publish(url, s, nums(10))
    delete_msg(url, s, 4)
    delete_msg(url, s, 10)  # the range's last message too
    with pytest.raises(SourceError, match=r"lost sequence\(s\) 4, 10 of range \(0, 10\]"):
        list(NatsSpout(url, s).records(off(s, 0), off(s, 10)))


def test_with_a_subject_filter_a_passed_head_is_a_possible_loss(nats_server: NatsServer) -> None:
    url = nats_server.url
    s = make_stream(url, max_msgs=10)
    publish(url, s, nums(30))
    sub = f"{s.lower()}.1"
    with pytest.raises(SourceError, match=r"may have lost sequence\(s\) 6..20 of range \(5, 30\]"):
        list(NatsSpout(url, s, subject=sub).records(off(s, 5), off(s, 30)))
    assert len(list(NatsSpout(url, s, subject=sub).records(off(s, 20), off(s, 30)))) == 5


# ---- connections and configuration -----------------------------------------------------------------
def test_a_missing_stream_and_an_unreachable_server_are_source_errors(nats_server: NatsServer) -> None:
    with pytest.raises(SourceError, match="'NOPE' does not exist; create it first"):
        NatsSpout(nats_server.url, "NOPE").initial_offset()
    t0 = time.monotonic()
    with pytest.raises(SourceError, match="cannot connect to NATS"):
        NatsSpout(f"nats://127.0.0.1:{free_port()}", "S", connect_timeout_s=0.3).initial_offset()
    assert time.monotonic() - t0 < 5


def test_offsets_of_another_stream_are_refused(nats_server: NatsServer) -> None:
    s = make_stream(nats_server.url)
    with pytest.raises(SourceError, match="belongs to stream 'OTHER'"):
        NatsSpout(nats_server.url, s).latest_offset({"seq": 3, "stream": "OTHER"}, ReadLimit())


def test_a_server_restart_is_ridden_out(tmp_path: Any) -> None:
    with NatsServer(tmp_path / "nats") as server:
        s = make_stream(server.url)
        publish(server.url, s, nums(5))
        spout = NatsSpout(server.url, s, connect_timeout_s=20)
        server.kill()
        result: dict[str, Any] = {}
        reader = threading.Thread(target=lambda: result.update(rows=list(spout.records(off(s, 0), off(s, 5)))))
        reader.start()
        time.sleep(0.7)
        server.start()  # same port and store directory: the messages are still there
        reader.join(30)
        assert len(result["rows"]) == 5


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"stream": "a.b"}, "stream must be"),
        ({"format": "xml"}, "format must be"),
        ({"start": "yesterday"}, "start must be"),
        ({"start": 0}, "start must be"),
        ({"fields": ["a", "b"]}, "one field"),
        ({"fetch_batch": 0}, "fetch_batch"),
        ({"read_partitions": 0}, "read_partitions"),
        ({"max_bytes_per_batch": -5}, "max_bytes_per_batch"),
        ({"seq_field": "data"}, "declared twice"),
        ({"url": ""}, "url must be"),
    ],
)
def test_configuration_errors(kwargs: dict[str, Any], needle: str) -> None:
    args = {"url": "nats://127.0.0.1:1", "stream": "S", **kwargs}
    with pytest.raises(ConfigError, match=needle):
        NatsSpout(**args)


# ---- resets under committed offsets ----------------------------------------------------------------
def test_a_stream_deleted_and_created_again_is_a_named_error_never_a_skip(nats_server: NatsServer) -> None:
    url = nats_server.url
    s = make_stream(url)
    publish(url, s, nums(10))
    spout = NatsSpout(url, s)
    start = spout.initial_offset()
    assert "created" in start
    end = spout.latest_offset(start, ReadLimit())
    assert pos(end) == off(s, 10) and end["created"] == start["created"]

    async def recreate() -> None:
        nc, js = await _js(url)
        await js.delete_stream(s)
        await js.add_stream(name=s, subjects=[f"{s.lower()}.>"])
        await nc.close()

    run(recreate())
    publish(url, s, nums(4))  # shorter than before: the last sequence tells
    with pytest.raises(SourceError, match=rf"stream '{s}' was deleted and created again: its last sequence is 4"):
        spout.latest_offset(end, ReadLimit())
    publish(url, s, nums(20))  # longer than before: the creation time tells
    with pytest.raises(SourceError, match=rf"stream '{s}' was deleted and created again: it was created at"):
        spout.latest_offset(end, ReadLimit())
    # a purge keeps the last sequence: what was read stays read, what follows is read
    run_purge = make_stream(url)
    publish(url, run_purge, nums(5))
    p_spout = NatsSpout(url, run_purge)
    p_end = p_spout.latest_offset(p_spout.initial_offset(), ReadLimit())

    async def purge() -> None:
        nc, js = await _js(url)
        await js.purge_stream(run_purge)
        await nc.close()

    run(purge())
    publish(url, run_purge, nums(3, first=6))
    nxt = p_spout.latest_offset(p_end, ReadLimit())
    assert pos(nxt) == off(run_purge, 8)
    assert len(list(p_spout.records(p_end, nxt))) == 3
