"""PostgreSQL backing maps over a **typed table** that people and other services query with plain SQL.

``PostgresMapState.opaque(url, table="word_counts", key_columns={"word": "TEXT"}, value_type="BIGINT")``
keeps its cells in::

    CREATE TABLE word_counts (word TEXT NOT NULL, value BIGINT, txid BIGINT, prev BIGINT,
                              PRIMARY KEY (word))

so ``SELECT word, value FROM word_counts ORDER BY value DESC`` reads the current counts. The
columns after the key columns depend on the map state's type:

================== ==================================== =======================================
state type         columns                              cell
================== ==================================== =======================================
opaque             ``value``, ``txid``, ``prev``        ``OpaqueValue(txid, value, prev)``
transactional      ``value``, ``txid``                  ``TransactionalValue(txid, value)``
non-transactional  ``value``                            the value
================== ==================================== =======================================

``value`` (and ``prev``) have ``value_type``: any scalar SQL type (``BIGINT``, ``DOUBLE
PRECISION``, ``NUMERIC(12,2)``, ``TEXT``, …) or ``JSONB`` / ``JSON`` for lists, dicts and mixed
values. A key has one value per key column, in the order of ``key_columns``.

- ``multi_get`` is one ``SELECT`` joining the table with ``unnest`` of the keys (``WITH
  ORDINALITY``, so each row finds its key's position even when the column type normalises a value).
- ``multi_put`` is one ``INSERT … SELECT * FROM unnest(…) ON CONFLICT (keys) DO UPDATE`` per 10 000
  rows, all in one transaction: a partition's update of a batch is applied entirely or not at all.
  Rewriting the same cells is idempotent, so a write whose connection broke is retried once.

Identifiers are validated (:func:`weir._util.validate_identifier`) and quoted, so they keep their
case: prefer lower-case names, which plain SQL reaches without quotes. The table is created if
missing (under an advisory lock); an existing table must have the key columns as its primary key
and exactly the value columns of the state's type.

Bounded waits, as for the Storm ``postgres`` provider: ``statement_timeout`` (seconds, default 300)
is the session's ``statement_timeout``, and ``socket_timeout`` (default ``statement_timeout + 60``)
bounds every read or write on the client side, so a frozen server (stopped process, paused VM) fails
the batch with a :class:`~weir.errors.StateError` naming the table and the operation instead of
stalling the topology; the connection is replaced on the next call.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar, TypeVar

from weir._redact import collect_secrets, redact_text
from weir._util import validate_identifier
from weir.connectors.postgres.connection import FailedCall, check_connection_options, connect, redact_url, run_guarded
from weir.connectors.postgres.connection import close as _close
from weir.connectors.postgres.connection import import_psycopg as _import_psycopg
from weir.errors import ConfigError, SerializationError, StateError, StoreUnavailableError
from weir.state.connections import ProcessConnections, shared_connections
from weir.trident.backing.catalog import PREFIX, MapCatalog, MapInfo, missing
from weir.trident.backing.codec import decode_json, encode_cell, encode_json, encode_key, to_cell, to_stored
from weir.trident.backing.factory import MapStateFamily, MapStore
from weir.trident.state import BackingMap, Key, StateType, as_keys
from weir.trident.state.map_state import check_same_length

__all__ = ["REGISTRY_TABLE", "PostgresBackingMap", "PostgresMapCatalog", "PostgresMapState", "PostgresMapStore"]

log = logging.getLogger("weir.trident")

#: the table of a schema's map states (table → state type, key columns, value type), for ``weir state``
REGISTRY_TABLE = "weir_trident_maps"
_SCAN_PAGE = 5000

T = TypeVar("T")

_CHUNK = 10_000
_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(?: [A-Za-z][A-Za-z0-9_]*)*(?:\(\s*\d+(?:\s*,\s*\d+)?\s*\))?$")
_CELL_COLUMNS = {
    StateType.OPAQUE: ("value", "txid", "prev"),
    StateType.TRANSACTIONAL: ("value", "txid"),
    StateType.NON_TRANSACTIONAL: ("value",),
}
_RESERVED = {"value", "txid", "prev"}
_CREATE_LOCK = 0x7765_6972_5F74_6D73  # pg_advisory_xact_lock key guarding CREATE TABLE ("weir_tms")
_ENSURED: set[tuple[Any, ...]] = set()
_ENSURED_LOCK = threading.Lock()


def _sql_type(text: object, *, what: str) -> str:
    if not isinstance(text, str) or not _TYPE.match(" ".join(text.split())):
        msg = (
            f"PostgresMapState {what} {text!r} is not a SQL type name such as BIGINT, TEXT, "
            "DOUBLE PRECISION, NUMERIC(12,2) or JSONB (array types are not supported: use JSONB)"
        )
        raise ConfigError(msg)
    return " ".join(text.split()).upper()


def _key_columns(spec: object) -> tuple[tuple[str, str], ...]:
    if isinstance(spec, Mapping):
        pairs = list(spec.items())
    elif isinstance(spec, (list, tuple)):
        pairs = list(spec)
    else:
        pairs = []
    out: list[tuple[str, str]] = []
    for pair in pairs:
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2):
            out = []
            break
        name = validate_identifier(pair[0], what="PostgresMapState key column")
        if name.lower() in _RESERVED:
            msg = f"PostgresMapState key column {name!r} clashes with the value columns (value, txid, prev)"
            raise ConfigError(msg)
        ctype = _sql_type(pair[1], what=f"type of key column {name!r}")
        if ctype == "JSON":
            msg = f"PostgresMapState key column {name!r}: JSON has no equality operator; use JSONB"
            raise ConfigError(msg)
        out.append((name, ctype))
    if not out:
        msg = (
            "PostgresMapState key_columns must name the key's columns and their SQL types in key order, "
            f"e.g. {{'word': 'TEXT'}} or [('user_id', 'BIGINT'), ('day', 'DATE')]; got {spec!r}"
        )
        raise ConfigError(msg)
    if len({n.lower() for n, _ in out}) != len(out):
        msg = f"PostgresMapState key_columns has a column twice: {[n for n, _ in out]}"
        raise ConfigError(msg)
    return tuple(out)


def _uniform(values: list[Any]) -> list[Any]:
    """``values`` with mixed int/float/Decimal made one type (psycopg dumps only uniform lists)."""
    kinds = {type(v) for v in values if v is not None}
    if len(kinds) < 2 or not kinds <= {int, float, Decimal}:
        return values
    if float in kinds:
        return [None if v is None else float(v) for v in values]
    return [None if v is None else Decimal(v) for v in values]


def _already_json(text: str) -> str:
    """``dumps`` of a JSON column value that :meth:`PostgresBackingMap._wrap_json` encoded already."""
    return text


def _json_loads(data: str | bytes) -> Any:
    """Read a ``JSON``/``JSONB`` column written by :func:`_json_dumps`."""
    return decode_json(data, what="PostgresMapState JSON column")


def _utf8(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (no lone surrogates)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True)
class PostgresMapStore(MapStore):
    """A typed PostgreSQL table holding one Trident map state (see the module docstring).

    Attributes
    ----------
    url : str
        ``postgresql://user[:password]@host[:port]/database``.
    table : str
        The table (created if missing).
    key_columns : tuple of (name, SQL type)
        The key's columns in key order; together the primary key.
    value_type : str
        SQL type of ``value`` (and ``prev``): a scalar type, or ``JSONB`` / ``JSON``.
    schema : str
        Schema of the table (default ``public``; must exist).
    connect_timeout : float
        Seconds to wait for a connection.
    statement_timeout : float
        Seconds the server lets one statement run or wait for a lock (the session's
        ``statement_timeout``; default 300, 0 = no limit).
    socket_timeout : float or None
        Seconds the client waits for one read or write before it shuts the connection down (default
        ``statement_timeout + 60``, or 360; 0 = no limit): what ends the wait on a frozen server.
    """

    kind: ClassVar[str] = "postgres"

    url: str
    table: str
    key_columns: tuple[tuple[str, str], ...]
    value_type: str = "BIGINT"
    schema: str = "public"
    connect_timeout: float = 5.0
    statement_timeout: float = 300.0
    socket_timeout: float | None = None

    def __post_init__(self) -> None:
        sock = check_connection_options(
            self.url,
            self.connect_timeout,
            self.statement_timeout,
            self.socket_timeout,
            what="PostgresMapState",
            names=("connect_timeout", "statement_timeout", "socket_timeout"),
        )
        validate_identifier(self.table, what="PostgresMapState table")
        validate_identifier(self.schema, what="PostgresMapState schema")
        object.__setattr__(self, "key_columns", _key_columns(self.key_columns))
        object.__setattr__(self, "value_type", _sql_type(self.value_type, what="value_type"))
        object.__setattr__(self, "socket_timeout", sock)

    # ---- names and SQL -------------------------------------------------------------------------
    @property
    def qualified(self) -> str:
        """``"schema"."table"``."""
        return f'"{self.schema}"."{self.table}"'

    @property
    def json_value(self) -> bool:
        """Whether ``value`` is a JSON column."""
        return self.value_type in ("JSON", "JSONB")

    def catalog_name(self) -> str:
        """The table (``schema.table`` outside ``public``): the name ``weir state`` lists the map state by."""
        return self.table if self.schema == "public" else f"{self.schema}.{self.table}"

    def describe(self) -> str:
        """``<url without password> table schema.table``."""
        return f"{redact_url(self.url)} table {self.schema}.{self.table}"

    def columns(self, state_type: StateType) -> list[tuple[str, str]]:
        """Every column of the table for ``state_type``: key columns, then the cell's."""
        types = {"value": self.value_type, "txid": "BIGINT", "prev": self.value_type}
        return [*self.key_columns, *((c, types[c]) for c in _CELL_COLUMNS[state_type])]

    # ---- connections ---------------------------------------------------------------------------
    def _open(self) -> Any:
        from psycopg.types.json import set_json_loads

        conn = connect(
            self.url,
            connect_timeout=self.connect_timeout,
            statement_timeout=self.statement_timeout,
            application_name="weir-trident",
        )
        set_json_loads(_json_loads, conn)
        return conn

    def _spec(self) -> tuple[str, str, float, float]:
        return ("postgres", self.url, self.connect_timeout, self.statement_timeout)

    def _scrub(self, exc: BaseException) -> str:
        """The error's text on one line, without the url's password."""
        text = " ".join(str(exc).split()) or type(exc).__name__
        return redact_text(text, collect_secrets(self.url))

    def _connections(self) -> ProcessConnections[Any]:
        return shared_connections(self._spec(), self._open, _close, per_thread=True)

    def connection(self) -> Any:
        """The connection of this process and thread, opened on first use.

        Raises
        ------
        ConfigError
            If the server cannot be reached or refuses the connection.
        """
        psycopg = _import_psycopg()
        try:
            return self._connections().get()
        except psycopg.Error as exc:
            text = self._scrub(exc)
            msg = (
                f"cannot use PostgreSQL for PostgresMapState {self.describe()}: {text}; check the url "
                "(host, port, database, user, password) and that the server accepts connections"
            )
            raise ConfigError(msg) from exc

    def run(self, body: Callable[[Any], T], *, what: str, in_transaction: bool) -> T:
        """Run ``body(conn)`` (in one transaction if asked); reconnect and rerun once if the connection broke.

        Only idempotent bodies are run through here: a read, or a write of absolute cells. The call
        is bounded: the server cancels a statement after ``statement_timeout``, and a server that
        does not answer at all (frozen) has the connection shut down after ``socket_timeout`` —
        either way a :class:`~weir.errors.StateError` naming the table and the operation.
        """
        psycopg = _import_psycopg()

        def connection() -> Any:
            try:
                return self.connection()
            except ConfigError as exc:  # the server went away mid-run: a failed batch, not bad config
                msg = f"{what}: {exc}"
                raise StoreUnavailableError(msg) from exc

        def fail(f: FailedCall) -> Exception:
            if isinstance(f.exc, psycopg.errors.QueryCanceled) and not f.timed_out:
                return StoreUnavailableError(
                    f"PostgresMapState {self.describe()}: {what} failed: {self._scrub(f.exc)} "
                    f"(statement_timeout={self.statement_timeout:g} s); the batch fails and is retried"
                )
            if isinstance(f.exc, (psycopg.DataError, psycopg.errors.IntegrityError)):
                return SerializationError(
                    f"PostgresMapState {self.describe()}: {what}: a key or value does not fit the "
                    f"columns {self.key_columns} / value {self.value_type} ({self._scrub(f.exc)}); store "
                    "values of the column types, or use value_type='JSONB'"
                )
            if f.timed_out:
                return StoreUnavailableError(
                    f"PostgresMapState {self.describe()}: {what} failed: no answer within "
                    f"socket_timeout={self.socket_timeout:g} s (the server is frozen or unreachable); "
                    "the connection was closed and the batch fails and is retried once the server answers"
                )
            failed = f"PostgresMapState {self.describe()}: {what} failed: {self._scrub(f.exc)}"
            if f.lost or isinstance(f.exc, psycopg.OperationalError):
                return StoreUnavailableError(failed)
            return StateError(failed)

        return run_guarded(
            connection,
            body,
            socket_timeout=self.socket_timeout,
            in_transaction=in_transaction,
            may_rerun=lambda f: (
                not isinstance(f.exc, (psycopg.DataError, psycopg.errors.IntegrityError, psycopg.errors.QueryCanceled))
            ),
            fail=fail,
            discard=lambda conn: self._connections().discard(conn),
            label=f"PostgresMapState {self.describe()}: {what} (gives up at socket_timeout={self.socket_timeout:g} s)",
        )

    # ---- the table -----------------------------------------------------------------------------
    def _found_layout(self, conn: Any) -> tuple[list[str], list[str]] | None:
        """(columns, primary-key columns) of the existing table, or ``None``."""
        rows = conn.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
            (self.schema, self.table),
        ).fetchall()
        if not rows:
            return None
        pk = conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
            "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indrelid = to_regclass(%s) AND i.indisprimary",
            (self.qualified,),
        ).fetchall()
        return [r[0] for r in rows], [r[0] for r in pk]

    def _check_layout(self, state_type: StateType, found: tuple[list[str], list[str]]) -> None:
        columns, pk = found
        keys = [n for n, _ in self.key_columns]
        missing = [n for n in keys if n not in columns]
        cells = [c for c in ("value", "txid", "prev") if c in columns]
        if missing or sorted(pk) != sorted(keys) or cells != list(_CELL_COLUMNS[state_type]):
            expected = ", ".join(f"{n} {t}" for n, t in self.columns(state_type))
            kinds = {v: k.value for k, v in _CELL_COLUMNS.items()}
            holds = kinds.get(tuple(cells))
            what = f" (the value columns of a map state of type {holds!r})" if holds else ""
            msg = (
                f"PostgresMapState {self.describe()}: the table exists with columns {columns} and primary "
                f"key {pk}{what}, but a map state of type {state_type.value!r} with these key columns needs "
                f"({expected}, PRIMARY KEY ({', '.join(keys)})); choose another table or drop this one"
            )
            raise ConfigError(msg)

    def ensure_table(self, state_type: StateType) -> None:
        """Create the table if missing (once per process) and check its layout.

        Raises
        ------
        ConfigError
            If the server is unreachable, a type is unknown, or an existing table has another layout.
        """
        mark = (self, state_type)
        with _ENSURED_LOCK:
            if mark in _ENSURED:
                return

        def body(conn: Any) -> None:
            types = [t for _, t in self.columns(state_type)]
            for t, ok in zip(types, conn.execute(
                "SELECT " + ", ".join(["to_regtype(%s) IS NOT NULL"] * len(types)), types
            ).fetchone(), strict=True):  # fmt: skip
                if not ok:
                    msg = f"PostgresMapState {self.describe()}: PostgreSQL knows no type {t!r}"
                    raise ConfigError(msg)
            found = self._found_layout(conn)
            if found is None:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK,))
                    if self._found_layout(conn) is None:
                        cols = ", ".join(
                            f'"{n}" {t} NOT NULL' if i < len(self.key_columns) else f'"{n}" {t}'
                            for i, (n, t) in enumerate(self.columns(state_type))
                        )
                        keys = ", ".join(f'"{n}"' for n, _ in self.key_columns)
                        conn.execute(f"CREATE TABLE {self.qualified} ({cols}, PRIMARY KEY ({keys}))")
                found = self._found_layout(conn)
            assert found is not None
            self._check_layout(state_type, found)
            self._register(conn, state_type)

        psycopg = _import_psycopg()
        try:
            self.run(body, what="creating the table", in_transaction=False)
        except (StateError, psycopg.Error) as exc:
            raise ConfigError(str(exc)) from exc
        with _ENSURED_LOCK:
            _ENSURED.add(mark)

    def _register(self, conn: Any, state_type: StateType) -> None:
        """Record the table in ``<schema>.weir_trident_maps`` (best effort: without CREATE the map still works)."""
        psycopg = _import_psycopg()
        registry = f'"{self.schema}"."{REGISTRY_TABLE}"'
        try:
            if conn.execute("SELECT to_regclass(%s)", (registry,)).fetchone()[0] is None:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK,))
                    conn.execute(
                        f"CREATE TABLE IF NOT EXISTS {registry} (name TEXT NOT NULL PRIMARY KEY, "
                        "state_type TEXT NOT NULL, key_columns TEXT NOT NULL, value_type TEXT NOT NULL)"
                    )
            conn.execute(
                f"INSERT INTO {registry} (name, state_type, key_columns, value_type) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (name) DO UPDATE SET state_type = EXCLUDED.state_type, "
                "key_columns = EXCLUDED.key_columns, value_type = EXCLUDED.value_type",
                (self.table, state_type.value, json.dumps([list(c) for c in self.key_columns]), self.value_type),
            )
        except psycopg.Error as exc:
            log.warning(
                "PostgresMapState %s: cannot record the map state in %s (%s); it works, but weir state will "
                "not list it",
                self.describe(),
                registry,
                self._scrub(exc),
            )

    def validate(self, state_type: StateType) -> None:
        """Connect now, create the table if needed, check its layout and record it for ``weir state``."""
        self.ensure_table(state_type)

    sweeps_expired: ClassVar[bool] = True

    def prepare_expiry(self, state_type: StateType) -> None:
        """Index the ``txid`` column (once per process), so the TTL sweep finds expired cells by a range scan."""
        self.ensure_table(state_type)
        mark = (self, state_type, "txid-index")
        with _ENSURED_LOCK:
            if mark in _ENSURED:
                return
        name = f"{self.table}_weir_txid"[:63]

        def body(conn: Any) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK,))
            conn.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON {self.qualified} (txid)')

        self.run(body, what="creating the txid index of the TTL sweep", in_transaction=True)
        with _ENSURED_LOCK:
            _ENSURED.add(mark)

    def delete_expired(self, state_type: StateType, upto: int, limit: int, *, txid: int) -> tuple[int, bool]:
        """Delete up to ``limit`` rows whose ``txid`` is at or below ``upto``, in one transaction.

        The condition is checked again on the row being deleted, so a row rewritten meanwhile stays.
        """
        self.prepare_expiry(state_type)
        q = self.qualified
        sql = f"DELETE FROM {q} WHERE ctid = ANY(ARRAY(SELECT ctid FROM {q} WHERE txid <= %s LIMIT %s)) AND txid <= %s"

        def body(conn: Any) -> int:
            return int(conn.execute(sql, (upto, limit, upto)).rowcount)

        what = f"TTL sweep of txid {txid} (rows written at or before txid {upto})"
        n = self.run(body, what=what, in_transaction=True)
        return n, n >= limit

    def backing_map(self, state_type: StateType) -> PostgresBackingMap:
        """A :class:`PostgresBackingMap` of ``state_type`` cells over this table."""
        return PostgresBackingMap(self, state_type)


