"""The change feed in SQLite (``weir.state.changelog.retain``): two tables beside the state.

Layout (made by the first logged commit)::

    weir_changes   (ns TEXT, txid INTEGER, k BLOB, before BLOB, after BLOB, PRIMARY KEY (ns, txid, k))
    weir_changelog (ns TEXT PRIMARY KEY, since INTEGER, retain INTEGER)   the first logged txid, N

Every function here runs inside the caller's transaction: :func:`log_change_set` inside the commit's
``BEGIN IMMEDIATE`` transaction (so the log and the commit are one atomic step), before the
prepared rows move. A key's *before* value is its committed value then (the delta overlays the
main table); NULL when it was absent. *after* is the prepared value, NULL for a delete.
"""

from __future__ import annotations

import sqlite3

from weir.state.changelog import ChangeRow, LogRange

__all__ = ["drop_log", "log_change_set", "read_log_changes", "read_log_range"]

_CREATE = (
    "CREATE TABLE IF NOT EXISTS weir_changes (ns TEXT NOT NULL, txid INTEGER NOT NULL, k BLOB NOT NULL, "
    "before BLOB, after BLOB, PRIMARY KEY (ns, txid, k)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS weir_changelog (ns TEXT NOT NULL PRIMARY KEY, since INTEGER NOT NULL, "
    "retain INTEGER NOT NULL) WITHOUT ROWID",
)
# the committed value of p.k before the commit: a delta row wins (NULL there: deleted), else the main table
_LOG = (
    "INSERT OR REPLACE INTO weir_changes (ns, txid, k, before, after) "
    "SELECT p.ns, ?2, p.k, CASE WHEN d.k IS NOT NULL THEN d.v ELSE m.v END, p.v "
    "FROM weir_prepare p LEFT JOIN weir_delta d ON d.ns = p.ns AND d.k = p.k "
    "LEFT JOIN weir_kv m ON m.ns = p.ns AND m.k = p.k WHERE p.ns = ?1"
)
_PRUNE = "DELETE FROM weir_changes WHERE ns = ? AND txid <= ?"
_RANGE_SET = (
    "INSERT INTO weir_changelog (ns, since, retain) VALUES (?, ?, ?) "
    "ON CONFLICT (ns) DO UPDATE SET retain = excluded.retain"
)
_RANGE = "SELECT since, retain FROM weir_changelog WHERE ns = ?"
_CHANGES = "SELECT txid, k, before, after FROM weir_changes WHERE ns = ? AND txid > ? AND txid <= ? ORDER BY txid, k"


def _exists(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'weir_changelog'").fetchone() is not None


def log_change_set(conn: sqlite3.Connection, namespace: str, txid: int, retain: int) -> None:
    """Log the prepared set of ``namespace`` as ``txid``; forget txids up to ``txid - retain``."""
    for stmt in _CREATE:
        conn.execute(stmt)
    conn.execute(_LOG, (namespace, txid))
    conn.execute(_PRUNE, (namespace, txid - retain))
    conn.execute(_RANGE_SET, (namespace, txid, retain))


def read_log_range(conn: sqlite3.Connection, namespace: str) -> LogRange | None:
    """The namespace's feed: first logged txid and retain (None when it never logged)."""
    if not _exists(conn):
        return None
    row = conn.execute(_RANGE, (namespace,)).fetchone()
    return None if row is None else LogRange(int(row[0]), int(row[1]))


def read_log_changes(conn: sqlite3.Connection, namespace: str, after_txid: int, upto_txid: int) -> list[ChangeRow]:
    """Logged changes of txids in (``after_txid``, ``upto_txid``], by txid then key."""
    if not _exists(conn):
        return []
    rows = conn.execute(_CHANGES, (namespace, after_txid, upto_txid)).fetchall()
    return [ChangeRow(int(t), bytes(k), b, a) for t, k, b, a in rows]


def drop_log(conn: sqlite3.Connection, namespace: str) -> None:
    """Forget the namespace's feed (inside :meth:`SqliteBackend.drop`'s transaction)."""
    if _exists(conn):
        conn.execute("DELETE FROM weir_changes WHERE ns = ?", (namespace,))
        conn.execute("DELETE FROM weir_changelog WHERE ns = ?", (namespace,))
