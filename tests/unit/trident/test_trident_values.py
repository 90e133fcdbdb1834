"""OpaqueValue / TransactionalValue math (seed 004) and their list form."""

from __future__ import annotations

import dataclasses
import json

import pytest

from weir.errors import SerializationError, StateError, WeirError
from weir.trident.state import OpaqueValue, TransactionalValue


def apply(value: OpaqueValue[int] | None, txid: int, delta: int) -> OpaqueValue[int]:
    """What an opaque map does for one key: build on get(txid), store update(txid, new)."""
    if value is None:
        return OpaqueValue(txid, delta)
    base = value.get(txid)
    return value.update(txid, (base or 0) + delta)


class TestOpaqueValueSeedExamples:
    def test_new_batch_moves_curr_to_prev(self) -> None:
        # seed 004: {value=4, prevValue=1, txid=2}, batch 3 with partial count 2
        stored = OpaqueValue(2, 4, 1)
        assert apply(stored, 3, 2) == OpaqueValue(3, 6, 4)

    def test_replay_of_stored_txid_builds_on_prev(self) -> None:
        # seed 004: same stored value, batch 2 replayed with partial count 2 -> value = prev + 2
        stored = OpaqueValue(2, 4, 1)
        assert apply(stored, 2, 2) == OpaqueValue(2, 3, 1)

    def test_count_3_then_batch_4_then_replay_of_4_with_other_tuples(self) -> None:
        v = OpaqueValue(3, 3)
        v = apply(v, 4, 2)
        assert (v.curr_txid, v.curr, v.prev) == (4, 5, 3)
        v = apply(v, 4, 3)  # the replay of batch 4 had 3 tuples this time
        assert (v.curr_txid, v.curr, v.prev) == (4, 6, 3)
        v = apply(v, 4, 3)  # replaying again is idempotent
        assert v == OpaqueValue(4, 6, 3)
        v = apply(v, 5, 1)
        assert v == OpaqueValue(5, 7, 6)

    def test_skipped_txids_are_new_batches(self) -> None:
        v = apply(OpaqueValue(3, 10, 7), 9, 1)
        assert v == OpaqueValue(9, 11, 10)

    def test_get_returns_prev_on_replay_and_curr_for_newer_batch(self) -> None:
        v = OpaqueValue(5, 50, 40)
        assert v.get(5) == 40
        assert v.get(6) == 50
        assert v.get(1000) == 50


class TestOpaqueValueOrdering:
    @pytest.mark.parametrize("method", ["get", "update"])
    def test_batch_behind_stored_txid_raises_state_error_naming_both(self, method: str) -> None:
        v = OpaqueValue(7, 1, 0)
        with pytest.raises(StateError) as info:
            if method == "get":
                v.get(6)
            else:
                v.update(6, 99)
        text = str(info.value)
        assert "6" in text and "7" in text and "behind" in text
        assert isinstance(info.value, WeirError) and isinstance(info.value, RuntimeError)

    def test_none_batch_txid_is_always_new(self) -> None:
        v = OpaqueValue(7, 1, 0)
        assert v.get(None) == 1
        assert v.update(None, 2) == OpaqueValue(None, 2, 1)

    def test_none_stored_txid_is_older_than_any_batch(self) -> None:
        v = OpaqueValue(None, 1, 0)
        assert v.get(3) == 1
        assert v.update(3, 2) == OpaqueValue(3, 2, 1)

    def test_default_prev_is_none(self) -> None:
        v = OpaqueValue(1, "x")
        assert v.prev is None
        assert v.get(1) is None  # a replay of the first batch builds on nothing


class TestImmutabilityAndListForm:
    def test_values_are_frozen(self) -> None:
        with pytest.raises(dataclasses.FrozenInstanceError):
            OpaqueValue(1, 2, 3).curr = 5  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            TransactionalValue(1, 2).val = 5  # type: ignore[misc]

    def test_update_returns_a_new_value(self) -> None:
        v = OpaqueValue(1, 2, 3)
        w = v.update(2, 9)
        assert v == OpaqueValue(1, 2, 3) and w is not v

    def test_opaque_round_trip_through_json(self) -> None:
        v = OpaqueValue(12, {"n": [1, 2]}, {"n": [1]})
        text = json.dumps(v.to_list())
        assert json.loads(text) == [12, {"n": [1, 2]}, {"n": [1]}]
        assert OpaqueValue.from_list(json.loads(text)) == v

    def test_transactional_round_trip_through_json(self) -> None:
        v = TransactionalValue(3, 5)
        assert v.to_list() == [3, 5]
        assert TransactionalValue.from_list(json.loads(json.dumps(v.to_list()))) == v
        assert TransactionalValue.from_list((None, None)) == TransactionalValue(None, None)

    @pytest.mark.parametrize("data", [[1, 2], [1, 2, 3, 4], "abc", None, 5, ["7", 1, 0], [True, 1, 0], [1.5, 1, 0]])
    def test_opaque_from_list_rejects_malformed(self, data: object) -> None:
        with pytest.raises(SerializationError, match="OpaqueValue"):
            OpaqueValue.from_list(data)  # type: ignore[arg-type]

    @pytest.mark.parametrize("data", [[1], [1, 2, 3], {"txid": 1}, ["1", 2]])
    def test_transactional_from_list_rejects_malformed(self, data: object) -> None:
        with pytest.raises(SerializationError, match="TransactionalValue"):
            TransactionalValue.from_list(data)  # type: ignore[arg-type]
