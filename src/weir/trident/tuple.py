"""Trident tuples and the collector user operations emit to.

A :class:`TridentTuple` is a Python ``tuple`` of values that also knows its field names:
``t[0]``, ``t["word"]``, ``t.get_string(0)`` and ``t.get_value_by_field("word")`` all work. An
operation sees only its input fields (``each(["line"], Split(), ["word"])`` hands ``Split`` a
one-field tuple), as in Storm.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from weir.errors import TopologyError
from weir.topology.tuple import Fields

__all__ = ["TridentCollector", "TridentTuple", "make_tuple", "tuple_class"]

log = logging.getLogger("weir.trident")


class TridentTuple(tuple[Any, ...]):
    """The values of one tuple, readable by position or by field name."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _index: dict[str, int] = {}  # noqa: RUF012 - set per subclass by tuple_class

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self.field_index(key))
        return tuple.__getitem__(self, key)

    def __reduce__(self) -> tuple[Any, ...]:
        return (make_tuple, (self._fields, tuple(self)))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={v!r}" for n, v in zip(self._fields, self, strict=False))
        return f"TridentTuple({inner})"

    # -- Storm spellings ----------------------------------------------------------------------
    def field_index(self, name: str) -> int:
        """Position of field ``name``; raises ``KeyError`` naming the tuple's fields."""
        try:
            return self._index[name]
        except KeyError:
            msg = f"unknown field {name!r}; this tuple's fields are {list(self._fields)}"
            raise KeyError(msg) from None

    def get_fields(self) -> Fields:
        """The field names."""
        return Fields(list(self._fields))

    def get_values(self) -> list[Any]:
        """The values as a list."""
        return list(self)

    def size(self) -> int:
        """Number of values."""
        return len(self)

    def contains(self, name: str) -> bool:
        """Whether the tuple has a field called ``name``."""
        return name in self._index

    def get_value(self, i: int) -> Any:
        """Value at position ``i``."""
        return tuple.__getitem__(self, i)

    def get_value_by_field(self, name: str) -> Any:
        """Value of the field called ``name``."""
        return tuple.__getitem__(self, self.field_index(name))

    def _typed(self, i: int, kind: type | tuple[type, ...], what: str) -> Any:
        v = tuple.__getitem__(self, i)
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            name = self._fields[i] if i < len(self._fields) else i
            msg = f"field {name!r} is {type(v).__name__} ({v!r:.60}), not {what}"
            raise TypeError(msg)
        return v

    def get_string(self, i: int) -> str:
        """Value at ``i`` as ``str`` (``TypeError`` if it is not one)."""
        return str(self._typed(i, str, "str"))

    def get_integer(self, i: int) -> int:
        """Value at ``i`` as ``int``."""
        return int(self._typed(i, int, "int"))

    get_long = get_integer

    def get_float(self, i: int) -> float:
        """Value at ``i`` as ``float`` (ints are converted)."""
        return float(self._typed(i, (int, float), "a number"))

    get_double = get_float

    def get_boolean(self, i: int) -> bool:
        """Value at ``i`` as ``bool``."""
        return bool(self._typed(i, bool, "bool"))

    def get_string_by_field(self, name: str) -> str:
        """Value of field ``name`` as ``str``."""
        return self.get_string(self.field_index(name))

    def get_integer_by_field(self, name: str) -> int:
        """Value of field ``name`` as ``int``."""
        return self.get_integer(self.field_index(name))

    get_long_by_field = get_integer_by_field

    def get_float_by_field(self, name: str) -> float:
        """Value of field ``name`` as ``float``."""
        return self.get_float(self.field_index(name))

    get_double_by_field = get_float_by_field

    def select(self, names: Iterable[str]) -> list[Any]:
        """Values of the named fields."""
        return [tuple.__getitem__(self, self.field_index(n)) for n in names]


@lru_cache(maxsize=512)
def tuple_class(fields: tuple[str, ...]) -> type[TridentTuple]:
    """The :class:`TridentTuple` subclass for ``fields`` (cached)."""
    return type(
        "TridentTuple",
        (TridentTuple,),
        {"__slots__": (), "_fields": fields, "_index": {n: i for i, n in enumerate(fields)}},
    )


def make_tuple(fields: Sequence[str], values: Iterable[Any]) -> TridentTuple:
    """A tuple of ``values`` with field names ``fields``."""
    return tuple_class(tuple(fields))(values)


class TridentCollector:
    """Where an operation emits its output tuples (Storm's ``TridentCollector``).

    ``emit(values)`` takes a list or tuple with one value per output field; with a single output
    field, a bare value that is not a list or tuple is accepted too.
    """

    __slots__ = ("_n", "_what", "errors", "out")

    def __init__(self, n_fields: int, what: str) -> None:
        self._n = n_fields
        self._what = what
        self.out: list[tuple[Any, ...]] = []
        self.errors: list[BaseException] = []

    def emit(self, values: Any) -> None:
        """Emit one tuple."""
        if isinstance(values, (list, tuple)):
            vals = tuple(values)
        elif self._n == 1:
            vals = (values,)
        else:
            msg = f"{self._what}: emit() needs a list of {self._n} values, got {values!r:.100}"
            raise TopologyError(msg)
        if len(vals) != self._n:
            msg = (
                f"{self._what}: emitted {len(vals)} values {vals!r:.100} but declared {self._n} output "
                "field(s); emit one value per declared field"
            )
            raise TopologyError(msg)
        self.out.append(vals)

    def report_error(self, error: BaseException) -> None:
        """Report an error without failing the batch (it is logged)."""
        self.errors.append(error)
        log.warning("%s reported an error: %r", self._what, error)

    def take(self) -> list[tuple[Any, ...]]:
        """The tuples emitted since the last ``take`` (and forget them)."""
        out, self.out = self.out, []
        return out


class SingleFieldCollector(TridentCollector):
    """A :class:`TridentCollector` for one output field that keeps the bare values.

    ``emit`` accepts the same arguments, but :attr:`out` holds each emitted tuple's one value
    rather than a 1-tuple: the runtime builds the output column straight from it.
    """

    __slots__ = ()

    def __init__(self, what: str) -> None:
        super().__init__(1, what)

    def emit(self, values: Any) -> None:
        """Emit one tuple (``[value]``, ``(value,)`` or a bare value)."""
        t = type(values)
        if t is list or t is tuple or isinstance(values, (list, tuple)):
            if len(values) != 1:
                super().emit(values)  # raises the declared-fields error
            self.out.append(values[0])
        else:
            self.out.append(values)
