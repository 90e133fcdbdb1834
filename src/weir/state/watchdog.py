"""A client-side deadline for calls that wait on a server: past it, the connection's socket is shut down.

A server-side timeout (PostgreSQL's ``statement_timeout``) cannot fire when the server itself is
frozen (a stopped process, a paused VM, a black-holed network path that still ACKs): the client
then waits on its socket forever. :class:`SocketWatchdog` bounds that wait. Code that talks to the
server runs inside ``with WATCHDOG.guard(fd, seconds) as g:``; when the block is still running
after ``seconds``, one background thread shuts the socket down (``shutdown(SHUT_RDWR)`` on a
duplicate of the descriptor), so the blocked call returns at once with a connection error, and
``g.fired`` tells the caller it was the deadline. The connection is then broken and must be
replaced; nothing else is touched.

One thread per process serves every guard (started lazily, and again after ``fork()``).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["WATCHDOG", "Guard", "SocketWatchdog"]


@dataclass
class Guard:
    """One armed deadline; ``fired`` is True when the watchdog shut the socket down."""

    fd: int
    deadline: float
    seconds: float
    fired: bool = False
    done: bool = field(default=False, repr=False)


class SocketWatchdog:
    """Shuts down the sockets of guarded blocks that outlive their deadline (see the module docs)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Guard]] = []
        self._seq = itertools.count()
        self._pid = -1

    def _ensure_thread(self) -> None:
        pid = os.getpid()
        if self._pid == pid:
            return
        # a fresh lock after fork(): the parent's may have been held by its watchdog thread
        self._cond = threading.Condition()
        self._heap = []
        self._pid = pid
        threading.Thread(target=self._loop, name="weir-socket-watchdog", daemon=True).start()

    @contextlib.contextmanager
    def guard(self, fd: int, seconds: float | None) -> Iterator[Guard]:
        """Arm a deadline of ``seconds`` for socket ``fd`` while the block runs (None: no deadline)."""
        g = Guard(fd, time.monotonic() + (seconds or 0.0), seconds or 0.0)
        if not seconds or seconds <= 0 or fd < 0:
            yield g
            return
        self._ensure_thread()
        with self._cond:
            earliest = not self._heap or g.deadline < self._heap[0][0]
            heapq.heappush(self._heap, (g.deadline, next(self._seq), g))
            if earliest:  # the thread sleeps until the earliest deadline: wake it only for a new one
                self._cond.notify()
        try:
            yield g
        finally:
            with self._cond:
                g.done = True
                heap = self._heap
                while heap and heap[0][2].done:  # finished guards leave at once (usually in order)
                    heapq.heappop(heap)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                deadline, _, g = self._heap[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
                g.fired = True
                g.done = True
                fd = g.fd
            _shutdown(fd)


def _shutdown(fd: int) -> None:
    try:
        dup = os.dup(fd)
    except OSError:
        return
    try:
        s = socket.socket(fileno=dup)
    except OSError:
        os.close(dup)
        return
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    s.close()


#: the watchdog of this process
WATCHDOG = SocketWatchdog()
