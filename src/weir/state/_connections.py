"""One database connection per process and thread, safe across ``fork()`` (Spark's worker daemon forks).

A connection made in a parent process is never used — nor closed — in a child: the child parks it
(keeps a reference, so the object's finaliser cannot close the parent's socket or file lock) and
opens its own. ``close()`` closes this process's connections; the next ``get()`` reconnects.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["ProcessConnections"]

C = TypeVar("C")

#: connections inherited from a parent process, kept alive and untouched
_PARKED: list[object] = []


class ProcessConnections(Generic[C]):
    """Connections made by ``connect`` for this process and thread; ``usable`` rejects broken ones."""

    def __init__(
        self,
        connect: Callable[[], C],
        close: Callable[[C], None],
        usable: Callable[[C], bool] | None = None,
    ) -> None:
        self._connect = connect
        self._close = close
        self._usable = usable
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[tuple[int, C]] = []
        self._generation = 0

    def get(self) -> C:
        """Return the connection of this thread, made on first use (or after a fork, a close or a break)."""
        local = self._local
        conn: C | None = getattr(local, "conn", None)
        if (
            conn is not None
            and local.pid == os.getpid()
            and local.gen == self._generation
            and (self._usable is None or self._usable(conn))
        ):
            return conn
        return self._reconnect()

    def _reconnect(self) -> C:
        local = self._local
        pid = os.getpid()
        usable = self._usable
        with self._lock:
            _PARKED.extend(c for p, c in self._open if p != pid)
            stale = [c for p, c in self._open if p == pid and usable is not None and not usable(c)]
            self._open = [(p, c) for p, c in self._open if p == pid and c not in stale]
        old = getattr(local, "conn", None)
        if old is not None and local.pid != pid and not any(old is c for c in _PARKED):
            _PARKED.append(old)
        for c in stale:
            self._close_quietly(c)
        conn = self._connect()
        with self._lock:
            self._open.append((pid, conn))
            local.gen = self._generation
        local.conn, local.pid = conn, pid
        return conn

    def _close_quietly(self, conn: C) -> None:
        try:
            self._close(conn)
        except Exception:  # noqa: BLE001, S110 - closing a broken connection may fail; nothing to do
            pass

    def close(self) -> None:
        """Close this process's connections (a later ``get`` reconnects)."""
        pid = os.getpid()
        with self._lock:
            mine = [c for p, c in self._open if p == pid]
            self._open = [(p, c) for p, c in self._open if p != pid]
            self._generation += 1
        for conn in mine:
            self._close_quietly(conn)
        self._local.conn = None
