"""Python classes a Flux file names by dotted path (``tests.flux.flux_components.SplitBolt``)."""

from __future__ import annotations

import sys
from typing import Any

from pyspark import cloudpickle

from weir.topology import BasicBolt, Fields, StatefulBolt, Values

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Splitter:
    """A component: how a line becomes words (built from constructorArgs, a property and a config method)."""

    def __init__(self, separator: str | None = None) -> None:
        self.separator = separator
        self.lower = False
        self.stop_words: set[str] = set()

    def set_lower(self, lower: bool) -> None:
        self.lower = bool(lower)

    def withStopWords(self, *words: str) -> None:  # noqa: N802 - a Java-style config method name
        self.stop_words.update(words)

    def split(self, line: str) -> list[str]:
        words = [w.lower() if self.lower else w for w in line.split(self.separator)]
        return [w for w in words if w and w not in self.stop_words]


class SplitBolt(BasicBolt):
    def __init__(self, splitter: Splitter) -> None:
        self.splitter = splitter

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("word"))

    def execute(self, tup: Any, collector: Any) -> None:
        for word in self.splitter.split(tup.get_string(0)):
            collector.emit(Values(word))


class CountBolt(StatefulBolt):  # type: ignore[type-arg]
    min_length = 1

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("word", "count"))

    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute(self, tup: Any) -> None:
        word = tup.get_string(0)
        if len(word) >= self.min_length:
            self.counts.put(word, self.counts.get(word, 0) + 1)
        self.collector.ack(tup)


class NotAComponent:
    pass
