"""The SPI helpers of weir.trident.state and its updaters (exports and examples: test_exports, test_doctests)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from weir.errors import ConfigError
from weir.trident.state import (
    CombinerValueUpdater,
    ReducerValueUpdater,
    ReplaceUpdater,
    State,
    StateFactory,
    StateType,
    ValueUpdater,
    is_exactly_once,
)


def test_state_and_factory_are_abstract() -> None:
    with pytest.raises(TypeError):
        State()  # type: ignore[abstract]
    with pytest.raises(TypeError):
        StateFactory()  # type: ignore[abstract]

    class LocationDB(State):
        def __init__(self) -> None:
            self.log: list[tuple[str, int | None]] = []

        def begin_commit(self, txid: int | None) -> None:
            self.log.append(("begin", txid))

        def commit(self, txid: int | None) -> None:
            self.log.append(("commit", txid))

    class LocationDBFactory(StateFactory):
        def make_state(self, conf: Mapping[str, Any], partition_index: int, num_partitions: int) -> State:
            return LocationDB()

    assert LocationDBFactory.state_type is None  # undeclared by default
    state = LocationDBFactory().make_state({}, 0, 1)
    state.begin_commit(None)
    state.commit(None)
    assert isinstance(state, LocationDB) and state.log == [("begin", None), ("commit", None)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (StateType.OPAQUE, StateType.OPAQUE),
        ("opaque", StateType.OPAQUE),
        ("TRANSACTIONAL", StateType.TRANSACTIONAL),
        ("non-transactional", StateType.NON_TRANSACTIONAL),
        (" Non_Transactional ", StateType.NON_TRANSACTIONAL),
    ],
)
def test_state_type_parse(value: Any, expected: StateType) -> None:
    assert StateType.parse(value) is expected


@pytest.mark.parametrize("value", ["exactly_once", "", 3, None])
def test_state_type_parse_rejects(value: Any) -> None:
    with pytest.raises(ConfigError, match="unknown state type"):
        StateType.parse(value)


def test_spout_state_table_of_seed_004() -> None:
    table = {(spout, state): is_exactly_once(spout, state) for spout in StateType for state in StateType}
    assert {pair for pair, ok in table.items() if ok} == {
        (StateType.TRANSACTIONAL, StateType.TRANSACTIONAL),
        (StateType.TRANSACTIONAL, StateType.OPAQUE),
        (StateType.OPAQUE, StateType.OPAQUE),
    }


def test_updaters() -> None:
    class Max:
        def combine(self, a: int, b: int) -> int:
            return max(a, b)

    class Count:
        def init(self) -> int:
            return 0

        def reduce(self, curr: int, tup: Any) -> int:
            return curr + 1

    combine = CombinerValueUpdater(Max(), 4)
    assert combine.update(None) == 4 and combine.update(9) == 9 and combine.update(1) == 4
    reduce = ReducerValueUpdater(Count(), iter([("x",), ("y",)]))
    assert reduce.update(None) == 2 and reduce.update(10) == 12
    assert ReplaceUpdater("v").update("old") == "v"
    updater: Any
    for updater in (combine, reduce, ReplaceUpdater(None)):
        assert isinstance(updater, ValueUpdater)
        assert type(updater).__name__ in repr(updater)
