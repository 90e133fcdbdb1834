"""Quick tests of the sqlite provider through TransactionalKeyValueState (the contract suite is elsewhere)."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

from weir.connectors.sqlite import SqliteBackend, SqliteOptions, open_backend, path_from_url
from weir.errors import ConfigError, FencedError, StateError
from weir.state.config import parse_provider_config
from weir.state.kv import TransactionalKeyValueState


def _open(path: Path, **opts: object) -> SqliteBackend:
    cfg = parse_provider_config(
        {
            "topology.state.provider": "sqlite",
            "topology.state.provider.config": {"url": "sqlite:///" + str(path), **opts},
        }
    )
    return open_backend(cfg)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "dir" / "state.db"


@pytest.fixture
def backend(db_path: Path):
    b = _open(db_path)
    yield b
    b.close()


# ---- configuration -------------------------------------------------------------------------------
def test_open_creates_parent_dirs_wal_and_describe(db_path: Path, backend: SqliteBackend) -> None:
    assert db_path.exists()
    assert backend.describe() == "sqlite:///" + str(db_path)
    assert (backend.kind, backend.durable, backend.distributed) == ("sqlite", True, False)
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"weir_kv", "weir_prepare", "weir_txid"} <= tables


def test_url_forms() -> None:
    assert path_from_url("sqlite:///rel/state.db") == "rel/state.db"
    assert path_from_url("sqlite:////abs/state.db") == "/abs/state.db"
    assert SqliteOptions("rel.db").path == os.path.abspath("rel.db")
    with pytest.raises(ConfigError, match="sqlite:///PATH"):
        path_from_url("sqlite://")
    with pytest.raises(ConfigError, match="query"):
        path_from_url("sqlite:///x.db?timeout=3")


def test_path_option_and_default_url(tmp_path: Path) -> None:
    cfg = parse_provider_config(
        {
            "topology.state.provider": "sqlite",
            "topology.state.provider.config": {"path": str(tmp_path / "p.db")},
        }
    )
    b = open_backend(cfg)
    assert b.path == str(tmp_path / "p.db")
    b.close()
    cfg = parse_provider_config({"topology.state.provider": "sqlite", "weir.state.dir": str(tmp_path / "home")})
    b = open_backend(cfg)
    assert b.path == str(tmp_path / "home" / "state.db")
    b.close()


@pytest.mark.parametrize(
    ("opts", "match"),
    [
        ({"synchronous": "OFF"}, "synchronous"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": "3"}, "timeout"),
    ],
)
def test_bad_options(tmp_path: Path, opts: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        _open(tmp_path / "x.db", **opts)


def test_memory_path_refused() -> None:
    with pytest.raises(ConfigError, match="memory provider"):
        SqliteOptions(":memory:")


def test_unwritable_location_is_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    with pytest.raises(ConfigError, match="cannot open the sqlite state store"):
        _open(blocker / "state.db")


def test_not_a_database_is_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ConfigError, match="bad.db"):
        _open(bad)


def test_newer_schema_refused(db_path: Path, backend: SqliteBackend) -> None:
    with sqlite3.connect(db_path) as raw:
        raw.execute("PRAGMA user_version = 99")
    with pytest.raises(ConfigError, match="schema version 99"):
        _open(db_path)


# ---- semantics through TransactionalKeyValueState ------------------------------------------------
def test_put_get_delete_and_visibility(backend: SqliteBackend) -> None:
    writer = TransactionalKeyValueState(backend, "t-c-0")
    reader = TransactionalKeyValueState(backend, "t-c-0")
    writer.put("a", 1)
    writer.put("b", {"x": [1, 2]})
    assert writer.get("a") == 1
    assert reader.get("a") is None
    writer.prepare_commit(1)
    assert writer.get("b") == {"x": [1, 2]}
    assert reader.get("a") is None  # prepared is not visible to others
    writer.commit(1)
    assert reader.get("a") == 1
    assert reader.get_many(["a", "b", "zz"], default=0) == [1, {"x": [1, 2]}, 0]
    assert writer.delete("a") == 1
    assert writer.get("a") is None
    assert reader.get("a") == 1
    writer.prepare_commit(2)
    writer.commit(2)
    assert reader.get("a") is None
    assert dict(reader) == {"b": {"x": [1, 2]}}
    assert backend.txids("t-c-0").committed == 2


def test_rollback_and_commit_rules(backend: SqliteBackend) -> None:
    s = TransactionalKeyValueState(backend, "ns")
    s.put("k", "v1")
    s.prepare_commit(1)
    s.commit(1)
    s.commit(1)  # idempotent
    s.put("k", "v2")
    s.delete("k")
    s.put("other", 5)
    s.prepare_commit(2)
    assert backend.load_prepared("ns") == (2, {b'"k"': None, b'"other"': b"5"})
    s.rollback()
    assert backend.load_prepared("ns") is None
    assert s.get("k") == "v1"
    assert s.get("other") is None
    with pytest.raises(StateError, match=r"'ns'.*txid 1.*committed txid 1"):
        s.prepare_commit(1)
    with pytest.raises(StateError, match=r"'ns'.*commit txid 7.*prepared txid is None"):
        s.commit(7)
    with pytest.raises(StateError, match="cannot commit txid 3"):
        backend.commit_prepared("ns", 3, None)


def test_commit_without_txid_writes_directly(backend: SqliteBackend) -> None:
    s = TransactionalKeyValueState(backend, "$checkpointspout-t")
    s.put("__state", {"txid": 4, "phase": "COMMITTED"})
    s.commit()
    assert TransactionalKeyValueState(backend, "$checkpointspout-t").get("__state") == {
        "txid": 4,
        "phase": "COMMITTED",
    }
    assert backend.txids("$checkpointspout-t").committed is None


def test_epoch_fencing(backend: SqliteBackend) -> None:
    assert backend.acquire_epoch("ns") == 1
    old = TransactionalKeyValueState(backend, "ns", epoch=1)
    old.put("a", 1)
    old.prepare_commit(1)
    assert backend.acquire_epoch("ns") == 2
    new = TransactionalKeyValueState(backend, "ns", epoch=2)
    with pytest.raises(FencedError, match=r"'ns'.*epoch 1 is older than the stored epoch 2"):
        old.commit(1)
    with pytest.raises(FencedError):
        backend.write_prepared("ns", 9, {b"x": b"1"}, 1)
    with pytest.raises(FencedError):
        backend.write_direct("ns", {b"x": b"1"}, 1)
    with pytest.raises(FencedError):
        backend.discard_prepared("ns", 1)
    # nothing changed
    assert backend.load_prepared("ns") == (1, {b'"a"': b"1"})
    assert backend.count("ns") == 0
    new.rollback()
    new.put("b", 2)
    new.prepare_commit(1)
    new.commit(1)
    assert backend.txids("ns").committed == 1
    assert backend.txids("ns").epoch == 2
    # a newer epoch carried by a write is stored
    backend.write_direct("ns", {b"z": b"1"}, 5)
    assert backend.txids("ns").epoch == 5


def test_scan_count_get_many_namespaces_drop(backend: SqliteBackend) -> None:
    rows = {f"k{i:05d}".encode(): str(i).encode() for i in range(4500)}  # > 2 scan pages
    backend.put_many("big", iter(rows.items()))
    assert backend.count("big") == 4500
    assert dict(backend.scan("big")) == rows
    keys = [b"k00001", b"nope", *list(rows)[:1200]]
    assert backend.get_many("big", keys) == [b"1", None, *list(rows.values())[:1200]]
    assert backend.get_many("big", []) == []
    backend.write_prepared("only-prepared", 3, {b"a": b"1"}, None)
    backend.acquire_epoch("only-epoch")
    assert backend.namespaces() == ["big", "only-epoch", "only-prepared"]
    backend.drop("big")
    assert backend.count("big") == 0
    assert backend.namespaces() == ["only-epoch", "only-prepared"]
    assert backend.txids("never").committed is None


def test_commit_applies_tombstones_and_upserts_in_sql(backend: SqliteBackend) -> None:
    backend.put_many("ns", [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    backend.write_prepared("ns", 1, {b"a": None, b"b": b"20", b"d": b"4", b"zz": None}, None)
    backend.commit_prepared("ns", 1, None)
    assert dict(backend.scan("ns")) == {b"b": b"20", b"c": b"3", b"d": b"4"}
    assert backend.txids("ns").committed == 1
    assert backend.txids("ns").prepared is None
    assert backend.load_prepared("ns") is None


# ---- connections and locks (processes, threads, fork, SIGKILL: tests/contract/test_processes.py) ---
def test_close_then_reuse(backend: SqliteBackend) -> None:
    backend.write_direct("c", {b"a": b"1"}, None)
    backend.close()
    assert backend.get("c", b"a") == b"1"


def test_busy_writer_times_out_with_state_error(db_path: Path, backend: SqliteBackend) -> None:
    short = _open(db_path, timeout=0.2)
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        t0 = time.monotonic()
        with pytest.raises(StateError, match=r"'busy'.*locked by another writer"):
            short.write_direct("busy", {b"a": b"1"}, None)
        assert time.monotonic() - t0 < 5
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        short.close()
    backend.write_direct("busy", {b"a": b"1"}, None)
    assert backend.get("busy", b"a") == b"1"
