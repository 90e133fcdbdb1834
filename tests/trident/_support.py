"""Helpers for the Trident tests: splitting, corpora, stores to read back, a LocationDB state."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weir.sources import FileSpout, Guarantee
from weir.trident import Function, QueryFunction, State, StateFactory, StateUpdater
from weir.trident.backing import HBaseMapState, PostgresMapState, RedisMapState, SqliteMapState


class Split(Function):
    """One output tuple per whitespace-separated word of field 0."""

    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup.get_string(0).split():
            collector.emit([word])


class OpaqueFileSpout(FileSpout):
    """A directory of text files declared OPAQUE: a test may rewrite a file between a crash and the
    restart, so the replayed batch (same files, Spark's offset log) holds different tuples."""

    guarantee = Guarantee.OPAQUE


class NonTransactionalFileSpout(FileSpout):
    """A directory of text files declared NON_TRANSACTIONAL (for the guarantee-table checks)."""

    guarantee = Guarantee.NON_TRANSACTIONAL


_MTIME = [int(time.time()) - 100_000]


def write_lines(directory: Path, name: str, lines: Sequence[str], *, mtime: float | None = None) -> None:
    """Write a text file atomically (Spark's file source must never see it half written).

    Spark picks files in modification-time order, so each file gets a modification time one second
    after the previous file's (or ``mtime``): files written in the same millisecond keep their order.
    """
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{name}.tmp"
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    if mtime is None:
        _MTIME[0] += 1
        mtime = _MTIME[0]
    os.utime(tmp, (mtime, mtime))
    os.replace(tmp, directory / name)


def word_files(directory: Path, files: Sequence[Sequence[str]]) -> Counter[str]:
    """One file per entry (``f000.txt``, …, one batch each with one file per trigger); the counts."""
    expected: Counter[str] = Counter()
    for i, lines in enumerate(files):
        write_lines(directory, f"f{i:03d}.txt", lines)
        for line in lines:
            expected.update(line.split())
    return expected


# ---- stores a test can read back --------------------------------------------------------------
@dataclass
class Store:
    """A durable map-state store of one kind: make factories, read every current value."""

    kind: str
    url: str
    tag: str

    def factory(self, state_type: str, name: str, *, keys: Sequence[str] = ("word",), value: str = "BIGINT") -> Any:
        """A ``MapStateFactory`` of ``state_type`` for table / prefix ``name``."""
        table = f"{name}_{self.tag}"
        if self.kind == "sqlite":
            return SqliteMapState.factory(state_type, self.url, table=table)
        if self.kind == "redis":
            return RedisMapState.factory(state_type, self.url, key_prefix=f"{table}:")
        if self.kind == "hbase":
            return HBaseMapState.factory(state_type, self.url, key_prefix=f"{table}:")
        return PostgresMapState.factory(
            state_type, self.url, table=table, key_columns={k: "TEXT" for k in keys}, value_type=value
        )

    def read_all(self, name: str) -> dict[tuple[Any, ...], Any]:
        """Every stored key of map state ``name`` and its current value (opaque/transactional cells)."""
        return self.read_all_table(f"{name}_{self.tag}")

    def read_all_table(self, table: str) -> dict[tuple[Any, ...], Any]:
        """Like :meth:`read_all`, for a table / key prefix named in full."""
        out: dict[tuple[Any, ...], Any] = {}
        if self.kind == "sqlite":
            path = self.url.removeprefix("sqlite:///")
            with sqlite3.connect(path) as conn:
                for k, v in conn.execute(f'SELECT k, v FROM "{table}"'):
                    out[tuple(json.loads(k))] = _current(json.loads(v))
            return out
        if self.kind == "redis":
            import redis

            client = redis.Redis.from_url(self.url)
            try:
                for key in client.scan_iter(match=f"{table}:*"):
                    raw = client.get(key)
                    k = json.loads(key.decode()[len(table) + 1 :])
                    out[tuple(k)] = _current(json.loads(raw))
            finally:
                client.close()
            return out
        if self.kind == "hbase":
            from urllib.parse import urlsplit

            import happybase

            parts = urlsplit(self.url)
            conn = happybase.Connection(parts.hostname, parts.port, timeout=60_000)
            try:
                prefix = f"{table}:".encode()
                for row, cols in conn.table(parts.path.strip("/")).scan(row_prefix=prefix):
                    k = json.loads(row[len(prefix) :].decode())
                    out[tuple(k)] = _current(json.loads(cols[b"cf:c"]))
            finally:
                conn.close()
            return out
        import psycopg

        with psycopg.connect(self.url) as conn:
            cols = [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_name = %s ORDER BY ordinal_position",
                    (table,),
                ).fetchall()
            ]
            keys = [c for c in cols if c not in ("value", "txid", "prev")]
            for row in conn.execute(f'SELECT {", ".join(keys)}, value FROM "{table}"').fetchall():
                out[tuple(row[:-1])] = row[-1]
        return out

    def counts(self, name: str) -> Counter[str]:
        """The current values of a one-key map state, keyed by the word (``None`` values left out)."""
        return Counter({k[0]: v for k, v in self.read_all(name).items() if v is not None})


