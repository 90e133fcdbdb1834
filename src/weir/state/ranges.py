"""Key ranges: a backend that can split a namespace's committed rows into ranges read apart (a mix-in).

``weir.state.read`` reads a big namespace as several Spark partitions, one per range, each on its
own executor core; every range checks the namespace's committed txid before and after its scan, so
the whole read is still consistent at one committed txid. SQLite splits by the serialized key (the
order of its primary key), PostgreSQL by the SHA-256 of the key its rows are ordered by.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator

__all__ = ["KeyRange", "KeyRangeBackend"]

#: ``(low, high)``: the rows with ``low <= order key < high``; None is open-ended
KeyRange = tuple[bytes | None, bytes | None]


class KeyRangeBackend(ABC):
    """A :class:`~weir.state.backend.Backend` whose committed rows can be scanned by key range."""

    @abstractmethod
    def key_ranges(self, namespace: str, parts: int) -> list[KeyRange]:
        """About ``parts`` contiguous ranges covering every committed row of ``namespace``, in order."""

    @abstractmethod
    def scan_range(self, namespace: str, key_range: KeyRange) -> Iterator[tuple[bytes, bytes]]:
        """The committed rows in ``key_range`` (as :meth:`~weir.state.backend.Backend.scan` pages them)."""
