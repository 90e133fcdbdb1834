"""Column-at-a-time Arrow conversion of raw broker values (bytes), for the spouts' read paths.

A spout that receives a page of entries builds one Arrow array per output column instead of a
tuple per record: text columns are checked for UTF-8 by Arrow itself, typed columns go through the
same converters as the per-record path. When any value does not convert, the caller falls back
to its per-record conversion, which marks exactly the malformed records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

__all__ = ["ARROW_TYPES", "Unconvertible", "arrow_column", "record_batch"]

ARROW_TYPES = {
    "STRING": pa.string(),
    "BINARY": pa.binary(),
    "BOOLEAN": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
}

#: what a value that does not fit its column raises (the caller then converts record by record)
Unconvertible = (ValueError, UnicodeDecodeError, TypeError, OverflowError, pa.ArrowInvalid, pa.ArrowTypeError)


def arrow_column(values: Sequence[bytes | None], type_name: str, conv: Callable[[Any], Any]) -> pa.Array:
    """The Arrow array of raw ``values`` (``bytes`` or ``None``) for a column of Spark type ``type_name``.

    ``STRING`` and ``BINARY`` are built by Arrow from the bytes directly (UTF-8 is validated);
    other types use ``conv`` (the column's :func:`~weir.sources.schema.converter`).

    Raises
    ------
    ValueError, UnicodeDecodeError, pyarrow.ArrowInvalid
        When a value does not convert (see :data:`Unconvertible`).
    """
    if type_name == "STRING":
        return pa.array(values, pa.binary()).cast(pa.string())
    if type_name == "BINARY":
        return pa.array(values, pa.binary())
    return pa.array([conv(v) for v in values], ARROW_TYPES[type_name])


def record_batch(arrays: list[pa.Array], names: list[str], n: int) -> pa.RecordBatch:
    """A record batch of ``arrays`` plus an all-null malformed-record column (the last of ``names``)."""
    return pa.RecordBatch.from_arrays([*arrays, pa.nulls(n, pa.string())], names=names)
