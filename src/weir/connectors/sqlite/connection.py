"""SQLite plumbing shared by the Storm backend (:mod:`.kv`) and the Trident backing maps (:mod:`.maps`).

- :class:`SqliteOptions` / :func:`check_options`: the file, the write-lock timeout and the
  ``synchronous`` level, checked once for both adapters; :func:`path_from_url` reads
  ``sqlite:///PATH``.
- :func:`connect`: a connection in autocommit mode (transactions are explicit), with the pragmas
  every weir connection uses; :func:`enable_wal` switches the file to WAL (readers never block the
  writer), retrying while another process holds the file.
- :func:`write_transaction`: one ``BEGIN IMMEDIATE`` transaction (the write lock is taken first, so
  two writers never deadlock on a lock upgrade), retried while the file is busy, its failure
  translated into :class:`~weir.errors.StateError` by the caller's message.

Connections are cached per process and thread by :mod:`weir.state.connections` (never used across
``fork()``); ``sqlite3`` is in the standard library, so there is no optional import here.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from weir._redact import redact_url
from weir._util import positive_float, positive_int
from weir.errors import ConfigError, StateError
from weir.state.config import ProviderConfig

__all__ = [
    "SqliteOptions",
    "check_options",
    "connect",
    "enable_wal",
    "is_busy",
    "path_from_url",
    "write_transaction",
]

T = TypeVar("T")

_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
_CACHE_KIB = -65536  # page cache per connection: 64 MiB (negative = KiB, SQLite's convention)


def _close(conn: sqlite3.Connection) -> None:
    conn.close()


def check_options(path: str, timeout: object, synchronous: object, *, what: str) -> tuple[str, float, str]:
    """``(absolute path, timeout, SYNCHRONOUS)`` of checked options; ``what`` names the user in errors.

    Raises
    ------
    ConfigError
        If the path is empty or not a file (``:memory:``, ``file:`` URIs), the timeout is not a
        positive number of seconds, or ``synchronous`` is neither ``NORMAL`` nor ``FULL``.
    """
    if not isinstance(path, str) or not path:
        msg = f"{what}: 'path' must be a non-empty string"
        raise ConfigError(msg)
    if path == ":memory:" or path.startswith("file:"):
        msg = (
            f"{what}: {path!r} is not a database file path; a state must outlive the process, so give "
            "sqlite:///PATH or a file path (the memory provider / MemoryMapState keep state in memory)"
        )
        raise ConfigError(msg)
    timeout_s = positive_float(timeout, f"{what}: timeout", expected="a positive number of seconds")
    if not isinstance(synchronous, str) or synchronous.upper() not in ("NORMAL", "FULL"):
        msg = f"{what}: synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}"
        raise ConfigError(msg)
    return os.path.abspath(path), timeout_s, synchronous.upper()


#: rows in a namespace's delta table after which a commit is followed by a merge into ``weir_kv``
MERGE_ROWS = 100_000


@dataclass(frozen=True)
class SqliteOptions:
    """Options of the ``sqlite`` provider.

    Attributes
    ----------
    path:
        Path of the database file (made absolute; parent directories are created).
    timeout:
        Seconds a writer waits for the database's write lock before failing (default 30).
    synchronous:
        ``"NORMAL"`` (default; a commit survives a crash of the process) or ``"FULL"`` (a commit
        also survives an OS crash or power loss, at the cost of an fsync per commit).
    merge_rows:
        A namespace's delta is merged into its main table once it holds this many rows (default
        :data:`MERGE_ROWS`; smaller: cheaper merges, more often; larger: fewer, larger merges).
    """

    path: str
    timeout: float = 30.0
    synchronous: str = "NORMAL"
    merge_rows: int = MERGE_ROWS

    def __post_init__(self) -> None:
        path, timeout, synchronous = check_options(self.path, self.timeout, self.synchronous, what="sqlite provider")
        m = self.merge_rows
        positive_int(m, "sqlite provider: 'mergeRows'")
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "timeout", timeout)
        object.__setattr__(self, "synchronous", synchronous)

    @classmethod
    def from_config(cls, cfg: ProviderConfig) -> SqliteOptions:
        """Options from a parsed provider configuration (``url`` or ``path``)."""
        opts = cfg.options
        path = opts.get("path")
        url = opts.get("url")
        if path is None and url is None:
            msg = "sqlite provider: set 'url' (sqlite:///PATH) or 'path' in topology.state.provider.config"
            raise ConfigError(msg)
        if path is None:
            path = path_from_url(str(url))
        kwargs: dict[str, Any] = {"path": path}
        if "timeout" in opts:
            kwargs["timeout"] = opts["timeout"]
        if "synchronous" in opts:
            kwargs["synchronous"] = opts["synchronous"]
        if "mergeRows" in opts:
            kwargs["merge_rows"] = opts["mergeRows"]
        return cls(**kwargs)


def path_from_url(url: str) -> str:
    """The file path of ``sqlite:///relative.db`` or ``sqlite:////absolute.db``."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() != "sqlite":
        msg = f"sqlite provider: url {url!r} must look like sqlite:///PATH (relative) or sqlite:////PATH"
        raise ConfigError(msg)
    if "?" in rest or "#" in rest:
        msg = f"sqlite provider: url {redact_url(url)!r} may not have a query; set timeout/synchronous as config keys"
        raise ConfigError(msg)
    path = rest[1:] if rest.startswith("/") else rest
    if not path:
        msg = f"sqlite provider: url {url!r} names no file; use sqlite:///PATH"
        raise ConfigError(msg)
    return path


