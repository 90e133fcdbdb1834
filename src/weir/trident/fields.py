"""Field lists of Trident streams: names, optional types, and the ``any`` column encoding.

A Trident stream is, inside a micro-batch, a Spark DataFrame whose columns are the stream's fields.
Fields that come from the spout, from Spark SQL (``Count``, ``Sum``, projections) or that a user
declared with a type (``"word:str"``) are typed Spark columns. A field a user function emits
without a declared type is an **any** field: a ``BINARY`` column holding a compact, deterministic
encoding of the Python value (:func:`encode_any` / :func:`decode_any`). Equal values encode to equal
bytes, so Spark can group, join and hash-partition on any-fields as on typed ones; user code only
ever sees the decoded Python values. Declare a type where you can: typed fields skip the encoding
and let ``Sum`` run in Spark SQL.

Field specs accepted wherever Trident takes fields: ``"word"``, ``"word, count"``, ``["word",
"count:int"]``, ``("a", "b")``, :class:`weir.topology.Fields`, or ``{"word": "str"}``. Type names
are Python's (``str``, ``int``, ``float``, ``bool``, ``bytes`` — ``int`` is 64-bit, ``float`` is a
double) or Spark SQL's (``string``, ``bigint``/``long``, ``integer``, ``double``, ``boolean``,
``binary``, ``date``, ``timestamp``), or ``any``; a :class:`pyspark.sql.types.DataType` works too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from weir import datacodec as _data
from weir.errors import TopologyError

__all__ = [
    "FieldSpec",
    "StreamSchema",
    "decode_any",
    "encode_any",
    "parse_fields",
    "parse_type",
]


def _spark_types() -> Any:
    from pyspark.sql import types as T  # noqa: N812

    return T


_TYPE_NAMES: dict[str, str] = {
    "str": "StringType",
    "string": "StringType",
    "int": "LongType",
    "long": "LongType",
    "bigint": "LongType",
    "integer": "IntegerType",
    "int32": "IntegerType",
    "smallint": "ShortType",
    "short": "ShortType",
    "tinyint": "ByteType",
    "byte": "ByteType",
    "float": "DoubleType",
    "double": "DoubleType",
    "float32": "FloatType",
    "real": "FloatType",
    "bool": "BooleanType",
    "boolean": "BooleanType",
    "bytes": "BinaryType",
    "binary": "BinaryType",
    "date": "DateType",
    "timestamp": "TimestampType",
}


def parse_type(spec: Any, *, field: str = "?") -> Any:
    """A Spark ``DataType`` for a type spec, or ``None`` for ``any`` / no type.

    Raises
    ------
    TopologyError
        If ``spec`` names no known type.
    """
    if spec is None:
        return None
    T = _spark_types()  # noqa: N806
    if isinstance(spec, T.DataType):
        return spec
    if isinstance(spec, type) and issubclass(spec, T.DataType):
        return spec()
    if isinstance(spec, type):
        by_py = {str: "StringType", int: "LongType", float: "DoubleType", bool: "BooleanType", bytes: "BinaryType"}
        if spec in by_py:
            return getattr(T, by_py[spec])()
    if isinstance(spec, str):
        norm = spec.strip().lower()
        if norm in ("", "any", "object"):
            return None
        if norm in _TYPE_NAMES:
            return getattr(T, _TYPE_NAMES[norm])()
    known = ", ".join(sorted({*_TYPE_NAMES, "any"}))
    msg = f"field {field!r}: unknown type {spec!r}; use one of {known}, or a pyspark DataType"
    raise TopologyError(msg)


@dataclass(frozen=True)
class FieldSpec:
    """One field: its name and its Spark type (``None`` = an any-field)."""

    name: str
    dtype: Any = None

    @property
    def is_any(self) -> bool:
        """Whether the field is stored with the any-encoding."""
        return self.dtype is None

    def spark_type(self) -> Any:
        """The Spark column type (``BINARY`` for an any-field)."""
        return _spark_types().BinaryType() if self.dtype is None else self.dtype

    def type_name(self) -> str:
        """``any`` or the Spark type's simple string."""
        return "any" if self.dtype is None else str(self.dtype.simpleString())


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        msg = f"field names must be non-empty strings, got {name!r}"
        raise TopologyError(msg)
    name = name.strip()
    if name.startswith("_weir") or "`" in name or "." in name:
        msg = f"field name {name!r} is reserved or unsafe (no '.', no backquote, no '_weir' prefix)"
        raise TopologyError(msg)
    return str(name)


