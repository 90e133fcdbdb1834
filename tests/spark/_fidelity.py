"""Bolts of the Storm-fidelity tests (module-level so executors can import them).

``Seed000WordCountBolt`` and ``Seed003WordCountBolt`` are the seeds' ``WordCountBolt`` ported verbatim
(Java → Python spelling; the seeds' ``...`` filled with the output declaration).
"""

from __future__ import annotations

from typing import Any

from weir.state import KeyValueState
from weir.topology import (
    BaseStatefulBolt,
    BaseStatefulWindowedBolt,
    BasicOutputCollector,
    Fields,
    OutputCollector,
    Tuple,
    TupleWindow,
    Values,
)


class Seed000WordCountBolt(BaseStatefulBolt[KeyValueState[str, int]]):
    """Seed 000: ``execute(Tuple tuple, BasicOutputCollector collector)`` — acked automatically."""

    word_counts: KeyValueState[str, int]

    def declare_output_fields(self, declarer: Any) -> None:  # the seed's "..."
        declarer.declare(Fields("word", "count"))

    def init_state(self, state: KeyValueState[str, int]) -> None:
        self.word_counts = state

    def execute(self, tuple: Tuple, collector: BasicOutputCollector) -> None:  # noqa: A002 - the seed's name
        word = tuple.get_string(0)
        count = self.word_counts.get(word, 0)
        count += 1
        self.word_counts.put(word, count)
        collector.emit(Values(word, count))


class Seed003WordCountBolt(BaseStatefulBolt[KeyValueState[str, int]]):
    """Seed 003: ``prepare`` keeps the ``OutputCollector``; ``emit(tuple, values)`` then ``ack(tuple)``."""

    word_counts: KeyValueState[str, int]
    collector: OutputCollector

    def declare_output_fields(self, declarer: Any) -> None:  # the seed's "..."
        declarer.declare(Fields("word", "count"))

    def prepare(self, storm_conf: Any, context: Any, collector: OutputCollector) -> None:
        self.collector = collector

    def init_state(self, state: KeyValueState[str, int]) -> None:
        self.word_counts = state

    def execute(self, tuple: Tuple) -> None:  # noqa: A002 - the seed's name
        word = tuple.get_string(0)
        count = self.word_counts.get(word, 0)
        count += 1
        self.word_counts.put(word, count)
        self.collector.emit(tuple, Values(word, count))
        self.collector.ack(tuple)


class ForgetsSomeAcks(BaseStatefulBolt[KeyValueState[str, int]]):
    """A rich bolt that never acks words starting with ``x`` (Storm would time them out)."""

    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute(self, tup: Tuple) -> None:
        w = tup.get_string(0)
        self.counts.put(w, self.counts.get(w, 0) + 1)
        if not w.startswith("x"):
            self.collector.ack(tup)


class TumblingNumbers(BaseStatefulWindowedBolt):
    """Stores each window's numbers under ``w<k>`` (k = windows so far) in its own state."""

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, window: TupleWindow) -> None:
        k = self.state.get("windows", 0) + 1
        self.state.put("windows", k)
        self.state.put(f"w{k}", sorted(int(t.get_string(0)) for t in window.get_iter()))
        assert [int(t.get_string(0)) for t in window.get_expired()] == self.state.get(f"w{k - 1}", [])
