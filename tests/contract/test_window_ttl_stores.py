"""TTL of a windowed bolt's state on every durable store (SQLite, Redis, PostgreSQL), no Spark.

The windowed bolt's key-value state expires keys at its batch time, exactly as a plain stateful
bolt's (tests/contract/test_ttl.py); this runs the windowed bolt of tests/unit/test_window_ttl.py
against the real stores, with the window's own namespace beside it.
"""

from __future__ import annotations

import time

import pytest

from tests.unit.test_window_ttl import LastWindowTotal
from weir.testing import BoltTester
from weir.topology import Count


@pytest.mark.parametrize("provider_url", ["sqlite", "redis", "postgres"], indirect=True)
def test_a_windowed_bolts_state_expires_on_every_store(provider_url: str) -> None:
    base = int(time.time() * 1000) + 10**9  # ahead of the wall clock that an outside reader decides at
    t = BoltTester(
        LastWindowTotal().with_tumbling_window(Count.of(2)),
        inputs={"src": ["key", "n"]},
        conf={"weir.state.ttl.ms": 5000},
        store=provider_url,
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
