"""SQLite backing maps: Trident map states in one table of an embedded database file.

Layout: one table per map state, ``<table> (k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID``, where ``k``
is the JSON array of the key's grouping values (``["man"]``) and ``v`` the JSON of the cell
(``[txid, curr, prev]`` for opaque, ``[txid, val]`` for transactional, the value itself for
non-transactional maps). A small table ``weir_trident_maps (name, state_type)`` records which kind
of map owns each table, so an opaque and a non-transactional state cannot share one by mistake.

- ``multi_get`` is one ``SELECT k, v ... WHERE k IN (...)`` per 500 keys (one read transaction).
- ``multi_put`` is one ``INSERT ... ON CONFLICT (k) DO UPDATE`` ``executemany`` inside one
  ``BEGIN IMMEDIATE`` transaction: a partition's update of a batch is applied entirely or not at all.
- The file is in WAL mode (readers never block the writer), and a writer waits up to ``timeout``
  seconds for the write lock, so several processes may write different partitions at once.

Examples
--------
>>> factory = SqliteMapState.opaque("sqlite:///state/words.db", table="word_counts")
>>> counts = factory.make_state({}, 0, 1)
>>> counts.multi_get([["cow"]])
[None]
"""

from __future__ import annotations

import functools
import operator
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from weir._util import validate_identifier
from weir.connectors.sqlite.connection import (
    SqliteOptions,
    _close,
    check_options,
    connect,
    enable_wal,
    is_busy,
    path_from_url,
    write_transaction,
)
from weir.errors import ConfigError, StateError
from weir.state.connections import shared_connections
from weir.trident.backing.catalog import MapCatalog, MapInfo
from weir.trident.backing.codec import chunked, decode_cell, encode_cell_text, encode_key
from weir.trident.backing.factory import MapStateFamily, MapStore
from weir.trident.state import BackingMap, Key, StateType, as_keys
from weir.trident.state.map_state import check_same_length

__all__ = ["SqliteBackingMap", "SqliteMapState", "SqliteMapStore"]

T = TypeVar("T")

_CHUNK = 500  # bound parameters per IN (...) query
_first = operator.itemgetter(0)
_META = (
    "CREATE TABLE IF NOT EXISTS weir_trident_maps "
    "(name TEXT NOT NULL PRIMARY KEY, state_type TEXT NOT NULL) WITHOUT ROWID"
)


def _path_of(url_or_path: str | os.PathLike[str]) -> str:
    if isinstance(url_or_path, os.PathLike):
        url_or_path = os.fspath(url_or_path)
    if not isinstance(url_or_path, str) or not url_or_path:
        msg = f"SqliteMapState: give a sqlite:///PATH url or a file path, got {url_or_path!r}"
        raise ConfigError(msg)
    return path_from_url(url_or_path) if "://" in url_or_path else url_or_path


def _connect_file(options: SqliteOptions) -> sqlite3.Connection:
    os.makedirs(os.path.dirname(options.path), exist_ok=True)
    conn = connect(options)
    try:
        enable_wal(conn, options.timeout)
    except BaseException:
        conn.close()
        raise
    return conn


_ENSURED: set[tuple[str, str, str, int]] = set()


