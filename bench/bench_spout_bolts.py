"""The bolts of bench/storm_spouts.py (a module of its own: pickled by value to Spark's workers)."""

from __future__ import annotations

import sys
from typing import Any

from pyspark import cloudpickle

from weir.topology import BasicBolt, StatefulBolt

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class SplitLine(BasicBolt):
    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])

    def execute(self, tup: Any, collector: Any) -> None:
        for w in tup.values[0].split():
            collector.emit([w])


class CountWords(StatefulBolt):  # type: ignore[type-arg]
    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Any, collector: Any) -> None:
        w = tup.values[0]
        self.state.put(w, (self.state.get(w) or 0) + 1)
