"""The state SPI of core Storm, in Python spelling.

A :class:`State` takes part in the checkpoint protocol (``prepare_commit`` → ``commit`` or
``rollback``); a :class:`KeyValueState` adds a key-value view; a :class:`StateProvider` makes the
state of one namespace. Visibility rules every provider obeys (the contract suite checks them):

1. a task reads its own uncommitted writes; another reader sees only committed data;
2. ``prepare_commit(t)`` fixes the change set of transaction *t*; later writes belong to the next one;
3. ``commit(t)`` is atomic and idempotent; ``rollback()`` discards everything not committed; a
   prepared but uncommitted *t* survives a crash and is committed or rolled back by recovery;
4. misuse (commit of a txid that was not prepared, prepare of a txid ≤ the committed one) raises a
   :class:`~weir.errors.StateError` naming the namespace and both txids.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from weir.topology.context import TopologyContext

__all__ = ["KeyValueState", "State", "StateProvider"]

K = TypeVar("K")
V = TypeVar("V")


class State(ABC):
    """A unit of state that takes part in Storm's prepare/commit/rollback protocol."""

    @abstractmethod
    def prepare_commit(self, txid: int) -> None:
        """Fix the current change set as transaction ``txid`` and make it durable (not visible)."""

    @abstractmethod
    def commit(self, txid: int | None = None) -> None:
        """Make transaction ``txid`` visible atomically; with no txid, save pending writes directly."""

    @abstractmethod
    def rollback(self) -> None:
        """Discard every change that is not committed (pending and prepared)."""

    def fence(self, epoch: int | None) -> None:  # noqa: B027 - optional hook
        """Write as the driver of ``epoch``; a store that can refuse an older driver's writes does so.

        The runtime calls it before a task or a commit touches the state. The default does nothing
        (a store without fencing).
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default does nothing."""


class KeyValueState(State, Generic[K, V]):
    """Key-value state, as Storm's ``KeyValueState``."""

    @abstractmethod
    def get(self, key: K, default: V | None = None) -> V | None:
        """Value of ``key`` (own uncommitted writes included), or ``default``."""

    @abstractmethod
    def put(self, key: K, value: V) -> None:
        """Set ``key`` to ``value`` in the current transaction."""

    @abstractmethod
    def delete(self, key: K) -> V | None:
        """Delete ``key`` in the current transaction; returns the previous value (or None)."""

    @abstractmethod
    def __iter__(self) -> Iterator[tuple[K, V]]:
        """Every live key once with its value, uncommitted writes included."""


class StateProvider(ABC):
    """Makes the state of a namespace (Storm's ``StateProvider``)."""

    @abstractmethod
    def new_state(self, namespace: str, conf: Mapping[str, Any], context: TopologyContext | None = None) -> State:
        """Return the state of ``namespace``, loaded with what was last committed."""
