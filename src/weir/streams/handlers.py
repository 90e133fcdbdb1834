"""Composable handlers: ``DelegateStateHandler`` and ``OrderedStateHandlers``."""

from __future__ import annotations

from collections.abc import Iterable

from weir.streams.checkpoint import Checkpoint
from weir.streams.handler import StateHandler

__all__ = ["DelegateStateHandler", "OrderedStateHandlers"]


class DelegateStateHandler(StateHandler):
    """Passes every call to another handler; subclass it to intercept some of them.

    Example
    -------
    >>> class Logged(DelegateStateHandler):
    ...     def checkpoint(self, ckpt):
    ...         print("checkpoint", ckpt.sequence_id)
    ...         super().checkpoint(ckpt)
    """

    def __init__(self, handler: StateHandler) -> None:
        if not isinstance(handler, StateHandler):
            msg = f"DelegateStateHandler wraps a StateHandler, got {type(handler).__qualname__}"
            raise TypeError(msg)
        self._handler = handler

    @property
    def handler(self) -> StateHandler:
        """The wrapped handler."""
        return self._handler

    def drain(self) -> None:
        """Delegate."""
        self._handler.drain()

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        """Delegate."""
        self._handler.checkpoint(checkpoint)

    def reset(self, checkpoint: Checkpoint) -> None:
        """Delegate."""
        self._handler.reset(checkpoint)

    def reset_to_initial_state(self) -> None:
        """Delegate."""
        self._handler.reset_to_initial_state()

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        """Delegate."""
        self._handler.retire_checkpoint(id)

    def prepare_for_non_blocking_checkpoint(self, id: int) -> None:  # noqa: A002
        """Delegate."""
        self._handler.prepare_for_non_blocking_checkpoint(id)

    def region_checkpointed(self, id: int) -> None:  # noqa: A002
        """Delegate."""
        self._handler.region_checkpointed(id)

    def close(self) -> None:
        """Delegate."""
        self._handler.close()


class OrderedStateHandlers(StateHandler):
    """Several handlers driven as one, in the given order.

    ``checkpoint`` lets each write into the same checkpoint in order and ``reset`` lets each read back
    in the same order, so one registration keeps a group's data together. ``close`` closes them in
    reverse order (the last opened is released first) and closes every one even if some fail.
    """

    def __init__(self, handlers: Iterable[StateHandler]) -> None:
        self._handlers = list(handlers)
        for h in self._handlers:
            if not isinstance(h, StateHandler):
                msg = f"OrderedStateHandlers takes StateHandlers, got {type(h).__qualname__}"
                raise TypeError(msg)

    @property
    def handlers(self) -> tuple[StateHandler, ...]:
        """The handlers, in call order."""
        return tuple(self._handlers)

    def drain(self) -> None:
        """Drain each, in order."""
        for h in self._handlers:
            h.drain()

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        """Each writes into ``checkpoint``, in order."""
        for h in self._handlers:
            h.checkpoint(checkpoint)

    def reset(self, checkpoint: Checkpoint) -> None:
        """Each reads back from ``checkpoint``, in order."""
        for h in self._handlers:
            h.reset(checkpoint)

    def reset_to_initial_state(self) -> None:
        """Each resets, in order."""
        for h in self._handlers:
            h.reset_to_initial_state()

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        """Each retires ``id``, in order."""
        for h in self._handlers:
            h.retire_checkpoint(id)

    def prepare_for_non_blocking_checkpoint(self, id: int) -> None:  # noqa: A002
        """Each prepares, in order."""
        for h in self._handlers:
            h.prepare_for_non_blocking_checkpoint(id)

    def region_checkpointed(self, id: int) -> None:  # noqa: A002
        """Each is told, in order."""
        for h in self._handlers:
            h.region_checkpointed(id)

    def close(self) -> None:
        """Close each in reverse order; the first error is raised after all were closed."""
        first: BaseException | None = None
        for h in reversed(self._handlers):
            try:
                h.close()
            except Exception as exc:  # keep closing the others
                first = first or exc
        if first is not None:
            raise first
