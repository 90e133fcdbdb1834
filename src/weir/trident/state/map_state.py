"""Map-shaped Trident states and the backing-map SPI.

- :class:`ReadOnlyMapState` — ``multi_get`` (what a ``MapGet`` query uses);
- :class:`MapState` — adds ``multi_update`` and ``multi_put`` (what ``persistent_aggregate`` on a
  grouped stream uses); :class:`RemovableMapState` adds ``multi_remove``;
- :class:`Snapshottable` — one global value (``persistent_aggregate`` on an ungrouped stream);
- :class:`BackingMap` — what a store implements: plain ``multi_get`` / ``multi_put`` of stored
  values. :class:`~weir.trident.state.OpaqueMap` and friends add the fault-tolerance on top.

A key is the list of grouping-field values of a group (Storm's ``List<Object>``): pass lists or
tuples. Map states hand keys to a backing map as tuples (lists nested in a key become tuples), so a
backing map can use them as dict keys.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Generic, TypeAlias, TypeVar

from weir.errors import ConfigError
from weir.trident.state.base import State
from weir.trident.state.updaters import ValueUpdater

__all__ = [
    "BackingMap",
    "Key",
    "MapState",
    "ReadOnlyMapState",
    "RemovableMapState",
    "Snapshottable",
    "as_key",
    "KeyList",
    "as_keys",
]

T = TypeVar("T")
V = TypeVar("V")

Key: TypeAlias = tuple[Any, ...]
"""A normalised key: the tuple of a group's grouping-field values."""


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def as_key(key: Sequence[Any]) -> Key:
    """Return ``key`` (a list or tuple of grouping-field values) as a hashable tuple.

    Raises
    ------
    ConfigError
        If ``key`` is a string, bytes or not a sequence: a single grouping value must still be
        wrapped, e.g. ``["apple"]``, not ``"apple"``.
    """
    t = type(key)
    if (t is tuple or t is list) and len(key) == 1:  # the usual key: one grouping value
        v = key[0]
        if isinstance(v, list):
            return (_freeze(v),)
        return key if isinstance(key, tuple) else (v,)
    if isinstance(key, tuple):
        frozen = key
    elif isinstance(key, list):
        frozen = tuple(key)
    elif isinstance(key, (str, bytes, bytearray)) or not isinstance(key, Sequence):
        msg = (
            f"a map state key is a list of grouping-field values; got {key!r} "
            f"({type(key).__name__}). Wrap a single value: [{key!r}]"
        )
        raise ConfigError(msg)
    else:
        frozen = tuple(key)
    if any(isinstance(v, list) for v in frozen):
        frozen = tuple(_freeze(v) for v in frozen)
    return frozen


class KeyList(list):  # type: ignore[type-arg]
    """A list of keys :func:`as_keys` already normalised: passed on between map layers as is."""

    __slots__ = ()


def as_keys(keys: Sequence[Sequence[Any]]) -> list[Key]:
    """Normalise every key with :func:`as_key` (a :class:`KeyList` is returned unchanged).

    Raises
    ------
    ConfigError
        If ``keys`` is not a list/tuple of keys, or a key is malformed.
    """
    if type(keys) is KeyList:
        return keys
    if isinstance(keys, (str, bytes, bytearray)) or not isinstance(keys, Sequence):
        msg = f"map state keys must be a list of keys (each a list of grouping values); got {keys!r}"
        raise ConfigError(msg)
    return KeyList([as_key(k) for k in keys])


def check_same_length(keys: Sequence[Any], others: Sequence[Any], *, what: str, op: str) -> None:
    """Raise :class:`ConfigError` unless ``keys`` and ``others`` have the same length."""
    if len(keys) != len(others):
        msg = f"{op}: got {len(keys)} keys but {len(others)} {what}; pass one per key, in key order"
        raise ConfigError(msg)


def check_backing(backing: object, what: str) -> None:
    """Raise :class:`ConfigError` unless ``backing`` has callable ``multi_get`` and ``multi_put``."""
    if not (callable(getattr(backing, "multi_get", None)) and callable(getattr(backing, "multi_put", None))):
        msg = (
            f"{what} needs a backing map with multi_get(keys) and multi_put(keys, vals) "
            f"(a weir.trident.state.BackingMap); got {backing!r}"
        )
        raise ConfigError(msg)


class BackingMap(ABC, Generic[V]):
    """Bulk get/put of stored values in a store (Storm's ``IBackingMap``).

    An :class:`~weir.trident.state.OpaqueMap` stores :class:`~weir.trident.state.OpaqueValue`
    cells, a :class:`~weir.trident.state.TransactionalMap` stores
    :class:`~weir.trident.state.TransactionalValue` cells and a
    :class:`~weir.trident.state.NonTransactionalMap` stores the values themselves. Keys arrive as
    tuples without duplicates. Implementations should do each call in as few round trips as the
    store allows: the map states call ``multi_get`` and ``multi_put`` at most once per update.
    """

    @abstractmethod
    def multi_get(self, keys: Sequence[Key]) -> list[V | None]:
        """Stored value of each key, ``None`` where there is none; same length and order as ``keys``."""

    @abstractmethod
    def multi_put(self, keys: Sequence[Key], vals: Sequence[V | None]) -> None:
        """Store ``vals[i]`` under ``keys[i]`` for every *i* (``None`` is stored as a value)."""


class ReadOnlyMapState(State, Generic[T]):
    """A state that can look up values by key (Storm's ``ReadOnlyMapState``)."""

    @abstractmethod
    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[T | None]:
        """Value of each key (``None`` if absent); same length and order as ``keys``."""


class MapState(ReadOnlyMapState[T]):
    """A keyed state that Trident updates in bulk (Storm's ``MapState``)."""

    @abstractmethod
    def multi_update(self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater[T]]) -> list[T | None]:
        """Apply ``updaters[i]`` to the value of ``keys[i]``; return the new values in key order.

        A key listed twice is updated twice, the second update seeing the first one's result.
        """

    @abstractmethod
    def multi_put(self, keys: Sequence[Sequence[Any]], vals: Sequence[T | None]) -> None:
        """Set the value of ``keys[i]`` to ``vals[i]`` (for a key listed twice, the last one wins)."""


class RemovableMapState(MapState[T]):
    """A map state whose keys can be removed (Storm's ``RemovableMapState``)."""

    @abstractmethod
    def multi_remove(self, keys: Sequence[Sequence[Any]]) -> None:
        """Remove ``keys``; they read as ``None`` afterwards."""


class Snapshottable(State, Generic[T]):
    """A state holding one global value (Storm's ``Snapshottable``)."""

    @abstractmethod
    def get(self) -> T | None:
        """The value (``None`` before the first update)."""

    @abstractmethod
    def update(self, updater: ValueUpdater[T]) -> T | None:
        """Apply ``updater`` to the value and return the new value."""

    @abstractmethod
    def set(self, val: T | None) -> None:
        """Replace the value."""
