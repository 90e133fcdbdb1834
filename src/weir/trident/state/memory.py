"""In-memory map state for tests and driver-local runs: :class:`MemoryBackingMap`, :class:`MemoryMapState`.

Data lives in a module-level store, one dict per ``(state id, partition)``, so a state made again
by the same :class:`MemoryMapState.Factory` in the same process sees what earlier ones wrote, as a
real store would. Nothing survives the process and nothing is shared between processes: Spark
executors each have their own copy, so use it in local mode only.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from weir.errors import ConfigError
from weir.trident.state.base import StateFactory, StateType, check_partition
from weir.trident.state.map_state import (
    BackingMap,
    Key,
    MapState,
    RemovableMapState,
    Snapshottable,
    as_keys,
)
from weir.trident.state.maps import NonTransactionalMap, OpaqueMap, TransactionalMap
from weir.trident.state.snapshottable import SnapshottableMap
from weir.trident.state.updaters import ValueUpdater
from weir.trident.state.values import current_value

__all__ = ["MemoryBackingMap", "MemoryMapState"]

T = TypeVar("T")


@dataclass
class _MemoryDb:
    """One partition's data, plus the removals of the latest batch attempt (see multi_remove)."""

    data: dict[Key, Any] = field(default_factory=dict)
    removed: list[Key] = field(default_factory=list)
    removed_txid: int | None = None


_DBS: dict[tuple[str, int], _MemoryDb] = {}
_DBS_LOCK = threading.Lock()


def _db(state_id: str, partition: int) -> _MemoryDb:
    with _DBS_LOCK:
        db = _DBS.get((state_id, partition))
        if db is None:
            db = _DBS[(state_id, partition)] = _MemoryDb()
        return db


class MemoryBackingMap(BackingMap[Any]):
    """A backing map over a dict (a fresh one unless ``data`` is given).

    Parameters
    ----------
    data : dict, optional
        The dict to read and write; keys are tuples of grouping values.
    """

    def __init__(self, data: dict[Key, Any] | None = None) -> None:
        self.data: dict[Key, Any] = {} if data is None else data

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        """Stored values (``None`` where absent)."""
        data = self.data
        return [data.get(k) for k in as_keys(keys)]

    def multi_put(self, keys: Sequence[Key], vals: Sequence[Any]) -> None:
        """Store values."""
        ks = as_keys(keys)
        if len(ks) != len(vals):
            msg = f"MemoryBackingMap.multi_put: got {len(ks)} keys but {len(vals)} values"
            raise ConfigError(msg)
        self.data.update(zip(ks, vals, strict=True))

    def multi_remove(self, keys: Sequence[Key]) -> None:
        """Delete keys (absent keys are ignored)."""
        for key in as_keys(keys):
            self.data.pop(key, None)

    def __len__(self) -> int:
        """Number of stored keys."""
        return len(self.data)

    def __repr__(self) -> str:
        return f"MemoryBackingMap({len(self.data)} keys)"


_BUILDERS: dict[StateType, Callable[[BackingMap[Any]], MapState[Any]]] = {
    StateType.OPAQUE: OpaqueMap.build,
    StateType.TRANSACTIONAL: TransactionalMap.build,
    StateType.NON_TRANSACTIONAL: NonTransactionalMap.build,
}


