"""Fixtures of the Streams tests: a clean call record and no live instances between tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.streams import _ops
from weir.runtime.spark.streams.operators import clear_live_instances
from weir.state.factory import close_backends
from weir.state.memory import MemoryBackend


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    _ops.CALLS.clear()
    clear_live_instances()
    yield
    clear_live_instances()
    _ops.CALLS.clear()
    MemoryBackend.reset_all()
    close_backends()
