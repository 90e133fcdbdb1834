"""Trident's base state SPI: :class:`State`, :class:`StateFactory` and :class:`StateType`.

A Trident state is told when the state updates of a batch begin and end, with the batch's txid
(seed 004): ``begin_commit(txid)`` → updates (``multi_update``, ``multi_put``, …) → ``commit(txid)``.
It assumes nothing else about how the state is stored or read. Batches reach a state in txid order
and a replayed batch keeps its txid; the map states of :mod:`weir.trident.state` use those two facts
to make updates idempotent.

This is not the checkpointed ``State`` of core Storm (:class:`weir.state.State`, with
``prepare_commit``/``rollback``); the two live side by side exactly as in Storm.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from weir._util import positive_int
from weir.errors import ConfigError

__all__ = ["State", "StateFactory", "StateType", "is_exactly_once"]


class StateType(enum.Enum):
    """Fault-tolerance level of a state (and, with the same names, of a spout).

    ``NON_TRANSACTIONAL`` stores plain values (at-least-once or at-most-once at best);
    ``TRANSACTIONAL`` stores ``(txid, value)`` and needs batches that never change for a txid;
    ``OPAQUE`` stores ``(txid, value, previous value)`` and tolerates batches that change on replay.
    """

    NON_TRANSACTIONAL = "non_transactional"
    TRANSACTIONAL = "transactional"
    OPAQUE = "opaque"

    @classmethod
    def parse(cls, value: StateType | str) -> StateType:
        """Return ``value`` as a :class:`StateType`; accepts a member, its name or its value.

        Raises
        ------
        ConfigError
            If ``value`` names no state type.
        """
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            norm = value.strip().lower().replace("-", "_")
            for member in cls:
                if norm in (member.value, member.name.lower()):
                    return member
        names = ", ".join(m.name for m in cls)
        msg = f"unknown state type {value!r}; use one of {names}"
        raise ConfigError(msg)


# Seed 004's table: which spout guarantee, paired with which state type, is exactly-once.
_EXACTLY_ONCE: dict[StateType, frozenset[StateType]] = {
    StateType.TRANSACTIONAL: frozenset({StateType.TRANSACTIONAL, StateType.OPAQUE}),
    StateType.OPAQUE: frozenset({StateType.OPAQUE}),
    StateType.NON_TRANSACTIONAL: frozenset(),
}


def is_exactly_once(spout_type: StateType | str, state_type: StateType | str) -> bool:
    """Whether a spout of ``spout_type`` feeding a state of ``state_type`` is exactly-once.

    Seed 004's table: a transactional spout is exactly-once with a transactional or an opaque
    state; an opaque spout only with an opaque state; a non-transactional spout never.

    Examples
    --------
    >>> is_exactly_once(StateType.OPAQUE, StateType.TRANSACTIONAL)
    False
    >>> is_exactly_once("transactional", "opaque")
    True
    """
    return StateType.parse(state_type) in _EXACTLY_ONCE[StateType.parse(spout_type)]


class State(ABC):
    """A Trident state: told where the updates of each batch begin and end.

    ``txid`` is ``None`` for updates that belong to no batch (Storm uses that for a
    ``partition_persist`` off a DRPC stream); the map states then treat the update as new.
    """

    @abstractmethod
    def begin_commit(self, txid: int | None) -> None:
        """The state updates of batch ``txid`` start now."""

    @abstractmethod
    def commit(self, txid: int | None) -> None:
        """The state updates of batch ``txid`` are complete."""


class StateFactory(ABC):
    """Makes the :class:`State` of one partition of a Trident state (Storm's ``StateFactory``).

    A factory is built on the driver and shipped to the tasks, so it must be picklable; the state
    it makes must reach the same stored data for the same partition every time it is made.

    Attributes
    ----------
    state_type : StateType or None
        The fault-tolerance level of the states this factory makes, used by the build-time check
        of spout type × state type. ``None`` (the default) means the factory does not say.
    shared_keyspace : bool
        ``True`` when which partition a key is routed to does not change what is stored: every
        partition's state reads and writes one keyspace (weir's own map states: one table, one
        key prefix). weir may then place keys in partitions by Spark's own hash partitioning (one
        shuffle less per batch; see docs/trident.md). ``False`` (the default) keeps every key in
        the partition a stable hash of its values gives it, in every version of weir.
    """

    state_type: StateType | None = None
    shared_keyspace: ClassVar[bool] = False

    @abstractmethod
    def make_state(self, conf: Mapping[str, Any], partition_index: int, num_partitions: int) -> State:
        """Return the state of partition ``partition_index`` out of ``num_partitions``."""

    def check_submit(self, conf: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook
        """Submit-time checks against the state's external system (a broker's limits): raise to refuse."""


def check_partition(partition_index: int, num_partitions: int, *, what: str) -> None:
    """Raise :class:`ConfigError` unless ``0 <= partition_index < num_partitions``."""
    positive_int(num_partitions, f"{what}: num_partitions")
    if (
        isinstance(partition_index, bool)
        or not isinstance(partition_index, int)
        or not 0 <= partition_index < num_partitions
    ):
        msg = f"{what}: partition_index must be an int in [0, {num_partitions}), got {partition_index!r}"
        raise ConfigError(msg)