class MemoryMapState(RemovableMapState[T], Snapshottable[T], Generic[T]):
    """Storm's ``MemoryMapState``: an in-memory map state that is also a snapshottable.

    The partition's dict is wrapped by the map of ``state_type`` (:class:`OpaqueMap` by default,
    :class:`TransactionalMap` or :class:`NonTransactionalMap`) and a :class:`SnapshottableMap`
    whose global key is :attr:`GLOBAL_KEY`.

    Parameters
    ----------
    state_id : str
        Identity of the state; states with the same id and partition share their data.
    partition : int
        Partition index.
    state_type : StateType or str
        Fault-tolerance level (default opaque).

    Examples
    --------
    >>> factory = MemoryMapState.Factory()
    >>> s = factory.make_state({}, 0, 1)
    >>> s.begin_commit(1); s.multi_put([["a"]], [5]); s.commit(1)
    >>> factory.make_state({}, 0, 1).multi_get([["a"], ["b"]])
    [5, None]
    """

    GLOBAL_KEY: Key = ("$MEMORY-MAP-STATE-GLOBAL$",)

    def __init__(self, state_id: str, partition: int = 0, state_type: StateType | str = StateType.OPAQUE) -> None:
        if not isinstance(state_id, str) or not state_id:
            msg = f"MemoryMapState needs a non-empty string id, got {state_id!r}"
            raise ConfigError(msg)
        self.state_id = state_id
        self.partition = partition
        self.state_type = StateType.parse(state_type)
        self._db = _db(state_id, partition)
        self.backing = MemoryBackingMap(self._db.data)
        self._map = _BUILDERS[self.state_type](self.backing)
        self._delegate: SnapshottableMap[T] = SnapshottableMap(self._map, self.GLOBAL_KEY)

    @staticmethod
    def clear_all() -> None:
        """Forget the data of every memory map state in this process (tests)."""
        with _DBS_LOCK:
            _DBS.clear()

    # -- State ----------------------------------------------------------------------------------
    def begin_commit(self, txid: int | None) -> None:
        """Start batch ``txid``; first delete for good the keys a finished earlier batch removed."""
        self._delegate.begin_commit(txid)
        db = self._db
        if db.removed and (txid is None or txid != db.removed_txid):
            self.backing.multi_remove(db.removed)
        db.removed = []
        db.removed_txid = txid

    def commit(self, txid: int | None) -> None:
        """End batch ``txid``."""
        self._delegate.commit(txid)

    # -- MapState -------------------------------------------------------------------------------
    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[T | None]:
        """Values of ``keys``."""
        return self._delegate.multi_get(keys)

    def multi_update(self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater[T]]) -> list[T | None]:
        """Update values with the fault-tolerance of :attr:`state_type`."""
        return self._delegate.multi_update(keys, updaters)

    def multi_put(self, keys: Sequence[Sequence[Any]], vals: Sequence[T | None]) -> None:
        """Set values."""
        self._delegate.multi_put(keys, vals)

    def multi_remove(self, keys: Sequence[Sequence[Any]]) -> None:
        """Remove keys: set them to ``None`` now, delete them when the next batch begins.

        A replay of this batch brings them back unless it removes them again.
        """
        ks = as_keys(keys)
        self._delegate.multi_put(ks, [None] * len(ks))
        self._db.removed.extend(ks)

    # -- Snapshottable ----------------------------------------------------------------------------
    def get(self) -> T | None:
        """The global value."""
        return self._delegate.get()

    def update(self, updater: ValueUpdater[T]) -> T | None:
        """Update the global value."""
        return self._delegate.update(updater)

    def set(self, val: T | None) -> None:
        """Replace the global value."""
        self._delegate.set(val)

    # -- inspection -------------------------------------------------------------------------------
    def get_tuples(self) -> Iterator[list[Any]]:
        """Every stored key with a value, as ``[*key, current value]`` (global key included)."""
        for key, cell in list(self._db.data.items()):
            val = current_value(cell)
            if val is not None:
                yield [*key, val]

    def __repr__(self) -> str:
        return f"MemoryMapState({self.state_id!r}, partition={self.partition}, state_type={self.state_type.name})"

    class Factory(StateFactory):
        """Makes :class:`MemoryMapState` partitions that share data per factory (and per id).

        Parameters
        ----------
        state_type : StateType or str
            Fault-tolerance level of the states (default opaque).
        state_id : str, optional
            Identity of the data; a random one by default, so each factory has its own data. A
            pickled copy of the factory keeps the id and so reaches the same data in this process.
        """

        state_type: StateType

        def __init__(self, state_type: StateType | str = StateType.OPAQUE, *, state_id: str | None = None) -> None:
            self.state_type = StateType.parse(state_type)
            if state_id is not None and (not isinstance(state_id, str) or not state_id):
                msg = f"MemoryMapState.Factory state_id must be a non-empty string, got {state_id!r}"
                raise ConfigError(msg)
            self.state_id = state_id or f"memory-map-state-{uuid.uuid4().hex}"

        def make_state(self, conf: Mapping[str, Any], partition_index: int, num_partitions: int) -> MemoryMapState[Any]:
            """The state of partition ``partition_index``; sees what earlier states of it wrote."""
            check_partition(partition_index, num_partitions, what=f"MemoryMapState {self.state_id!r}")
            return MemoryMapState(self.state_id, partition_index, self.state_type)

        def __repr__(self) -> str:
            return f"MemoryMapState.Factory({self.state_type.name}, state_id={self.state_id!r})"
