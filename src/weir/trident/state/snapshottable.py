""":class:`SnapshottableMap`: a map state that also holds one global value under a fixed key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from weir.errors import ConfigError
from weir.trident.state.base import StateType
from weir.trident.state.map_state import Key, MapState, Snapshottable, as_key
from weir.trident.state.updaters import ValueUpdater

__all__ = ["SnapshottableMap"]

T = TypeVar("T")


class SnapshottableMap(MapState[T], Snapshottable[T], Generic[T]):
    """Turn a :class:`~weir.trident.state.MapState` into a :class:`~weir.trident.state.Snapshottable`.

    The global value (``persistent_aggregate`` on an ungrouped stream) lives under ``global_key``
    in the delegate, so it gets the delegate's fault-tolerance (opaque, transactional, …). Every
    map operation and ``begin_commit`` / ``commit`` go to the delegate unchanged.

    Parameters
    ----------
    delegate : MapState
        The map state to store into, e.g. ``OpaqueMap.build(backing)``.
    global_key : list, tuple or str
        The key of the global value; a string stands for the one-element key ``[string]``.

    Examples
    --------
    >>> from weir.trident.state import MemoryBackingMap, OpaqueMap
    >>> total = SnapshottableMap(OpaqueMap.build(MemoryBackingMap()), "$total")
    >>> total.begin_commit(1); total.set(10); total.commit(1)
    >>> total.get()
    10
    """

    def __init__(self, delegate: MapState[T], global_key: Sequence[Any] | str) -> None:
        if not isinstance(delegate, MapState):
            msg = f"SnapshottableMap needs a weir.trident.state.MapState as delegate; got {delegate!r}"
            raise ConfigError(msg)
        self.delegate = delegate
        self.global_key: Key = (global_key,) if isinstance(global_key, str) else as_key(global_key)
        self._keys = [self.global_key]

    @property
    def state_type(self) -> StateType | None:
        """The delegate's state type (``None`` if it does not declare one)."""
        found = getattr(self.delegate, "state_type", None)
        return found if isinstance(found, StateType) else None

    def begin_commit(self, txid: int | None) -> None:
        """Delegate ``begin_commit``."""
        self.delegate.begin_commit(txid)

    def commit(self, txid: int | None) -> None:
        """Delegate ``commit``."""
        self.delegate.commit(txid)

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[T | None]:
        """Delegate ``multi_get``."""
        return self.delegate.multi_get(keys)

    def multi_update(self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater[T]]) -> list[T | None]:
        """Delegate ``multi_update``."""
        return self.delegate.multi_update(keys, updaters)

    def multi_put(self, keys: Sequence[Sequence[Any]], vals: Sequence[T | None]) -> None:
        """Delegate ``multi_put``."""
        self.delegate.multi_put(keys, vals)

    def get(self) -> T | None:
        """The global value."""
        return self.delegate.multi_get(self._keys)[0]

    def update(self, updater: ValueUpdater[T]) -> T | None:
        """Update the global value and return the new one."""
        return self.delegate.multi_update(self._keys, [updater])[0]

    def set(self, val: T | None) -> None:
        """Replace the global value."""
        self.delegate.multi_put(self._keys, [val])

    def __repr__(self) -> str:
        return f"SnapshottableMap({self.delegate!r}, {self.global_key!r})"
