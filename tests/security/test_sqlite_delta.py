"""SQLite's delta layout: commits write a small delta, a merge folds it into the main table.

Readers must see exactly the committed state whatever the delta holds (the dict-model property
test with merges after every commit or every few); a file of the previous layout opens with its
data and prepared set; a SIGKILL before or during a merge loses nothing.
"""

from __future__ import annotations

import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.contract._support import provider_of
from tests.contract.test_properties import OPS, _run
from tests.crash._harness import run_driver
from weir.connectors.sqlite import SqliteBackend, SqliteOptions
from weir.errors import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "crash"))
from sqlite_merge_driver import changes as merge_changes  # noqa: E402

DRIVER = Path(__file__).resolve().parents[1] / "crash" / "sqlite_merge_driver.py"


@pytest.mark.parametrize("merge_rows", [1, 3])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=8, max_size=40))
def test_protocol_sequences_match_the_dict_model_while_deltas_merge(
    tmp_path_factory: pytest.TempPathFactory, merge_rows: int, ops: list[tuple[Any, ...]]
) -> None:
    path = tmp_path_factory.mktemp("delta") / "state.db"
    _run(provider_of(f"sqlite:///{path}", mergeRows=merge_rows), ops)


def _db_rows(path: Path, table: str) -> int:
    with sqlite3.connect(path) as c:
        return int(c.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: S608 - test tables


def test_reads_overlay_the_delta_and_a_merge_changes_nothing_visible(tmp_path: Path) -> None:
    backend = SqliteBackend.open(SqliteOptions(str(tmp_path / "s.db"), merge_rows=10**6))
    ns = "overlay"
    backend.put_many(ns, [(b"k%03d" % i, b"main") for i in range(100)])
    backend.write_prepared(ns, 1, {**{b"k%03d" % i: b"d1" for i in range(0, 100, 2)}, b"k001": None}, None)
    backend.commit_prepared(ns, 1, None)
    backend.write_prepared(ns, 2, {b"k000": None, b"new": b"d2", b"k003": b"d2", b"gone": None}, None)
    backend.commit_prepared(ns, 2, None)
    backend.write_direct(ns, {b"k005": b"direct", b"k007": None}, None)
    expected = {b"k%03d" % i: (b"d1" if i % 2 == 0 else b"main") for i in range(100)}
    expected.update({b"new": b"d2", b"k003": b"d2", b"k005": b"direct"})
    for k in (b"k000", b"k001", b"k007"):
        del expected[k]
    keys = [*sorted(expected), b"k000", b"k001", b"k007", b"gone", b"nothing"]

    def check() -> None:
        assert dict(backend.scan(ns)) == expected
        assert [k for k, _ in backend.scan(ns)] == sorted(expected)
        assert backend.count(ns) == len(expected)
        assert backend.get_many(ns, keys) == [expected.get(k) for k in keys]
        assert [backend.get(ns, k) for k in keys] == [expected.get(k) for k in keys]

    assert _db_rows(tmp_path / "s.db", "weir_delta") > 0
    check()
    backend.merge(ns)
    assert _db_rows(tmp_path / "s.db", "weir_delta") == 0
    check()
    # a bulk load after commits: the loaded value wins over the delta's
    backend.write_prepared(ns, 3, {b"k010": b"d3"}, None)
    backend.commit_prepared(ns, 3, None)
    backend.put_many(ns, [(b"k010", b"loaded")])
    assert backend.get(ns, b"k010") == b"loaded"
    assert "overlay" in backend.namespaces()
    backend.drop(ns)
    assert backend.count(ns) == 0 and _db_rows(tmp_path / "s.db", "weir_delta") == 0
    with pytest.raises(ConfigError, match="mergeRows"):
        SqliteOptions(str(tmp_path / "x.db"), merge_rows=0)


def test_a_file_of_the_previous_layout_opens_with_its_rows_and_prepared_set(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as c:  # what weir with schema version 1 wrote
        c.executescript(
            "PRAGMA journal_mode = WAL;"
            "CREATE TABLE weir_kv (ns TEXT NOT NULL, k BLOB NOT NULL, v BLOB NOT NULL, "
            "PRIMARY KEY (ns, k)) WITHOUT ROWID;"
            "CREATE TABLE weir_prepare (ns TEXT NOT NULL, k BLOB NOT NULL, v BLOB, PRIMARY KEY (ns, k)) WITHOUT ROWID;"
            "CREATE TABLE weir_txid (ns TEXT NOT NULL PRIMARY KEY, committed INTEGER, prepared INTEGER, "
            "epoch INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;"
            "PRAGMA user_version = 1;"
        )
        c.executemany("INSERT INTO weir_kv VALUES ('old', ?, ?)", [(b"a", b"1"), (b"b", b"2")])
        c.executemany("INSERT INTO weir_prepare VALUES ('old', ?, ?)", [(b"a", b"10"), (b"b", None)])
        c.execute("INSERT INTO weir_txid VALUES ('old', 4, 5, 2)")
    backend = SqliteBackend.open(SqliteOptions(str(path)))
    assert dict(backend.scan("old")) == {b"a": b"1", b"b": b"2"}
    rec = backend.txids("old")
    assert (rec.committed, rec.prepared, rec.epoch) == (4, 5, 2)
    assert backend.load_prepared("old") == (5, {b"a": b"10", b"b": None})
    backend.commit_prepared("old", 5, 2)  # recovery rolls the old file's prepared set forward
    assert dict(backend.scan("old")) == {b"a": b"10"} and backend.txids("old").committed == 5
    backend.close()
    with sqlite3.connect(path) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == 2
    again = SqliteBackend.open(SqliteOptions(str(path)))  # opening the migrated file again
    assert dict(again.scan("old")) == {b"a": b"10"}


def _expected(last: int) -> dict[bytes, bytes]:
    state: dict[bytes, bytes] = {}
    for t in range(1, last + 1):
        for k, v in merge_changes(t).items():
            if v is None:
                state.pop(k, None)
            else:
                state[k] = v
    return state


@pytest.mark.crash
@pytest.mark.parametrize("point", ["sqlite_before_merge", "sqlite_during_merge"])
def test_sigkill_before_or_during_a_merge_loses_nothing(tmp_path: Path, point: str) -> None:
    db = str(tmp_path / "m.db")
    first = run_driver([str(DRIVER), db, "1", "12"], f"{point}@3")
    assert first.returncode == -signal.SIGKILL, first.stderr[-2000:]
    backend = SqliteBackend.open(SqliteOptions(db, merge_rows=25))
    assert backend.txids("m").committed == 3  # the commit of txid 3 happened; its merge did not
    assert dict(backend.scan("m")) == _expected(3)
    assert _db_rows(Path(db), "weir_delta") > 0
    backend.close()
    rest = run_driver([str(DRIVER), db, "1", "12"], None)
    assert rest.returncode == 0 and "DONE 12" in rest.stdout, rest.stderr[-2000:]
    backend = SqliteBackend.open(SqliteOptions(db, merge_rows=25))
    assert dict(backend.scan("m")) == _expected(12)
    assert backend.count("m") == len(_expected(12))
    backend.merge("m")
    assert dict(backend.scan("m")) == _expected(12)
