"""SQLite backing maps: layout, one transaction per multi_put, several writer processes, errors."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from tests.contract.trident.conftest import Sum
from weir.errors import ConfigError, StateError
from weir.trident.backing import SqliteBackingMap, SqliteMapState, close_connections
from weir.trident.state import CombinerValueUpdater, OpaqueValue, StateType


@pytest.fixture(autouse=True)
def _close() -> None:
    close_connections()
    yield
    close_connections()


def test_table_is_plain_json_one_row_per_key(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    factory = SqliteMapState.opaque(f"sqlite:///{db}", table="word_counts")
    state = factory.make_state({}, 0, 1)
    state.begin_commit(4)
    state.multi_update([["man", 1], ["dög", None]], [CombinerValueUpdater(Sum(), 2)] * 2)
    state.commit(4)
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    rows = dict(conn.execute("SELECT k, v FROM word_counts").fetchall())
    assert rows == {'["man",1]': "[4,2,null]", '["dög",null]': "[4,2,null]"}
    assert conn.execute("SELECT name, state_type FROM weir_trident_maps").fetchall() == [("word_counts", "opaque")]
    conn.close()


def test_multi_put_is_one_transaction(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    factory = SqliteMapState.non_transactional(str(db), table="atomic")
    backing = factory.backing_map()
    backing.multi_put([("old",)], [1])
    conn = sqlite3.connect(db)
    conn.execute(
        "CREATE TRIGGER boom BEFORE INSERT ON atomic WHEN NEW.k = '[\"boom\"]' "
        "BEGIN SELECT RAISE(ABORT, 'boom refused'); END"
    )
    conn.close()
    with pytest.raises(StateError, match=r"atomic.*multi_put of 3 keys failed.*boom refused"):
        backing.multi_put([("old",), ("new",), ("boom",)], [2, 3, 4])
    assert backing.multi_get([("old",), ("new",), ("boom",)]) == [1, None, None]


def test_multi_get_spans_chunks(tmp_path: Path) -> None:
    backing = SqliteMapState.non_transactional(tmp_path / "t.db", table="big").backing_map()
    keys = [(f"k{i}", i) for i in range(1234)]
    backing.multi_put(keys, list(range(1234)))
    assert backing.multi_get(list(reversed(keys))) == list(reversed(range(1234)))


def test_writer_waits_for_the_lock_then_gives_up_after_timeout(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    patient = SqliteMapState.non_transactional(db, table="locked", timeout=10).backing_map()
    hasty = SqliteMapState.non_transactional(db, table="locked", timeout=0.2).backing_map()
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.6, lambda: holder.execute("COMMIT"))
    start = time.monotonic()
    with pytest.raises(StateError, match=r"timeout=0.2s"):
        hasty.multi_put([("a",)], [1])
    release.start()
    patient.multi_put([("a",)], [2])
    assert time.monotonic() - start >= 0.5
    release.join()
    holder.close()
    assert patient.multi_get([("a",)]) == [2]


def test_backing_map_pickles_without_its_connection(tmp_path: Path) -> None:
    import pickle

    backing = SqliteMapState.transactional(tmp_path / "t.db", table="p").backing_map()
    backing.multi_put([("a",)], [[1, 2]])
    copy = pickle.loads(pickle.dumps(backing))
    assert isinstance(copy, SqliteBackingMap) and copy.state_type is StateType.TRANSACTIONAL
    assert copy.multi_get([("a",)])[0].val == 2


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"table": "word counts"}, r"table 'word counts' is not a valid SQL identifier"),
        ({"table": "sqlite_master"}, "reserved"),
        ({"timeout": 0}, "timeout must be a positive number"),
        ({"synchronous": "OFF"}, "synchronous must be 'NORMAL' or 'FULL'"),
    ],
)
def test_bad_options_raise_config_error(tmp_path: Path, kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        SqliteMapState.opaque(tmp_path / "t.db", **kwargs)


def test_bad_locations_raise_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"not a database file"):
        SqliteMapState.opaque(":memory:")
    with pytest.raises(ConfigError, match=r"sqlite:///PATH"):
        SqliteMapState.opaque("postgresql://host/db")
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigError, match=r"cannot open the SQLite map state .*file/sub/t.db"):
        SqliteMapState.opaque(blocker / "sub" / "t.db")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConfigError, match=r"garbage.db"):
        SqliteMapState.opaque(garbage)


def test_two_kinds_of_state_cannot_share_a_table(tmp_path: Path) -> None:
    SqliteMapState.opaque(tmp_path / "t.db", table="shared")
    with pytest.raises(ConfigError, match=r"'shared' holds a map state of type 'opaque', not 'transactional'"):
        SqliteMapState.transactional(tmp_path / "t.db", table="shared")


def test_reads_see_cells_written_by_the_maps(tmp_path: Path) -> None:
    factory = SqliteMapState.opaque(tmp_path / "t.db", table="cells")
    state = factory.make_state({}, 0, 1)
    state.begin_commit(1)
    state.multi_put([["x"]], [3])
    state.commit(1)
    state.begin_commit(2)
    state.multi_put([["x"]], [4])
    state.commit(2)
    assert factory.backing_map().multi_get([("x",)]) == [OpaqueValue(2, 4, 3)]
