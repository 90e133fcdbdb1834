"""What every store shares: the store SPI, the picklable factory and the three constructors.

:class:`MapStore` is the SPI, :class:`MapStateFactory` the picklable factory, and
:class:`MapStateFamily` offers ``opaque`` / ``transactional`` / ``non_transactional``.

A factory made on the driver, e.g. ``SqliteMapState.opaque("sqlite:///counts.db", table="words")``,
holds only options (a :class:`MapStore` and a few numbers), so it pickles to Spark executors. There
``make_state(conf, partition_index, num_partitions)`` builds the map state of the factory's type over
the store's backing map — optionally behind a :class:`~weir.trident.state.CachedMap` — and the
backing map opens its connection on first use, once per process.

The states it makes are the map states of :mod:`weir.trident.state` (``isinstance(s, OpaqueMap)``
holds) that are also :class:`~weir.trident.state.Snapshottable`: like Storm's ``MemcachedState``
(which wraps its map in a ``SnapshottableMap``) a global aggregation keeps its one value under
``global_key``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from weir._util import positive_int
from weir.errors import ConfigError, StateError
from weir.trident.state import (
    BackingMap,
    CachedMap,
    Key,
    MapState,
    NonTransactionalMap,
    OpaqueMap,
    Snapshottable,
    StateFactory,
    StateType,
    TransactionalMap,
    ValueUpdater,
    as_key,
)
from weir.trident.state.base import check_partition

__all__ = [
    "DEFAULT_GLOBAL_KEY",
    "MapStateFactory",
    "MapStateFamily",
    "MapStore",
    "SnapshottableNonTransactionalMap",
    "SnapshottableOpaqueMap",
    "SnapshottableTransactionalMap",
]

T = TypeVar("T")

DEFAULT_GLOBAL_KEY: Key = ("$__GLOBAL_KEY__$",)
"""Key of the global value of a snapshottable map state (Storm's ``MemcachedState`` default)."""


class MapStore(ABC):
    """Where the cells of one Trident map state live: a table, a key prefix, … (picklable options).

    Subclasses are frozen dataclasses; they never hold an open connection.
    """

    kind: ClassVar[str] = "store"

    @abstractmethod
    def backing_map(self, state_type: StateType) -> BackingMap[Any]:
        """A backing map storing cells of ``state_type`` (connects lazily, on first use)."""

    @abstractmethod
    def validate(self, state_type: StateType) -> None:
        """Connect now and create the table (where there is one).

        Raises
        ------
        ConfigError
            When the store cannot be reached or used; the message names the store and the fix.
        """

    def catalog_name(self) -> str | None:
        """The name ``weir state`` lists this map state by (``trident:<name>``); None when it has none."""
        return None

    @abstractmethod
    def describe(self) -> str:
        """Where the data lives, without credentials."""

    #: whether :meth:`delete_expired` is implemented (the TTL sweep of ``weir.state.ttl.ms``)
    sweeps_expired: ClassVar[bool] = False

    def with_expiry_index(self) -> MapStore:
        """The same store, writing whatever :meth:`delete_expired` needs to find cells by txid (default: itself)."""
        return self

    def prepare_expiry(self, state_type: StateType) -> None:  # noqa: B027 - optional hook
        """Create what finds cells by their txid (an index), once; the default needs none."""

    def delete_expired(self, state_type: StateType, upto: int, limit: int, *, txid: int) -> tuple[int, bool]:
        """Delete up to ``limit`` cells whose stored txid is at or below ``upto``; ``(deleted, more left)``.

        Each delete is conditional on the cell's txid at the moment of the delete, so a cell rewritten
        since (a txid above ``upto``) is never deleted, and running it again deletes nothing new.
        ``txid`` is the committing batch (stores that keep a sweep mark record it).

        Raises
        ------
        StateError
            The store cannot sweep (see :attr:`sweeps_expired`) or the delete failed.
        """
        msg = f"the Trident map state {self.describe()} has no TTL sweep (weir sweeps SQLite, Redis and PostgreSQL)"
        raise StateError(msg)


class _GlobalValue(Snapshottable[T]):
    """``get`` / ``update`` / ``set`` of one value under :attr:`global_key` of a map state."""

    global_key: Key

    def get(self) -> T | None:
        """The global value."""
        return self.multi_get([self.global_key])[0]  # type: ignore[attr-defined,no-any-return]

    def update(self, updater: ValueUpdater[T]) -> T | None:
        """Update the global value and return the new one."""
        return self.multi_update([self.global_key], [updater])[0]  # type: ignore[attr-defined,no-any-return]

    def set(self, val: T | None) -> None:
        """Replace the global value."""
        self.multi_put([self.global_key], [val])  # type: ignore[attr-defined]


class SnapshottableOpaqueMap(OpaqueMap[T], _GlobalValue[T]):
    """An :class:`~weir.trident.state.OpaqueMap` that is also a snapshottable (value at ``global_key``)."""

    def __init__(self, backing: BackingMap[Any], global_key: Sequence[Any] = DEFAULT_GLOBAL_KEY) -> None:
        super().__init__(backing)
        self.global_key = as_key(global_key)

    def __repr__(self) -> str:
        return f"SnapshottableOpaqueMap({self.backing!r})"


class SnapshottableTransactionalMap(TransactionalMap[T], _GlobalValue[T]):
    """A :class:`~weir.trident.state.TransactionalMap` that is also a snapshottable."""

    def __init__(self, backing: BackingMap[Any], global_key: Sequence[Any] = DEFAULT_GLOBAL_KEY) -> None:
        super().__init__(backing)
        self.global_key = as_key(global_key)

    def __repr__(self) -> str:
        return f"SnapshottableTransactionalMap({self.backing!r})"


class SnapshottableNonTransactionalMap(NonTransactionalMap[T], _GlobalValue[T]):
    """A :class:`~weir.trident.state.NonTransactionalMap` that is also a snapshottable."""

    def __init__(self, backing: BackingMap[Any], global_key: Sequence[Any] = DEFAULT_GLOBAL_KEY) -> None:
        super().__init__(backing)
        self.global_key = as_key(global_key)

    def __repr__(self) -> str:
        return f"SnapshottableNonTransactionalMap({self.backing!r})"


_MAP_CLASSES: dict[StateType, type[Any]] = {
    StateType.OPAQUE: SnapshottableOpaqueMap,
    StateType.TRANSACTIONAL: SnapshottableTransactionalMap,
    StateType.NON_TRANSACTIONAL: SnapshottableNonTransactionalMap,
}


def _check_cache_size(cache_size: object) -> int | None:
    if cache_size is None:
        return None
    return positive_int(cache_size, "cache_size", minimum=0, expected="None, 0 (no cache) or a positive int") or None


@dataclass(frozen=True)
class MapStateFactory(StateFactory):
    """A picklable Trident :class:`~weir.trident.state.StateFactory` of map states over a store.

    Parameters
    ----------
    store : MapStore
        Where the cells live (options only; connections are opened per process, on first use).
    state_type : StateType
        Opaque, transactional or non-transactional: which map state :meth:`make_state` builds.
    cache_size : int or None
        When set, the backing map is wrapped in a :class:`~weir.trident.state.CachedMap` of that
        many keys. The cache belongs to the state object :meth:`make_state` returns (a fresh one per
        call), so it never serves a value another process wrote since.
    global_key : tuple
        Key of the global value (``get`` / ``update`` / ``set`` of a snapshottable state).
    """

    #: every partition's map reaches every key of the store (one table / keyspace)
    shared_keyspace: ClassVar[bool] = True

    store: MapStore
    state_type: StateType  # type: ignore[assignment]
    cache_size: int | None = None
    global_key: Key = field(default=DEFAULT_GLOBAL_KEY)

    def __post_init__(self) -> None:
        if not isinstance(self.store, MapStore):
            msg = f"MapStateFactory needs a weir.trident.backing.MapStore, got {self.store!r}"
            raise ConfigError(msg)
        object.__setattr__(self, "state_type", StateType.parse(self.state_type))
        object.__setattr__(self, "cache_size", _check_cache_size(self.cache_size))
        object.__setattr__(self, "global_key", as_key(self.global_key))

    def backing_map(self) -> BackingMap[Any]:
        """The backing map of a new state: the store's, behind a cache if ``cache_size`` is set."""
        backing = self.store.backing_map(self.state_type)
        if self.cache_size:
            return CachedMap(backing, self.cache_size)
        return backing

    def make_state(self, conf: Mapping[str, Any], partition_index: int, num_partitions: int) -> MapState[Any]:
        """The map state of partition ``partition_index``; every partition shares the store.

        Keys are spread over partitions by Trident (by a stable hash of the grouping values), so
        partitions write disjoint keys and may run at the same time in different processes.

        Returns
        -------
        MapState
            A :class:`SnapshottableOpaqueMap`, :class:`SnapshottableTransactionalMap` or
            :class:`SnapshottableNonTransactionalMap` (subclasses of ``OpaqueMap`` … that are also
            ``Snapshottable``).
        """
        check_partition(partition_index, num_partitions, what=f"{self.store.describe()}")
        state: MapState[Any] = _MAP_CLASSES[self.state_type](self.backing_map(), self.global_key)
        return state

    def validate(self) -> MapStateFactory:
        """Connect to the store now and create its table if needed; return ``self``.

        Raises
        ------
        ConfigError
            If the store is unreachable or unusable (the message names it and says what to do).
        """
        self.store.validate(self.state_type)
        return self

    def describe(self) -> str:
        """``<state type> map state in <store>``."""
        return f"{self.state_type.value} map state in {self.store.describe()}"

    def __repr__(self) -> str:
        cache = f", cache_size={self.cache_size}" if self.cache_size else ""
        return f"MapStateFactory({self.store!r}, {self.state_type.name}{cache})"


class MapStateFamily(ABC):
    """The ``opaque`` / ``transactional`` / ``non_transactional`` constructors of one store.

    Subclasses implement :meth:`store` (their own parameters); everything else is shared:

    ``cache_size`` (default none) puts a :class:`~weir.trident.state.CachedMap` of that many keys
    in front of the store; ``global_key`` is where a global aggregation keeps its value;
    ``check=True`` (the default) connects right away and creates the table, so a bad URL, an
    unreachable server or a bad identifier raises :class:`~weir.errors.ConfigError` on the driver
    when the topology is built, not in an executor.
    """

    @classmethod
    @abstractmethod
    def store(cls, *args: Any, **kwargs: Any) -> MapStore:
        """The store described by the store-specific arguments (validated, not connected)."""

    @classmethod
    def factory(
        cls,
        state_type: StateType | str,
        *args: Any,
        cache_size: int | None = None,
        global_key: Sequence[Any] = DEFAULT_GLOBAL_KEY,
        check: bool = True,
        **kwargs: Any,
    ) -> MapStateFactory:
        """A :class:`MapStateFactory` of ``state_type`` over :meth:`store` ``(*args, **kwargs)``."""
        made: MapStateFactory = MapStateFactory(
            cls.store(*args, **kwargs), StateType.parse(state_type), cache_size, as_key(global_key)
        )
        if check:
            made.validate()
        return made

    @classmethod
    def opaque(cls, *args: Any, **kwargs: Any) -> MapStateFactory:
        """Factory of opaque-transactional map states (cells ``[txid, curr, prev]``); see :meth:`store`."""
        return cls.factory(StateType.OPAQUE, *args, **kwargs)

    @classmethod
    def transactional(cls, *args: Any, **kwargs: Any) -> MapStateFactory:
        """Factory of transactional map states (cells ``[txid, val]``); see :meth:`store`."""
        return cls.factory(StateType.TRANSACTIONAL, *args, **kwargs)

    @classmethod
    def non_transactional(cls, *args: Any, **kwargs: Any) -> MapStateFactory:
        """Factory of non-transactional map states (plain values); see :meth:`store`."""
        return cls.factory(StateType.NON_TRANSACTIONAL, *args, **kwargs)