@dataclass(frozen=True)
class SqliteMapStore(MapStore):
    """A table of a SQLite database file holding one Trident map state.

    Attributes
    ----------
    path : str
        Absolute path of the database file (its directory is created if needed).
    table : str
        Table of this map state (a SQL identifier; one table per map state).
    timeout : float
        Seconds a writer waits for the write lock (SQLite's busy timeout), default 30.
    synchronous : str
        ``"NORMAL"`` (default; a commit survives a process crash) or ``"FULL"`` (also a power loss).
    """

    kind: ClassVar[str] = "sqlite"

    path: str
    table: str = "trident_state"
    timeout: float = 30.0
    synchronous: str = "NORMAL"

    def __post_init__(self) -> None:
        validate_identifier(self.table, what="SqliteMapState table")
        if self.table.lower().startswith("sqlite_") or self.table.lower() == "weir_trident_maps":
            msg = f"SqliteMapState table {self.table!r} is reserved; choose another name"
            raise ConfigError(msg)
        path, timeout, synchronous = check_options(self.path, self.timeout, self.synchronous, what="SqliteMapState")
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "timeout", timeout)
        object.__setattr__(self, "synchronous", synchronous)

    @functools.cached_property
    def options(self) -> SqliteOptions:
        """The file's connection options (shared with the Storm backend's plumbing)."""
        return SqliteOptions(self.path, self.timeout, self.synchronous)

    def catalog_name(self) -> str:
        """The table: the name ``weir state`` lists the map state by."""
        return self.table

    def describe(self) -> str:
        """``sqlite:///<path> table <table>``."""
        return f"sqlite:///{self.path} table {self.table!r}"

    def connection(self) -> sqlite3.Connection:
        """The connection of this process and thread to the file, opened on first use.

        Raises
        ------
        ConfigError
            If the file cannot be opened as a SQLite database.
        """
        options = self.options
        try:
            conns = shared_connections(("sqlite", options), lambda: _connect_file(options), _close, per_thread=True)
            return conns.get()
        except (OSError, sqlite3.Error) as exc:
            msg = (
                f"cannot open the SQLite map state {self.describe()}: {exc}; check that the directory is "
                "writable and the file is a SQLite database (or give another path)"
            )
            raise ConfigError(msg) from exc

    def write(self, body: Callable[[sqlite3.Connection], T], *, what: str) -> T:
        """Run ``body`` in one ``BEGIN IMMEDIATE`` transaction; retry while the file is busy."""

        def failure(exc: sqlite3.Error) -> str:
            hint = (
                f"another process held the write lock for more than timeout={self.timeout}s; "
                "raise timeout or write less per batch"
                if is_busy(exc)
                else "check the file and the disk"
            )
            return f"SQLite map state {self.describe()}: {what} failed: {exc}; {hint}"

        return write_transaction(self.connection(), body, timeout=self.timeout, failure=failure)

    def ensure_table(self, state_type: StateType) -> None:
        """Create the table (once per process) and check which kind of map owns it.

        Raises
        ------
        ConfigError
            If the table belongs to a map state of another type.
        """
        mark = (self.path, self.table, state_type.value, os.getpid())
        if mark in _ENSURED:
            return

        def create(conn: sqlite3.Connection) -> None:
            conn.execute(_META)
            row = conn.execute("SELECT state_type FROM weir_trident_maps WHERE name = ?", (self.table,)).fetchone()
            if row is not None and row[0] != state_type.value:
                msg = (
                    f"SqliteMapState {self.describe()} holds a map state of type {row[0]!r}, not "
                    f"{state_type.value!r}; use another table for this state (or delete the old one)"
                )
                raise ConfigError(msg)
            if row is None:
                conn.execute(
                    "INSERT INTO weir_trident_maps (name, state_type) VALUES (?, ?)",
                    (self.table, state_type.value),
                )
            conn.execute(
                f'CREATE TABLE IF NOT EXISTS "{self.table}" (k TEXT NOT NULL PRIMARY KEY, v TEXT) WITHOUT ROWID'
            )

        try:
            self.write(create, what="creating the table")
        except StateError as exc:
            raise ConfigError(str(exc)) from exc
        _ENSURED.add(mark)

    def validate(self, state_type: StateType) -> None:
        """Open the file and create the table now (see :meth:`ensure_table`)."""
        self.ensure_table(state_type)

    sweeps_expired: ClassVar[bool] = True

    def prepare_expiry(self, state_type: StateType) -> None:
        """Index the table by the txid inside each cell (``json_extract(v, '$[0]')``), once per process.

        The expression index lets the TTL sweep find expired cells by a range scan; the stored
        cells do not change.
        """
        self.ensure_table(state_type)
        mark = (self.path, self.table, "txid-index", os.getpid())
        if mark in _ENSURED:
            return
        sql = f'CREATE INDEX IF NOT EXISTS "{self.table}$txid" ON "{self.table}" (json_extract(v, \'$[0]\'))'
        self.write(lambda conn: conn.execute(sql), what="creating the txid index of the TTL sweep")
        _ENSURED.add(mark)

    def delete_expired(self, state_type: StateType, upto: int, limit: int, *, txid: int) -> tuple[int, bool]:
        """Delete up to ``limit`` cells whose txid is at or below ``upto``, in one transaction."""
        self.prepare_expiry(state_type)
        sql = (
            f'DELETE FROM "{self.table}" WHERE k IN (SELECT k FROM "{self.table}" '
            "WHERE json_extract(v, '$[0]') <= ? LIMIT ?)"
        )
        n = self.write(
            lambda conn: conn.execute(sql, (upto, limit)).rowcount,
            what=f"TTL sweep of txid {txid} (cells written at or before txid {upto})",
        )
        return int(n), int(n) >= limit

    def backing_map(self, state_type: StateType) -> SqliteBackingMap:
        """A :class:`SqliteBackingMap` of ``state_type`` cells over this table."""
        return SqliteBackingMap(self, state_type)