def _current(cell: Any) -> Any:
    if isinstance(cell, list) and len(cell) == 3:
        return cell[1]
    if isinstance(cell, list) and len(cell) == 2:
        return cell[1]
    return cell


def _open(path: str, *setup: str) -> sqlite3.Connection:
    """A WAL connection with ``setup`` statements run, retried while another process holds a lock."""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    for attempt in range(100):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            for stmt in setup:
                conn.execute(stmt)
            return conn
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == 99:
                raise
            time.sleep(0.05)
    return conn


# ---- seed 004's LocationDB, bulk style ------------------------------------------------------------
class LocationDB(State):
    """A user's home-grown database of user locations (one SQLite file shared by all partitions)."""

    def __init__(self, path: str, partition: int = 0) -> None:
        self.path = path
        self.partition = partition
        self.conn = _open(
            path,
            "CREATE TABLE IF NOT EXISTS loc (user_id INTEGER PRIMARY KEY, location TEXT)",
            "CREATE TABLE IF NOT EXISTS calls (what TEXT, txid INTEGER, n INTEGER, p INTEGER)",
        )

    def _call(self, what: str, txid: int | None, n: int) -> None:
        self.conn.execute("INSERT INTO calls VALUES (?, ?, ?, ?)", (what, txid, n, self.partition))

    def begin_commit(self, txid: int | None) -> None:
        self._call("begin", txid, 0)

    def commit(self, txid: int | None) -> None:
        self._call("commit", txid, 0)

    def set_locations_bulk(self, user_ids: list[int], locations: list[str]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany(
            "INSERT INTO loc VALUES (?, ?) ON CONFLICT (user_id) DO UPDATE SET location = excluded.location",
            list(zip(user_ids, locations, strict=True)),
        )
        self.conn.execute("INSERT INTO calls VALUES ('bulk_set', NULL, ?, ?)", (len(user_ids), self.partition))
        self.conn.execute("COMMIT")

    def bulk_get_locations(self, user_ids: list[int]) -> list[str | None]:
        self._call("bulk_get", None, len(user_ids))
        found = dict(
            self.conn.execute(
                f"SELECT user_id, location FROM loc WHERE user_id IN ({','.join('?' * len(user_ids))})", user_ids
            ).fetchall()
        )
        return [found.get(u) for u in user_ids]


class LocationDBFactory(StateFactory):
    """Makes a LocationDB over one file."""

    def __init__(self, path: str) -> None:
        self.path = path
        LocationDB(path).conn.close()  # create the file and tables on the driver, once

    def make_state(self, conf: Mapping[str, Any], partition_index: int, num_partitions: int) -> LocationDB:
        return LocationDB(self.path, partition_index)

    def __repr__(self) -> str:
        return f"LocationDBFactory({self.path!r})"


class LocationUpdater(StateUpdater[LocationDB]):
    """Seed 004's bulk LocationUpdater; emits (userid, location) to the new values stream."""

    def update_state(self, state: LocationDB, tuples: list[Any], collector: Any) -> None:
        ids = [t.get_integer(0) for t in tuples]
        locations = [t.get_string(1) for t in tuples]
        state.set_locations_bulk(ids, locations)
        for i, loc in zip(ids, locations, strict=True):
            collector.emit([i, loc])


class QueryLocation(QueryFunction[LocationDB, Any]):
    """Seed 004's bulk QueryLocation."""

    def batch_retrieve(self, state: LocationDB, tuples: list[Any]) -> list[Any]:
        return state.bulk_get_locations([t.get_integer(0) for t in tuples])

    def execute(self, tup: Any, result: Any, collector: Any) -> None:
        collector.emit([result])


def location_calls(path: str) -> list[tuple[str, int | None, int, int]]:
    """Every begin/commit/bulk call recorded by LocationDB, in order: (what, txid, n, partition)."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT what, txid, n, p FROM calls ORDER BY rowid").fetchall()
    return [tuple(r) for r in rows]  # type: ignore[misc]


def locations(path: str) -> dict[int, str]:
    """The stored locations."""
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT user_id, location FROM loc").fetchall())


# ---- a recording sink -------------------------------------------------------------------------------
class RecordState(State):
    """Appends tuples to a SQLite table (to read what a stream emitted, across worker processes)."""

    def __init__(self, path: str, table: str) -> None:
        self.table = table
        self.conn = _open(path, f'CREATE TABLE IF NOT EXISTS "{table}" (txid INTEGER, p INTEGER, vals TEXT)')
        self.partition = 0

    def begin_commit(self, txid: int | None) -> None:
        self.txid = txid

    def commit(self, txid: int | None) -> None:
        pass

    def add(self, tuples: list[Any]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany(
            f'INSERT INTO "{self.table}" VALUES (?, ?, ?)',
            [(self.txid, self.partition, json.dumps(list(t))) for t in tuples],
        )
        self.conn.execute("COMMIT")


class RecordFactory(StateFactory):
    """Makes RecordStates writing table ``table`` of ``path``."""

    def __init__(self, path: str, table: str) -> None:
        self.path = path
        self.table = table
        RecordState(path, table).conn.close()  # create the file and table on the driver, once

    def make_state(self, conf: Mapping[str, Any], partition_index: int, num_partitions: int) -> RecordState:
        s = RecordState(self.path, self.table)
        s.partition = partition_index
        return s


class Record(StateUpdater[RecordState]):
    """Records every tuple of the partition."""

    def update_state(self, state: RecordState, tuples: list[Any], collector: Any) -> None:
        state.add(tuples)


def recorded(path: str, table: str) -> list[tuple[int, int, list[Any]]]:
    """Rows recorded by a RecordState: (txid, partition, values)."""
    if not Path(path).exists():
        return []
    with sqlite3.connect(path) as conn:
        try:
            rows = conn.execute(f'SELECT txid, p, vals FROM "{table}" ORDER BY rowid').fetchall()
        except sqlite3.OperationalError:
            return []
    return [(t, p, json.loads(v)) for t, p, v in rows]


def record(stream: Any, path: str, table: str, fields: Sequence[str] | None = None) -> None:
    """Record every tuple of ``stream`` (its ``fields``, all by default) in ``table``."""
    stream.partition_persist(RecordFactory(path, table), fields or stream.fields, Record())


def values_of(rows: list[tuple[int, int, list[Any]]]) -> list[tuple[Any, ...]]:
    """Just the recorded values, as sorted tuples."""
    return sorted(tuple(v) for _, _, v in rows)


Maker = Callable[..., Any]
