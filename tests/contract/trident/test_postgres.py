"""PostgreSQL typed tables: plain SQL, layouts per state type, one transaction, errors."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from tests.contract.trident.conftest import Sum
from tests.servers import PostgresDatabase, free_port
from weir.connectors.postgres import maps as pg_module
from weir.errors import ConfigError, SerializationError, StateError
from weir.trident.backing import PostgresMapState, close_connections
from weir.trident.state import CombinerValueUpdater, OpaqueValue, StateType, TransactionalValue

pytestmark = pytest.mark.services


@pytest.fixture(autouse=True)
def _close() -> Iterator[None]:
    close_connections()
    yield
    close_connections()


def _table() -> str:
    return f"t_{uuid.uuid4().hex[:10]}"


def _sql(url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description is not None else []


def _count_words(factory: Any, txid: int, words: list[str]) -> list[Any]:
    counts: dict[str, int] = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    state = factory.make_state({}, 0, 1)
    state.begin_commit(txid)
    out = state.multi_update([[w] for w in counts], [CombinerValueUpdater(Sum(), n) for n in counts.values()])
    state.commit(txid)
    return out


def test_word_counts_are_readable_with_plain_sql(postgres_url: str) -> None:
    table = _table()
    factory = PostgresMapState.opaque(postgres_url, table=table, key_columns={"word": "TEXT"}, value_type="BIGINT")
    _count_words(factory, 1, ["the", "man", "the", "dog"])
    _count_words(factory, 2, ["the", "man"])
    _count_words(factory, 2, ["the"])  # a replay of batch 2 with fewer tuples
    rows = _sql(postgres_url, f"SELECT word, value FROM {table} ORDER BY value DESC, word")
    assert rows == [("the", 3), ("man", 2), ("dog", 1)]
    full = _sql(postgres_url, f"SELECT word, value, txid, prev FROM {table} ORDER BY word")
    assert full == [("dog", 1, 1, None), ("man", 2, 2, 1), ("the", 3, 2, 2)]


@pytest.mark.parametrize(
    ("state_type", "columns"),
    [
        (
            StateType.OPAQUE,
            [
                ("word", "text"),
                ("day", "date"),
                ("value", "double precision"),
                ("txid", "bigint"),
                ("prev", "double precision"),
            ],
        ),
        (
            StateType.TRANSACTIONAL,
            [("word", "text"), ("day", "date"), ("value", "double precision"), ("txid", "bigint")],
        ),
        (StateType.NON_TRANSACTIONAL, [("word", "text"), ("day", "date"), ("value", "double precision")]),
    ],
)
def test_table_layout_per_state_type(postgres_url: str, state_type: StateType, columns: list[tuple[str, str]]) -> None:
    table = _table()
    PostgresMapState.factory(
        state_type, postgres_url, table=table, key_columns=[("word", "TEXT"), ("day", "DATE")],
        value_type="double precision",
    )  # fmt: skip
    found = _sql(
        postgres_url,
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
        table,
    )
    assert found == columns
    pk = _sql(
        postgres_url,
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary ORDER BY 1",
        table,
    )
    assert pk == [("day",), ("word",)]


def test_numbers_of_mixed_python_types_fit_numeric_columns(postgres_url: str) -> None:
    table = _table()
    backing = PostgresMapState.non_transactional(
        postgres_url, table=table, key_columns={"k": "BIGINT"}, value_type="NUMERIC(12,3)"
    ).backing_map()
    backing.multi_put([(1,), (2,), (3,)], [1, 2.5, Decimal("3.125")])
    assert backing.multi_get([(3,), (1,), (2,)]) == [Decimal("3.125"), Decimal("1"), Decimal("2.5")]
    floats = PostgresMapState.opaque(
        postgres_url, table=_table(), key_columns={"k": "BIGINT"}, value_type="DOUBLE PRECISION"
    ).backing_map()
    floats.multi_put([(1,), (2,)], [OpaqueValue(1, 1, 0.5), OpaqueValue(1, 2.5, None)])
    assert floats.multi_get([(1,), (2,)]) == [OpaqueValue(1, 1.0, 0.5), OpaqueValue(1, 2.5, None)]


def test_json_values_and_keys(postgres_url: str) -> None:
    backing = PostgresMapState.transactional(
        postgres_url, table=_table(), key_columns={"doc": "JSONB"}, value_type="JSONB"
    ).backing_map()
    cells = [
        TransactionalValue(1, {"a": [1, "é"]}),
        TransactionalValue(2, b"\x01"),
        TransactionalValue(3, None),
    ]
    keys = [(["x", 1],), (1.5,), ("plain",)]
    backing.multi_put(keys, cells)
    assert backing.multi_get(list(reversed(keys))) == list(reversed(cells))


def test_multi_put_is_one_transaction(postgres_url: str) -> None:
    table = _table()
    factory = PostgresMapState.non_transactional(postgres_url, table=table, key_columns={"word": "TEXT"})
    backing = factory.backing_map()
    backing.multi_put([("old",)], [1])
    _sql(
        postgres_url,
        f"CREATE FUNCTION {table}_boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.word = 'boom' THEN RAISE EXCEPTION 'boom refused'; END IF; RETURN NEW; END $$",
    )
    _sql(
        postgres_url,
        f"CREATE TRIGGER boom BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION {table}_boom()",
    )
    with pytest.raises(StateError, match=rf"table public.{table}: multi_put of 3 keys failed: boom refused"):
        backing.multi_put([("old",), ("new",), ("boom",)], [2, 3, 4])
    assert backing.multi_get([("old",), ("new",), ("boom",)]) == [1, None, None]


def test_big_batches_are_chunked_inside_one_transaction(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg_module, "_CHUNK", 100)
    backing = PostgresMapState.non_transactional(
        postgres_url, table=_table(), key_columns={"k": "BIGINT"}
    ).backing_map()
    backing.multi_put([(i,) for i in range(250)], list(range(250)))
    assert backing.multi_get([(i,) for i in range(250)]) == list(range(250))


def test_keys_and_values_that_do_not_fit_are_serialization_errors(postgres_url: str) -> None:
    backing = PostgresMapState.non_transactional(
        postgres_url, table=_table(), key_columns={"word": "TEXT", "n": "BIGINT"}
    ).backing_map()
    with pytest.raises(SerializationError, match=r"key \('only-one',\) does not match the key columns \['word', 'n'\]"):
        backing.multi_get([("only-one",)])
    with pytest.raises(SerializationError, match=r"non-null value per key column"):
        backing.multi_put([("w", None)], [1])
    with pytest.raises(SerializationError, match=r"does not fit the columns"):
        backing.multi_put([("w", 1)], ["not a number"])


def test_reconnects_after_the_server_dropped_the_connection(
    postgres_url: str, postgres_database: PostgresDatabase
) -> None:
    backing = PostgresMapState.opaque(postgres_url, table=_table(), key_columns={"w": "TEXT"}).backing_map()
    backing.multi_put([("a",)], [OpaqueValue(1, 1, None)])
    assert postgres_database.terminate_connections() >= 1
    assert backing.multi_get([("a",)]) == [OpaqueValue(1, 1, None)]
    postgres_database.terminate_connections()
    backing.multi_put([("a",)], [OpaqueValue(2, 5, 1)])
    assert backing.multi_get([("a",)]) == [OpaqueValue(2, 5, 1)]


def test_a_schema_other_than_public(postgres_url: str) -> None:
    _sql(postgres_url, "CREATE SCHEMA IF NOT EXISTS analytics")
    table = _table()
    factory = PostgresMapState.transactional(postgres_url, table=table, key_columns={"w": "TEXT"}, schema="analytics")
    _count_words(factory, 1, ["a", "a"])
    assert _sql(postgres_url, f"SELECT w, value, txid FROM analytics.{table}") == [("a", 2, 1)]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"table": "word counts"}, r"table 'word counts' is not a valid SQL identifier"),
        ({"table": "x; DROP TABLE y"}, r"is not a valid SQL identifier"),
        ({"schema": "1st"}, r"schema '1st' is not a valid SQL identifier"),
        ({"key_columns": {"my word": "TEXT"}}, r"key column 'my word' is not a valid SQL identifier"),
        ({"key_columns": {"value": "TEXT"}}, r"key column 'value' clashes"),
        ({"key_columns": {}}, r"key_columns must name the key's columns"),
        ({"key_columns": {"w": "TEXT); DROP TABLE x; --"}}, r"is not a SQL type name"),
        ({"key_columns": {"w": "TEXT[]"}}, r"array types are not supported"),
        ({"key_columns": {"w": "JSON"}}, r"JSON has no equality operator; use JSONB"),
        ({"value_type": "BIGINT'"}, r"value_type \"BIGINT'\" is not a SQL type name"),
        ({"value_type": "NOSUCHTYPE"}, r"PostgreSQL knows no type 'NOSUCHTYPE'"),
    ],
)
def test_bad_identifiers_and_types_raise_config_error(postgres_url: str, kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"table": _table(), "key_columns": {"w": "TEXT"}, **kwargs}
    with pytest.raises(ConfigError, match=match):
        PostgresMapState.opaque(postgres_url, **args)


def test_bad_or_unreachable_urls_raise_config_error(postgres_url: str) -> None:
    with pytest.raises(ConfigError, match=r"url 'mysql://h/db' must look like postgresql://"):
        PostgresMapState.opaque("mysql://h/db", table="t", key_columns={"w": "TEXT"})
    port = free_port()
    url = f"postgresql://postgres:secret@127.0.0.1:{port}/nodb"
    with pytest.raises(ConfigError, match=rf"postgres:\*\*\*@127.0.0.1:{port}/nodb table public.t") as info:
        PostgresMapState.opaque(url, table="t", key_columns={"w": "TEXT"})
    assert "secret" not in str(info.value)
    missing_db = postgres_url.rsplit("/", 1)[0] + "/weir_no_such_db"
    with pytest.raises(ConfigError, match=r"weir_no_such_db.*does not exist"):
        PostgresMapState.opaque(missing_db, table="t", key_columns={"w": "TEXT"})


def test_existing_table_of_another_layout_is_refused(postgres_url: str) -> None:
    table = _table()
    PostgresMapState.opaque(postgres_url, table=table, key_columns={"w": "TEXT"})
    with pytest.raises(ConfigError, match=r"value columns of a map state of type 'opaque'.*'transactional'"):
        PostgresMapState.transactional(postgres_url, table=table, key_columns={"w": "TEXT"})
    with pytest.raises(ConfigError, match=r"primary key \['w'\].*PRIMARY KEY \(word\)"):
        PostgresMapState.opaque(postgres_url, table=table, key_columns={"word": "TEXT"})
