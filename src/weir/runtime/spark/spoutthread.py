"""One driver thread per Storm spout task: it owns the spout and polls the next batch ahead.

Storm calls a spout task's ``next_tuple``, ``ack`` and ``fail`` on one executor thread, never
concurrently. weir keeps that rule with a :class:`SpoutThread` per spout task: every call into the
spout (``open``, ``next_tuple``, ``ack``, ``flush_acks``, ``fail``, ``close``) is a command run on
that thread (:meth:`SpoutThread.call` waits for it), so a client library that is not thread-safe
(pika's ``BlockingConnection``) is only ever used from the thread that opened it.

Between commands the thread **polls ahead**: once batch *n*'s tuples are in the spout log
(:meth:`SpoutThread.ahead`), it keeps calling ``next_tuple`` and buffers what the spout emits, raw,
while batch *n*'s Spark job and commit run; batch *n + 1* starts from that buffer
(:meth:`SpoutThread.take`). Commands come first (the acks of batch *n* are not delayed by polling).
The buffer holds at most ``limit`` tuples (``weir.spout.batch.max.tuples``, and
``topology.max.spout.pending`` minus the tuples in flight), so the bound on un-acked tuples holds.
Tuples polled ahead are not in the spout log yet: they are un-acked deliveries, which the source
redelivers if the driver dies (crash point ``during_poll_ahead``), and which ``fail`` returns to the
source when the spout task is closed.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from weir._faults import crash_point

__all__ = ["Emitted", "SpoutThread"]

T = TypeVar("T")

#: what a spout emitted, as its collector hands it over: ``(stream, values, msg_id, direct task)``
Emitted = tuple[str, Any, Any, Any]

#: how long the thread waits after an empty ``next_tuple`` before polling again (seconds), doubled
#: after each further empty call up to :data:`_IDLE_MAX_S` (Storm's progressive wait strategy); a
#: command wakes the thread at once. Empty polls are not free (a round trip, and the GIL the driver's
#: own threads need while Spark runs the batch), so an idle source is polled rarely.
_IDLE_S = 0.002
_IDLE_MAX_S = 0.1


class SpoutThread:
    """The thread that owns one spout task (see the module docstring).

    Parameters
    ----------
    name : the thread's name (the topology, spout and task)
    """

    def __init__(self, name: str, topology: str | None = None) -> None:
        self.name = name
        self.topology = topology  # names the crash point's topology (the crash barrier of the tests)
        self._cond = threading.Condition()
        self._commands: collections.deque[tuple[Callable[[], Any], Future[Any]]] = collections.deque()
        self._stopping = False
        self._thread: threading.Thread | None = None
        # poll-ahead, guarded by _cond
        self._poll: Callable[[], list[Emitted]] | None = None  # one next_tuple; what it emitted
        self._limit = 0
        self._txid = 0  # the batch being polled ahead (for the crash point)
        self._buffer: list[Emitted] = []
        self._error: BaseException | None = None
        self._started = 0.0  # monotonic time the poll-ahead began
        self._last_empty = False  # the last next_tuple (ahead or not) emitted nothing
        #: seconds spent in next_tuple ahead of a batch
        self.ahead_s = 0.0

    # ---- commands -------------------------------------------------------------------------------
    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the spout's thread and return what it returns (or raise what it raised)."""
        if self._thread is threading.current_thread():
            return fn()
        fut: Future[T] = Future()
        with self._cond:
            if self._thread is None or not self._thread.is_alive():
                self._stopping = False
                self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
                self._thread.start()
            self._commands.append((fn, fut))
            self._cond.notify_all()
        return fut.result()

    def stop(self) -> None:
        """End the thread once its queued commands ran (the poll-ahead is dropped: take it first)."""
        with self._cond:
            thread = self._thread
            self._stopping = True
            self._poll = None
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._cond:
            self._thread = None

    # ---- poll-ahead (the thread's own calls: from commands, or the main loop) ----------------------
    def ahead(self, txid: int, poll: Callable[[], list[Emitted]], limit: int) -> None:
        """Poll ahead for batch ``txid``: call ``poll`` while fewer than ``limit`` tuples are buffered."""
        with self._cond:
            if self._poll is None:
                self._started = time.monotonic()
            self._txid = txid
            self._poll = poll
            self._limit = limit
            self._cond.notify_all()

    def set_limit(self, limit: int) -> None:
        """A new bound on the buffer (acks freed room under ``topology.max.spout.pending``)."""
        with self._cond:
            self._limit = limit
            self._cond.notify_all()

    def take(self) -> tuple[list[Emitted], BaseException | None, float | None]:
        """Stop polling ahead; the buffer, the error a ``next_tuple`` raised, and when the poll-ahead began.

        Call it from a command (on the spout's thread), so no ``next_tuple`` is in progress.
        """
        with self._cond:
            buf, err = self._buffer, self._error
            started = self._started if self._poll is not None or buf or err else None
            self._buffer, self._error, self._poll = [], None, None
            return buf, err, started

    def drop(self, keep: Callable[[Emitted], bool]) -> int:
        """Drop the buffered tuples ``keep`` refuses (call it from a command); how many were dropped."""
        with self._cond:
            before = len(self._buffer)
            self._buffer = [e for e in self._buffer if keep(e)]
            return before - len(self._buffer)

    def note_poll(self, empty: bool) -> None:
        """Record whether a ``next_tuple`` called outside the poll-ahead emitted nothing."""
        self._last_empty = empty

    @property
    def last_empty(self) -> bool:
        """Whether the last ``next_tuple`` emitted nothing (the source had nothing more then)."""
        return self._last_empty

    # ---- the thread -----------------------------------------------------------------------------
    def _next(self, idle: float) -> tuple[Callable[[], Any], Future[Any]] | Callable[[], list[Emitted]] | None:
        """Wait for work: a command, the poll-ahead's next call, or None (stop)."""
        with self._cond:
            while True:
                if self._commands:
                    return self._commands.popleft()
                if self._stopping:
                    return None
                poll = self._poll
                if poll is not None and len(self._buffer) < self._limit and self._error is None:
                    if not idle:
                        return poll
                    self._cond.wait(idle)  # the source was empty: wait, unless a command comes
                    idle = 0.0
                    continue
                self._cond.wait()

    def _main(self) -> None:
        idle = 0.0  # the wait before the next poll-ahead call (0: poll now)
        while True:
            work = self._next(idle)
            if work is None:
                return
            if isinstance(work, tuple):
                fn, fut = work
                if fut.set_running_or_notify_cancel():
                    try:
                        fut.set_result(fn())
                    except BaseException as exc:  # handed to the caller
                        fut.set_exception(exc)
                continue
            t0 = time.perf_counter()
            try:
                got = work()
            except Exception as exc:  # the next batch fails with it, naming the task
                with self._cond:
                    self._error = exc
                continue
            finally:
                self.ahead_s += time.perf_counter() - t0
            self._last_empty = not got
            idle = 0.0 if got else min(_IDLE_MAX_S, max(_IDLE_S, idle * 2))
            if got:
                with self._cond:
                    first = not self._buffer
                    self._buffer.extend(got)
                    txid = self._txid
                if first:
                    crash_point("during_poll_ahead", txid, topology=self.topology)
