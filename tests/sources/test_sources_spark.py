"""Redis Streams and NATS JetStream spouts in topologies on Spark: exact counts, bounded batches,
malformed records, and what a trimmed range does to a transactional and to an opaque spout."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis

import weir
from tests.servers import NatsServer, RedisServer
from tests.sources._spouts import count_topology
from tests.sources.test_nats import make_stream, publish
from weir.demo import read_counts
from weir.sources import Guarantee, NatsSpout, RedisStreamSpout

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.services]


def xadd(r: redis.Redis, stream: str, first: int, n: int, keyfmt: str = "r{}") -> Counter[str]:
    pipe = r.pipeline(transaction=False)
    counts: Counter[str] = Counter()
    for i in range(first, first + n):
        k = keyfmt.format(i % 5)
        pipe.xadd(stream, {"key": k, "n": str(i)}, id=f"{i}-0")
        counts[k] += 1
    pipe.execute()
    return counts


def test_redis_and_nats_spouts_count_exactly_in_bounded_batches(
    spark: Any, tmp_path: Path, redis_server: RedisServer, nats_server: NatsServer
) -> None:
    r = redis.Redis(port=redis_server.port)
    a, b = f"a-{uuid.uuid4().hex[:6]}", f"b-{uuid.uuid4().hex[:6]}"
    expected = xadd(r, a, 1, 300) + xadd(r, b, 1, 120)
    r.xadd(a, {"key": "bad", "n": "not a number"}, id="301-0")  # malformed: goes to the dead letters
    stream = make_stream(nats_server.url)
    publish(nats_server.url, stream, [json.dumps({"key": f"n{i % 3}"}).encode() for i in range(250)])
    expected += Counter(f"n{i % 3}" for i in range(250))
    spouts = {
        "redis": RedisStreamSpout(
            redis_server.url, [a, b], schema="key STRING, n BIGINT", max_records_per_batch=150, id_field="id"
        ),
        "nats": NatsSpout(nats_server.url, stream, format="json", fields=["key"], max_records_per_batch=100),
    }
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.deadletter": str(tmp_path / "dead")}
    st = weir.submit("brokers", conf, count_topology(spouts), spark=spark).process_available(timeout=900)
    # redis: 421 entries by 150 → 3 batches; nats: 250 by 100 → 3 batches; both advance together
    assert st.batches == 3 and st.tuples_in == 420 + 250
    assert read_counts(conf, "brokers") == expected
    dead = [json.loads(line) for f in sorted((tmp_path / "dead" / "brokers").glob("*.jsonl")) for line in f.open()]
    assert len(dead) == 1 and dead[0]["component"] == "redis"
    assert f"stream '{a}' entry 301-0: field 'n'" in dead[0]["error"]

    # more data: a new run resumes from Spark's checkpoint and reads only what is new
    expected += xadd(r, b, 121, 30)
    publish(nats_server.url, stream, [json.dumps({"key": "n9"}).encode()] * 5)
    expected["n9"] += 5
    st2 = weir.submit("brokers", conf, count_topology(spouts), spark=spark).process_available(timeout=900)
    assert st2.batches == 1 and st2.tuples_in == 35
    assert read_counts(conf, "brokers") == expected


@pytest.mark.parametrize("guarantee", [Guarantee.TRANSACTIONAL, Guarantee.OPAQUE])
def test_a_trimmed_redis_range(spark: Any, tmp_path: Path, redis_server: RedisServer, guarantee: Guarantee) -> None:
    r = redis.Redis(port=redis_server.port)
    s = f"t-{uuid.uuid4().hex[:6]}"
    expected = xadd(r, s, 1, 40)
    spout = RedisStreamSpout(redis_server.url, s, ["key"], max_records_per_batch=20, guarantee=guarantee)
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.batch.max.retries": 0}
    name = f"trim_{guarantee.value}"
    first = weir.submit(name, conf, count_topology({"s": spout}), spark=spark).process_available(timeout=600)
    assert first.batches == 2
    xadd(r, s, 41, 60)
    r.xtrim(s, maxlen=30, approximate=False)  # 41..70 were never read: gone
    run = weir.submit(name, conf, count_topology({"s": spout}), spark=spark)
    if guarantee is Guarantee.TRANSACTIONAL:
        with pytest.raises(weir.TopologyError) as err:
            run.process_available(timeout=600)
        text = str(err.value)
        assert "SourceError" in text and f"Redis stream '{s}'" in text
        assert "lost 30 of the 50 entries in (40-0, 90-0]" in text
        assert read_counts(conf, name) == expected  # nothing of the failed batch was committed
    else:
        st = run.process_available(timeout=600)
        assert st.tuples_in == 30
        expected.update(f"r{i % 5}" for i in range(71, 101))
        assert read_counts(conf, name) == expected


def test_removed_nats_messages_fail_a_transactional_topology(
    spark: Any, tmp_path: Path, nats_server: NatsServer
) -> None:
    stream = make_stream(nats_server.url, max_msgs=50)
    publish(nats_server.url, stream, [b"k1"] * 20)
    spout = NatsSpout(nats_server.url, stream, fields=["key"])
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.batch.max.retries": 0}
    first = weir.submit("natstrim", conf, count_topology({"s": spout}), spark=spark).process_available(timeout=600)
    assert first.tuples_in == 20
    publish(nats_server.url, stream, [b"k2"] * 100)  # keeps 71..120
    with pytest.raises(weir.TopologyError) as err:
        weir.submit("natstrim", conf, count_topology({"s": spout}), spark=spark).process_available(timeout=600)
    assert "SourceError" in str(err.value) and "lost sequence(s) 21..70 of range (20, 120]" in str(err.value)
    assert read_counts(conf, "natstrim") == Counter({"k1": 20})
