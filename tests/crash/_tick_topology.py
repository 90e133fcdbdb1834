"""A topology whose stateful bolt counts into ``pending`` and flushes ``pending`` into ``total`` on ticks.

Shared by ``tick_driver.py`` (the SIGKILL chain) and ``tests/spark/test_ticks.py``.
"""

from __future__ import annotations

from typing import Any

from weir.demo import SplitSentence
from weir.sources import FileSpout
from weir.topology import StatefulBolt, Topology, TopologyBuilder, Tuple
from weir.topology.ticks import TupleUtils


class TickFlush(StatefulBolt):
    """Counts words into ``pending``; a tick moves ``pending`` into ``total`` and records ``tick-<txid>``.

    Every key changes on a tick, so a tick applied twice (or lost) changes the committed state.
    """

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Tuple) -> None:
        st = self.state
        if TupleUtils.isTick(tup):
            pending = st.get("pending", 0)
            st.put("total", st.get("total", 0) + pending)
            st.put("pending", 0)
            st.put("flushes", st.get("flushes", 0) + 1)
            st.put(f"tick-{tup.txid}", [pending, list(tup.values)])
            self.collector.ack(tup)  # a no-op, as in Storm
            return
        st.put("pending", st.get("pending", 0) + 1)
        self.collector.ack(tup)


def tick_topology(input_dir: str, *, freq_secs: float = 2) -> Topology:
    """Lines → split → :class:`TickFlush` (2 tasks, shuffle), ticking every ``freq_secs``."""
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(input_dir, files_per_batch=1))
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("lines")
    b.set_bolt("flush", TickFlush(), 2).shuffle_grouping("split").add_configuration(
        "topology.tick.tuple.freq.secs", freq_secs
    )
    return b.create_topology()


def tick_state(provider: Any, topology: str) -> list[dict[str, Any]]:
    """The committed state of both ``flush`` tasks."""
    return [dict(provider.new_state(f"{topology}-flush-{i}")) for i in range(2)]
