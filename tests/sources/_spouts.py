"""Spouts and bolts the source tests run on Spark (pickled by value: executors cannot import tests)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pyspark import cloudpickle

from weir.sources import ReadLimit, ReplayableSpout
from weir.topology import Fields, StatefulBolt, TopologyBuilder

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Numbers(ReplayableSpout):
    """Records ``(n, key)`` for n in [0, total): key = ``k{n % keys}``; offsets ``{"n": ...}``."""

    schema = "n BIGINT, key STRING"

    def __init__(self, total: int, keys: int = 7, max_records: int | None = None, log_dir: str | None = None) -> None:
        self.total = total
        self.keys = keys
        self.max_records_per_batch = max_records
        self.log_dir = log_dir

    def _log(self, what: str, payload: Any) -> None:
        if self.log_dir:
            with open(os.path.join(self.log_dir, f"{what}.jsonl"), "a", encoding="utf-8") as fh:
                fh.write(json.dumps(payload) + "\n")

    def initial_offset(self) -> dict[str, Any]:
        self._log("initial", time.time())
        return {"n": 0}

    def latest_offset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        return {"n": limit.cap(start["n"], self._available())}

    def _available(self) -> int:
        if self.log_dir and os.path.exists(os.path.join(self.log_dir, "available")):
            with open(os.path.join(self.log_dir, "available"), encoding="utf-8") as fh:
                return min(self.total, int(fh.read()))
        return self.total

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[tuple[dict[str, Any], dict[str, Any]]]:
        a, b = start["n"], end["n"]
        if b <= a:
            return []
        mid = (a + b) // 2
        return [({"n": a}, {"n": mid}), ({"n": mid}, {"n": b})] if b - a > 1 else [(start, end)]

    def read(self, start: dict[str, Any], end: dict[str, Any]) -> Iterable[tuple[Any, ...]]:
        return ((i, f"k{i % self.keys}") for i in range(start["n"], end["n"]))

    def commit(self, end: dict[str, Any]) -> None:
        self._log("commit", end)


class MarkedNumbers(Numbers):
    """:class:`Numbers` with a malformed-record column: record ``bad_at`` is marked malformed."""

    corrupt_column = True

    def __init__(self, total: int, bad_at: int | None = None, **kw: Any) -> None:
        super().__init__(total, **kw)
        self.bad_at = bad_at

    def read(self, start: dict[str, Any], end: dict[str, Any]) -> Iterable[tuple[Any, ...]]:
        for i in range(start["n"], end["n"]):
            yield (None, None, f"n={i} is not a number") if i == self.bad_at else (i, f"k{i % self.keys}", None)


class PlainTypes(ReplayableSpout):
    """Three records with a value of every plain column type, including nulls."""

    schema = "s STRING, b BINARY, t BOOLEAN, i8 TINYINT, i16 SMALLINT, i32 INT, i64 BIGINT, f FLOAT, d DOUBLE"
    ROWS: tuple[tuple[Any, ...], ...] = (
        ("a", b"\x00\xff", True, -8, -16, -32, -(2**40), 1.5, 2.25),
        ("b", None, False, 127, 32767, 2**31 - 1, 2**63 - 1, -0.5, 1e300),
        ("c", b"", None, None, None, None, None, None, None),
    )

    def initial_offset(self) -> dict[str, Any]:
        return {"n": 0}

    def latest_offset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        return {"n": limit.cap(start["n"], len(self.ROWS))}

    def read(self, start: dict[str, Any], end: dict[str, Any]) -> Iterable[tuple[Any, ...]]:
        return self.ROWS[start["n"] : end["n"]]


class NamedPlainTypes(PlainTypes):
    """:class:`PlainTypes` whose ``to_values`` reads the row by column name (a Spark Row's API)."""

    def to_values(self, row: Any) -> tuple[Any, ...]:
        return tuple(row[c] for c in ("s", "b", "t", "i8", "i16", "i32", "i64", "f", "d"))


class TypeRecorder(StatefulBolt):
    """Stores, per first value, the Python type and repr of every value of the tuple."""

    def init_state(self, state: Any) -> None:
        self.seen = state

    def execute(self, tup: Any, collector: Any) -> None:  # Storm's basic shape: acked automatically
        self.seen.put(tup[0], [[type(v).__name__, repr(v)] for v in tup.values])


class NowSpout(Numbers):
    """Starts at "now" (a clock reading): only a pinned initial offset keeps batch 0 replayable."""

    def initial_offset(self) -> dict[str, Any]:
        self._log("initial", time.time())
        return {"n": int(time.time() * 1000) % 1000}


class CountByKey(StatefulBolt):
    """Counts tuples per value of field ``key`` in a KeyValueState."""

    def __init__(self, field: str = "key") -> None:
        self.field = field

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("key", "count"))

    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute(self, tup: Any) -> None:
        key = tup[self.field]
        n = self.counts.get(key, 0) + 1
        self.counts.put(key, n)
        self.collector.ack(tup)


def count_topology(spouts: Mapping[str, Any], parallelism: int = 2, field: str = "key") -> Any:
    """Every spout → a stateful count per ``field`` (fields grouping)."""
    b = TopologyBuilder()
    bolt = b.set_bolt("count", CountByKey(field), parallelism)
    for name, spout in spouts.items():
        b.set_spout(name, spout)
        bolt.fields_grouping(name, Fields(field))
    return b.create_topology()


class HeapProbe(ReplayableSpout):
    """One record per read partition: the reading process's frozen-object count and pid."""

    schema = "frozen BIGINT, pid BIGINT"

    def initial_offset(self) -> dict[str, Any]:
        return {"n": 0}

    def latest_offset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        return {"n": 4}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[tuple[dict[str, Any], dict[str, Any]]]:
        return [({"n": i}, {"n": i + 1}) for i in range(start["n"], end["n"])]

    def read(self, start: dict[str, Any], end: dict[str, Any]) -> Iterable[tuple[Any, ...]]:
        import gc

        return [(gc.get_freeze_count(), os.getpid())]
