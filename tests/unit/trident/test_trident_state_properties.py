"""Property tests: map states against a model, over random batch histories with replays.

A history is a sequence of batches with strictly increasing (possibly skipping) txids. Each batch
has zero or more failed attempts, then one attempt that commits. A failed attempt stops before the
update, in the middle of the backing map's write (only some keys reach the store) or after the
update but before ``commit``; any attempt may first restart the task (a new state object, and a
cold cache). The model:

- opaque state: per key, the sum of the committed attempt's inputs of every batch — whatever the
  failed attempts contained (an opaque spout may change a batch on replay; a failed attempt only
  touches keys its replay also has, as every tuple ends up in exactly one successful batch);
- transactional state: replays carry identical inputs; per key, the sum over batches, each once;
- non-transactional state: every input that reached the store counts (at-least-once).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir.trident.state import (
    CachedMap,
    CombinerValueUpdater,
    MapState,
    MemoryBackingMap,
    MemoryMapState,
    NonTransactionalMap,
    OpaqueMap,
    StateType,
    TransactionalMap,
)

KEYS = ["a", "b", "c", "d", "e"]
FAILURES = ["before_update", "partial_put", "before_commit"]


class Sum:
    def combine(self, a: int, b: int) -> int:
        return a + b


SUM = Sum()


class Crash(Exception):
    """The task died while the backing map was writing."""


class FlakyStore(MemoryBackingMap):
    """A dict store whose next write can be made to stop after ``fail_after`` keys."""

    fail_after: int | None = None

    def multi_put(self, keys: Sequence[tuple[Any, ...]], vals: Sequence[Any]) -> None:
        n, self.fail_after = self.fail_after, None
        if n is None:
            super().multi_put(keys, vals)
            return
        super().multi_put(list(keys)[:n], list(vals)[:n])
        raise Crash


@dataclass(frozen=True)
class Attempt:
    inputs: dict[str, int]
    failure: str | None  # None: the attempt commits
    written: int  # for partial_put: how many keys reach the store
    restart: bool


@dataclass(frozen=True)
class Batch:
    txid: int
    attempts: list[Attempt]  # failed ones first, the committing one last


@st.composite
def histories(draw: st.DrawFn, identical_replays: bool, allow_partial_put: bool = True) -> list[Batch]:
    failures = FAILURES if allow_partial_put else [f for f in FAILURES if f != "partial_put"]
    txid = draw(st.integers(0, 3))
    batches = []
    for _ in range(draw(st.integers(1, 7))):
        txid += draw(st.integers(1, 3))
        final = draw(st.dictionaries(st.sampled_from(KEYS), st.integers(-5, 20), max_size=len(KEYS)))
        attempts = []
        for _ in range(draw(st.integers(0, 3))):
            if identical_replays or not final:
                inputs = final
            else:
                subset = draw(st.lists(st.sampled_from(list(final)), unique=True))
                inputs = {k: draw(st.integers(-5, 20)) for k in subset}
            written = draw(st.integers(0, max(len(inputs) - 1, 0)))
            attempts.append(Attempt(inputs, draw(st.sampled_from(failures)), written, draw(st.booleans())))
        attempts.append(Attempt(final, None, 0, draw(st.booleans())))
        batches.append(Batch(txid, attempts))
    return batches


BUILDERS: dict[StateType, Callable[[Any], MapState[Any]]] = {
    StateType.OPAQUE: OpaqueMap.build,
    StateType.TRANSACTIONAL: TransactionalMap.build,
    StateType.NON_TRANSACTIONAL: NonTransactionalMap.build,
}


class Harness:
    """Makes (and re-makes, on restart) the state under test over one store."""

    def __init__(self, state_type: StateType, backing: str) -> None:
        self.backing = backing
        self.store = FlakyStore()
        self.factory = MemoryMapState.Factory(state_type)
        self.state_type = state_type
        self.state = self.make()

    def make(self) -> MapState[Any]:
        if self.backing == "memory":
            return self.factory.make_state({}, 0, 1)
        inner: Any = self.store if self.backing == "dict" else CachedMap(self.store, 2)
        return BUILDERS[self.state_type](inner)

    def run(self, txid: int, attempt: Attempt) -> list[Any] | None:
        if attempt.restart:
            self.state = self.make()
        state = self.state
        keys = [[k] for k in attempt.inputs]
        updaters = [CombinerValueUpdater(SUM, v) for v in attempt.inputs.values()]
        state.begin_commit(txid)
        if attempt.failure == "before_update":
            return None
        if attempt.failure == "partial_put":
            self.store.fail_after = attempt.written
            try:
                state.multi_update(keys, updaters)
            except Crash:
                pass
            self.store.fail_after = None
            return None
        out = state.multi_update(keys, updaters)
        if attempt.failure == "before_commit":
            return None
        state.commit(txid)
        return out


def check(harness: Harness, history: list[Batch]) -> None:
    at_least_once = harness.state_type is StateType.NON_TRANSACTIONAL
    model: dict[str, int] = {}
    for batch in history:
        for attempt in batch.attempts:
            reached: list[str] = []
            if attempt.failure is None or attempt.failure == "before_commit":
                reached = list(attempt.inputs)
            elif attempt.failure == "partial_put":
                reached = list(attempt.inputs)[: attempt.written]
            out = harness.run(batch.txid, attempt)
            if at_least_once:
                for key in reached:
                    model[key] = model.get(key, 0) + attempt.inputs[key]
            elif attempt.failure is None:
                for key, delta in attempt.inputs.items():
                    model[key] = model.get(key, 0) + delta
            if out is not None:  # the new values stream of the committed attempt
                assert out == [model[k] for k in attempt.inputs]
    reader = harness.make()  # a fresh reader (a restarted task or a query) sees the model
    assert reader.multi_get([[k] for k in KEYS]) == [model.get(k) for k in KEYS]


PROPERTY_SETTINGS = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.mark.parametrize("backing", ["dict", "cached", "memory"])
@pytest.mark.parametrize("identical_replays", [False, True], ids=["opaque-spout", "transactional-spout"])
@PROPERTY_SETTINGS
@given(data=st.data())
def test_opaque_state_is_exactly_once(backing: str, identical_replays: bool, data: st.DataObject) -> None:
    history = data.draw(histories(identical_replays, allow_partial_put=backing != "memory"))
    check(Harness(StateType.OPAQUE, backing), history)


@pytest.mark.parametrize("backing", ["dict", "cached", "memory"])
@PROPERTY_SETTINGS
@given(data=st.data())
def test_transactional_state_is_exactly_once_with_identical_replays(backing: str, data: st.DataObject) -> None:
    history = data.draw(histories(True, allow_partial_put=backing != "memory"))
    check(Harness(StateType.TRANSACTIONAL, backing), history)


@pytest.mark.parametrize("backing", ["dict", "cached", "memory"])
@PROPERTY_SETTINGS
@given(data=st.data())
def test_non_transactional_state_counts_every_write(backing: str, data: st.DataObject) -> None:
    history = data.draw(histories(False, allow_partial_put=backing != "memory"))
    check(Harness(StateType.NON_TRANSACTIONAL, backing), history)


@settings(max_examples=200, deadline=None)
@given(
    stored=st.integers(-100, 100),
    txid=st.integers(1, 50),
    attempts=st.lists(st.integers(-10, 10), min_size=1, max_size=5),
    later=st.lists(st.integers(-10, 10), max_size=5),
)
def test_opaque_value_replays_keep_only_the_last_attempt(
    stored: int, txid: int, attempts: list[int], later: list[int]
) -> None:
    from weir.trident.state import OpaqueValue

    v: OpaqueValue[int] = OpaqueValue(txid, stored, None)
    batch = txid + 1
    for delta in attempts:  # every attempt of one batch: only the last one counts
        v = v.update(batch, (v.get(batch) or 0) + delta)
    assert (v.curr_txid, v.curr, v.prev) == (batch, stored + attempts[-1], stored)
    for i, delta in enumerate(later):  # later batches, each once
        v = v.update(batch + 1 + i, (v.get(batch + 1 + i) or 0) + delta)
    assert v.curr == stored + attempts[-1] + sum(later)
