"""Storm's ``Fields``, ``Values`` and ``Tuple``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

__all__ = ["DEFAULT_STREAM", "Fields", "Tuple", "Values"]

DEFAULT_STREAM = "default"


class Fields(Sequence[str]):
    """An ordered list of field names (Storm's ``Fields``)."""

    __slots__ = ("_index", "_names")

    def __init__(self, *names: str | Iterable[str]) -> None:
        flat: list[str] = []
        for n in names:
            if isinstance(n, str):
                flat.append(n)
            else:
                flat.extend(n)
        for n in flat:
            if not isinstance(n, str) or not n:
                msg = f"field names must be non-empty strings, got {n!r}"
                raise TypeError(msg)
        if len(set(flat)) != len(flat):
            msg = f"duplicate field names in {flat}"
            raise ValueError(msg)
        self._names = tuple(flat)
        self._index = {n: i for i, n in enumerate(flat)}

    def __getitem__(self, i: Any) -> Any:
        return self._names[i]

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Fields):
            return self._names == other._names
        if isinstance(other, (list, tuple)):
            return self._names == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._names)

    def __repr__(self) -> str:
        return f"Fields{self._names!r}"

    def field_index(self, name: str) -> int:
        """Position of ``name``; raises ``KeyError`` naming the known fields."""
        try:
            return self._index[name]
        except KeyError:
            msg = f"unknown field {name!r}; fields are {list(self._names)}"
            raise KeyError(msg) from None

    def to_list(self) -> list[str]:
        """The names as a list."""
        return list(self._names)

    def select(self, selector: Fields | Sequence[str], values: Sequence[Any]) -> list[Any]:
        """The values of the ``selector`` fields taken from ``values``."""
        return [values[self._index[n]] for n in selector]


class Values(list[Any]):
    """The values of a tuple to emit (Storm's ``Values``): ``Values("word", 3)``."""

    __slots__ = ()

    def __init__(self, *values: Any) -> None:
        self.extend(values)  # a new list is empty: what list.__init__ would do, at two thirds of the cost


class Tuple:
    """An input tuple of a bolt: values with field names and where they came from."""

    __slots__ = ("fields", "owner", "source_component", "source_stream_id", "source_task", "txid", "values")

    def __init__(
        self,
        values: Sequence[Any],
        fields: Fields,
        source_component: str,
        source_stream_id: str = DEFAULT_STREAM,
        source_task: int = 0,
        txid: int | None = None,
    ) -> None:
        self.values = values
        self.fields = fields
        self.source_component = source_component
        self.source_stream_id = source_stream_id
        self.source_task = source_task
        self.txid = txid
        #: the token of the collector of the task that received this tuple (0: none)
        self.owner = 0

    # Storm spellings
    def get_value(self, i: int) -> Any:
        """Value at position ``i``."""
        return self.values[i]

    def get_string(self, i: int) -> str:
        """Value at ``i`` as ``str`` (raises ``TypeError`` if it is not one)."""
        v = self.values[i]
        if not isinstance(v, str):
            msg = f"field {i} of a tuple from {self.source_component!r} is {type(v).__name__}, not str"
            raise TypeError(msg)
        return v

    def get_integer(self, i: int) -> int:
        """Value at ``i`` as ``int``."""
        v = self.values[i]
        if isinstance(v, bool) or not isinstance(v, int):
            msg = f"field {i} of a tuple from {self.source_component!r} is {type(v).__name__}, not int"
            raise TypeError(msg)
        return v

    get_long = get_integer

    def get_float(self, i: int) -> float:
        """Value at ``i`` as ``float``."""
        return float(self.values[i])

    get_double = get_float

    def get_value_by_field(self, name: str) -> Any:
        """Value of the field called ``name``."""
        return self.values[self.fields.field_index(name)]

    def get_string_by_field(self, name: str) -> str:
        """Value of field ``name`` as ``str``."""
        return self.get_string(self.fields.field_index(name))

    def get_integer_by_field(self, name: str) -> int:
        """Value of field ``name`` as ``int``."""
        return self.get_integer(self.fields.field_index(name))

    get_long_by_field = get_integer_by_field

    def get_float_by_field(self, name: str) -> float:
        """Value of field ``name`` as ``float``."""
        return self.get_float(self.fields.field_index(name))

    get_double_by_field = get_float_by_field

    def get_boolean(self, i: int) -> bool:
        """Value at ``i`` as ``bool`` (raises ``TypeError`` if it is not one)."""
        v = self.values[i]
        if not isinstance(v, bool):
            msg = f"field {i} of a tuple from {self.source_component!r} is {type(v).__name__}, not bool"
            raise TypeError(msg)
        return v

    def get_boolean_by_field(self, name: str) -> bool:
        """Value of field ``name`` as ``bool``."""
        return self.get_boolean(self.fields.field_index(name))

    def get_fields(self) -> Fields:
        """The field names."""
        return self.fields

    def get_values(self) -> list[Any]:
        """The values as a list."""
        return list(self.values)

    def contains(self, name: str) -> bool:
        """Whether the tuple has a field called ``name``."""
        return name in self.fields

    def select(self, selector: Fields | Sequence[str]) -> list[Any]:
        """Values of the ``selector`` fields."""
        return self.fields.select(selector, self.values)

    def get_source_component(self) -> str:
        """Storm's ``getSourceComponent``."""
        return self.source_component

    def get_source_stream_id(self) -> str:
        """Storm's ``getSourceStreamId``."""
        return self.source_stream_id

    def get_source_task(self) -> int:
        """Storm's ``getSourceTask``."""
        return self.source_task

    def size(self) -> int:
        """Number of values."""
        return len(self.values)

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, str):
            return self.get_value_by_field(key)
        return self.values[key]

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def __repr__(self) -> str:
        return f"Tuple({list(self.values)!r}, from={self.source_component}:{self.source_stream_id}[{self.source_task}])"
