"""TTL of a windowed bolt's state on every durable store (SQLite, Redis, PostgreSQL), no Spark.

The windowed bolt's key-value state expires keys at its batch time, exactly as a plain stateful
bolt's (tests/contract/test_ttl.py); this runs the windowed bolt of tests/unit/test_window_ttl.py
against the real stores, with the window's own namespace beside it.
"""

from __future__ import annotations

import pytest

from tests.unit.test_window_ttl import check_window_ttl


@pytest.mark.parametrize("provider_url", ["sqlite", "redis", "postgres"], indirect=True)
def test_a_windowed_bolts_state_expires_on_every_store(provider_url: str) -> None:
    check_window_ttl(provider_url)
