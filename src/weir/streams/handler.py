"""IBM Streams' ``StateHandler`` interface (seed 002), in Python spelling.

Call order per consistent cut (one micro-batch, one task)::

    process(tuple) ...           every tuple of the batch on data ports
    drain()                      every handler, in registration order
    process(tuple) ...           every tuple of the batch on control ports; then all permits released
    prepare_for_non_blocking_checkpoint(id)   non-blocking mode only, every handler
    checkpoint(Checkpoint)       every handler, same Checkpoint, in order (background in non-blocking mode)
    --- the coordinator commits the batch (the region is checkpointed) ---
    region_checkpointed(id)      start operators of the region
    retire_checkpoint(old id)    checkpoints past ``weir.checkpoint.retain``

After a failure: ``reset(Checkpoint)`` with the latest complete checkpoint, or
``reset_to_initial_state()`` when the region failed before its first complete checkpoint. Neither is
called when an operator initialises for the first time.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from weir.streams.checkpoint import Checkpoint

__all__ = ["StateHandler", "is_stateful_operator"]


class StateHandler(ABC):
    """Callbacks through which an operator takes part in checkpointing and reset.

    An :class:`~weir.streams.operator.Operator` that subclasses ``StateHandler`` is registered as a
    handler automatically (before any handler it registers itself); others register handlers with
    ``context.register_state_handler(h)`` in ``prepare``. Handlers are called in registration order
    and all write into (and read back from) the same :class:`~weir.streams.checkpoint.Checkpoint`.

    Only :meth:`drain` may submit tuples. No handler should assume it runs in a consistent region:
    the same handler serves periodic and operator-driven checkpointing.

    A handler is a context manager: leaving the ``with`` block calls :meth:`close`.
    """

    @abstractmethod
    def drain(self) -> None:
        """Finish all pending work of the current cut (flush buffers, submit held tuples)."""

    @abstractmethod
    def checkpoint(self, checkpoint: Checkpoint) -> None:
        """Write the handler's state into ``checkpoint`` (stream or key-value API)."""

    @abstractmethod
    def reset(self, checkpoint: Checkpoint) -> None:
        """Restore the state written into ``checkpoint`` (read in the order it was written)."""

    @abstractmethod
    def reset_to_initial_state(self) -> None:
        """Return to the state the operator had right after initialisation."""

    @abstractmethod
    def retire_checkpoint(self, id: int) -> None:  # noqa: A002 - Streams' name
        """Checkpoint ``id`` will never be used for a reset again (its data is deleted)."""

    def prepare_for_non_blocking_checkpoint(self, id: int) -> None:  # noqa: A002,B027
        """Snapshot what :meth:`checkpoint` will write, so processing can go on (non-blocking mode).

        Called after :meth:`drain` and before :meth:`checkpoint` runs in the background; the
        default does nothing, which is right for handlers whose state is not touched meanwhile.
        """

    def region_checkpointed(self, id: int) -> None:  # noqa: A002,B027
        """Every operator of the region has checkpointed ``id`` (called on start operators only)."""

    def close(self) -> None:  # noqa: B027
        """Release resources."""

    def __enter__(self) -> StateHandler:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def is_stateful_operator(obj: Any) -> bool:
    """Whether ``obj`` is a Streams operator that takes part in checkpointing."""
    from weir.streams.operator import Operator

    return isinstance(obj, Operator) and obj.is_stateful()
