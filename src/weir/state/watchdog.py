"""A client-side deadline for calls that wait on a server: past it, the connection's socket is shut down.

A server-side timeout (PostgreSQL's ``statement_timeout``) cannot fire when the server itself is
frozen (a stopped process, a paused VM, a black-holed network path that still ACKs): the client
then waits on its socket forever. :class:`SocketWatchdog` bounds that wait. Code that talks to the
server runs inside ``with WATCHDOG.guard(fd, seconds) as g:``; when the block is still running
after ``seconds``, one background thread shuts the socket down (``shutdown(SHUT_RDWR)`` on a
duplicate of the descriptor), so the blocked call returns at once with a connection error, and
``g.fired`` tells the caller it was the deadline. The connection is then broken and must be
replaced; nothing else is touched.

While a guarded call waits, the watchdog logs a warning every :data:`WARN_EVERY_S` seconds
(logger ``weir.state``), naming what waits (``label``) and for how long, so a frozen server is never
a silent stall: first at :data:`WARN_EVERY_S` s, then at twice that, and so on until the deadline.

A client whose own socket timeouts already bound each attempt (redis-py, pymemcache, Thrift) only
needs the log lines: :meth:`SocketWatchdog.waiting` arms the warnings without a socket to shut down.

One thread per process serves every guard (started lazily, and again after ``fork()``).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["WARN_EVERY_S", "WATCHDOG", "Guard", "SocketWatchdog"]

log = logging.getLogger("weir.state")

#: seconds between two "still waiting" warnings of a guarded call
WARN_EVERY_S = 10.0


@dataclass
class Guard:
    """One armed deadline; ``fired`` is True when the watchdog shut the socket down."""

    fd: int
    deadline: float
    seconds: float
    label: str = ""
    fired: bool = False
    done: bool = field(default=False, repr=False)
    started: float = field(default_factory=time.monotonic, repr=False)


class SocketWatchdog:
    """Shuts down the sockets of guarded blocks that outlive their deadline (see the module docs)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Guard, bool]] = []  # (when, seq, guard, is a warning)
        self._seq = itertools.count()
        self._pid = -1
        #: seconds between two "still waiting" warnings (:data:`WARN_EVERY_S`)
        self.warn_every_s = WARN_EVERY_S

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
    def guard(self, fd: int, seconds: float | None, label: str = "") -> Iterator[Guard]:
        """Arm a deadline of ``seconds`` for socket ``fd`` while the block runs (None: no deadline).

        ``label`` says what waits (the store, namespace and operation): with it, the watchdog logs a
        warning every :data:`WARN_EVERY_S` seconds while the block still runs.
        """
        now = time.monotonic()
        g = Guard(fd, now + (seconds or 0.0), seconds or 0.0, label, started=now)
        if not seconds or seconds <= 0 or (fd < 0 and not label):
            yield g
            return
        self._ensure_thread()
        with self._cond:
            first = g.deadline
            heapq.heappush(self._heap, (g.deadline, next(self._seq), g, False))
            if label and now + self.warn_every_s < g.deadline:
                first = now + self.warn_every_s
                heapq.heappush(self._heap, (first, next(self._seq), g, True))
            if self._heap[0][0] == first:  # the thread sleeps until the earliest entry: wake it for a new one
                self._cond.notify()
        try:
            yield g
        finally:
            with self._cond:
                g.done = True
                heap = self._heap
                while heap and heap[0][2].done:  # finished guards leave at once (usually in order)
                    heapq.heappop(heap)

    def waiting(self, label: str, seconds: float) -> contextlib.AbstractContextManager[Guard]:
        """Log "still waiting" for ``label`` while the block runs, up to ``seconds``; nothing is shut down.

        For clients whose own timeouts bound every attempt: the block ends by itself within
        ``seconds`` (the client's bound), and the log says what waits in the meantime.
        """
        return self.guard(-1, seconds, label)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                when, _, g, warning = self._heap[0]
                now = time.monotonic()
                wait = when - now
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
                if warning:
                    if now + self.warn_every_s < g.deadline:
                        heapq.heappush(self._heap, (now + self.warn_every_s, next(self._seq), g, True))
                    waited = now - g.started
                else:
                    g.fired = True
                    g.done = True
                    fd = g.fd
            if warning:
                log.warning("still waiting after %.0f s: %s", waited, g.label)
                continue
            if fd >= 0:
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
