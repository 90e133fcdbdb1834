"""Typed ``value`` columns for Trident map states in PostgreSQL tables (decided by the declared ``value_type``)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from tests.statedata.test_read import build
from weir.connectors.postgres.maps import PostgresMapState
from weir.statedata import read
from weir.statedata.typed import spark_value_type

pytestmark = pytest.mark.services


def _write(url: str, table: str, value_type: str, values: list[list[Any]]) -> None:
    state = PostgresMapState.opaque(url, table=table, key_columns={"word": "TEXT"}, value_type=value_type)
    st = state.make_state({}, 0, 1)
    for txid, vals in enumerate(values, 2):  # txids 2, 3, 4; the coordinator's record says 3 committed
        st.begin_commit(txid)
        st.multi_put([["dog"], ["man"]], vals)
        st.commit(txid)


@pytest.mark.parametrize("provider_url", ["postgres"], indirect=True)
def test_numeric_value_types_give_numeric_columns(spark: Any, provider_url: str) -> None:
    build(provider_url)  # the topology 'wc', committed at txid 3
    _write(provider_url, "counts", "BIGINT", [[3, 1], [5, 2], [9, 4]])
    df = read(spark, provider_url, "wc", "trident:counts")
    assert dict(df.dtypes)["value"] == "bigint"
    # txid 4 is after the committed txid 3: the opaque cells' previous values are read
    assert sorted((json.loads(r.key), r.value, r.txid) for r in df.collect()) == [(["dog"], 5, 3), (["man"], 2, 3)]
    assert df.groupBy().sum("value").first()[0] == 7  # a number, summed by Spark without a cast

    _write(provider_url, "prices", "NUMERIC(12,2)", [[1.5, 2.25], [3.5, 4.75], [0, 0]])
    df = read(spark, provider_url, "wc", "trident:prices")
    assert dict(df.dtypes)["value"] == "decimal(12,2)"
    assert sorted(r.value for r in df.collect()) == [Decimal("3.50"), Decimal("4.75")]

    _write(provider_url, "ratios", "DOUBLE PRECISION", [[0.5, 1.5], [2.5, 3.5], [0, 0]])
    assert dict(read(spark, provider_url, "wc", "trident:ratios").dtypes)["value"] == "double"

    _write(provider_url, "docs", "JSONB", [[{"a": 1}, [1]], [{"a": 2}, [2, 3]], [0, 0]])
    df = read(spark, provider_url, "wc", "trident:docs")
    assert dict(df.dtypes)["value"] == "string"  # JSON text: the store is not typed there
    assert sorted(r.value for r in df.collect()) == ["[2,3]", '{"a":2}']


def test_the_rule_is_the_declared_type() -> None:
    assert [spark_value_type(t) for t in ("bigint", "INTEGER", "smallint", "Double  Precision", "real")] == [
        "BIGINT", "BIGINT", "BIGINT", "DOUBLE", "DOUBLE",
    ]  # fmt: skip
    assert spark_value_type("NUMERIC(12, 2)") == "DECIMAL(12,2)"
    assert spark_value_type("numeric(10)") == "DECIMAL(10,0)"
    assert [spark_value_type(t) for t in ("NUMERIC", "NUMERIC(40,2)", "TEXT", "JSONB", None)] == [None] * 5
