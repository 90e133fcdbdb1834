"""``Spout.source_lag``: how far a source is ahead of a batch's end offset (real Redis and NATS)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from tests.servers import NatsServer, RedisServer
from tests.sources.test_nats import make_stream, nums, publish
from tests.sources.test_redis_streams import fill, key
from weir.sources import FileSpout, NatsSpout, ReadLimit, RedisStreamSpout

pytestmark = pytest.mark.services


def test_redis_streams_lag_counts_entries_after_the_offset(redis_server: RedisServer) -> None:
    r = redis.Redis(port=redis_server.port)
    a, b = key("lag-a"), key("lag-b")
    fill(r, a, 20)
    fill(r, b, 5)
    spout = RedisStreamSpout(redis_server.url, [a, b], ["key"])
    start = spout.initial_offset()
    assert spout.source_lag(start) == 25
    end = spout.latest_offset(start, ReadLimit(max_records=10))
    assert spout.source_lag(end) == 15
    end = spout.latest_offset(start, ReadLimit())
    assert spout.source_lag(end) == 0
    fill(r, a, 7, first=21)
    assert spout.source_lag(end) == 7
    assert spout.source_lag(None) is None


def test_nats_lag_counts_messages_after_the_offset(nats_server: NatsServer) -> None:
    url = nats_server.url
    s = make_stream(url)
    publish(url, s, nums(12))
    spout = NatsSpout(url, s)
    start = spout.initial_offset()
    assert spout.source_lag(start) == 12
    end = spout.latest_offset(start, ReadLimit(max_records=5))
    assert spout.source_lag(end) == 7
    publish(url, s, nums(3, first=13))
    assert spout.source_lag(end) == 10
    assert spout.source_lag({"no": "seq"}) is None


def test_a_spout_that_cannot_tell_says_unknown(tmp_path: Any) -> None:
    assert FileSpout(str(tmp_path)).source_lag({"logOffset": 3}) is None
