"""The storage SPI under every built-in key-value provider.

A :class:`Backend` stores, per namespace, three things (Storm's Redis layout, generalised):

* **committed rows** — what every reader sees;
* **one prepared change set** — ``{key: value-or-None}`` (None is a tombstone) with its txid;
* **the txid record** — ``committed`` txid, ``prepared`` txid and the fencing ``epoch``.

:class:`~weir.state.kv.TransactionalKeyValueState` implements Storm's semantics on top; a backend only
has to make each write method **atomic**. Keys and values are already serialized bytes.

Epoch fencing: every write takes the writer's ``epoch`` (or None for an unfenced admin write). The
backend checks it atomically against the namespace's stored epoch: an older epoch raises
:class:`~weir.errors.FencedError` and changes nothing; a newer one is stored.

:meth:`Backend.write_owned` is the strict form the checkpoint coordinator uses for its record: the
stored epoch must be *exactly* the writer's (which took it with :meth:`Backend.acquire_epoch`). A
lower or missing one means the store lost what it held — emptied, restarted without persistence,
restored from an older snapshot, failed over to a lagging replica — and raises
:class:`~weir.errors.StateLossError` without writing, instead of reading the loss as "epoch 0, go on".
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from weir.errors import FencedError, StateLossError

__all__ = ["Backend", "Changes", "TxidRecord", "fenced_message", "lost_message"]

Changes = Mapping[bytes, bytes | None]
"""A change set: serialized key → serialized value, or None for a delete (tombstone)."""


@dataclass(frozen=True)
class TxidRecord:
    """The txid record of a namespace."""

    committed: int | None = None
    prepared: int | None = None
    epoch: int = 0


def fenced_message(namespace: str, epoch: int, stored: int) -> str:
    """The message of a :class:`FencedError`."""
    return (
        f"namespace {namespace!r}: writer epoch {epoch} is older than the stored epoch {stored}; "
        "a newer driver has taken over this topology, so this one must stop (nothing was written)"
    )


def lost_message(namespace: str, epoch: int, stored: int) -> str:
    """The message of the :class:`StateLossError` of a :meth:`Backend.write_owned` that found a lower epoch."""
    found = "no epoch (the namespace is gone)" if stored == 0 else f"epoch {stored}"
    return (
        f"namespace {namespace!r}: this writer took epoch {epoch}, but the store now holds {found}: it lost "
        "what it held (emptied, restarted without persistence, restored from an older snapshot, or failed over "
        "to a lagging replica); nothing was written"
    )


def check_epoch(namespace: str, epoch: int | None, stored: int, *, exact: bool = False) -> None:
    """Raise :class:`FencedError` when ``epoch`` is older than ``stored``.

    With ``exact`` (:meth:`Backend.write_owned`), a ``stored`` epoch lower than ``epoch`` raises
    :class:`StateLossError`.
    """
    if epoch is not None and epoch < stored:
        raise FencedError(fenced_message(namespace, epoch, stored))
    if exact and epoch is not None and epoch > stored:
        raise StateLossError(lost_message(namespace, epoch, stored))


class Backend(ABC):
    """Storage of committed rows, prepared change sets and txid records, by namespace."""

    #: short name shown by the CLI ("sqlite", "redis", ...)
    kind: str = "backend"
    #: whether the store survives the process (memory does not)
    durable: bool = True
    #: whether it may be used from executors on other machines
    distributed: bool = True

    # ---- reads -------------------------------------------------------------------------------
    @abstractmethod
    def get(self, namespace: str, key: bytes) -> bytes | None:
        """Committed value of ``key``, or None."""

    def get_many(self, namespace: str, keys: list[bytes]) -> list[bytes | None]:
        """Committed values of ``keys`` in order (one round trip where the store allows)."""
        return [self.get(namespace, k) for k in keys]

    @abstractmethod
    def scan(self, namespace: str) -> Iterator[tuple[bytes, bytes]]:
        """Every committed row of ``namespace``."""

    @abstractmethod
    def count(self, namespace: str) -> int:
        """Number of committed rows of ``namespace``."""

    @abstractmethod
    def txids(self, namespace: str) -> TxidRecord:
        """The txid record of ``namespace`` (all None / 0 when it has never been written)."""

    @abstractmethod
    def load_prepared(self, namespace: str) -> tuple[int, dict[bytes, bytes | None]] | None:
        """The prepared change set and its txid, or None."""

    @abstractmethod
    def namespaces(self) -> list[str]:
        """Every namespace that has rows, a prepared set or a txid record, sorted."""

    # ---- atomic writes -----------------------------------------------------------------------
    @abstractmethod
    def write_prepared(self, namespace: str, txid: int, changes: Changes, epoch: int | None) -> None:
        """Replace the prepared change set of ``namespace`` with ``changes`` as ``txid``, atomically."""

    @abstractmethod
    def commit_prepared(self, namespace: str, txid: int, epoch: int | None) -> None:
        """Apply the prepared set (which must carry ``txid``) to the committed rows atomically.

        In the same atomic step the committed txid becomes ``txid`` and the prepared set is cleared.
        """

    @abstractmethod
    def discard_prepared(self, namespace: str, epoch: int | None) -> None:
        """Delete the prepared change set, atomically (no-op when there is none)."""

    @abstractmethod
    def write_direct(self, namespace: str, changes: Changes, epoch: int | None) -> None:
        """Apply ``changes`` to the committed rows atomically, without touching txids."""

    def write_prepared_owned(self, namespace: str, txid: int, changes: Changes, epoch: int) -> None:
        """:meth:`write_prepared`, only while the stored epoch is exactly ``epoch`` (a task of the driver that took it).

        The driver stamps its epoch on every task namespace at start (:meth:`claim`); a task's prepare
        then finds exactly that epoch, unless the store lost it — emptied, restarted without
        persistence, rolled back — which raises :class:`~weir.errors.StateLossError` and writes
        nothing (a newer epoch: :class:`~weir.errors.FencedError`). Built-in backends check it in
        the same atomic step as the write; this default (for other backends) reads the epoch first.
        """
        check_epoch(namespace, epoch, self.txids(namespace).epoch, exact=True)
        self.write_prepared(namespace, txid, changes, epoch)

    def claim(self, namespace: str, epoch: int) -> None:
        """Store ``epoch`` as the namespace's epoch (a driver at start); nothing else changes.

        A newer stored epoch raises :class:`~weir.errors.FencedError` (another driver took over).
        """
        self.write_direct(namespace, {}, epoch)

    def write_owned(self, namespace: str, changes: Changes, epoch: int) -> None:
        """:meth:`write_direct`, only while the stored epoch is exactly ``epoch`` (taken by this writer).

        A lower or missing epoch raises :class:`~weir.errors.StateLossError` and writes nothing; a
        higher one :class:`~weir.errors.FencedError`. Built-in backends check it in the same atomic
        step as the write; this default (for other backends) reads the epoch first.
        """
        check_epoch(namespace, epoch, self.txids(namespace).epoch, exact=True)
        self.write_direct(namespace, changes, epoch)

    @abstractmethod
    def acquire_epoch(self, namespace: str) -> int:
        """Atomically increment and return the namespace's epoch (a new driver takes over)."""

    @abstractmethod
    def drop(self, namespace: str) -> None:
        """Delete everything of ``namespace`` (admin)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    def verify(self) -> list[str]:
        """Check the whole store; a list of problems, each naming where (``weir state inspect --verify``).

        The default reads every namespace's txid record and prepared change set, so foreign or
        garbled bookkeeping is named; a backend adds its own deeper checks (SQLite: integrity_check).
        """
        from weir.errors import WeirError

        problems: list[str] = []
        for ns in self.namespaces():
            try:
                self.txids(ns)
                self.load_prepared(ns)
            except WeirError as exc:
                problems.append(str(exc))
        return problems

    # ---- helpers -----------------------------------------------------------------------------
    def describe(self) -> str:
        """Where the store is, for messages (no passwords)."""
        return self.kind

    @staticmethod
    def split(changes: Changes) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
        """Split a change set into upserts and deletes."""
        ups: list[tuple[bytes, bytes]] = []
        dels: list[bytes] = []
        for k, v in changes.items():
            if v is None:
                dels.append(k)
            else:
                ups.append((k, v))
        return ups, dels

    def put_many(self, namespace: str, rows: Iterable[tuple[bytes, bytes]]) -> None:
        """Admin bulk load of committed rows (used by ``weir state migrate``)."""
        self.write_direct(namespace, dict(rows), None)
