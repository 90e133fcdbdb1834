"""The ``postgres`` provider: a shared, durable store that other services can query with SQL.

Layout (``<schema>.<prefix>…``, default ``public.weir_…``)::

    weir_kv      (ns TEXT, k BYTEA, v BYTEA NOT NULL, kh, PRIMARY KEY (ns, kh))  committed rows
    weir_prepare (ns TEXT, k BYTEA, v BYTEA,          kh, PRIMARY KEY (ns, kh))  prepared sets (NULL = delete)
    weir_txid    (ns TEXT PRIMARY KEY, committed BIGINT, prepared BIGINT, epoch BIGINT NOT NULL DEFAULT 0)

``kh`` is ``sha256(k)``, a stored generated column: PostgreSQL cannot index keys longer than about
2.7 KB, and state keys may be documents or long URLs. Lookups use ``kh = sha256(key) AND k = key``,
so another service can read a key with plain SQL the same way.

Every write method is one transaction that first locks the namespace's txid row
(``SELECT ... FOR UPDATE``, creating it if needed) and checks the writer's epoch there, so a fenced
driver can never overwrite a newer one's change set. A commit moves rows in SQL
(``INSERT ... SELECT ... ON CONFLICT DO UPDATE`` and ``DELETE ... USING``). Bulk rows travel as
``bytea[]`` arrays expanded with ``unnest`` or with binary ``COPY``: one round trip for any size.

Connections are made per process and per thread (never shared across ``fork()``), lazily, so the
backend may be pickled to Spark executors. Reads reconnect once when the connection broke.

Configuration (``topology.state.provider.config``)::

    {"url": "postgresql://user:password@host:5432/db",
     "schema": "public", "tablePrefix": "weir_", "connectTimeout": 5,
     "statementTimeout": 300, "socketTimeout": 360}

Bounded waits: ``statementTimeout`` (seconds) is set as the session's ``statement_timeout``, so the
server cancels a statement that runs (or waits for a lock) longer; ``socketTimeout`` (seconds) bounds
every read or write transaction on the client side — a frozen server (stopped process, paused VM)
cannot cancel anything, so past it the connection's socket is shut down and the call fails with a
:class:`~weir.errors.StateError` naming the store, the namespace and the operation. TLS and other
libpq settings go in the url's query (``?sslmode=verify-full&sslrootcert=ca.pem&sslcert=...``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeVar

from weir._faults import crash_point
from weir._util import validate_identifier
from weir.connectors.postgres.changelog import ChangelogSql
from weir.connectors.postgres.connection import (
    FailedCall,
    check_connection_options,
    connect,
    redact_url,
    run_guarded,
    scrub,
)
from weir.connectors.postgres.connection import close as _close
from weir.connectors.postgres.connection import connect_hint as _connect_hint
from weir.connectors.postgres.connection import import_psycopg as _import_psycopg
from weir.errors import ConfigError, StateError, StoreUnavailableError
from weir.state.backend import Backend, Changes, TxidRecord, check_epoch
from weir.state.changelog import ChangelogBackend, ChangeRow, LogRange
from weir.state.config import ProviderConfig
from weir.state.connections import ProcessConnections
from weir.state.ranges import KeyRange, KeyRangeBackend

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresBackend", "PostgresOptions", "open_backend", "redact_url"]

#: a prepared change set at least this large gets fresh planner statistics before it commits
LARGE_CHANGE_SET = 10_000

T = TypeVar("T")

#: the longest namespace weir's tables index (a btree entry holds at most about 2,700 bytes)
MAX_NAMESPACE_BYTES = 2000
#: the longest server error text quoted in a StateError (a refused row may be quoted whole)
_MAX_REASON = 1000


def shown_namespace(namespace: str, limit: int = 120) -> str:
    """``repr(namespace)``, cut to about ``limit`` characters with its length when it is longer."""
    if len(namespace) <= limit:
        return repr(namespace)
    return f"{namespace[: limit // 2]!r}... ({len(namespace)} characters)"


_SCHEMA_LOCK_ID = 0x7765_6972_5F73_6368  # pg_advisory_xact_lock key guarding table creation ("weir_sch")
_GET_MANY_CHUNK = 10_000
_SCAN_CHUNK = 5_000
_BULK_CHUNK = 50_000


@dataclass(frozen=True)
class PostgresOptions:
    """Options of the ``postgres`` provider.

    Attributes
    ----------
    url:
        libpq connection URL, ``postgresql://user[:password]@host[:port]/database``.
    schema:
        Schema of weir's tables (default ``public``; created if missing).
    table_prefix:
        Prefix of the table names (default ``weir_``: ``weir_kv``, ``weir_prepare``, ``weir_txid``).
    connect_timeout:
        Seconds to wait for a connection (default 5).
    statement_timeout:
        Seconds the server lets one statement run or wait for a lock (``statement_timeout``,
        default 300; 0 = no limit).
    socket_timeout:
        Seconds the client waits for one read or write transaction before it shuts the connection
        down (default ``statement_timeout + 60``, or 360; 0 = no limit). This is what ends the wait
        on a frozen server.
    """

    url: str
    schema: str = "public"
    table_prefix: str = "weir_"
    connect_timeout: float = 5.0
    statement_timeout: float = 300.0
    socket_timeout: float | None = None

    def __post_init__(self) -> None:
        sock = check_connection_options(
            self.url, self.connect_timeout, self.statement_timeout, self.socket_timeout, what="postgres provider"
        )
        validate_identifier(self.schema, what="postgres provider: schema")
        if not isinstance(self.table_prefix, str):
            msg = f"postgres provider: tablePrefix must be a string, got {type(self.table_prefix).__name__}"
            raise ConfigError(msg)
        for suffix in ("kv", "prepare", "txid"):
            validate_identifier(self.table_prefix + suffix, what="postgres provider: table name (tablePrefix)")
        object.__setattr__(self, "socket_timeout", sock)

    @classmethod
    def from_config(cls, cfg: ProviderConfig) -> PostgresOptions:
        """Options from a parsed provider configuration."""
        opts = cfg.options
        if not opts.get("url"):
            msg = "postgres provider: set 'url' (postgresql://user@host:port/database)"
            raise ConfigError(msg)
        kwargs: dict[str, Any] = {"url": opts["url"]}
        for key, name in (
            ("schema", "schema"),
            ("tablePrefix", "table_prefix"),
            ("connectTimeout", "connect_timeout"),
            ("statementTimeout", "statement_timeout"),
            ("socketTimeout", "socket_timeout"),
        ):
            if key in opts:
                kwargs[name] = opts[key]
        return cls(**kwargs)

    def table(self, suffix: str) -> str:
        """The quoted, schema-qualified name of table ``<prefix><suffix>`` (identifiers validated)."""
        return f'"{self.schema}"."{self.table_prefix}{suffix}"'


class _Statements:
    """The SQL of one backend, with its table names filled in."""

    def __init__(self, o: PostgresOptions) -> None:
        kv, prep, txid = o.table("kv"), o.table("prepare"), o.table("txid")
        # btree entries are limited to ~2.7 KB, so rows are keyed by sha256(k), a stored generated
        # column; k itself is kept (and rechecked) so other services can read keys as they are
        kh = "kh BYTEA GENERATED ALWAYS AS (sha256(k)) STORED"
        self.create = (
            f"CREATE TABLE IF NOT EXISTS {kv} (ns TEXT NOT NULL, k BYTEA NOT NULL, v BYTEA NOT NULL, "
            f"{kh}, PRIMARY KEY (ns, kh))",
            f"CREATE TABLE IF NOT EXISTS {prep} (ns TEXT NOT NULL, k BYTEA NOT NULL, v BYTEA, "
            f"{kh}, PRIMARY KEY (ns, kh))",
            f"CREATE TABLE IF NOT EXISTS {txid} (ns TEXT PRIMARY KEY, committed BIGINT, prepared BIGINT, "
            "epoch BIGINT NOT NULL DEFAULT 0)",
        )
        has_kh = "EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('{t}') AND attname = 'kh')"
        self.exists = (
            f"SELECT to_regclass('{kv}') IS NOT NULL, to_regclass('{prep}') IS NOT NULL, "
            f"to_regclass('{txid}') IS NOT NULL, {has_kh.format(t=kv)}, {has_kh.format(t=prep)}"
        )
        self.get = f"SELECT v FROM {kv} WHERE ns = %s AND kh = sha256(%b) AND k = %b"
        self.get_many = f"SELECT k, v FROM {kv} WHERE ns = %s AND kh = ANY(%b::bytea[])"
        self.count = f"SELECT count(*) FROM {kv} WHERE ns = %s"
        self.scan_first = f"SELECT kh, k, v FROM {kv} WHERE ns = %s ORDER BY kh LIMIT %s"
        self.scan_next = f"SELECT kh, k, v FROM {kv} WHERE ns = %s AND kh > %b ORDER BY kh LIMIT %s"
        self.txids = f"SELECT committed, prepared, epoch FROM {txid} WHERE ns = %s"
        self.load_prepared = (
            f"SELECT t.prepared, p.k, p.v FROM {txid} t LEFT JOIN {prep} p ON p.ns = t.ns WHERE t.ns = %s"
        )
        step = (
            "{n}(ns) AS (SELECT min(ns) FROM {t} UNION ALL "
            "SELECT (SELECT min(ns) FROM {t} WHERE ns > {n}.ns) FROM {n} WHERE {n}.ns IS NOT NULL)"
        )
        self.namespaces = (
            f"WITH RECURSIVE {step.format(n='a', t=kv)}, {step.format(n='b', t=prep)} "
            f"SELECT ns FROM {txid} UNION SELECT ns FROM a WHERE ns IS NOT NULL "
            "UNION SELECT ns FROM b WHERE ns IS NOT NULL"
        )
        self.lock = f"SELECT committed, prepared, epoch FROM {txid} WHERE ns = %s FOR UPDATE"
        self.ensure = f"INSERT INTO {txid} (ns) VALUES (%s) ON CONFLICT (ns) DO NOTHING"
        self.set_txid = f"UPDATE {txid} SET committed = %s, prepared = %s, epoch = %s WHERE ns = %s"
        self.acquire = f"UPDATE {txid} SET epoch = epoch + 1 WHERE ns = %s RETURNING epoch"
        self.upsert = (
            f"INSERT INTO {kv} (ns, k, v) SELECT %s, t.k, t.v "
            "FROM unnest(%b::bytea[], %b::bytea[]) AS t(k, v) "
            "ON CONFLICT (ns, kh) DO UPDATE SET k = EXCLUDED.k, v = EXCLUDED.v"
        )
        self.delete = f"DELETE FROM {kv} WHERE ns = %s AND kh = ANY(%b::bytea[])"
        self.prepare_clear = f"DELETE FROM {prep} WHERE ns = %s"
        self.prepare_copy = f"COPY {prep} (ns, k, v) FROM STDIN (FORMAT BINARY)"
        self.move_upserts = (
            f"INSERT INTO {kv} (ns, k, v) SELECT ns, k, v FROM {prep} WHERE ns = %s AND v IS NOT NULL "
            "ON CONFLICT (ns, kh) DO UPDATE SET k = EXCLUDED.k, v = EXCLUDED.v"
        )
        self.move_deletes = (
            f"DELETE FROM {kv} AS r USING {prep} AS p WHERE r.ns = %s AND p.ns = r.ns AND p.kh = r.kh AND p.v IS NULL"
        )
        self.drop = tuple(f"DELETE FROM {t} WHERE ns = %s" for t in (kv, prep, txid))
        # fresh statistics after a large COPY, so the commit's joins plan for the rows really there
        # (stale ones from a small table can pick a nested loop that is quadratic in the set's size)
        self.analyze_prepare = f"ANALYZE {prep}"


def _kh(key: bytes) -> bytes:
    """The key hash column's value, ``sha256(k)``, as the server computes it."""
    return hashlib.sha256(key).digest()


