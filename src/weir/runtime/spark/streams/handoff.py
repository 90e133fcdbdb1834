"""The hand-off of a Streams operator task's live state between the Python workers of one machine.

Spark may run an operator's task in another Python worker each batch; a move is not a failure, so
the state must follow the task. After every batch, the task's worker writes what the operator's
handlers ``checkpoint()`` (the cut's own checkpoint when the batch took one and nothing ran after
it) to a hand-off file shared by the machine's workers, keyed by (store, topology, operator, task,
driver epoch) and tagged with the attempt token of the batch. The task of the next batch, when its
worker does not hold the live instance, ``reset()``-s a new one from the entry whose token is the
one the task's committed head names — the state right after the last committed batch, never a
stale one: an entry of a failed attempt, of a batch that did not commit, or of an earlier driver
(another epoch: the process died, and Streams' rule applies — back to the last checkpoint) never
matches. The two newest entries per task are kept, so a retry after a failed attempt still finds
the state of the batch before it.

The data is the checkpoint's stored form, read with the store's serializer (``data`` by default:
nothing is unpickled). The file lives in ``$WEIR_HANDOFF_DIR`` or ``<tmp>/weir-handoff-<uid>``
(mode 0700); on a cluster of several machines a task that moves to another machine restores from
the store instead (its latest complete checkpoint).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["HandOff", "directory_override", "handoff_for_task"]

log = logging.getLogger("weir.streams")

_KEEP = 2  # entries per task: the newest batch's and the one before (a retry after a failure)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS handoff (task TEXT NOT NULL, token TEXT NOT NULL, epoch INTEGER, txid INTEGER, "
    "seq INTEGER, ts REAL, data BLOB, PRIMARY KEY (task, token))"
)
_override: str | None = None
_lock = threading.Lock()
_opened: dict[str, HandOff] = {}


@dataclass
class Entry:
    """One handed-off state: the checkpoint's stored form and the operator's counters."""

    data: bytes
    seq: int
    ts: float
    txid: int


class HandOff:
    """The hand-off file of one directory (one per process, shared by the machine's workers)."""

    def __init__(self, directory: str) -> None:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        st = os.stat(directory)
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            msg = f"{directory} is not private to this user (owner {st.st_uid}, mode {st.st_mode & 0o777:o})"
            raise OSError(msg)
        self.path = os.path.join(directory, "handoff.db")
        self._conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=OFF")  # a lost entry only costs a restore from the store
        self._conn.execute(_SCHEMA)
        self._mutex = threading.Lock()

    def save(self, task: str, token: str, epoch: int, txid: int, entry: Entry) -> None:
        """Store ``entry`` as the state after batch ``txid`` (attempt ``token``); drop older entries."""
        with self._mutex:
            c = self._conn
            c.execute("BEGIN IMMEDIATE")
            try:
                c.execute(
                    "INSERT OR REPLACE INTO handoff VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (task, token, epoch, txid, entry.seq, entry.ts, entry.data),
                )
                c.execute(
                    "DELETE FROM handoff WHERE task = ? AND (epoch IS NOT ? OR token NOT IN "
                    "(SELECT token FROM handoff WHERE task = ? AND epoch IS ? ORDER BY txid DESC LIMIT ?))",
                    (task, epoch, task, epoch, _KEEP),
                )
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise

    def load(self, task: str, token: str, epoch: int) -> Entry | None:
        """The entry of attempt ``token`` written under ``epoch``, if any."""
        with self._mutex:
            row = self._conn.execute(
                "SELECT data, seq, ts, txid FROM handoff WHERE task = ? AND token = ? AND epoch = ?",
                (task, token, epoch),
            ).fetchone()
        if row is None:
            return None
        return Entry(bytes(row[0]), int(row[1]), float(row[2]), int(row[3]))


def _directory() -> str:
    if _override is not None:
        return _override
    return os.environ.get("WEIR_HANDOFF_DIR") or os.path.join(tempfile.gettempdir(), f"weir-handoff-{os.getuid()}")


def handoff_for_task() -> HandOff | None:
    """The hand-off of this process: inside a Spark task, or when a test set a directory; else None."""
    if _override is None:
        from pyspark import TaskContext

        if TaskContext.get() is None:
            return None  # the in-process OperatorTester: one process, live instances only
    directory = _directory()
    with _lock:
        h = _opened.get(directory)
        if h is None:
            try:
                h = HandOff(directory)
            except (OSError, sqlite3.Error) as exc:
                log.warning("the Streams hand-off directory %s cannot be used (%s): moves restore from the store",
                            directory, exc)  # fmt: skip
                return None
            _opened[directory] = h
    return h


@contextlib.contextmanager
def directory_override(directory: str) -> Iterator[None]:
    """Use the hand-off in ``directory`` outside Spark too (tests of moves without Spark)."""
    global _override
    old, _override = _override, directory
    try:
        yield
    finally:
        _override = old
