"""weir's data-only encoding: round trips, and it never loads a pickle unless the caller allows it."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from weir import datacodec as _data

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
    st.dates(),
    st.datetimes(),
    st.decimals(allow_nan=False, allow_infinity=False),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.one_of(st.text(), st.integers()), inner, max_size=4),
        st.frozensets(st.one_of(st.text(), st.integers()), max_size=4),
    ),
    max_leaves=12,
)


@given(_VALUES)
def test_plain_data_round_trips_exactly(value: Any) -> None:
    data = _data.encode(value)
    back = _data.decode(data)
    assert back == value and type(back) is type(value)
    assert _data.encode(back) == data  # canonical: equal values, equal bytes


class _Custom:
    pass


def test_objects_are_refused_unless_pickling_is_allowed() -> None:
    with pytest.raises(_data.DataCodecError, match="journal: a value of type _Custom is not plain data"):
        _data.encode([_Custom()], what="journal")
    blob = _data.encode([complex(1, 2)], allow_pickle=True)
    assert _data.decode(blob, allow_pickle=True) == [complex(1, 2)]
    with pytest.raises(_data.DataCodecError, match="my record holds a pickle payload"):
        _data.decode(blob, what="my record")


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (pickle.dumps({"a": 1}), "holds a pickle payload"),
        (b"Q123", "unknown tag"),
        (b"l\x00\x00\x00\x09ab", "truncated item"),
        (b"d\x00\x00\x00\x02i1", "odd number"),
        (b"", "unknown tag"),
    ],
)
def test_foreign_or_damaged_bytes_name_the_record(data: bytes, match: str) -> None:
    with pytest.raises(_data.DataCodecError, match=match) as info:
        _data.decode(data, what="namespace 'x', key 'y'")
    assert "namespace 'x', key 'y'" in str(info.value)
