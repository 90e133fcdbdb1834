"""The change feed in PostgreSQL (``weir.state.changelog.retain``): two tables beside the state.

Layout (``<schema>.<prefix>…``, made before the first logged commit)::

    weir_changes   (ns TEXT, txid BIGINT, k BYTEA, before BYTEA, after BYTEA, kh, PRIMARY KEY (ns, txid, kh))
    weir_changelog (ns TEXT PRIMARY KEY, since BIGINT, retain BIGINT)   the first logged txid, N

:meth:`ChangelogSql.log` runs inside the commit's transaction (after the namespace's txid row is
locked, before the prepared rows move), so the log and the commit are one atomic step. A key's
*before* value is its committed value then (NULL: absent); *after* the prepared value (NULL: deleted).
"""

from __future__ import annotations

from typing import Any

from weir.state.changelog import ChangeRow, LogRange

__all__ = ["ChangelogSql"]


class ChangelogSql:
    """The change feed's SQL for one backend's tables (``table(suffix)`` quotes a validated name)."""

    def __init__(self, table: Any) -> None:
        ch, cl, kv, prep = table("changes"), table("changelog"), table("kv"), table("prepare")
        kh = "kh BYTEA GENERATED ALWAYS AS (sha256(k)) STORED"
        self.create = (
            f"CREATE TABLE IF NOT EXISTS {ch} (ns TEXT NOT NULL, txid BIGINT NOT NULL, k BYTEA NOT NULL, "
            f"before BYTEA, after BYTEA, {kh}, PRIMARY KEY (ns, txid, kh))",
            f"CREATE TABLE IF NOT EXISTS {cl} (ns TEXT PRIMARY KEY, since BIGINT NOT NULL, retain BIGINT NOT NULL)",
        )
        self.exists = f"SELECT to_regclass('{cl}') IS NOT NULL AND to_regclass('{ch}') IS NOT NULL"
        self.log = (
            f"INSERT INTO {ch} (ns, txid, k, before, after) SELECT p.ns, %s, p.k, m.v, p.v FROM {prep} p "
            f"LEFT JOIN {kv} m ON m.ns = p.ns AND m.kh = p.kh WHERE p.ns = %s "
            "ON CONFLICT (ns, txid, kh) DO UPDATE SET before = EXCLUDED.before, after = EXCLUDED.after"
        )
        self.prune = f"DELETE FROM {ch} WHERE ns = %s AND txid <= %s"
        self.range_set = (
            f"INSERT INTO {cl} (ns, since, retain) VALUES (%s, %s, %s) "
            "ON CONFLICT (ns) DO UPDATE SET retain = EXCLUDED.retain"
        )
        self.range = f"SELECT since, retain FROM {cl} WHERE ns = %s"
        self.changes = (
            f"SELECT txid, k, before, after FROM {ch} WHERE ns = %s AND txid > %s AND txid <= %s ORDER BY txid, kh"
        )
        self.drop = (f"DELETE FROM {ch} WHERE ns = %s", f"DELETE FROM {cl} WHERE ns = %s")

    def log_change_set(self, conn: Any, namespace: str, txid: int, retain: int) -> None:
        """Inside the commit's transaction: log the prepared set as ``txid``; forget txids up to ``txid - retain``."""
        conn.execute(self.log, (txid, namespace))
        conn.execute(self.prune, (namespace, txid - retain))
        conn.execute(self.range_set, (namespace, txid, retain))

    def read_range(self, conn: Any, namespace: str) -> LogRange | None:
        """The namespace's feed (None when it never logged)."""
        if not conn.execute(self.exists).fetchone()[0]:
            return None
        row = conn.execute(self.range, (namespace,)).fetchone()
        return None if row is None else LogRange(int(row[0]), int(row[1]))

    def read_changes(self, conn: Any, namespace: str, after_txid: int, upto_txid: int) -> list[ChangeRow]:
        """Logged changes of txids in (``after_txid``, ``upto_txid``]."""
        if not conn.execute(self.exists).fetchone()[0]:
            return []
        rows = conn.execute(self.changes, (namespace, after_txid, upto_txid), binary=True).fetchall()
        return [
            ChangeRow(int(t), bytes(k), None if b is None else bytes(b), None if a is None else bytes(a))
            for t, k, b, a in rows
        ]