def _one(item: Any) -> FieldSpec:
    if isinstance(item, FieldSpec):
        return item
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        name = _check_name(item[0])
        return FieldSpec(name, parse_type(item[1], field=name))
    if not isinstance(item, str):
        msg = f"a field is a name like 'word' or 'word:str', got {item!r}"
        raise TopologyError(msg)
    name, sep, typ = item.partition(":")
    name = _check_name(name)
    return FieldSpec(name, parse_type(typ, field=name) if sep else None)


def parse_fields(spec: Any, *, what: str = "fields", allow_empty: bool = False) -> tuple[FieldSpec, ...]:
    """Normalise a field spec (see the module docstring) to a tuple of :class:`FieldSpec`.

    Raises
    ------
    TopologyError
        On a malformed spec, an unknown type or a duplicate name.
    """
    items: list[Any]
    if spec is None:
        items = []
    elif isinstance(spec, str):
        items = [s for s in (p.strip() for p in spec.split(",")) if s]
    elif isinstance(spec, Mapping):
        items = [(k, v) for k, v in spec.items()]
    elif isinstance(spec, StreamSchema):
        items = list(spec.fields)
    elif isinstance(spec, Iterable):
        items = list(spec)
    else:
        msg = f"{what}: expected field names (a list like ['word', 'count:int']), got {spec!r}"
        raise TopologyError(msg)
    out = tuple(_one(i) for i in items)
    names = [f.name for f in out]
    if len(set(names)) != len(names):
        msg = f"{what}: duplicate field names in {names}"
        raise TopologyError(msg)
    if not out and not allow_empty:
        msg = f"{what}: at least one field is needed"
        raise TopologyError(msg)
    return out


def field_names(spec: Any, *, what: str = "fields", allow_empty: bool = False) -> list[str]:
    """Just the names of a field spec (types, if given, are ignored)."""
    return [f.name for f in parse_fields(spec, what=what, allow_empty=allow_empty)]


@dataclass(frozen=True)
class StreamSchema:
    """The ordered fields of a stream."""

    fields: tuple[FieldSpec, ...]

    @property
    def names(self) -> list[str]:
        """The field names, in order."""
        return [f.name for f in self.fields]

    def __contains__(self, name: object) -> bool:
        return any(f.name == name for f in self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    def get(self, name: str, *, what: str) -> FieldSpec:
        """The field called ``name``; raises :class:`TopologyError` naming the stream's fields."""
        for f in self.fields:
            if f.name == name:
                return f
        msg = f"{what}: unknown field {name!r}; the stream's fields are {self.names}"
        raise TopologyError(msg)

    def select(self, names: Sequence[str], *, what: str) -> StreamSchema:
        """The schema of ``names`` (each must exist)."""
        return StreamSchema(tuple(self.get(n, what=what) for n in names))

    def plus(self, extra: Sequence[FieldSpec], *, what: str) -> StreamSchema:
        """The schema followed by ``extra`` (names must be new)."""
        for f in extra:
            if f.name in self:
                msg = (
                    f"{what}: output field {f.name!r} already exists in the stream {self.names}; "
                    "choose another name (or project() it away first)"
                )
                raise TopologyError(msg)
        return StreamSchema(tuple(self.fields) + tuple(extra))

    def spark_schema(self) -> Any:
        """The Spark ``StructType`` of the stream's DataFrame."""
        T = _spark_types()  # noqa: N806
        return T.StructType([T.StructField(f.name, f.spark_type(), True) for f in self.fields])

    def describe(self) -> str:
        """``[word:string, n:any]``."""
        return "[" + ", ".join(f"{f.name}:{f.type_name()}" for f in self.fields) + "]"


# ---- the any-field encoding -----------------------------------------------------------------
def encode_any(value: Any) -> bytes | None:
    """Encode a Python value for an any-field; ``None`` stays ``None`` (a SQL null).

    Plain data (strings, numbers, bools, bytes, dates, tuples/lists/dicts/sets of them) gets
    :mod:`weir.datacodec`'s canonical form (equal values, equal bytes); anything else is pickled. Any-field
    columns only carry values this topology's own functions emitted, within one batch; nothing weir
    stores uses this pickle fallback (see :func:`weir.datacodec.decode`).

    Raises
    ------
    SerializationError
        If the value cannot be pickled.
    """
    if value is None:
        return None
    return _data.encode(value, allow_pickle=True, what="a Trident field")


def decode_any(data: bytes | bytearray | memoryview | None) -> Any:
    """Decode what :func:`encode_any` produced (``None`` stays ``None``)."""
    if data is None:
        return None
    return _data.decode(data, allow_pickle=True, what="a Trident field")
