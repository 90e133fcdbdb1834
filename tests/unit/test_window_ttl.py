"""The user state of a windowed bolt expires like a stateful bolt's (``weir.state.ttl.ms``).

Driven with weir's ``BoltTester`` (the bolt's task against a real in-process store); the batch time
is set by hand per checkpoint, as the coordinator's recorded time is in a topology.
"""

from __future__ import annotations

import time
from typing import Any

from weir.testing import BoltTester
from weir.topology import BaseStatefulWindowedBolt, Count, Fields, TupleWindow


class LastWindowTotal(BaseStatefulWindowedBolt):
    """Per key, the total of the last window that held it."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("key", "total"))

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, window: TupleWindow) -> None:
        totals: dict[str, int] = {}
        for t in window.get_iter():
            totals[t.get_string(0)] = totals.get(t.get_string(0), 0) + t.get_integer(1)
        for key, total in totals.items():
            self.state.put(key, total)


def check_window_ttl(store: str | None = None) -> None:
    """Keys of the window's totals expire at the batch time; the commit removes them from ``store``."""
    base = int(time.time() * 1000) + 10**9  # ahead of the wall clock that an outside reader decides at
    t = BoltTester(
        LastWindowTotal().with_tumbling_window(Count.of(2)),
        inputs={"src": ["key", "n"]},
        conf={"weir.state.ttl.ms": 5000},
        store=store,
    )
    assert t.state is not None
    t.state.set_batch_time(base)
    t.execute("src", ["a", 1])
    t.execute("src", ["b", 2])  # window [a, b] fires: a=1, b=2, both expire at base + 5000
    t.checkpoint()
    assert t.committed() == {"a": 1, "b": 2}
    t.state.set_batch_time(base + 3000)
    t.execute("src", ["b", 5])
    t.execute("src", ["c", 1])  # b rewritten: expires at base + 8000
    t.checkpoint()
    t.state.set_batch_time(base + 5000)  # a expires
    assert t.state.get("a") is None and t.state.get("b") == 5
    t.checkpoint()
    assert t.committed() == {"b": 5, "c": 1}
    rows = dict(t.provider.backend.scan(t.context.state_namespace))
    assert t.state.key_serializer.serialize("a") not in rows  # deleted by that commit
    t.state.set_batch_time(base + 8000)  # b expires too; c (written at base + 3000) with it
    t.checkpoint()
    assert t.committed() == {}


def test_a_windowed_bolts_state_expires_at_the_batch_time_and_the_commit_removes_it() -> None:
    check_window_ttl()
