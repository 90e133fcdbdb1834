"""A streamparse word count written as a streamparse user writes it, plus a bolt that writes to Redis.

The spout reads lines from a Redis list (``<prefix>:lines``) and is reliable the way a streamparse
spout over a queue is: every line is emitted with its index as the tuple id, ``ack`` records the
index in ``<prefix>:acked``, and a new instance starts again from the first line not acked (so a
restarted topology redelivers what was not acknowledged). The count bolt keeps its counts in weir
state (``WithState``); the Redis bolt writes every running count into the hash ``<prefix>:counts``
(``HSET``, so a replayed batch writes the same values again).
"""

from __future__ import annotations

import sys
from typing import Any

import redis
from pyspark import cloudpickle
from streamparse import BatchingBolt, Bolt, Grouping, Spout, Stream, Topology

from weir.streamparse import WithState

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class LineSpout(Spout):
    outputs = ["line"]

    def initialize(self, stormconf: dict[str, Any], context: dict[str, Any]) -> None:
        self.redis = redis.Redis.from_url(stormconf["wordcount.redis.url"], decode_responses=True)
        self.prefix = stormconf["wordcount.prefix"]
        self.position = 0

    def next_tuple(self) -> None:
        total = self.redis.llen(f"{self.prefix}:lines")
        while self.position < total:
            index = self.position
            self.position += 1
            if self.redis.sismember(f"{self.prefix}:acked", index):
                continue
            line = self.redis.lindex(f"{self.prefix}:lines", index)
            self.emit([line], tup_id=index)
            return

    def ack(self, tup_id: Any) -> None:
        self.redis.sadd(f"{self.prefix}:acked", tup_id)

    def fail(self, tup_id: Any) -> None:
        self.logger.warning("line %s failed; it is emitted again by the next instance", tup_id)


class SplitBolt(Bolt):
    outputs = [Stream(fields=["word"]), Stream(fields=["length"], name="lengths")]

    def process(self, tup: Any) -> None:
        for word in tup.values.line.split():
            self.emit([word])
            self.emit([len(word)], stream="lengths")


class WordCountBolt(WithState, Bolt):
    outputs = ["word", "count"]
    auto_ack = False

    def process(self, tup: Any) -> None:
        word = tup.values.word
        count = (self.state.get(word) or 0) + 1
        self.state.put(word, count)
        self.emit([word, count], anchors=[tup])
        self.ack(tup)


class RedisCountBolt(Bolt):
    """Writes each word's running count into a Redis hash."""

    def initialize(self, conf: dict[str, Any], ctx: dict[str, Any]) -> None:
        self.redis = redis.Redis.from_url(conf["wordcount.redis.url"])
        self.key = f"{conf['wordcount.prefix']}:counts"
        self.logger.info("task %s writes to %s", ctx["taskid"], self.key)

    def process(self, tup: Any) -> None:
        word, count = tup.values
        self.redis.hset(self.key, word, count)


class LengthTotalBolt(WithState, BatchingBolt):
    """Sums word lengths per micro-batch (a BatchingBolt: one ``process_batch`` per batch and key)."""

    outputs = ["total"]

    def group_key(self, tup: Any) -> Any:
        return None

    def process_batch(self, key: Any, tups: list[Any]) -> None:
        total = (self.state.get("total") or 0) + sum(t.values.length for t in tups)
        self.state.put("total", total)
        self.emit([total])


class WordCount(Topology):
    config = {"topology.state.checkpoint.interval.ms": 300}

    line_spout = LineSpout.spec(par=1)
    split_bolt = SplitBolt.spec(inputs=[line_spout], par=2)
    count_bolt = WordCountBolt.spec(inputs={split_bolt: Grouping.fields("word")}, par=2)
    redis_bolt = RedisCountBolt.spec(inputs={count_bolt: Grouping.fields("word")}, par=2)
    length_bolt = LengthTotalBolt.spec(inputs={split_bolt["lengths"]: Grouping.GLOBAL}, par=1)


def load_lines(url: str, prefix: str, lines: list[str]) -> None:
    r = redis.Redis.from_url(url)
    r.delete(f"{prefix}:lines", f"{prefix}:acked", f"{prefix}:counts")
    r.rpush(f"{prefix}:lines", *lines)


def redis_counts(url: str, prefix: str) -> dict[str, int]:
    r = redis.Redis.from_url(url, decode_responses=True)
    return {k: int(v) for k, v in r.hgetall(f"{prefix}:counts").items()}


def acked(url: str, prefix: str) -> int:
    return int(redis.Redis.from_url(url).scard(f"{prefix}:acked"))


def lines_for(n: int) -> list[str]:
    """``n`` lines over a small vocabulary (deterministic)."""
    vocab = ["storm", "spark", "weir", "tuple", "bolt", "spout", "state", "redis"]
    return [" ".join(vocab[(i * 3 + j) % len(vocab)] for j in range(1 + i % 4)) for i in range(n)]
