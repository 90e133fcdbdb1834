"""The ``memory`` provider: process-local dicts, for unit tests and driver-local runs.

All instances in one process share one store per provider name, so a second reader sees committed
data as with a real store. Nothing survives the process; the runner refuses it outside local mode.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

from weir.state.backend import Backend, Changes, TxidRecord, check_epoch

__all__ = ["MemoryBackend"]

_STORES: dict[str, MemoryBackend] = {}
_STORES_LOCK = threading.Lock()


class MemoryBackend(Backend):
    """Dict-based backend; one shared instance per ``name`` in a process."""

    kind = "memory"
    durable = False
    distributed = False

    def __init__(self, name: str = "default") -> None:
        self.name = name
        self._lock = threading.RLock()
        self._rows: dict[str, dict[bytes, bytes]] = {}
        self._prepared: dict[str, tuple[int, dict[bytes, bytes | None]]] = {}
        self._txids: dict[str, TxidRecord] = {}

    @classmethod
    def shared(cls, name: str = "default") -> MemoryBackend:
        """The process-wide store called ``name``."""
        with _STORES_LOCK:
            if name not in _STORES:
                _STORES[name] = cls(name)
            return _STORES[name]

    @classmethod
    def reset_all(cls) -> None:
        """Forget every shared memory store (tests)."""
        with _STORES_LOCK:
            _STORES.clear()

    def describe(self) -> str:
        """``memory://<name>``."""
        return f"memory://{self.name}"

    # reads
    def get(self, namespace: str, key: bytes) -> bytes | None:
        """Committed value of ``key``."""
        return self._rows.get(namespace, {}).get(key)

    def scan(self, namespace: str) -> Iterator[tuple[bytes, bytes]]:
        """Committed rows (a snapshot)."""
        with self._lock:
            items = list(self._rows.get(namespace, {}).items())
        yield from items

    def count(self, namespace: str) -> int:
        """Committed row count."""
        return len(self._rows.get(namespace, {}))

    def txids(self, namespace: str) -> TxidRecord:
        """Txid record."""
        return self._txids.get(namespace, TxidRecord())

    def load_prepared(self, namespace: str) -> tuple[int, dict[bytes, bytes | None]] | None:
        """Prepared change set."""
        with self._lock:
            got = self._prepared.get(namespace)
            return None if got is None else (got[0], dict(got[1]))

    def namespaces(self) -> list[str]:
        """Known namespaces."""
        with self._lock:
            return sorted(set(self._rows) | set(self._prepared) | set(self._txids))

    # writes
    def _fence(self, namespace: str, epoch: int | None, *, exact: bool = False) -> TxidRecord:
        rec = self._txids.get(namespace, TxidRecord())
        check_epoch(namespace, epoch, rec.epoch, exact=exact)
        if epoch is not None and epoch > rec.epoch:
            rec = TxidRecord(rec.committed, rec.prepared, epoch)
        return rec

    def write_prepared(self, namespace: str, txid: int, changes: Changes, epoch: int | None) -> None:
        """Replace the prepared set."""
        with self._lock:
            rec = self._fence(namespace, epoch)
            self._prepared[namespace] = (txid, dict(changes))
            self._txids[namespace] = TxidRecord(rec.committed, txid, rec.epoch)

    def commit_prepared(self, namespace: str, txid: int, epoch: int | None) -> None:
        """Apply the prepared set."""
        from weir.errors import StateError

        with self._lock:
            rec = self._fence(namespace, epoch)
            got = self._prepared.get(namespace)
            if got is None or got[0] != txid:
                msg = f"namespace {namespace!r}: txid {txid} is not prepared (prepared: {rec.prepared})"
                raise StateError(msg)
            self._apply(namespace, got[1])
            del self._prepared[namespace]
            self._txids[namespace] = TxidRecord(txid, None, rec.epoch)

    def discard_prepared(self, namespace: str, epoch: int | None) -> None:
        """Drop the prepared set."""
        with self._lock:
            rec = self._fence(namespace, epoch)
            self._prepared.pop(namespace, None)
            self._txids[namespace] = TxidRecord(rec.committed, None, rec.epoch)

    def write_direct(self, namespace: str, changes: Changes, epoch: int | None) -> None:
        """Apply changes to committed rows."""
        self._direct(namespace, changes, epoch, exact=False)

    def write_owned(self, namespace: str, changes: Changes, epoch: int) -> None:
        """Apply changes to committed rows while the stored epoch is exactly ``epoch``."""
        self._direct(namespace, changes, epoch, exact=True)

    def _direct(self, namespace: str, changes: Changes, epoch: int | None, *, exact: bool) -> None:
        with self._lock:
            rec = self._fence(namespace, epoch, exact=exact)
            self._apply(namespace, changes)
            self._txids[namespace] = rec

    def _apply(self, namespace: str, changes: Mapping[bytes, Any]) -> None:
        rows = self._rows.setdefault(namespace, {})
        for k, v in changes.items():
            if v is None:
                rows.pop(k, None)
            else:
                rows[k] = v

    def acquire_epoch(self, namespace: str) -> int:
        """Increment the epoch."""
        with self._lock:
            rec = self._txids.get(namespace, TxidRecord())
            new = TxidRecord(rec.committed, rec.prepared, rec.epoch + 1)
            self._txids[namespace] = new
            return new.epoch

    def drop(self, namespace: str) -> None:
        """Forget the namespace."""
        with self._lock:
            self._rows.pop(namespace, None)
            self._prepared.pop(namespace, None)
            self._txids.pop(namespace, None)
