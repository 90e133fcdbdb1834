"""The values a transactional or opaque map state stores: :class:`TransactionalValue`, :class:`OpaqueValue`.

Both are immutable; an update returns a new value. Their list form (:meth:`to_list` /
:meth:`from_list`) holds only the txid(s) and the user's values, so a store that serializes lists
(JSON, the default serializer) keeps them readable from other languages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from weir.errors import SerializationError, StateError

__all__ = ["OpaqueValue", "TransactionalValue", "current_value"]

T = TypeVar("T")


def _check_txid(txid: object, *, what: str) -> int | None:
    if txid is None or (isinstance(txid, int) and not isinstance(txid, bool)):
        return txid
    msg = f"{what} must be an int or None, got {txid!r} ({type(txid).__name__})"
    raise SerializationError(msg)


def _as_list(data: object, size: int, cls_name: str, layout: str) -> Sequence[Any]:
    if not isinstance(data, (list, tuple)) or len(data) != size:
        msg = f"cannot read a {cls_name} from {data!r}: expected a list {layout}"
        raise SerializationError(msg)
    return data


@dataclass(frozen=True, slots=True)
class TransactionalValue(Generic[T]):
    """A value with the txid of the batch that last changed it (a transactional state's cell).

    Parameters
    ----------
    txid : int or None
        Txid of the batch that wrote ``val``.
    val : T or None
        The stored value.
    """

    txid: int | None
    val: T | None

    def to_list(self) -> list[Any]:
        """``[txid, val]``."""
        return [self.txid, self.val]

    @classmethod
    def from_list(cls, data: Sequence[Any]) -> TransactionalValue[Any]:
        """Read the form written by :meth:`to_list`.

        Raises
        ------
        SerializationError
            If ``data`` is not a two-element list whose first element is an int txid or None.
        """
        txid, val = _as_list(data, 2, cls.__name__, "[txid, val]")
        return cls(_check_txid(txid, what="TransactionalValue txid"), val)


@dataclass(frozen=True, slots=True)
class OpaqueValue(Generic[T]):
    """An opaque state's cell: the current value, its txid, and the value before that txid.

    Trident applies batches in txid order and replays a batch under the same txid, possibly with
    different tuples. So for a batch with txid *b*:

    - *b* greater than ``curr_txid`` (or either txid ``None``): a new batch. ``curr`` is the value
      to build on and becomes ``prev``.
    - *b* equal to ``curr_txid``: a replay. ``curr`` holds an earlier attempt of this very batch and
      is discarded; ``prev`` is the value to build on and stays ``prev``.
    - *b* smaller than ``curr_txid``: impossible under Trident's ordering; :class:`StateError`.

    Parameters
    ----------
    curr_txid : int or None
        Txid of the batch that wrote ``curr``.
    curr : T or None
        The current value.
    prev : T or None
        The value before batch ``curr_txid``.

    Examples
    --------
    A count of 3 written by batch 3; batch 4 adds 2; batch 4 is replayed with 3 tuples:

    >>> v = OpaqueValue(3, 3)
    >>> v = v.update(4, v.get(4) + 2)
    >>> v
    OpaqueValue(curr_txid=4, curr=5, prev=3)
    >>> v.update(4, v.get(4) + 3)
    OpaqueValue(curr_txid=4, curr=6, prev=3)
    """

    curr_txid: int | None
    curr: T | None
    prev: T | None = None

    def _is_replay(self, batch_txid: int | None) -> bool:
        """``True`` for a replay of ``curr_txid``, ``False`` for a newer batch; raises if behind."""
        if batch_txid is None or self.curr_txid is None or batch_txid > self.curr_txid:
            return False
        if batch_txid == self.curr_txid:
            return True
        msg = (
            f"batch txid {batch_txid} is behind the stored txid {self.curr_txid} of this opaque value "
            f"({self!r}): Trident applies batches in txid order, so the store already holds a newer "
            "batch. Another run or topology writes to the same state, or txids were reused "
            "(a fresh Spark checkpoint on an old store); give it its own state or keep the checkpoint."
        )
        raise StateError(msg)

    def update(self, batch_txid: int | None, new_val: T | None) -> OpaqueValue[T]:
        """The cell after batch ``batch_txid`` set the value to ``new_val``.

        ``new_val`` must have been computed from :meth:`get` of the same ``batch_txid``.

        Raises
        ------
        StateError
            If ``batch_txid`` is behind ``curr_txid``.
        """
        prev = self.prev if self._is_replay(batch_txid) else self.curr
        return OpaqueValue(batch_txid, new_val, prev)

    def get(self, batch_txid: int | None) -> T | None:
        """The value batch ``batch_txid`` builds on: ``prev`` on a replay, else ``curr``.

        Raises
        ------
        StateError
            If ``batch_txid`` is behind ``curr_txid``.
        """
        return self.prev if self._is_replay(batch_txid) else self.curr

    def to_list(self) -> list[Any]:
        """``[curr_txid, curr, prev]``."""
        return [self.curr_txid, self.curr, self.prev]

    @classmethod
    def from_list(cls, data: Sequence[Any]) -> OpaqueValue[Any]:
        """Read the form written by :meth:`to_list`.

        Raises
        ------
        SerializationError
            If ``data`` is not a three-element list whose first element is an int txid or None.
        """
        txid, curr, prev = _as_list(data, 3, cls.__name__, "[curr_txid, curr, prev]")
        return cls(_check_txid(txid, what="OpaqueValue curr_txid"), curr, prev)


def current_value(cell: Any) -> Any:
    """The current value of a decoded map-state cell (what a batch's ``multi_get`` returns for it)."""
    if isinstance(cell, OpaqueValue):
        return cell.curr
    if isinstance(cell, TransactionalValue):
        return cell.val
    return cell