class SqliteBackingMap(BackingMap[Any]):
    """Bulk get/put of JSON cells in one SQLite table (see the module docstring).

    Parameters
    ----------
    store : SqliteMapStore
        File and table.
    state_type : StateType
        Which cells are stored (they are read back as ``OpaqueValue`` / ``TransactionalValue``).
    """

    def __init__(self, store: SqliteMapStore, state_type: StateType | str) -> None:
        self.store = store
        self.state_type = StateType.parse(state_type)
        table = store.table
        self._select: dict[int, str] = {}
        self._upsert = f'INSERT INTO "{table}" (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v'

    def _select_sql(self, n: int) -> str:
        sql = self._select.get(n)
        if sql is None:
            sql = self._select[n] = f'SELECT k, v FROM "{self.store.table}" WHERE k IN ({",".join("?" * n)})'
        return sql

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        """Cells of ``keys`` (``None`` where absent): one query per 500 keys, one read transaction.

        The keys are looked up in sorted order, so consecutive lookups walk neighbouring B-tree
        pages (at millions of keys, a batch's keys are spread over the whole table).
        """
        ks = as_keys(keys)
        if not ks:
            return []
        store = self.store
        where = store.describe()
        store.ensure_table(self.state_type)
        encoded = [encode_key(k, where=where) for k in ks]
        distinct = sorted(set(encoded))
        conn = store.connection()
        found: dict[str, str | None] = {}
        chunks = chunked(distinct, _CHUNK)
        try:
            if len(chunks) > 1:
                conn.execute("BEGIN")
            try:
                for chunk in chunks:
                    found.update(conn.execute(self._select_sql(len(chunk)), chunk).fetchall())
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")
        except sqlite3.Error as exc:
            msg = f"SQLite map state {where}: multi_get of {len(distinct)} keys failed: {exc}"
            raise StateError(msg) from exc
        if not found:  # none of the keys is stored (new keys)
            return [None] * len(ks)
        st = self.state_type
        get = found.get
        return [
            decode_cell(get(e), st, k, where=where) if e in found else None for e, k in zip(encoded, ks, strict=True)
        ]

    def multi_put(self, keys: Sequence[Key], vals: Sequence[Any]) -> None:
        """Store every cell in one transaction (all or nothing), in key order.

        Rows are written sorted by key (B-tree neighbours one after the other); for a key listed
        twice the last value still wins (the sort is stable).
        """
        ks = as_keys(keys)
        check_same_length(ks, vals, what="values", op="SqliteBackingMap.multi_put")
        if not ks:
            return
        store = self.store
        where = store.describe()
        store.ensure_table(self.state_type)
        st = self.state_type
        rows = [
            (encode_key(k, where=where), encode_cell_text(v, st, k, where=where)) for k, v in zip(ks, vals, strict=True)
        ]
        rows.sort(key=_first)
        sql = self._upsert
        store.write(lambda conn: conn.executemany(sql, rows), what=f"multi_put of {len(rows)} keys")

    def __getstate__(self) -> dict[str, Any]:
        return {"store": self.store, "state_type": self.state_type}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["store"], state["state_type"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"SqliteBackingMap({self.store.describe()}, {self.state_type.name})"


class SqliteMapState(MapStateFamily):
    """Trident map states in a SQLite file: ``SqliteMapState.opaque(url_or_path, table=...)``.

    ``opaque`` / ``transactional`` / ``non_transactional`` take the arguments of :meth:`store`
    plus ``cache_size``, ``global_key`` and ``check`` (see :class:`MapStateFamily`) and return a
    picklable :class:`~weir.trident.backing.MapStateFactory`.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "trident.db")
    >>> factory = SqliteMapState.opaque(path, table="word_counts")
    >>> counts = factory.make_state({}, 0, 1)
    >>> counts.begin_commit(1); counts.multi_put([["man"]], [3]); counts.commit(1)
    >>> factory.make_state({}, 0, 1).multi_get([["man"], ["dog"]])
    [3, None]
    """

    @classmethod
    def store(
        cls,
        url_or_path: str | os.PathLike[str],
        table: str = "trident_state",
        *,
        timeout: float = 30.0,
        synchronous: str = "NORMAL",
    ) -> SqliteMapStore:
        """The table ``table`` of the database ``url_or_path`` (``sqlite:///PATH`` or a path).

        Parameters
        ----------
        url_or_path : str or path
            ``sqlite:///relative.db``, ``sqlite:////absolute.db`` or a file path.
        table : str
            The map state's table (a SQL identifier); give every map state its own.
        timeout : float
            Seconds a writer waits for the write lock.
        synchronous : str
            ``"NORMAL"`` or ``"FULL"``.
        """
        return SqliteMapStore(_path_of(url_or_path), table, timeout, synchronous)


class SqliteMapCatalog(MapCatalog):
    """The Trident map states of one SQLite file (the tables ``weir_trident_maps`` lists)."""

    def __init__(self, options: SqliteOptions) -> None:
        self.options = options

    def describe(self) -> str:
        """``sqlite:///<path>``."""
        return f"sqlite:///{self.options.path}"

    def _conn(self) -> sqlite3.Connection:
        options = self.options
        return shared_connections(("sqlite", options), lambda: _connect_file(options), _close, per_thread=True).get()

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        try:
            return self._conn().execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            msg = f"reading Trident map states of {self.describe()} failed: {exc}"
            raise StateError(msg) from exc

    def maps(self) -> list[MapInfo]:
        """Every table ``weir_trident_maps`` lists, with its state type."""
        known = self._read("SELECT name FROM sqlite_schema WHERE type = 'table' AND name = 'weir_trident_maps'")
        if not known:
            return []
        rows = self._read("SELECT name, state_type FROM weir_trident_maps ORDER BY name")
        return [MapInfo(name, StateType.parse(kind)) for name, kind in rows]

    def store(self, name: str) -> SqliteMapStore:
        """The :class:`SqliteMapStore` of the table ``name``."""
        return SqliteMapStore(self.options.path, name, self.options.timeout, self.options.synchronous)

    def scan(self, name: str) -> Iterator[tuple[str, bytes | str]]:
        """``(JSON key, JSON cell)`` rows of the table, sorted by key."""
        table = self.store(name).table
        yield from self._read(f'SELECT k, v FROM "{table}" ORDER BY k')

    def count(self, name: str) -> int:
        """Rows of the table."""
        return int(self._read(f'SELECT count(*) FROM "{self.store(name).table}"')[0][0])

    def delete(self, name: str, keys: list[Key]) -> None:
        """Delete the rows of ``keys`` in one transaction."""
        store = self.store(name)
        where = store.describe()
        encoded = [(encode_key(k, where=where),) for k in keys]
        sql = f'DELETE FROM "{store.table}" WHERE k = ?'
        store.write(lambda conn: conn.executemany(sql, encoded), what=f"delete of {len(encoded)} keys")

    def drop(self, name: str) -> None:
        """Drop the table and its ``weir_trident_maps`` row (one transaction)."""
        store = self.store(name)

        def body(conn: sqlite3.Connection) -> None:
            conn.execute(_META)
            conn.execute("DELETE FROM weir_trident_maps WHERE name = ?", (store.table,))
            conn.execute(f'DROP TABLE IF EXISTS "{store.table}"')

        store.write(body, what="dropping the map state")
        _ENSURED.difference_update({m for m in _ENSURED if m[:2] == (store.path, store.table)})

    def register(self, name: str, state_type: StateType) -> None:
        """Create the table of ``name`` for ``state_type`` (refused if it holds another type)."""
        self.store(name).ensure_table(state_type)


def catalog_for(backend: Any) -> SqliteMapCatalog:
    """The catalog of the file of a :class:`~weir.connectors.sqlite.kv.SqliteBackend`."""
    return SqliteMapCatalog(backend.options)
