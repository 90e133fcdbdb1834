"""Typed ``value`` columns where the store is typed: a Trident map state in a PostgreSQL table.

How it is decided: from the **declared** type of the table's ``value`` column (the map state's
``value_type``, recorded in weir's registry of map states beside the table), never from the values
read, so the DataFrame's schema is known before a row is read and is the same on every read:

=====================================================  ====================
``value_type``                                         ``value`` column
=====================================================  ====================
``BIGINT``, ``INTEGER``, ``INT``, ``SMALLINT`` (…)     ``bigint``
``DOUBLE PRECISION``, ``REAL``, ``FLOAT`` (…)          ``double``
``NUMERIC(p,s)`` / ``DECIMAL(p,s)``, ``p`` ≤ 38        ``decimal(p,s)``
anything else (``JSONB``, ``TEXT``, ``NUMERIC``, …)    JSON text (``string``)
=====================================================  ====================

Every other store (SQLite, Redis, HBase, and the Storm bolts' namespaces everywhere) keeps
serialized values, so its ``value`` column is JSON text.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

__all__ = ["spark_value_type", "typed_value"]

_INTEGER = {"BIGINT", "INT8", "INTEGER", "INT", "INT4", "SMALLINT", "INT2"}
_FLOAT = {"DOUBLE PRECISION", "FLOAT8", "REAL", "FLOAT4", "FLOAT"}
_DECIMAL = re.compile(r"^(?:NUMERIC|DECIMAL)\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)$")


def spark_value_type(value_type: object) -> str | None:
    """The Spark type (DDL) of a map state's ``value`` column, or None for JSON text."""
    if not isinstance(value_type, str):
        return None
    sql = " ".join(value_type.split()).upper()
    if sql in _INTEGER:
        return "BIGINT"
    if sql in _FLOAT:
        return "DOUBLE"
    m = _DECIMAL.match(sql)
    if m and int(m.group(1)) <= 38:
        return f"DECIMAL({int(m.group(1))},{int(m.group(2) or 0)})"
    return None


def typed_value(value: Any, spark_type: str) -> Any:
    """A value read from a typed column as the Python object Spark expects for ``spark_type``."""
    if value is None:
        return None
    if spark_type == "BIGINT":
        return int(value)
    if spark_type == "DOUBLE":
        return float(value)
    return value if isinstance(value, Decimal) else Decimal(str(value))
