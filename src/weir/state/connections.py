"""One database connection per process and thread, safe across ``fork()`` (Spark's worker daemon forks).

A connection made in a parent process is never used — nor closed — in a child: the child parks it
(keeps a reference, so the object's finaliser cannot close the parent's socket or file lock) and
opens its own. ``close()`` closes this process's connections; the next ``get()`` reconnects.

This is the one connection cache of every store, used by Storm's backends (one
:class:`ProcessConnections` per backend object) and by Trident's backing maps, whose factories
travel to executors pickled and share one set per store options (:func:`shared_connections`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable
from types import SimpleNamespace
from typing import Any, Generic, TypeVar

__all__ = ["ProcessConnections", "close_connections", "shared_connections"]

C = TypeVar("C")

#: connections inherited from a parent process, kept alive and untouched
_PARKED: list[object] = []


class ProcessConnections(Generic[C]):
    """Connections made by ``connect`` for this process and thread; ``usable`` rejects broken ones.

    With ``per_thread=False`` the threads of a process share one connection (a thread-safe client
    such as redis-py's or HBase's pool).
    """

    def __init__(
        self,
        connect: Callable[[], C],
        close: Callable[[C], None],
        usable: Callable[[C], bool] | None = None,
        *,
        per_thread: bool = True,
    ) -> None:
        self._connect = connect
        self._close = close
        self._usable = usable
        self._per_thread = per_thread
        self._local: Any = threading.local() if per_thread else SimpleNamespace()
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
        if not self._per_thread:
            with self._lock:  # another thread may have connected meanwhile: use its connection
                for p, c in self._open:
                    if p == pid and (usable is None or usable(c)):
                        local.conn, local.pid, local.gen = c, pid, self._generation
                        return c
        conn = self._connect()
        with self._lock:
            self._open.append((pid, conn))
            gen = self._generation
        local.conn, local.pid, local.gen = conn, pid, gen
        return conn

    def discard(self, conn: C) -> None:
        """Close ``conn`` (found broken) and forget it; the next ``get`` of its thread reconnects."""
        with self._lock:
            found = any(c is conn for _, c in self._open)
            self._open = [(p, c) for p, c in self._open if c is not conn]
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None
        if found:
            self._close_quietly(conn)

    def _close_quietly(self, conn: C) -> None:
        try:
            self._close(conn)
        except Exception:  # noqa: BLE001, S110 - closing a broken connection may fail; nothing to do
            pass

    def close(self) -> int:
        """Close this process's connections (a later ``get`` reconnects); return how many."""
        pid = os.getpid()
        with self._lock:
            mine = [c for p, c in self._open if p == pid]
            self._open = [(p, c) for p, c in self._open if p != pid]
            self._generation += 1
        for conn in mine:
            self._close_quietly(conn)
        self._local.conn = None
        return len(mine)


_SHARED_LOCK = threading.Lock()
_SHARED: dict[Hashable, ProcessConnections[Any]] = {}


def shared_connections(
    spec: Hashable,
    connect: Callable[[], C],
    close: Callable[[C], None],
    *,
    per_thread: bool,
) -> ProcessConnections[C]:
    """The connections of the store named by ``spec`` (its hashable options), shared in this process.

    The first call for ``spec`` makes the cache with ``connect`` / ``close``; later calls return it,
    so every backing map over the same store reuses one connection per process (and thread).
    """
    conns = _SHARED.get(spec)
    if conns is not None:
        return conns
    with _SHARED_LOCK:
        conns = _SHARED.get(spec)
        if conns is None:
            conns = _SHARED[spec] = ProcessConnections(connect, close, per_thread=per_thread)
    return conns


def close_connections() -> int:
    """Close every shared store connection this process opened; return how many were closed.

    Later operations reconnect. Useful in tests, and before a process forks workers.
    """
    with _SHARED_LOCK:
        caches = list(_SHARED.values())
    return sum(c.close() for c in caches)
