"""Output schemas of replayable spouts: a small DDL subset and converters from broker bytes.

A spout declares its output as a Spark DDL string (``"user STRING, amount BIGINT"``) or as field
names (every field ``STRING``). Brokers hand out bytes (Redis stream fields, NATS payloads) or JSON
values; :func:`converter` turns one of those into the Python value the column's Spark type expects,
and raises ``ValueError`` with a short reason when it cannot (the spout then reports the record as
malformed, naming the stream and the entry).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from weir.errors import ConfigError

__all__ = ["CORRUPT_COLUMN", "Column", "converter", "parse_columns", "to_ddl"]

#: trailing column that carries "why this record is malformed" (``None`` when it is fine)
CORRUPT_COLUMN = "_corrupt_record"

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: DDL type name (upper case) → canonical name
_TYPES = {
    "STRING": "STRING",
    "VARCHAR": "STRING",
    "TEXT": "STRING",
    "BINARY": "BINARY",
    "BOOLEAN": "BOOLEAN",
    "BOOL": "BOOLEAN",
    "TINYINT": "TINYINT",
    "BYTE": "TINYINT",
    "SMALLINT": "SMALLINT",
    "SHORT": "SMALLINT",
    "INT": "INT",
    "INTEGER": "INT",
    "BIGINT": "BIGINT",
    "LONG": "BIGINT",
    "FLOAT": "FLOAT",
    "REAL": "FLOAT",
    "DOUBLE": "DOUBLE",
}

_INT_BITS = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}


@dataclass(frozen=True)
class Column:
    """One output column: a field name and its canonical Spark SQL type name."""

    name: str
    type: str


def parse_columns(schema: str | None, fields: Sequence[str] | None, *, where: str) -> list[Column]:
    """The columns of a spout from its DDL ``schema`` and/or its ``fields``.

    With only ``fields`` every column is ``STRING``; with both, the names must agree.

    Raises
    ------
    ConfigError
        Neither given, a bad or duplicate name, an unsupported type, or names that disagree.
    """
    if schema is None and not fields:
        msg = f"{where}: declare the output with fields=[...] or schema='name TYPE, ...'"
        raise ConfigError(msg)
    if schema is None:
        cols = [Column(_check_name(str(f), where), "STRING") for f in fields or ()]
    else:
        if not isinstance(schema, str) or not schema.strip():
            msg = f"{where}: schema must be a DDL string such as 'user STRING, amount BIGINT', got {schema!r}"
            raise ConfigError(msg)
        cols = []
        for part in schema.split(","):
            words = part.split()
            if len(words) != 2:
                msg = f"{where}: cannot read {part.strip()!r} in schema {schema!r}; expected 'name TYPE'"
                raise ConfigError(msg)
            name, typ = words[0].strip("`"), words[1].upper()
            if typ not in _TYPES:
                msg = (
                    f"{where}: column {name!r} has type {words[1]!r}, which this spout cannot produce; "
                    f"use one of {', '.join(sorted(set(_TYPES.values())))} (cast later in a bolt if needed)"
                )
                raise ConfigError(msg)
            cols.append(Column(_check_name(name, where), _TYPES[typ]))
        if fields is not None and [c.name for c in cols] != list(fields):
            msg = f"{where}: fields {list(fields)} do not match the schema's columns {[c.name for c in cols]}"
            raise ConfigError(msg)
    names = [c.name for c in cols]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        msg = f"{where}: output field(s) {dupes} declared twice"
        raise ConfigError(msg)
    if CORRUPT_COLUMN in names:
        msg = f"{where}: {CORRUPT_COLUMN!r} is reserved for malformed records; rename that field"
        raise ConfigError(msg)
    return cols


def _check_name(name: str, where: str) -> str:
    if not _NAME.match(name):
        msg = f"{where}: output field {name!r} must be a plain identifier (letters, digits, '_')"
        raise ConfigError(msg)
    return name


def to_ddl(columns: Sequence[Column], *, corrupt_column: bool = False) -> str:
    """The Spark DDL of ``columns`` (plus the trailing malformed-record column)."""
    parts = [f"`{c.name}` {c.type}" for c in columns]
    if corrupt_column:
        parts.append(f"`{CORRUPT_COLUMN}` STRING")
    return ", ".join(parts)


def converter(type_name: str) -> Callable[[Any], Any]:
    """A function turning bytes, text or a JSON value into a value of Spark type ``type_name``.

    ``None`` stays ``None`` (a missing field is a null). A value that does not fit raises
    ``ValueError`` with the reason.
    """
    if type_name == "STRING":
        return _to_str
    if type_name == "BINARY":
        return _to_bytes
    if type_name == "BOOLEAN":
        return _to_bool
    if type_name in _INT_BITS:
        bits = _INT_BITS[type_name]
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

        def to_int(v: Any) -> int | None:
            if v is None:
                return None
            if isinstance(v, bool):
                msg = f"{v!r} is a boolean, not a {type_name}"
                raise ValueError(msg)
            if isinstance(v, float):
                if not v.is_integer():
                    msg = f"{v!r} is not a whole number ({type_name})"
                    raise ValueError(msg)
                n = int(v)
            elif isinstance(v, int):
                n = v
            else:
                n = int(_text(v).strip())
            if not lo <= n <= hi:
                msg = f"{n} is out of range for {type_name}"
                raise ValueError(msg)
            return n

        return to_int
    if type_name in ("FLOAT", "DOUBLE"):
        return _to_float
    msg = f"no converter for Spark type {type_name!r}"
    raise ConfigError(msg)


def _text(v: Any) -> str:
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8")
    if isinstance(v, str):
        return v
    msg = f"{type(v).__name__} value {v!r:.80} is not text"
    raise ValueError(msg)


def _to_str(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"), sort_keys=True)
    return _text(v)


def _to_bytes(v: Any) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode("utf-8")
    msg = f"{type(v).__name__} value {v!r:.80} is not binary"
    raise ValueError(msg)


def _to_bool(v: Any) -> bool | None:
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    text = _text(v).strip().lower() if not isinstance(v, int) else str(v)
    if text in ("true", "t", "1", "yes"):
        return True
    if text in ("false", "f", "0", "no"):
        return False
    msg = f"{text!r:.80} is not a boolean (true/false/1/0)"
    raise ValueError(msg)


def _to_float(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool):
        msg = f"{v!r} is a boolean, not a number"
        raise ValueError(msg)
    if isinstance(v, (int, float)):
        return float(v)
    return float(_text(v).strip())
