"""Value updaters: how ``multi_update`` turns a stored value into the new one.

A :class:`ValueUpdater` gets the stored value (``None`` for a key never written) and returns the
new value; a map state calls it at most once per key and update. ``persistent_aggregate`` with a
combiner aggregator uses :class:`CombinerValueUpdater`; with a reducer aggregator,
:class:`ReducerValueUpdater`; ``multi_put`` on an opaque map uses :class:`ReplaceUpdater`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

__all__ = [
    "CombinerValueUpdater",
    "ReducerValueUpdater",
    "ReplaceUpdater",
    "SupportsCombine",
    "SupportsReduce",
    "ValueUpdater",
]

T = TypeVar("T")


@runtime_checkable
class ValueUpdater(Protocol[T]):
    """Computes a key's new value from its stored value (Storm's ``ValueUpdater``)."""

    def update(self, stored: T | None) -> T | None:
        """Return the new value; ``stored`` is ``None`` when the key has no value yet."""
        ...


class SupportsCombine(Protocol[T]):
    """The part of a combiner aggregator a :class:`CombinerValueUpdater` uses."""

    def combine(self, val1: T, val2: T) -> T:
        """Combine two partial aggregates into one."""
        ...


class SupportsReduce(Protocol[T]):
    """The part of a reducer aggregator a :class:`ReducerValueUpdater` uses."""

    def init(self) -> T:
        """The value to start from when the key has none."""
        ...

    def reduce(self, curr: T, tuple_: Any) -> T:
        """Fold one tuple into ``curr``."""
        ...


class CombinerValueUpdater(Generic[T]):
    """Combine the stored value with ``arg``, this batch's partial aggregate for the key.

    A key with no stored value takes ``arg`` as it is (``combine`` is not called).

    Parameters
    ----------
    agg : SupportsCombine
        The combiner aggregator (anything with ``combine(val1, val2)``).
    arg : T
        The batch's partial aggregate for the key.

    Examples
    --------
    >>> class Sum:
    ...     def combine(self, a, b): return a + b
    >>> CombinerValueUpdater(Sum(), 2).update(3), CombinerValueUpdater(Sum(), 2).update(None)
    (5, 2)
    """

    __slots__ = ("agg", "arg")

    def __init__(self, agg: SupportsCombine[T], arg: T) -> None:
        self.agg = agg
        self.arg = arg

    def update(self, stored: T | None) -> T | None:
        """``arg`` if nothing is stored, else ``agg.combine(stored, arg)``."""
        if stored is None:
            return self.arg
        return self.agg.combine(stored, self.arg)

    def __repr__(self) -> str:
        return f"CombinerValueUpdater({self.agg!r}, {self.arg!r})"


class ReducerValueUpdater(Generic[T]):
    """Fold this batch's tuples for a key into the stored value (``agg.init()`` if none).

    Parameters
    ----------
    agg : SupportsReduce
        The reducer aggregator (anything with ``init()`` and ``reduce(curr, tuple)``).
    tuples : iterable
        The batch's tuples for the key, in order.
    """

    __slots__ = ("agg", "tuples")

    def __init__(self, agg: SupportsReduce[T], tuples: Iterable[Any]) -> None:
        self.agg = agg
        self.tuples = list(tuples)

    def update(self, stored: T | None) -> T | None:
        """Reduce every tuple into the stored value, starting from ``agg.init()`` if none."""
        curr = self.agg.init() if stored is None else stored
        for tup in self.tuples:
            curr = self.agg.reduce(curr, tup)
        return curr

    def __repr__(self) -> str:
        return f"ReducerValueUpdater({self.agg!r}, {len(self.tuples)} tuples)"


class ReplaceUpdater(Generic[T]):
    """Ignore the stored value and return ``value`` (what ``multi_put`` means as an update)."""

    __slots__ = ("value",)

    def __init__(self, value: T | None) -> None:
        self.value = value

    def update(self, stored: T | None) -> T | None:
        """Return ``value``."""
        return self.value

    def __repr__(self) -> str:
        return f"ReplaceUpdater({self.value!r})"