class PostgresBackend(Backend, ChangelogBackend, KeyRangeBackend):
    """Backend SPI over three PostgreSQL tables (see the module docstring for the layout)."""

    kind = "postgres"
    durable = True
    distributed = True

    def __init__(self, options: PostgresOptions) -> None:
        self.options = options
        self._sql = _Statements(options)
        self._log_sql = ChangelogSql(options.table)
        self._log_ready = False
        self._conns: ProcessConnections[Any] = ProcessConnections(
            self._new_connection, _close, usable=lambda c: not (c.closed or c.broken)
        )

    @classmethod
    def open(cls, options: PostgresOptions) -> PostgresBackend:
        """Connect now and create the tables if needed; raise ConfigError when that is impossible."""
        backend = cls(options)
        psycopg = _import_psycopg()
        try:
            conn = backend._conn()
            backend._init_schema(conn)
        except ConfigError:
            backend.close()
            raise
        except psycopg.Error as exc:
            backend.close()
            text = backend._scrub(exc)
            if isinstance(exc, psycopg.errors.InsufficientPrivilege):
                hint = (
                    f"grant the user CREATE on schema {options.schema!r} or create weir's tables ahead "
                    "(see weir.connectors.postgres)"
                )
            else:
                hint = _connect_hint(text)
            msg = f"cannot open the postgres state store {backend.describe()}: {text}; {hint}"
            raise ConfigError(msg) from exc
        return backend

    def describe(self) -> str:
        """The url (password hidden), with the schema and prefix when not the defaults."""
        out = redact_url(self.options.url)
        if (self.options.schema, self.options.table_prefix) != ("public", "weir_"):
            out += f" [{self.options.schema}.{self.options.table_prefix}*]"
        return out

    def __repr__(self) -> str:
        return f"PostgresBackend({self.describe()!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    # ---- connections ---------------------------------------------------------------------------
    def _conn(self) -> psycopg.Connection[Any]:
        return self._conns.get()  # type: ignore[no-any-return]

    def _new_connection(self) -> Any:
        o = self.options
        return connect(
            o.url, connect_timeout=o.connect_timeout, statement_timeout=o.statement_timeout, application_name="weir"
        )

    def _scrub(self, exc: BaseException) -> str:
        """The error's text on one line, without the url's password."""
        return scrub(exc, self.options.url)

    def _failure(self, namespace: str, what: str, exc: BaseException, timed_out: bool, extra: str = "") -> StateError:
        """A StateError naming the store, the namespace and the operation (never a raw psycopg error)."""
        psycopg = _import_psycopg()
        # the server did not answer (refused, lost, timed out, frozen): retriable, a supervised run restarts
        unavailable = timed_out or isinstance(exc, psycopg.OperationalError)
        if timed_out:
            reason = (
                f"no answer within socketTimeout={self.options.socket_timeout:g} s (the server is frozen "
                "or unreachable); the connection was closed"
            )
        else:
            reason = self._scrub(exc)
            if isinstance(exc, psycopg.errors.QueryCanceled):
                reason += f" (statementTimeout={self.options.statement_timeout:g} s)"
            elif what.endswith("(connecting)"):
                reason += f" (connectTimeout={self.options.connect_timeout:g} s)"
        if len(reason) > _MAX_REASON:
            reason = reason[:_MAX_REASON] + f"... ({len(reason)} characters in all)"
        if len(namespace.encode("utf-8", "surrogatepass")) > MAX_NAMESPACE_BYTES:
            return StateError(
                f"namespace {shown_namespace(namespace)}: {what} on the postgres store {self.describe()} failed: "
                f"{reason}; the namespace is longer than PostgreSQL can index (at most {MAX_NAMESPACE_BYTES} "
                "bytes in weir's tables): use shorter topology, component or state names"
            )
        cls = StoreUnavailableError if unavailable else StateError
        return cls(
            f"namespace {shown_namespace(namespace)}: {what} on the postgres store {self.describe()} failed: "
            f"{reason}{extra}; the batch fails and is retried or recovered once the server answers"
        )

    def _waiting(self, namespace: str, what: str) -> str:
        """What a call waits for, for the watchdog's log lines while the server does not answer."""
        return (
            f"namespace {shown_namespace(namespace)}: {what} on the postgres store {self.describe()} "
            f"(gives up at socketTimeout={self.options.socket_timeout:g} s)"
        )

    def close(self) -> None:
        """Close this process's connections (a later call reconnects)."""
        self._conns.close()

    def _init_schema(self, conn: psycopg.Connection[Any]) -> None:
        row = conn.execute(self._sql.exists).fetchone()
        assert row is not None
        kv_exists, prep_exists, txid_exists, kv_hashed, prep_hashed = row
        if (kv_exists and not kv_hashed) or (prep_exists and not prep_hashed):
            msg = (
                f"the tables {self.options.table('kv')} / {self.options.table('prepare')} exist but lack the "
                "'kh' key-hash column of weir's layout (made by an older weir or another program); "
                "rename or drop them, or choose another tablePrefix"
            )
            raise ConfigError(msg)
        if kv_exists and prep_exists and txid_exists:
            return
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_ID,))
            found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.options.schema,)).fetchone()
            if found is None:
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.options.schema}"')
            for stmt in self._sql.create:
                conn.execute(stmt)

    # ---- transactions --------------------------------------------------------------------------
    def _get_conn(self, namespace: str, what: str) -> psycopg.Connection[Any]:
        psycopg = _import_psycopg()
        try:
            return self._conn()
        except psycopg.Error as exc:
            raise self._failure(namespace, f"{what} (connecting)", exc, False) from exc

    def _read(self, namespace: str, body: Callable[[psycopg.Connection[Any]], T], what: str = "read") -> T:
        """Run a read; reconnect and retry once if the connection broke (not after a timeout)."""
        psycopg = _import_psycopg()
        return run_guarded(
            lambda: self._get_conn(namespace, what),
            body,
            socket_timeout=self.options.socket_timeout,
            in_transaction=False,
            may_rerun=lambda f: isinstance(f.exc, psycopg.OperationalError),
            fail=lambda f: self._failure(namespace, what, f.exc, f.timed_out),
            discard=self._conns.discard,
            label=self._waiting(namespace, what),
        )

    def _write(
        self,
        namespace: str,
        body: Callable[[psycopg.Connection[Any]], T],
        *,
        rerun: bool = True,
        what: str = "write",
    ) -> T:
        """Run ``body`` in one transaction.

        A connection found broken before ``COMMIT`` was sent (nothing can have been applied) is
        replaced and the transaction run once more; a connection lost during ``COMMIT`` is reported,
        since the outcome is unknown.
        """

        def fail(f: FailedCall) -> StateError:
            extra = (
                "; the connection was lost while committing, so the write may or may not have "
                "been applied (recovery resolves it from the txid record)"
                if f.lost and not f.timed_out and f.stage == "commit"
                else ""
            )
            return self._failure(namespace, what, f.exc, f.timed_out, extra)

        return run_guarded(
            lambda: self._get_conn(namespace, what),
            body,
            socket_timeout=self.options.socket_timeout,
            in_transaction=True,
            may_rerun=lambda f: f.stage == "begin" or (f.stage == "body" and rerun),
            fail=fail,
            discard=self._conns.discard,
            label=self._waiting(namespace, what),
        )

    def _fence(
        self, conn: psycopg.Connection[Any], namespace: str, epoch: int | None, *, exact: bool = False
    ) -> TxidRecord:
        """Lock (creating) the namespace's txid row and check ``epoch``; return the record to write."""
        row = conn.execute(self._sql.lock, (namespace,)).fetchone()
        if row is None:
            conn.execute(self._sql.ensure, (namespace,))
            row = conn.execute(self._sql.lock, (namespace,)).fetchone()
        assert row is not None
        committed, prepared, stored = row
        check_epoch(namespace, epoch, stored, exact=exact)
        if epoch is not None and epoch > stored:
            stored = epoch
        return TxidRecord(committed, prepared, stored)

    def _upsert(self, conn: psycopg.Connection[Any], namespace: str, rows: list[tuple[bytes, bytes]]) -> None:
        for i in range(0, len(rows), _BULK_CHUNK):
            chunk = dict(rows[i : i + _BULK_CHUNK])  # ON CONFLICT refuses a key twice in one statement
            conn.execute(self._sql.upsert, (namespace, list(chunk), list(chunk.values())))

    # ---- reads ---------------------------------------------------------------------------------
    def get(self, namespace: str, key: bytes) -> bytes | None:
        """Committed value of ``key``, or None."""
        row = self._read(
            namespace, lambda c: c.execute(self._sql.get, (namespace, key, key), binary=True).fetchone(), "read a key"
        )
        return None if row is None else bytes(row[0])

    def get_many(self, namespace: str, keys: list[bytes]) -> list[bytes | None]:
        """Committed values of ``keys`` in order (``kh = ANY(array)``, 10,000 keys per query)."""

        def body(conn: psycopg.Connection[Any]) -> list[bytes | None]:
            found: dict[bytes, bytes] = {}
            for i in range(0, len(keys), _GET_MANY_CHUNK):
                chunk = keys[i : i + _GET_MANY_CHUNK]
                cur = conn.execute(self._sql.get_many, (namespace, [_kh(k) for k in chunk]), binary=True)
                found.update((bytes(k), bytes(v)) for k, v in cur)
            return [found.get(k) for k in keys]

        if not keys:
            return []
        return self._read(namespace, body, f"read {len(keys)} keys")

    def scan(self, namespace: str) -> Iterator[tuple[bytes, bytes]]:
        """Committed rows (in key-hash order), read in pages of 5,000; no transaction spans pages."""
        return self.scan_range(namespace, (None, None))

    def key_ranges(self, namespace: str, parts: int) -> list[KeyRange]:
        """``parts`` (at most 256) ranges of the SHA-256 of the keys: even shares, no query needed."""
        parts = max(1, min(parts, 256))
        edges: list[bytes | None] = [None, *(bytes([256 * i // parts]) for i in range(1, parts)), None]
        return [(edges[i], edges[i + 1]) for i in range(parts)]

    def scan_range(self, namespace: str, key_range: KeyRange) -> Iterator[tuple[bytes, bytes]]:
        """Committed rows with ``low <= sha256(key) < high`` in key-hash order, in pages of 5,000."""
        low, high = key_range

        def page(last: bytes | None) -> list[tuple[bytes, bytes, bytes]]:
            def body(c: psycopg.Connection[Any]) -> list[tuple[bytes, bytes, bytes]]:
                if last is None:
                    cur = c.execute(self._sql.scan_first, (namespace, _SCAN_CHUNK), binary=True)
                else:
                    cur = c.execute(self._sql.scan_next, (namespace, last, _SCAN_CHUNK), binary=True)
                return [(bytes(h), bytes(k), bytes(v)) for h, k, v in cur]

            return self._read(namespace, body, "scan the committed rows")

        rows = page(low)  # a bound is one byte, a hash 32: "> low" is ">= low"
        while rows:
            for h, k, v in rows:
                if high is not None and h >= high:
                    return
                yield k, v
            if len(rows) < _SCAN_CHUNK:
                return
            rows = page(rows[-1][0])

    def count(self, namespace: str) -> int:
        """Number of committed rows."""
        row = self._read(
            namespace, lambda c: c.execute(self._sql.count, (namespace,)).fetchone(), "count the committed rows"
        )
        return 0 if row is None else int(row[0])

    def txids(self, namespace: str) -> TxidRecord:
        """The txid record (None / None / 0 for an unknown namespace)."""
        row = self._read(
            namespace, lambda c: c.execute(self._sql.txids, (namespace,)).fetchone(), "read the txid record"
        )
        return TxidRecord() if row is None else TxidRecord(row[0], row[1], int(row[2]))

    def load_prepared(self, namespace: str) -> tuple[int, dict[bytes, bytes | None]] | None:
        """The prepared change set and its txid (one consistent query), or None."""
        rows = self._read(
            namespace,
            lambda c: c.execute(self._sql.load_prepared, (namespace,), binary=True).fetchall(),
            "read the prepared change set",
        )
        if not rows or rows[0][0] is None:
            return None
        return int(rows[0][0]), {bytes(k): None if v is None else bytes(v) for _, k, v in rows if k is not None}

    def namespaces(self) -> list[str]:
        """Every namespace with rows, a prepared set or a txid record, sorted."""
        rows = self._read("*", lambda c: c.execute(self._sql.namespaces).fetchall(), "list namespaces")
        return sorted(r[0] for r in rows)

    # ---- atomic writes -------------------------------------------------------------------------
    def write_prepared(self, namespace: str, txid: int, changes: Changes, epoch: int | None) -> None:
        """Replace the prepared change set with ``changes`` as ``txid`` (one transaction, binary COPY)."""
        self._prepare(namespace, txid, changes, epoch, exact=False)

    def write_prepared_owned(self, namespace: str, txid: int, changes: Changes, epoch: int) -> None:
        """:meth:`write_prepared` while the stored epoch is exactly ``epoch`` (checked under the row lock)."""
        self._prepare(namespace, txid, changes, epoch, exact=True)

    def _prepare(self, namespace: str, txid: int, changes: Changes, epoch: int | None, *, exact: bool) -> None:
        def body(conn: psycopg.Connection[Any]) -> None:
            rec = self._fence(conn, namespace, epoch, exact=exact)
            conn.execute(self._sql.prepare_clear, (namespace,))
            if changes:
                with conn.cursor() as cur, cur.copy(self._sql.prepare_copy) as copy:
                    copy.set_types(["text", "bytea", "bytea"])
                    for k, v in changes.items():
                        copy.write_row((namespace, k, v))
                if len(changes) >= LARGE_CHANGE_SET:
                    conn.execute(self._sql.analyze_prepare)
            conn.execute(self._sql.set_txid, (rec.committed, txid, rec.epoch, namespace))

        self._write(namespace, body, what=f"prepare txid {txid} ({len(changes)} changes)")

    def commit_prepared(self, namespace: str, txid: int, epoch: int | None) -> None:
        """Move the prepared set ``txid`` into the committed rows, in SQL, in one transaction."""
        self._commit(namespace, txid, epoch, 0)

    def _commit(self, namespace: str, txid: int, epoch: int | None, retain: int) -> None:
        """The commit transaction; with ``retain`` (:meth:`commit_logged`) the change set is logged in it."""

        def body(conn: psycopg.Connection[Any]) -> None:
            rec = self._fence(conn, namespace, epoch)
            if rec.prepared != txid:
                msg = (
                    f"namespace {namespace!r}: cannot commit txid {txid}: the prepared txid is "
                    f"{rec.prepared} and the committed txid is {rec.committed}; commit only what was prepared"
                )
                raise StateError(msg)
            if retain:
                self._log_sql.log_change_set(conn, namespace, txid, retain)
                crash_point("changelog_logged", txid)  # inside the transaction: a kill here commits neither
            conn.execute(self._sql.move_upserts, (namespace,))
            conn.execute(self._sql.move_deletes, (namespace,))
            conn.execute(self._sql.prepare_clear, (namespace,))
            conn.execute(self._sql.set_txid, (txid, None, rec.epoch, namespace))

        self._write(namespace, body, what=f"commit txid {txid}")

    # ---- change feed (weir.state.changelog) ---------------------------------------------------
    def commit_logged(self, namespace: str, txid: int, epoch: int | None, retain: int) -> None:
        """:meth:`commit_prepared` with the change set logged in the same transaction (see ChangelogBackend)."""
        if not self._log_ready:
            self.prepare_changelog()
        self._commit(namespace, txid, epoch, retain)

    def prepare_changelog(self) -> None:
        """Create the change feed's tables if needed (its own transaction; a concurrent creator is retried)."""
        pg = _import_psycopg()

        def body(conn: Any) -> None:
            for stmt in self._log_sql.create:
                conn.execute(stmt)

        for attempt in range(3):
            try:
                self._write("(changelog)", body, what="create the change feed's tables")
                break
            except StateError as exc:  # two processes creating at once: one wins, the other sees a duplicate
                if attempt == 2 or not isinstance(exc.__cause__, (pg.errors.UniqueViolation, pg.errors.DuplicateTable)):
                    raise
        self._log_ready = True

    def log_range(self, namespace: str) -> LogRange | None:
        """What the namespace's feed holds (None when it never logged)."""
        return self._read(namespace, lambda c: self._log_sql.read_range(c, namespace))

    def log_changes(self, namespace: str, after_txid: int, upto_txid: int) -> list[ChangeRow]:
        """Logged changes of txids in (``after_txid``, ``upto_txid``]."""
        return self._read(namespace, lambda c: self._log_sql.read_changes(c, namespace, after_txid, upto_txid))

    def discard_prepared(self, namespace: str, epoch: int | None) -> None:
        """Delete the prepared change set (no-op when there is none)."""

        def body(conn: psycopg.Connection[Any]) -> None:
            rec = self._fence(conn, namespace, epoch)
            conn.execute(self._sql.prepare_clear, (namespace,))
            conn.execute(self._sql.set_txid, (rec.committed, None, rec.epoch, namespace))

        self._write(namespace, body, what="roll back the prepared change set")

    def write_direct(self, namespace: str, changes: Changes, epoch: int | None) -> None:
        """Apply ``changes`` to the committed rows (one transaction), txids untouched."""
        self._direct(namespace, changes, epoch, exact=False)

    def write_owned(self, namespace: str, changes: Changes, epoch: int) -> None:
        """:meth:`write_direct` while the stored epoch is exactly ``epoch`` (checked under the row lock)."""
        self._direct(namespace, changes, epoch, exact=True)

    def _direct(self, namespace: str, changes: Changes, epoch: int | None, *, exact: bool) -> None:
        ups, dels = self.split(changes)

        def body(conn: psycopg.Connection[Any]) -> None:
            rec = self._fence(conn, namespace, epoch, exact=exact)
            if ups:
                self._upsert(conn, namespace, ups)
            for i in range(0, len(dels), _BULK_CHUNK):
                conn.execute(self._sql.delete, (namespace, [_kh(k) for k in dels[i : i + _BULK_CHUNK]]))
            conn.execute(self._sql.set_txid, (rec.committed, rec.prepared, rec.epoch, namespace))

        self._write(namespace, body, what=f"write {len(changes)} changes")

    def put_many(self, namespace: str, rows: Iterable[tuple[bytes, bytes]]) -> None:
        """Bulk load of committed rows in one transaction (``rows`` is streamed in chunks)."""
        it = iter(rows)

        def body(conn: psycopg.Connection[Any]) -> None:
            self._fence(conn, namespace, None)
            while chunk := list(islice(it, _BULK_CHUNK)):
                self._upsert(conn, namespace, chunk)

        self._write(namespace, body, rerun=False, what="bulk load rows")

    def acquire_epoch(self, namespace: str) -> int:
        """Increment and return the namespace's epoch."""

        def body(conn: psycopg.Connection[Any]) -> int:
            conn.execute(self._sql.ensure, (namespace,))
            row = conn.execute(self._sql.acquire, (namespace,)).fetchone()
            assert row is not None
            return int(row[0])

        return self._write(namespace, body, what="take a new epoch")

    def drop(self, namespace: str) -> None:
        """Delete the rows, the prepared set and the txid record of ``namespace``."""

        def body(conn: psycopg.Connection[Any]) -> None:
            for stmt in self._sql.drop:
                conn.execute(stmt, (namespace,))
            row = conn.execute(self._log_sql.exists).fetchone()
            if row is not None and row[0]:
                for stmt in self._log_sql.drop:
                    conn.execute(stmt, (namespace,))

        self._write(namespace, body, what="drop the namespace")


def open_backend(cfg: ProviderConfig) -> PostgresBackend:
    """Connect to the PostgreSQL store named by ``cfg`` and create weir's tables if needed."""
    return PostgresBackend.open(PostgresOptions.from_config(cfg))
