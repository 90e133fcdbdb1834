"""Public surface, the JSON codec, factory validation, and a property test against the memory map."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.trident.conftest import Sum
from weir.errors import ConfigError, SerializationError, StateError
from weir.trident.backing import (
    DEFAULT_GLOBAL_KEY,
    MapStateFactory,
    MapStore,
    SqliteMapState,
    close_connections,
)
from weir.trident.backing.codec import decode_cell, encode_cell, encode_cell_text, encode_key
from weir.trident.state import (
    CombinerValueUpdater,
    MemoryBackingMap,
    OpaqueMap,
    OpaqueValue,
    StateFactory,
    StateType,
    TransactionalMap,
    TransactionalValue,
)


@pytest.fixture(autouse=True)
def _close() -> Iterator[None]:
    close_connections()
    yield
    close_connections()


# ---- codec -----------------------------------------------------------------------------------
def test_key_encoding_is_compact_deterministic_json() -> None:
    assert encode_key(("man", 3, None, True, 1.5), where="w") == '["man",3,null,true,1.5]'
    assert encode_key(("naïve",), where="w") == '["naïve"]'
    assert encode_key((("nested", 1), b"\x00"), where="w") == '[["nested",1],{"$bytes":"AA=="}]'
    with pytest.raises(SerializationError, match=r"w: key \(frozenset\(\)\,\) cannot be stored"):
        encode_key((frozenset(),), where="w")
    with pytest.raises(SerializationError, match=r"no JSON form"):
        encode_key((float("nan"),), where="w")


def test_cells_round_trip_and_foreign_data_is_refused() -> None:
    cell = OpaqueValue(3, {"a": b"\x01"}, [1])
    data = encode_cell(cell, StateType.OPAQUE, ("k",), where="w")
    assert data == b'[3,{"a":{"$bytes":"AQ=="}},[1]]'
    assert decode_cell(data, StateType.OPAQUE, ("k",), where="w") == cell
    assert decode_cell(b"[1,2]", StateType.TRANSACTIONAL, ("k",), where="w") == TransactionalValue(1, 2)
    assert decode_cell(b"7", StateType.NON_TRANSACTIONAL, ("k",), where="w") == 7
    with pytest.raises(SerializationError, match=r"w: key \('k',\): stored data 7 is not one of the OpaqueValue"):
        decode_cell(b"7", StateType.OPAQUE, ("k",), where="w")
    with pytest.raises(SerializationError, match=r"key \('k',\).*another kind of map state"):
        decode_cell(b'["x",1,2]', StateType.OPAQUE, ("k",), where="w")
    with pytest.raises(SerializationError, match=r"not valid JSON"):
        decode_cell(b"{nope", StateType.NON_TRANSACTIONAL, ("k",), where="w")


_SCALAR = st.one_of(
    st.none(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.sampled_from(['a"b', "a\\b", "tab\t", "\u2028", "naïve", "\ud800"]),
)
_VALUE = st.one_of(_SCALAR, st.lists(_SCALAR, max_size=3))
_TXID = st.one_of(st.none(), st.integers(min_value=0, max_value=2**63))


@settings(max_examples=150)
@given(txid=_TXID, curr=_VALUE, prev=_VALUE)
def test_cell_text_is_the_text_of_encode_cell(txid: int | None, curr: object, prev: object) -> None:
    """The direct text of the usual cells is, character for character, what the JSON serializer writes."""
    for cell, state_type in (
        (OpaqueValue(txid, curr, prev), StateType.OPAQUE),
        (TransactionalValue(txid, curr), StateType.TRANSACTIONAL),
        ([txid, curr, prev], StateType.OPAQUE),
        (curr, StateType.NON_TRANSACTIONAL),
    ):
        data = encode_cell(cell, state_type, ("k",), where="w")
        text = encode_cell_text(cell, state_type, ("k",), where="w")
        assert text == data.decode("utf-8", "surrogatepass")
        assert decode_cell(text, state_type, ("k",), where="w") == decode_cell(data, state_type, ("k",), where="w")


def test_cell_text_refuses_what_encode_cell_refuses() -> None:
    with pytest.raises(SerializationError, match=r"w: key \('k',\): cannot store 7"):
        encode_cell_text(7, StateType.OPAQUE, ("k",), where="w")
    with pytest.raises(SerializationError, match=r"w: value of key \('k',\)"):
        encode_cell_text(OpaqueValue(1, float("nan")), StateType.OPAQUE, ("k",), where="w")


# ---- factories -------------------------------------------------------------------------------
def test_factory_is_a_picklable_state_factory(tmp_path: Path) -> None:
    factory = SqliteMapState.transactional(tmp_path / "t.db", table="tx", cache_size=5, global_key=["$all"])
    assert isinstance(factory, StateFactory) and isinstance(factory.store, MapStore)
    assert factory.state_type is StateType.TRANSACTIONAL
    assert factory.global_key == ("$all",)
    copy = pickle.loads(pickle.dumps(factory))
    assert copy == factory and copy.describe() == factory.describe()
    assert "transactional map state in sqlite:///" in factory.describe()
    assert SqliteMapState.opaque(tmp_path / "t.db", table="o").global_key == DEFAULT_GLOBAL_KEY
    assert SqliteMapState.factory("opaque", tmp_path / "t.db", table="o").state_type is StateType.OPAQUE


@pytest.mark.parametrize("cache_size", [-1, 1.5, True, "10"])
def test_bad_cache_size_is_a_config_error(tmp_path: Path, cache_size: object) -> None:
    with pytest.raises(ConfigError, match=r"cache_size must be None, 0 \(no cache\) or a positive int"):
        SqliteMapState.opaque(tmp_path / "t.db", cache_size=cache_size)


def test_other_misuse_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"needs a weir.trident.backing.MapStore"):
        MapStateFactory("sqlite:///x.db", StateType.OPAQUE)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"unknown state type 'exactly_once'"):
        SqliteMapState.factory("exactly_once", tmp_path / "t.db")
    factory = SqliteMapState.opaque(tmp_path / "t.db")
    with pytest.raises(ConfigError, match=r"partition_index must be an int in \[0, 2\), got 2"):
        factory.make_state({}, 2, 2)


def test_check_false_defers_every_connection(tmp_path: Path) -> None:
    path = tmp_path / "later" / "t.db"
    factory = SqliteMapState.opaque(path, table="later", check=False)
    assert not path.exists()
    state = factory.make_state({}, 0, 1)
    assert not path.exists()
    assert state.multi_get([["a"]]) == [None]
    assert path.exists()


def test_store_errors_are_state_errors(tmp_path: Path) -> None:
    import sqlite3

    factory = SqliteMapState.non_transactional(tmp_path / "t.db", table="dropped")
    conn = sqlite3.connect(tmp_path / "t.db")
    conn.execute("DROP TABLE dropped")
    conn.close()
    with pytest.raises(StateError, match=r"table 'dropped': multi_get of 1 keys failed: no such table"):
        factory.backing_map().multi_get([("a",)])


# ---- property: a durable opaque map behaves exactly like the in-memory one ---------------------
_WORDS = st.sampled_from(["a", "b", "c", "d"])
_BATCH = st.dictionaries(_WORDS, st.integers(1, 5), min_size=1, max_size=4)
_STEP = st.tuples(_BATCH, st.booleans(), st.one_of(st.none(), _BATCH))


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_STEP, min_size=1, max_size=6))
def test_sqlite_opaque_and_transactional_maps_match_memory(
    tmp_path_factory: pytest.TempPathFactory, steps: list
) -> None:  # type: ignore[type-arg]
    """Each step: a batch, whether its first attempt fails after writing, and the replay's batch."""
    db = tmp_path_factory.mktemp("prop") / "t.db"
    for state_type, builder in (
        (StateType.OPAQUE, OpaqueMap.build),
        (StateType.TRANSACTIONAL, TransactionalMap.build),
    ):
        factory = SqliteMapState.factory(state_type, db, table=state_type.value)
        memory = builder(MemoryBackingMap())
        for txid, (batch, fails, replay) in enumerate(steps, start=1):
            attempts = [batch]
            if fails:
                # a transactional spout replays the same batch; an opaque one may change it
                attempts.append(replay if (replay and state_type is StateType.OPAQUE) else batch)
            for i, adds in enumerate(attempts):
                durable = factory.make_state({}, 0, 1)
                results = []
                for target in (durable, memory):
                    target.begin_commit(txid)
                    results.append(
                        target.multi_update(
                            [[w] for w in adds], [CombinerValueUpdater(Sum(), n) for n in adds.values()]
                        )
                    )
                    if i == len(attempts) - 1:
                        target.commit(txid)
                assert results[0] == results[1]
        words = [["a"], ["b"], ["c"], ["d"]]
        assert factory.make_state({}, 0, 1).multi_get(words) == memory.multi_get(words)
    close_connections()


def test_sqlite_backing_map_answers_in_key_order_and_last_put_wins(tmp_path: Path) -> None:
    """Keys are read and written sorted; answers still follow the caller's order, and a key put twice keeps the last."""
    store = SqliteMapState.store(tmp_path / "t.db", table="order")
    backing = store.backing_map(StateType.NON_TRANSACTIONAL)
    words = [f"w{i:04d}" for i in range(1200)][::-1]  # descending, more than one IN (...) chunk
    backing.multi_put([(w,) for w in words], list(range(len(words))))
    backing.multi_put([("w0003",), ("zz",), ("w0003",), ("a",)], ["z first", 1, "a last", 2])  # the last sorts first
    asked = [("zz",), ("w1199",), ("missing",), ("w0003",), ("a",), ("w1199",)]
    assert backing.multi_get(asked) == [1, 0, None, "a last", 2, 0]
    assert backing.multi_get([("missing",), ("nope",)]) == [None, None]
