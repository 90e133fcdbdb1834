"""Open connections, one set per process: made lazily, reused, never carried across ``fork()``.

A map-state factory travels to Spark executors pickled; what it carries is only its options. The
first operation of a backing map in a process opens the client (a SQLite or PostgreSQL connection,
a Redis or Memcached client) and keeps it here, keyed by the options, the process id and — for
clients that are not thread-safe — the thread, so later states of the same store reuse it.

A client inherited from a parent process through ``fork()`` is never used or closed by the child
(closing a SQLite connection would drop the parent's file locks, closing a PostgreSQL one would end
the parent's session): it is only kept referenced, and the child opens its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

__all__ = ["close_connections", "discard_client", "get_client"]

T = TypeVar("T")

_LOCK = threading.Lock()
# (spec, pid, thread id or 0) -> (client, closer)
_CLIENTS: dict[tuple[Hashable, int, int], tuple[Any, Callable[[Any], None]]] = {}
_INHERITED: list[Any] = []


def _forget_inherited(pid: int) -> None:
    """Move clients opened by another process out of the table (caller holds the lock)."""
    foreign = [key for key in _CLIENTS if key[1] != pid]
    for key in foreign:
        _INHERITED.append(_CLIENTS.pop(key)[0])


def get_client(
    spec: Hashable,
    opener: Callable[[], T],
    closer: Callable[[T], None],
    *,
    per_thread: bool,
) -> T:
    """The open client for ``spec`` in this process (and thread, if ``per_thread``); opened if needed.

    ``opener`` runs outside the lock and may raise; nothing is cached then.
    """
    pid = os.getpid()
    key = (spec, pid, threading.get_ident() if per_thread else 0)
    found = _CLIENTS.get(key)
    if found is not None:
        client: T = found[0]
        return client
    with _LOCK:
        _forget_inherited(pid)
    client = opener()
    with _LOCK:
        found = _CLIENTS.get(key)
        if found is None:
            _CLIENTS[key] = (client, closer)
            return client
    _safe_close(closer, client)  # another thread opened one first
    winner: T = found[0]
    return winner


def discard_client(spec: Hashable, client: object) -> None:
    """Close ``client`` and forget it if it is the cached client of ``spec`` (a broken connection)."""
    pid = os.getpid()
    with _LOCK:
        keys = [k for k, (c, _) in _CLIENTS.items() if k[0] == spec and k[1] == pid and c is client]
        entries = [_CLIENTS.pop(k) for k in keys]
    for c, closer in entries:
        _safe_close(closer, c)


def close_connections() -> int:
    """Close every backing-map connection this process opened; return how many were closed.

    Later operations reconnect. Useful in tests, and before a process forks workers.
    """
    pid = os.getpid()
    with _LOCK:
        mine = [k for k in _CLIENTS if k[1] == pid]
        entries = [_CLIENTS.pop(k) for k in mine]
        _forget_inherited(pid)
    for client, closer in entries:
        _safe_close(closer, client)
    return len(entries)


def _safe_close(closer: Callable[[Any], None], client: Any) -> None:
    try:
        closer(client)
    except Exception:  # noqa: BLE001, S110 - a broken connection may fail to close; nothing to do
        pass
