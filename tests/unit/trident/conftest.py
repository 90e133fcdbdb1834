"""Fixtures for the Trident state unit tests (pure Python: no Spark, no server)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from weir.trident.state import MemoryBackingMap, MemoryMapState


class RecordingBackingMap(MemoryBackingMap):
    """A dict backing map that records every call (keys as received), to count round trips."""

    def __init__(self, data: dict[tuple[Any, ...], Any] | None = None) -> None:
        super().__init__(data)
        self.gets: list[list[tuple[Any, ...]]] = []
        self.puts: list[list[tuple[tuple[Any, ...], Any]]] = []
        self.fail_next_put = False

    def multi_get(self, keys: Sequence[tuple[Any, ...]]) -> list[Any]:
        self.gets.append(list(keys))
        return super().multi_get(keys)

    def multi_put(self, keys: Sequence[tuple[Any, ...]], vals: Sequence[Any]) -> None:
        self.puts.append(list(zip(keys, vals, strict=True)))
        if self.fail_next_put:
            self.fail_next_put = False
            raise ConnectionError("store went away")
        super().multi_put(keys, vals)

    def reset_calls(self) -> None:
        self.gets.clear()
        self.puts.clear()


class Sum:
    """A combiner aggregator (structural: only ``combine`` is used by the updater)."""

    def combine(self, a: int, b: int) -> int:
        return a + b


@pytest.fixture
def recording() -> RecordingBackingMap:
    return RecordingBackingMap()


@pytest.fixture
def summer() -> Sum:
    return Sum()


@pytest.fixture(autouse=True)
def _clear_memory_map_states() -> Iterator[None]:
    yield
    MemoryMapState.clear_all()
