"""The ``sqlite`` provider: weir's embedded, durable default store (one database file, WAL mode).

Layout (four tables, clustered on their primary keys)::

    weir_kv      (ns TEXT, k BLOB, v BLOB NOT NULL, PRIMARY KEY (ns, k))  committed rows (main)
    weir_delta   (ns TEXT, k BLOB, v BLOB,          PRIMARY KEY (ns, k))  committed, not yet merged (NULL = deleted)
    weir_prepare (ns TEXT, k BLOB, v BLOB,          PRIMARY KEY (ns, k))  prepared sets (NULL = delete)
    weir_txid    (ns TEXT PRIMARY KEY, committed, prepared, epoch, delta) txid record per namespace

A commit does not write into the (possibly large) main table: it moves the prepared rows into the
small ``weir_delta`` table, so its cost depends on the size of the change set and of the delta, not
on the size of the state (rewriting 10,000 random rows of a 1M-row B-tree rewrites thousands of its
leaf pages; the delta's pages are few and hot). Readers overlay the delta over the main table in one
SQL statement (a delta row wins; a NULL one is a deleted key). When a namespace's delta reaches
:data:`MERGE_ROWS` rows, the commit is followed by a merge — a second transaction that moves the
delta into the main table in key order, touching each leaf page once for the whole delta rather than
once per commit — whose cost is thus shared by the commits since the last one. The merge changes
nothing a reader sees, so a crash before or during it (SQLite rolls the transaction back) leaves
the delta for the next commit's merge. Files of the previous layout (schema version 1, no delta)
are migrated on open by adding the empty table and column, in one transaction.

Every write method is one SQL transaction opened with ``BEGIN IMMEDIATE`` (the write lock is taken
first, so two writers never deadlock on a lock upgrade), and the namespace's epoch is checked inside
it. A commit moves rows with ``INSERT ... SELECT`` and ``DELETE ... WHERE k IN (SELECT ...)``, so its
cost is SQLite's, not Python's. Several processes may write different namespaces of one file at once:
they queue on the write lock (``busy_timeout``) and a busy error is retried until ``timeout``.

Connections are made per process and per thread (a connection is never used across ``fork()`` or by
two threads), so one backend object may be shared by threads, inherited by forked Spark Python
workers, or pickled.

Configuration (``topology.state.provider.config``)::

    {"url": "sqlite:///relative/path.db"}     # or sqlite:////absolute/path.db, or {"path": "..."}
    {"timeout": 30}                            # seconds a writer waits for the write lock
    {"synchronous": "NORMAL"}                  # NORMAL (default: survives a process crash) or FULL
                                               # (also survives a power loss, slower commits)
    {"mergeRows": 100000}                      # delta rows that trigger a merge into the main table
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any, TypeVar

from weir._faults import crash_point
from weir.connectors.sqlite.changelog import drop_log, log_change_set, read_log_changes, read_log_range
from weir.connectors.sqlite.connection import (
    MERGE_ROWS,
    SqliteOptions,
    _close,
    connect,
    enable_wal,
    is_busy,
    path_from_url,
    write_transaction,
)
from weir.errors import ConfigError, StateError
from weir.state.backend import Backend, Changes, TxidRecord, check_epoch
from weir.state.changelog import ChangelogBackend, ChangeRow, LogRange
from weir.state.config import ProviderConfig
from weir.state.connections import ProcessConnections
from weir.state.ranges import KeyRange, KeyRangeBackend

__all__ = ["MERGE_ROWS", "SqliteBackend", "SqliteOptions", "open_backend", "path_from_url"]

T = TypeVar("T")

_SCHEMA_VERSION = 2
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS weir_kv (ns TEXT NOT NULL, k BLOB NOT NULL, v BLOB NOT NULL, "
    "PRIMARY KEY (ns, k)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS weir_prepare (ns TEXT NOT NULL, k BLOB NOT NULL, v BLOB, "
    "PRIMARY KEY (ns, k)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS weir_txid (ns TEXT NOT NULL PRIMARY KEY, committed INTEGER, "
    "prepared INTEGER, epoch INTEGER NOT NULL DEFAULT 0, delta INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS weir_delta (ns TEXT NOT NULL, k BLOB NOT NULL, v BLOB, "
    "PRIMARY KEY (ns, k)) WITHOUT ROWID",
)
# schema version 1 → 2: the delta table (above, IF NOT EXISTS) and the txid record's delta count
_MIGRATE_1_TO_2 = ("ALTER TABLE weir_txid ADD COLUMN delta INTEGER NOT NULL DEFAULT 0",)

# reads overlay the delta over the main table, each in one statement (one consistent snapshot)
_NO_DELTA = "NOT EXISTS (SELECT 1 FROM weir_delta d WHERE d.ns = m.ns AND d.k = m.k)"
_GET = (
    "SELECT v FROM weir_delta WHERE ns = ?1 AND k = ?2 "
    f"UNION ALL SELECT v FROM weir_kv m WHERE ns = ?1 AND k = ?2 AND {_NO_DELTA}"
)
_GET_MANY = (
    "SELECT k, v FROM weir_delta WHERE ns = ?1 AND k IN ({keys}) "
    f"UNION ALL SELECT k, v FROM weir_kv m WHERE ns = ?1 AND k IN ({{keys}}) AND {_NO_DELTA}"
)
_COUNT = (
    "SELECT (SELECT count(*) FROM weir_kv WHERE ns = ?1)"
    " + (SELECT count(*) FROM weir_delta WHERE ns = ?1 AND v IS NOT NULL)"
    " - (SELECT count(*) FROM weir_delta d JOIN weir_kv m ON m.ns = d.ns AND m.k = d.k WHERE d.ns = ?1)"
)
_SCAN = (
    f"SELECT k, v FROM weir_kv m WHERE ns = ?1 AND k {{op}} ?2 AND {_NO_DELTA} "
    "UNION ALL SELECT k, v FROM weir_delta WHERE ns = ?1 AND k {op} ?2 AND v IS NOT NULL ORDER BY k LIMIT ?3"
)
_SCAN_FIRST = _SCAN.format(op=">=")
# a key about ?2 rows into the namespace (main rows and the delta's keys: only a boundary, never a row)
_SPLIT_AT = (
    "SELECT k FROM weir_kv WHERE ns = ?1 UNION SELECT k FROM weir_delta WHERE ns = ?1 ORDER BY k LIMIT 1 OFFSET ?2"
)
_SCAN_NEXT = _SCAN.format(op=">")
_TXIDS = "SELECT committed, prepared, epoch FROM weir_txid WHERE ns = ?"
_LOAD_PREPARED = "SELECT t.prepared, p.k, p.v FROM weir_txid t LEFT JOIN weir_prepare p ON p.ns = t.ns WHERE t.ns = ?"
# every distinct namespace of a table by index skip-scan (no full scan of a big table)
_NS_STEP = (
    "{n}(ns) AS (SELECT min(ns) FROM {t} UNION ALL "
    "SELECT (SELECT min(ns) FROM {t} WHERE ns > {n}.ns) FROM {n} WHERE {n}.ns IS NOT NULL)"
)
_NAMESPACES = (
    "WITH RECURSIVE "
    + _NS_STEP.format(n="a", t="weir_kv")
    + ", "
    + _NS_STEP.format(n="b", t="weir_prepare")
    + ", "
    + _NS_STEP.format(n="c", t="weir_delta")
    + " SELECT ns FROM weir_txid UNION SELECT ns FROM a WHERE ns IS NOT NULL"
    " UNION SELECT ns FROM b WHERE ns IS NOT NULL UNION SELECT ns FROM c WHERE ns IS NOT NULL"
)
_TXID_ENSURE = "INSERT OR IGNORE INTO weir_txid (ns) VALUES (?)"
_TXID_SET = "UPDATE weir_txid SET committed = ?, prepared = ?, epoch = ? WHERE ns = ?"
_UPSERT = "INSERT INTO weir_kv (ns, k, v) VALUES (?, ?, ?) ON CONFLICT (ns, k) DO UPDATE SET v = excluded.v"
_DELTA_ROW = "INSERT INTO weir_delta (ns, k, v) VALUES (?, ?, ?) ON CONFLICT (ns, k) DO UPDATE SET v = excluded.v"
_DELTA_DROP_KEY = "DELETE FROM weir_delta WHERE ns = ? AND k = ?"
_DELTA_ANY = "SELECT 1 FROM weir_delta WHERE ns = ? LIMIT 1"
_DELTA_ADD = "UPDATE weir_txid SET delta = delta + ? WHERE ns = ? RETURNING delta"
_PREPARE_CLEAR = "DELETE FROM weir_prepare WHERE ns = ?"
_PREPARE_ROW = "INSERT INTO weir_prepare (ns, k, v) VALUES (?, ?, ?)"
# the commit: prepared rows into the delta (deletes included, as NULL)
_MOVE_TO_DELTA = (
    "INSERT INTO weir_delta (ns, k, v) SELECT ns, k, v FROM weir_prepare WHERE ns = ? "
    "ON CONFLICT (ns, k) DO UPDATE SET v = excluded.v"
)
# the merge: the delta into the main table, in key order
_MERGE_UPSERTS = (
    "INSERT INTO weir_kv (ns, k, v) SELECT ns, k, v FROM weir_delta WHERE ns = ? AND v IS NOT NULL "
    "ORDER BY k ON CONFLICT (ns, k) DO UPDATE SET v = excluded.v"
)
_MERGE_DELETES = "DELETE FROM weir_kv WHERE ns = ? AND k IN (SELECT k FROM weir_delta WHERE ns = ? AND v IS NULL)"
_MERGE_CLEAR = "DELETE FROM weir_delta WHERE ns = ?"
# a change set as large as a merge goes straight into the main table (after the delta, if any)
_PREPARED_AT_LEAST = "SELECT count(*) FROM (SELECT 1 FROM weir_prepare WHERE ns = ? LIMIT ?)"
_MOVE_UPSERTS = (
    "INSERT INTO weir_kv (ns, k, v) SELECT ns, k, v FROM weir_prepare WHERE ns = ? AND v IS NOT NULL "
    "ON CONFLICT (ns, k) DO UPDATE SET v = excluded.v"
)
_MOVE_DELETES = "DELETE FROM weir_kv WHERE ns = ? AND k IN (SELECT k FROM weir_prepare WHERE ns = ? AND v IS NULL)"
_MERGE_DONE = "UPDATE weir_txid SET delta = 0 WHERE ns = ?"

_GET_MANY_CHUNK = 500  # bound parameters per IN (...) query
_SCAN_CHUNK = 2000  # rows per scan page
_PUT_MANY_CHUNK = 10_000  # rows per executemany of put_many


class SqliteBackend(Backend, ChangelogBackend, KeyRangeBackend):
    """Backend SPI over one SQLite database file (see the module docstring for the layout)."""

    kind = "sqlite"
    durable = True
    distributed = False

    def __init__(self, options: SqliteOptions) -> None:
        self.options = options
        self.merge_rows = options.merge_rows
        self.path = options.path
        self._conns: ProcessConnections[sqlite3.Connection] = ProcessConnections(self._new_connection, _close)

    @classmethod
    def open(cls, options: SqliteOptions) -> SqliteBackend:
        """Create the file (and its directory) and the tables if needed; raise ConfigError if impossible."""
        backend = cls(options)
        try:
            os.makedirs(os.path.dirname(options.path), exist_ok=True)
            backend._init_schema()
            backend._check("quick_check")
        except ConfigError:
            backend.close()
            raise
        except (OSError, sqlite3.Error) as exc:
            backend.close()
            msg = (
                f"cannot open the sqlite state store {backend.describe()}: {exc}; check that the "
                "directory is writable and the file is a SQLite database (or point url/path elsewhere)"
            )
            raise ConfigError(msg) from exc
        return backend

    def describe(self) -> str:
        """``sqlite:///<absolute path>``."""
        return "sqlite:///" + self.path

    def __repr__(self) -> str:
        return f"SqliteBackend({self.describe()!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    # ---- connections ---------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        return self._conns.get()

    def _new_connection(self) -> sqlite3.Connection:
        return connect(self.options)

    def close(self) -> None:
        """Close this process's connections (a later call reconnects)."""
        self._conns.close()

    def _init_schema(self) -> None:
        enable_wal(self._conn(), self.options.timeout)

        def create(c: sqlite3.Connection) -> None:
            (version,) = c.execute("PRAGMA user_version").fetchone()
            if version > _SCHEMA_VERSION:
                msg = (
                    f"the state store {self.describe()} has schema version {version}, newer than this "
                    f"weir ({_SCHEMA_VERSION}); upgrade weir"
                )
                raise ConfigError(msg)
            old_txid = c.execute("SELECT 1 FROM sqlite_master WHERE name = 'weir_txid'").fetchone()
            has_delta = old_txid is not None and any(
                r[1] == "delta" for r in c.execute("PRAGMA table_info(weir_txid)").fetchall()
            )
            for stmt in _SCHEMA:
                c.execute(stmt)
            if old_txid is not None and not has_delta:  # a file of schema version 1: migrate
                for stmt in _MIGRATE_1_TO_2:
                    c.execute(stmt)
            if version < _SCHEMA_VERSION:
                c.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")

        self._write("(schema)", create)

    def _integrity(self, pragma: str) -> list[str]:
        rows = self._conn().execute(f"PRAGMA {pragma}(20)").fetchall()
        return [] if [r[0] for r in rows] == ["ok"] else [str(r[0]) for r in rows]

    def _check(self, pragma: str) -> None:
        """Refuse a damaged database file (``PRAGMA quick_check`` at open), naming the file."""
        try:
            problems = self._integrity(pragma)
        except sqlite3.DatabaseError as exc:
            problems = [str(exc)]
        if problems:
            msg = (
                f"the sqlite state store {self.describe()} is damaged ({pragma}: {'; '.join(problems[:3])}); "
                "weir will not read or write it, since rows could be missing silently. Restore the file from a "
                "backup; `weir state inspect --verify` runs the full check"
            )
            raise ConfigError(msg)

    def verify(self) -> list[str]:
        """``PRAGMA integrity_check`` of the whole file, then the default record checks."""
        try:
            problems = [f"{self.describe()}: integrity_check: {p}" for p in self._integrity("integrity_check")]
        except sqlite3.DatabaseError as exc:
            return [f"{self.describe()}: integrity_check failed: {exc}"]
        return problems or super().verify()

    # ---- transactions --------------------------------------------------------------------------
    def _write(self, namespace: str, body: Callable[[sqlite3.Connection], T], *, rerun: bool = True) -> T:
        """Run ``body`` in one ``BEGIN IMMEDIATE`` transaction; retry while the file is busy."""

        def failure(exc: sqlite3.Error) -> str:
            return f"namespace {namespace!r}: write to {self.describe()} failed: {exc}" + (
                f"; the file stayed locked by another writer for {self.options.timeout:g} s "
                "(raise 'timeout' in the provider config)"
                if is_busy(exc)
                else ""
            )

        return write_transaction(self._conn(), body, timeout=self.options.timeout, failure=failure, rerun=rerun)

    def _read(self, namespace: str, body: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return body(self._conn())
        except sqlite3.Error as exc:
            msg = f"namespace {namespace!r}: read from {self.describe()} failed: {exc}"
            raise StateError(msg) from exc

    @staticmethod
    def _fence(conn: sqlite3.Connection, namespace: str, epoch: int | None, *, exact: bool = False) -> TxidRecord:
        """Inside the write transaction: read (creating) the txid record and check ``epoch``."""
        row = conn.execute(_TXIDS, (namespace,)).fetchone()
        if row is None:
            conn.execute(_TXID_ENSURE, (namespace,))
            row = (None, None, 0)
        committed, prepared, stored = row
        check_epoch(namespace, epoch, stored, exact=exact)
        if epoch is not None and epoch > stored:
            stored = epoch
        return TxidRecord(committed, prepared, stored)

    # ---- reads ---------------------------------------------------------------------------------
    def get(self, namespace: str, key: bytes) -> bytes | None:
        """Committed value of ``key``, or None."""
        try:
            row = self._conn().execute(_GET, (namespace, key)).fetchone()
        except sqlite3.Error as exc:
            msg = f"namespace {namespace!r}: read of a key from {self.describe()} failed: {exc}"
            raise StateError(msg) from exc
        return None if row is None else row[0]  # type: ignore[no-any-return]

    def get_many(self, namespace: str, keys: list[bytes]) -> list[bytes | None]:
        """Committed values of ``keys`` in order, ``IN (...)`` queries of up to 500 keys."""

        def body(conn: sqlite3.Connection) -> list[bytes | None]:
            found: dict[bytes, bytes] = {}
            for i in range(0, len(keys), _GET_MANY_CHUNK):
                chunk = keys[i : i + _GET_MANY_CHUNK]
                sql = _GET_MANY.format(keys=",".join(f"?{j + 2}" for j in range(len(chunk))))
                found.update(conn.execute(sql, (namespace, *chunk)).fetchall())
            return [found.get(k) for k in keys]  # a deleted key's delta row holds None

        if not keys:
            return []
        return self._read(namespace, body)

    def scan(self, namespace: str) -> Iterator[tuple[bytes, bytes]]:
        """Committed rows in key order, read in pages of 2,000 (no read lock is held between pages)."""
        return self.scan_range(namespace, (None, None))

    def scan_range(self, namespace: str, key_range: KeyRange) -> Iterator[tuple[bytes, bytes]]:
        """Committed rows with ``low <= key < high`` in key order, in pages of 2,000."""
        low, high = key_range

        def page(last: bytes | None) -> list[tuple[bytes, bytes]]:
            if last is None:
                first = low or b""
                return self._read(
                    namespace, lambda c: c.execute(_SCAN_FIRST, (namespace, first, _SCAN_CHUNK)).fetchall()
                )
            return self._read(namespace, lambda c: c.execute(_SCAN_NEXT, (namespace, last, _SCAN_CHUNK)).fetchall())

        rows = page(None)
        while rows:
            for k, v in rows:
                if high is not None and k >= high:
                    return
                yield k, v
            if len(rows) < _SCAN_CHUNK:
                return
            rows = page(rows[-1][0])

    def key_ranges(self, namespace: str, parts: int) -> list[KeyRange]:
        """``parts`` ranges of about equal row counts, split at stored keys (one ordered walk of the keys each)."""
        n = self.count(namespace)
        if parts <= 1 or n < 2 * parts:
            return [(None, None)]

        def cuts(c: sqlite3.Connection) -> list[bytes | None]:
            rows = [c.execute(_SPLIT_AT, (namespace, i * n // parts)).fetchone() for i in range(1, parts)]
            return [None if row is None else bytes(row[0]) for row in rows]

        bounds = sorted({b for b in self._read(namespace, cuts) if b is not None})
        edges: list[bytes | None] = [None, *bounds, None]
        return [(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]

    def count(self, namespace: str) -> int:
        """Number of committed rows (main rows, plus the delta's new keys, minus its deleted ones)."""
        return int(self._read(namespace, lambda c: c.execute(_COUNT, (namespace,)).fetchone()[0]))

    def txids(self, namespace: str) -> TxidRecord:
        """The txid record (None / None / 0 for an unknown namespace)."""
        row = self._read(namespace, lambda c: c.execute(_TXIDS, (namespace,)).fetchone())
        return TxidRecord() if row is None else TxidRecord(row[0], row[1], row[2])

    def load_prepared(self, namespace: str) -> tuple[int, dict[bytes, bytes | None]] | None:
        """The prepared change set and its txid (one consistent query), or None."""
        rows = self._read(namespace, lambda c: c.execute(_LOAD_PREPARED, (namespace,)).fetchall())
        if not rows or rows[0][0] is None:
            return None
        return int(rows[0][0]), {k: v for _, k, v in rows if k is not None}

    def namespaces(self) -> list[str]:
        """Every namespace with rows, a prepared set or a txid record, sorted."""
        rows = self._read("*", lambda c: c.execute(_NAMESPACES).fetchall())
        return sorted(r[0] for r in rows)

    # ---- atomic writes -------------------------------------------------------------------------
    def write_prepared(self, namespace: str, txid: int, changes: Changes, epoch: int | None) -> None:
        """Replace the prepared change set with ``changes`` as ``txid`` (one transaction)."""
        self._prepare(namespace, txid, changes, epoch, exact=False)

    def write_prepared_owned(self, namespace: str, txid: int, changes: Changes, epoch: int) -> None:
        """:meth:`write_prepared` while the stored epoch is exactly ``epoch`` (checked in the same transaction)."""
        self._prepare(namespace, txid, changes, epoch, exact=True)

    def _prepare(self, namespace: str, txid: int, changes: Changes, epoch: int | None, *, exact: bool) -> None:
        def body(conn: sqlite3.Connection) -> None:
            rec = self._fence(conn, namespace, epoch, exact=exact)
            conn.execute(_PREPARE_CLEAR, (namespace,))
            conn.executemany(_PREPARE_ROW, ((namespace, k, v) for k, v in changes.items()))
            conn.execute(_TXID_SET, (rec.committed, txid, rec.epoch, namespace))

        self._write(namespace, body)

    def commit_prepared(self, namespace: str, txid: int, epoch: int | None) -> None:
        """Commit the prepared set ``txid``: one transaction, then maybe a merge (a second one).

        1. In one transaction (the commit point): check the epoch and the prepared txid, move the
           prepared rows into the delta (``INSERT ... SELECT``), clear the prepared set, record
           ``txid`` as committed and add the moved rows to the delta's count. A prepared set of
           ``merge_rows`` rows or more would be merged at once: it goes straight into the main
           table instead (after the delta, if any), in the same transaction.
        2. If the delta now holds ``merge_rows`` rows or more, :meth:`merge` it into the main
           table (a separate transaction; nothing a reader sees changes).
        """
        delta = self._write(namespace, lambda conn: self._commit_in(conn, namespace, txid, epoch))
        self._after_commit(namespace, txid, delta)

    def _after_commit(self, namespace: str, txid: int, delta: int) -> None:
        if delta >= self.merge_rows:
            crash_point("sqlite_before_merge", txid)
            self.merge(namespace, txid=txid)

    def _commit_in(
        self, conn: sqlite3.Connection, namespace: str, txid: int, epoch: int | None, retain: int = 0
    ) -> int:
        """Inside the write transaction: the commit (see :meth:`commit_prepared`); the delta's new size.

        With ``retain`` (:meth:`commit_logged`), the change set is logged first, in the same transaction.
        """
        limit = self.merge_rows
        rec = self._fence(conn, namespace, epoch)
        if rec.prepared != txid:
            msg = (
                f"namespace {namespace!r}: cannot commit txid {txid}: the prepared txid is "
                f"{rec.prepared} and the committed txid is {rec.committed}; commit only what was prepared"
            )
            raise StateError(msg)
        if retain:
            log_change_set(conn, namespace, txid, retain)
            crash_point("changelog_logged", txid)  # inside the transaction: a kill here commits neither
        if conn.execute(_PREPARED_AT_LEAST, (namespace, limit)).fetchone()[0] >= limit:
            self._merge_delta(conn, namespace)
            conn.execute(_MOVE_UPSERTS, (namespace,))
            conn.execute(_MOVE_DELETES, (namespace, namespace))
            moved = 0
        else:
            before = conn.total_changes
            conn.execute(_MOVE_TO_DELTA, (namespace,))
            moved = conn.total_changes - before  # rows inserted or replaced: an upper bound of new ones
        conn.execute(_PREPARE_CLEAR, (namespace,))
        conn.execute(_TXID_SET, (txid, None, rec.epoch, namespace))
        return int(conn.execute(_DELTA_ADD, (moved, namespace)).fetchone()[0])

    # ---- change feed (weir.state.changelog) ---------------------------------------------------
    def commit_logged(self, namespace: str, txid: int, epoch: int | None, retain: int) -> None:
        """:meth:`commit_prepared` with the change set logged in the same transaction (see ChangelogBackend)."""
        delta = self._write(namespace, lambda conn: self._commit_in(conn, namespace, txid, epoch, retain))
        self._after_commit(namespace, txid, delta)

    def log_range(self, namespace: str) -> LogRange | None:
        """What the namespace's feed holds (None when it never logged)."""
        return self._read(namespace, lambda c: read_log_range(c, namespace))

    def log_changes(self, namespace: str, after_txid: int, upto_txid: int) -> list[ChangeRow]:
        """Logged changes of txids in (``after_txid``, ``upto_txid``]."""
        return self._read(namespace, lambda c: read_log_changes(c, namespace, after_txid, upto_txid))

    def merge(self, namespace: str, *, txid: int | None = None) -> None:
        """Move ``namespace``'s delta into its main table (one transaction; readers see no change).

        Upserts of the delta's rows in key order, deletes of its NULL rows, then the delta and its
        count cleared. Not fenced: it moves committed rows only, so whoever runs it leaves the
        same visible state. ``weir state`` and tests may call it; commits call it when the delta
        reaches :data:`MERGE_ROWS` rows.
        """
        self._write(namespace, lambda conn: self._merge_delta(conn, namespace, txid))

    @staticmethod
    def _merge_delta(conn: sqlite3.Connection, namespace: str, txid: int | None = None) -> None:
        """Inside a write transaction: the delta into the main table, then cleared."""
        conn.execute(_MERGE_UPSERTS, (namespace,))
        if txid is not None:
            crash_point("sqlite_during_merge", txid)
        conn.execute(_MERGE_DELETES, (namespace, namespace))
        conn.execute(_MERGE_CLEAR, (namespace,))
        conn.execute(_MERGE_DONE, (namespace,))

    def discard_prepared(self, namespace: str, epoch: int | None) -> None:
        """Delete the prepared change set (no-op when there is none)."""

        def body(conn: sqlite3.Connection) -> None:
            rec = self._fence(conn, namespace, epoch)
            conn.execute(_PREPARE_CLEAR, (namespace,))
            conn.execute(_TXID_SET, (rec.committed, None, rec.epoch, namespace))

        self._write(namespace, body)

    def write_direct(self, namespace: str, changes: Changes, epoch: int | None) -> None:
        """Apply ``changes`` to the committed rows (one transaction, into the delta), txids untouched."""
        self._direct(namespace, changes, epoch, exact=False)

    def write_owned(self, namespace: str, changes: Changes, epoch: int) -> None:
        """:meth:`write_direct` while the stored epoch is exactly ``epoch`` (checked in the same transaction)."""
        self._direct(namespace, changes, epoch, exact=True)

    def _direct(self, namespace: str, changes: Changes, epoch: int | None, *, exact: bool) -> None:
        def body(conn: sqlite3.Connection) -> None:
            rec = self._fence(conn, namespace, epoch, exact=exact)
            conn.executemany(_DELTA_ROW, ((namespace, k, v) for k, v in changes.items()))
            conn.execute(_TXID_SET, (rec.committed, rec.prepared, rec.epoch, namespace))
            conn.execute(_DELTA_ADD, (len(changes), namespace)).fetchone()

        self._write(namespace, body)

    def put_many(self, namespace: str, rows: Iterable[tuple[bytes, bytes]]) -> None:
        """Bulk load of committed rows in one transaction (``rows`` is streamed, not copied)."""
        it = iter(rows)

        def body(conn: sqlite3.Connection) -> None:
            self._fence(conn, namespace, None)
            shadowed = conn.execute(_DELTA_ANY, (namespace,)).fetchone() is not None
            while chunk := list(islice(it, _PUT_MANY_CHUNK)):
                conn.executemany(_UPSERT, ((namespace, k, v) for k, v in chunk))
                if shadowed:  # a delta row of the key would hide the loaded value
                    conn.executemany(_DELTA_DROP_KEY, ((namespace, k) for k, _ in chunk))

        self._write(namespace, body, rerun=False)

    def acquire_epoch(self, namespace: str) -> int:
        """Increment and return the namespace's epoch."""

        def body(conn: sqlite3.Connection) -> int:
            conn.execute(_TXID_ENSURE, (namespace,))
            row = conn.execute(
                "UPDATE weir_txid SET epoch = epoch + 1 WHERE ns = ? RETURNING epoch", (namespace,)
            ).fetchone()
            return int(row[0])

        return self._write(namespace, body)

    def drop(self, namespace: str) -> None:
        """Delete the rows, the prepared set and the txid record of ``namespace``."""

        def body(conn: sqlite3.Connection) -> None:
            for table in ("weir_kv", "weir_delta", "weir_prepare", "weir_txid"):
                conn.execute(f"DELETE FROM {table} WHERE ns = ?", (namespace,))
            drop_log(conn, namespace)

        self._write(namespace, body)


def open_backend(cfg: ProviderConfig) -> SqliteBackend:
    """Open (creating if needed) the SQLite store named by ``cfg`` (``url`` or ``path``)."""
    return SqliteBackend.open(SqliteOptions.from_config(cfg))
