"""IBM Streams' ``StateHandler`` interface (seed 002), in Python spelling."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from weir.streams.checkpoint import Checkpoint

__all__ = ["StateHandler", "is_stateful_operator"]


class StateHandler(ABC):
    """Callbacks through which an operator takes part in checkpointing and reset.

    Order per consistent cut (one micro-batch): every tuple processed → :meth:`drain` →
    (non-blocking only) :meth:`prepare_for_non_blocking_checkpoint` → :meth:`checkpoint`; when the whole
    region has checkpointed, :meth:`region_checkpointed`; older checkpoints get :meth:`retire_checkpoint`.
    After a failure: :meth:`reset` with the latest complete checkpoint, or
    :meth:`reset_to_initial_state` when the region fails before its first checkpoint.
    """

    @abstractmethod
    def drain(self) -> None:
        """Finish all pending work of the current cut (flush buffers, submit held tuples)."""

    @abstractmethod
    def checkpoint(self, checkpoint: Checkpoint) -> None:
        """Write the handler's state into ``checkpoint``."""

    @abstractmethod
    def reset(self, checkpoint: Checkpoint) -> None:
        """Restore the state written into ``checkpoint``."""

    @abstractmethod
    def reset_to_initial_state(self) -> None:
        """Return to the state the operator had right after initialisation."""

    @abstractmethod
    def retire_checkpoint(self, id: int) -> None:  # noqa: A002 - Streams' name
        """Checkpoint ``id`` will not be used for a reset any more."""

    def prepare_for_non_blocking_checkpoint(self, id: int) -> None:  # noqa: A002,B027
        """Snapshot what :meth:`checkpoint` will write while processing goes on (non-blocking mode)."""

    def region_checkpointed(self, id: int) -> None:  # noqa: A002,B027
        """Every operator of the region has checkpointed ``id`` (called on start operators)."""

    def close(self) -> None:  # noqa: B027
        """Release resources."""

    def __enter__(self) -> StateHandler:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def is_stateful_operator(obj: Any) -> bool:
    """Whether ``obj`` is a Streams operator that takes part in checkpointing."""
    from weir.streams.operator import Operator

    return isinstance(obj, Operator) and obj.checkpointed
