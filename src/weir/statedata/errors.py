"""The errors of reading state as data."""

from __future__ import annotations

from weir.errors import StateError

__all__ = ["StateReadConflictError"]


class StateReadConflictError(StateError):
    """A commit landed while a namespace was read: the rows would mix two txids.

    The message names the topology, the namespace and both txids; read again (the new read is
    consistent at the newer txid).
    """