class PostgresBackingMap(BackingMap[Any]):
    """Bulk get/put of cells in a typed PostgreSQL table (see the module docstring).

    Parameters
    ----------
    store : PostgresMapStore
        Server, table and column types.
    state_type : StateType
        Which cells are stored (read back as ``OpaqueValue`` / ``TransactionalValue``).
    """

    def __init__(self, store: PostgresMapStore, state_type: StateType | str) -> None:
        self.store = store
        self.state_type = StateType.parse(state_type)
        st = self.state_type
        cols = store.columns(st)
        nkeys = len(store.key_columns)
        q = store.qualified
        names = ", ".join(f'"{n}"' for n, _ in cols)
        arrays = ", ".join(f"%s::{t}[]" for _, t in cols)
        key_names = ", ".join(f'"{n}"' for n, _ in store.key_columns)
        updates = ", ".join(f'"{c}" = EXCLUDED."{c}"' for c in _CELL_COLUMNS[st])
        self._upsert = (
            f"INSERT INTO {q} ({names}) SELECT * FROM unnest({arrays}) "
            f"ON CONFLICT ({key_names}) DO UPDATE SET {updates}"
        )
        key_arrays = ", ".join(f"%s::{t}[]" for _, t in store.key_columns)
        aliases = ", ".join(f"k{i}" for i in range(nkeys))
        join = " AND ".join(f't."{n}" = u.k{i}' for i, (n, _) in enumerate(store.key_columns))
        cells = ", ".join(f't."{c}"' for c in _CELL_COLUMNS[st])
        self._select = (
            f"SELECT u.weir_ord, {cells} FROM unnest({key_arrays}) WITH ORDINALITY AS u({aliases}, weir_ord) "
            f"JOIN {q} AS t ON {join}"
        )
        self._json_keys = [t in ("JSON", "JSONB") for _, t in store.key_columns]

    def _wrap_json(self, values: list[Any], json_type: str, keys: list[Key], what: str) -> list[Any]:
        """``values`` for a JSON column, in weir's JSON (``bytes`` as ``{"$bytes": …}``)."""
        from psycopg.types.json import Json, Jsonb

        wrapper = Jsonb if json_type == "JSONB" else Json
        where = self.store.describe()
        return [
            None
            if v is None
            else wrapper(
                encode_json(v, what=f"{where}: {what} of key {k!r}").decode("utf-8", "surrogatepass"),
                dumps=_already_json,
            )
            for v, k in zip(values, keys, strict=True)
        ]

    def _key_arrays(self, ks: list[Key]) -> list[list[Any]]:
        store = self.store
        n = len(store.key_columns)
        where = store.describe()
        for k in ks:
            if len(k) != n or any(v is None for v in k):
                names = [c for c, _ in store.key_columns]
                msg = (
                    f"PostgresMapState {where}: key {k!r} does not match the key columns {names}; give one "
                    "non-null value per key column, in that order"
                )
                raise SerializationError(msg)
            for v in k:
                if isinstance(v, str) and not _utf8(v):
                    msg = (
                        f"PostgresMapState {where}: key {k!r} holds a lone surrogate ({ascii(v)}), which "
                        "PostgreSQL text cannot store; decode the grouping value with errors='replace' "
                        "or group by its bytes"
                    )
                    raise SerializationError(msg)
        arrays: list[list[Any]] = []
        for i, (name, ctype) in enumerate(store.key_columns):
            column = _uniform([k[i] for k in ks])
            if self._json_keys[i]:
                column = self._wrap_json(column, ctype, ks, f"key column {name}")
            arrays.append(column)
        return arrays

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        """Cells of ``keys`` (``None`` where there is no row): one ``SELECT`` joined with ``unnest``."""
        ks = as_keys(keys)
        if not ks:
            return []
        distinct = list(dict.fromkeys(ks))
        arrays = self._key_arrays(distinct)
        store = self.store
        store.ensure_table(self.state_type)
        sql = self._select
        rows = store.run(
            lambda conn: conn.execute(sql, arrays).fetchall(),
            what=f"multi_get of {len(distinct)} keys",
            in_transaction=False,
        )
        st = self.state_type
        where = store.describe()
        by_key: dict[Key, Any] = {}
        for row in rows:
            key = distinct[row[0] - 1]
            if st is StateType.OPAQUE:
                value, txid, prev = row[1:]
                by_key[key] = to_cell([txid, value, prev], st, key, where=where)
            elif st is StateType.TRANSACTIONAL:
                value, txid = row[1:]
                by_key[key] = to_cell([txid, value], st, key, where=where)
            else:
                by_key[key] = row[1]
        return [by_key.get(k) for k in ks]

    def multi_put(self, keys: Sequence[Key], vals: Sequence[Any]) -> None:
        """Upsert every cell, in one transaction (``INSERT … SELECT unnest … ON CONFLICT DO UPDATE``)."""
        ks = as_keys(keys)
        check_same_length(ks, vals, what="values", op="PostgresBackingMap.multi_put")
        if not ks:
            return
        store = self.store
        where = store.describe()
        st = self.state_type
        cells = dict(zip(ks, vals, strict=True))  # a key given twice: the last value wins
        distinct = list(cells)
        columns: list[list[Any]] = [[] for _ in _CELL_COLUMNS[st]]
        for key, cell in cells.items():
            stored = to_stored(cell, st, key, where=where)
            if st is StateType.OPAQUE:
                txid, curr, prev = stored if stored is not None else (None, None, None)
                row: tuple[Any, ...] = (curr, txid, prev)
            elif st is StateType.TRANSACTIONAL:
                txid, val = stored if stored is not None else (None, None)
                row = (val, txid)
            else:
                row = (stored,)
            for column, v in zip(columns, row, strict=True):
                column.append(v)
        value_cols = [0, 2] if st is StateType.OPAQUE else [0]
        for i in value_cols:
            columns[i] = _uniform(columns[i])
            if store.json_value:
                columns[i] = self._wrap_json(columns[i], store.value_type, distinct, "value")
        key_arrays = self._key_arrays(distinct)
        store.ensure_table(st)
        sql = self._upsert
        n = len(distinct)

        def body(conn: Any) -> None:
            for start in range(0, n, _CHUNK):
                part = [a[start : start + _CHUNK] for a in (*key_arrays, *columns)]
                conn.execute(sql, part)

        store.run(body, what=f"multi_put of {n} keys", in_transaction=True)

    def __getstate__(self) -> dict[str, Any]:
        return {"store": self.store, "state_type": self.state_type}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["store"], state["state_type"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"PostgresBackingMap({self.store.describe()}, {self.state_type.name})"


class PostgresMapState(MapStateFamily):
    """Trident map states in a typed PostgreSQL table.

    ``PostgresMapState.opaque(url, table="word_counts", key_columns={"word": "TEXT"},
    value_type="BIGINT")``; ``opaque`` / ``transactional`` / ``non_transactional`` take the
    arguments of :meth:`store` plus ``cache_size``, ``global_key`` and ``check`` (see
    :class:`MapStateFamily`) and return a picklable :class:`~weir.trident.backing.MapStateFactory`.

    Examples
    --------
    >>> import os
    >>> factory = PostgresMapState.opaque(
    ...     os.environ.get("PG_URL", "postgresql://postgres@127.0.0.1:5432/app"), table="word_counts",
    ...     key_columns={"word": "TEXT"}, value_type="BIGINT")
    """

    @classmethod
    def store(
        cls,
        url: str,
        table: str,
        key_columns: Mapping[str, str] | Sequence[tuple[str, str]],
        value_type: str = "BIGINT",
        *,
        schema: str = "public",
        connect_timeout: float = 5.0,
        statement_timeout: float = 300.0,
        socket_timeout: float | None = None,
    ) -> PostgresMapStore:
        """The typed table ``schema.table`` at ``url``.

        Parameters
        ----------
        url : str
            ``postgresql://user[:password]@host[:port]/database``.
        table : str
            Table name (created if missing).
        key_columns : mapping or list of pairs
            Key column names and SQL types, in key order: ``{"word": "TEXT"}``.
        value_type : str
            SQL type of the value (``BIGINT`` default; ``JSONB`` for anything JSON).
        schema : str
            Schema of the table (must exist).
        connect_timeout : float
            Seconds to wait for a connection.
        statement_timeout : float
            Seconds the server lets one statement run (default 300; 0 = no limit).
        socket_timeout : float, optional
            Seconds the client waits for the server before it closes the connection (default
            ``statement_timeout + 60``; 0 = no limit).
        """
        return PostgresMapStore(
            url,
            table,
            _key_columns(key_columns),
            value_type,
            schema,
            connect_timeout,
            statement_timeout,
            socket_timeout,
        )


# ---- weir state --------------------------------------------------------------------------------
def _map_name(schema: str, table: str) -> str:
    return table if schema == "public" else f"{schema}.{table}"


class PostgresMapCatalog(MapCatalog):
    """The Trident map states of one PostgreSQL database: the tables every ``<schema>.weir_trident_maps`` lists.

    A map state is named by its table (``schema.table`` outside ``public``). Reads go through the
    typed table itself, in key order; :meth:`drop` empties the table but never drops it (it may be
    one the user created, granted and indexed).
    """

    def __init__(
        self,
        url: str,
        connect_timeout: float = 5.0,
        statement_timeout: float = 300.0,
        socket_timeout: float | None = None,
    ) -> None:
        self.url = url
        # a store of this database whose connections (and bounded, translated calls) the catalog borrows
        self._db = PostgresMapStore(
            url,
            REGISTRY_TABLE,
            (("name", "TEXT"),),
            "TEXT",
            connect_timeout=connect_timeout,
            statement_timeout=statement_timeout,
            socket_timeout=socket_timeout,
        )
        self._layouts: dict[str, tuple[tuple[tuple[str, str], ...], str]] = {}

    def describe(self) -> str:
        """The database URL, without password."""
        return redact_url(self.url)

    def _read(self, body: Callable[[Any], T], what: str) -> T:
        return self._db.run(body, what=what, in_transaction=False)

    def maps(self) -> list[MapInfo]:
        """Every registered table that still exists, with its state type and layout."""

        def body(conn: Any) -> list[tuple[str, str, str, str, str]]:
            schemas = [
                r[0]
                for r in conn.execute(
                    "SELECT table_schema FROM information_schema.tables WHERE table_name = %s "
                    "AND table_type = 'BASE TABLE' ORDER BY table_schema",
                    (REGISTRY_TABLE,),
                ).fetchall()
            ]
            rows = []
            for schema in schemas:
                try:
                    validate_identifier(schema, what="schema")  # it goes into SQL below
                except ConfigError:
                    continue
                rows += [
                    (schema, *r)
                    for r in conn.execute(
                        f'SELECT name, state_type, key_columns, value_type FROM "{schema}"."{REGISTRY_TABLE}" '
                        "WHERE to_regclass(format('%%I.%%I', %s::text, name)) IS NOT NULL ORDER BY name",
                        (schema,),
                    ).fetchall()
                ]
            return rows

        out = []
        for schema, table, kind, key_columns, value_type in self._read(body, "listing the Trident map states"):
            name = _map_name(schema, table)
            columns = tuple((str(n), str(t)) for n, t in json.loads(key_columns))
            self._layouts[name] = (columns, value_type)
            layout = {"key_columns": [list(c) for c in columns], "value_type": value_type}
            out.append(MapInfo(name, StateType.parse(kind), layout))
        return sorted(out, key=lambda m: m.name)

    @staticmethod
    def _split(name: str) -> tuple[str, str]:
        schema, _, table = name.rpartition(".")
        return schema or "public", table

    def _store(self, name: str, layout: tuple[tuple[tuple[str, str], ...], str]) -> PostgresMapStore:
        schema, table = self._split(name)
        db = self._db
        return PostgresMapStore(
            self.url, table, layout[0], layout[1], schema, db.connect_timeout, db.statement_timeout, db.socket_timeout
        )

    def _layout(self, name: str) -> tuple[tuple[tuple[str, str], ...], str] | None:
        if name not in self._layouts:
            self.maps()
        return self._layouts.get(name)

    def store(self, name: str) -> PostgresMapStore:
        """The :class:`PostgresMapStore` of the registered table ``name``."""
        layout = self._layout(name)
        if layout is None:
            raise missing(PREFIX + name, self.describe())
        return self._store(name, layout)

    def cells(self, info: MapInfo) -> Iterator[tuple[Key, Any]]:
        """``(key, cell)`` of every row, in key order (pages of 5,000 rows, each one ``SELECT``)."""
        store = self.store(info.name)
        st = info.state_type
        keys = [f'"{n}"' for n, _ in store.key_columns]
        cols = ", ".join([*keys, *(f'"{c}"' for c in _CELL_COLUMNS[st])])
        order = ", ".join(keys)
        first = f"SELECT {cols} FROM {store.qualified} ORDER BY {order} LIMIT {_SCAN_PAGE}"
        after = (
            f"SELECT {cols} FROM {store.qualified} WHERE ({order}) > ({', '.join(['%s'] * len(keys))}) "
            f"ORDER BY {order} LIMIT {_SCAN_PAGE}"
        )
        n = len(keys)
        where = store.describe()
        last: tuple[Any, ...] | None = None
        while True:
            sql, args = (first, ()) if last is None else (after, last)

            def page(conn: Any, q: str = sql, a: tuple[Any, ...] = args) -> list[Any]:
                return list(conn.execute(q, a).fetchall())

            rows = store.run(page, what=f"reading map state {info.name!r}", in_transaction=False)
            for row in rows:
                key = tuple(row[:n])
                if st is StateType.OPAQUE:
                    value, txid, prev = row[n:]
                    cell = to_cell([txid, value, prev], st, key, where=where)
                elif st is StateType.TRANSACTIONAL:
                    value, txid = row[n:]
                    cell = to_cell([txid, value], st, key, where=where)
                else:
                    cell = row[n]
                yield key, cell
            if len(rows) < _SCAN_PAGE:
                return
            last = tuple(rows[-1][:n])
            if any(t in ("JSON", "JSONB") for _, t in store.key_columns):  # a decoded JSON key: wrap it again
                last = tuple(column[0] for column in PostgresBackingMap(store, st)._key_arrays([last]))

    def scan(self, name: str) -> Iterator[tuple[str, bytes | str]]:
        """``(JSON key, JSON cell)`` of every row, in key order."""
        info = next((m for m in self.maps() if m.name == name), None)
        if info is None:
            raise missing(PREFIX + name, self.describe())
        where = self.describe()
        for key, cell in self.cells(info):
            yield encode_key(key, where=where), encode_cell(cell, info.state_type, key, where=where)

    def count(self, name: str) -> int:
        """Rows of the table."""
        store = self.store(name)
        sql = f"SELECT count(*) FROM {store.qualified}"
        return int(self._read(lambda conn: conn.execute(sql).fetchone()[0], f"counting map state {name!r}"))

    def delete(self, name: str, keys: list[Key]) -> None:
        """Delete the rows of ``keys`` in one transaction."""
        store = self.store(name)
        arrays = PostgresBackingMap(store, StateType.NON_TRANSACTIONAL)._key_arrays(as_keys(keys))
        cols = ", ".join(f'"{n}"' for n, _ in store.key_columns)
        unnest = ", ".join(f"%s::{t}[]" for _, t in store.key_columns)
        sql = f"DELETE FROM {store.qualified} WHERE ({cols}) IN (SELECT * FROM unnest({unnest}))"
        store.run(lambda conn: conn.execute(sql, arrays), what=f"deleting {len(keys)} keys", in_transaction=True)

    def drop(self, name: str) -> None:
        """Delete every row of the table (the table itself, and its registry row, stay)."""
        store = self.store(name)
        sql = f"DELETE FROM {store.qualified}"
        store.run(lambda conn: conn.execute(sql), what="emptying the map state", in_transaction=True)

    def _needs_layout(self, name: str) -> StateError:
        return StateError(
            f"{self.describe()}: a PostgreSQL map state is a typed table, so a copy of trident:{name} needs its key "
            "columns and value type, which only a PostgreSQL map state has; run its topology against this "
            "database once (it creates the table), then migrate"
        )

    def register(self, name: str, state_type: StateType) -> None:
        """Create (or check) the table ``name`` for ``state_type`` with its registered layout."""
        layout = self._layout(name)
        if layout is None:
            raise self._needs_layout(name)
        self._store(name, layout).ensure_table(state_type)

    def _target_layout(self, info: MapInfo) -> tuple[tuple[tuple[str, str], ...], str]:
        if isinstance(info.layout, Mapping) and "key_columns" in info.layout:
            return _key_columns(info.layout["key_columns"]), str(info.layout.get("value_type", "JSONB"))
        layout = self._layout(info.name)
        if layout is None:
            raise self._needs_layout(info.name)
        return layout

    def check_target(self, info: MapInfo) -> None:
        """A copy needs a valid ``[schema.]table`` name and a layout (from a PostgreSQL source, or registered)."""
        schema, table = self._split(info.name)
        validate_identifier(table, what="PostgreSQL map state table")
        validate_identifier(schema, what="PostgreSQL map state schema")
        self._store(info.name, self._target_layout(info))

    def create_like(self, info: MapInfo) -> None:
        """Create the table of ``info`` (key columns and value type from ``info.layout``) and register it."""
        layout = self._target_layout(info)
        self._store(info.name, layout).ensure_table(info.state_type)
        self._layouts[info.name] = layout


def catalog_for(backend: Any) -> PostgresMapCatalog:
    """The catalog of the database of a :class:`~weir.connectors.postgres.kv.PostgresBackend`."""
    o = backend.options
    return PostgresMapCatalog(o.url, o.connect_timeout, o.statement_timeout, o.socket_timeout)