def is_busy(exc: sqlite3.Error) -> bool:
    """True if ``exc`` says the file is locked by another connection (retry later)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _BUSY_CODES
    return "locked" in str(exc) or "busy" in str(exc)


def connect(options: SqliteOptions) -> sqlite3.Connection:
    """A new connection to ``options.path`` (autocommit; ``synchronous``, memory temp store, 64 MiB cache).

    The caller opens transactions explicitly (:func:`write_transaction`); the connection may be
    used by another thread than the one that made it, never by two at once.
    """
    conn = sqlite3.connect(
        options.path,
        timeout=options.timeout,
        isolation_level=None,
        check_same_thread=False,
        cached_statements=256,
    )
    try:
        conn.execute(f"PRAGMA synchronous = {options.synchronous}")
        conn.execute("PRAGMA temp_store = MEMORY")
        # a commit into a large state updates rows spread over many B-tree pages; with SQLite's
        # default 2 MiB page cache those pages spill and are read again within one transaction,
        # so the commit's cost grew with the state. 64 MiB (used only as needed) keeps them.
        conn.execute(f"PRAGMA cache_size = {_CACHE_KIB}")
    except sqlite3.Error:
        conn.close()
        raise
    return conn


def enable_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put the file in WAL mode, retrying for ``timeout`` seconds while another process holds it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def write_transaction(
    conn: sqlite3.Connection,
    body: Callable[[sqlite3.Connection], T],
    *,
    timeout: float,
    failure: Callable[[sqlite3.Error], str],
    rerun: bool = True,
) -> T:
    """Run ``body`` in one ``BEGIN IMMEDIATE`` transaction; retry while the file is busy.

    A busy error is retried with a growing pause until ``timeout`` seconds have passed — the
    whole ``body`` again if ``rerun`` (it must then be repeatable), otherwise only a ``BEGIN``
    that did not get the lock. Anything raised rolls the transaction back; a SQLite error that is
    not retried becomes a :class:`~weir.errors.StateError` with the message ``failure(exc)``.
    """
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        began = False
        try:
            conn.execute("BEGIN IMMEDIATE")
            began = True
            result = body(conn)
            conn.execute("COMMIT")
            return result
        except BaseException as exc:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            if not isinstance(exc, sqlite3.Error):
                raise
            if (
                isinstance(exc, sqlite3.OperationalError)
                and is_busy(exc)
                and (rerun or not began)
                and time.monotonic() < deadline
            ):
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
                continue
            raise StateError(failure(exc)) from exc
