"""Damaged files and foreign keys are named, never read silently and never deleted."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from weir.connectors.sqlite import SqliteBackend, SqliteOptions
from weir.errors import ConfigError, StateError

from ..cli._support import run
from ..servers import RedisServer


def _filled_sqlite(path: Path, n: int = 20_000) -> None:
    b = SqliteBackend.open(SqliteOptions(str(path)))
    b.write_direct("t-count-0", {f"k{i}".encode(): b"x" * 50 for i in range(n)}, None)
    b.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def test_a_damaged_sqlite_page_is_refused_at_open_and_reported_by_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "state.db"
    _filled_sqlite(db)
    url = f"sqlite:///{db}"
    ok = run(capsys, "state", "inspect", "--verify", "--url", url)
    assert ok.code == 0 and "is intact" in ok.out
    with open(db, "r+b") as fh:  # one page in the middle of the rows' B-tree overwritten
        fh.seek(4096 * 100)
        fh.write(os.urandom(4096))
    with pytest.raises(ConfigError) as info:
        SqliteBackend.open(SqliteOptions(str(db)))
    assert f"the sqlite state store {url} is damaged (quick_check" in str(info.value)
    assert "inspect --verify" in str(info.value)
    bad = run(capsys, "state", "inspect", "--verify", "--url", url)
    assert bad.code == 1 and "problem(s) in " + url in bad.out and "integrity_check" in bad.out
    listed = run(capsys, "state", "ls", "--url", url)  # every other command refuses the file too
    assert listed.code != 0 and "is damaged" in listed.err


@pytest.fixture(scope="module")
def redis_foreign() -> RedisServer:
    with RedisServer() as server:
        yield server


def test_a_foreign_prepare_key_is_named_and_left_alone(
    redis_foreign: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    redis_foreign.flushall()
    redis_foreign.command_reply("HSET", "t-count-0$prepare", "mine", "not weir's")
    redis_foreign.command_reply("HSET", "t-count-0$txid", "commit", "3")
    from weir.state.factory import StateFactory

    backend = StateFactory.from_url(redis_foreign.url).backend
    for action in (
        lambda: backend.write_prepared("t-count-0", 4, {b"k": b"1"}, 1),
        lambda: backend.discard_prepared("t-count-0", 1),
        lambda: backend.write_direct("t-count-0", {b"k": b"1"}, 1),
        lambda: backend.load_prepared("t-count-0"),
    ):
        with pytest.raises(StateError) as info:
            action()
        text = str(info.value)
        assert "namespace 't-count-0'" in text and "'t-count-0$prepare'" in text
        assert "weir did not write" in text and "untouched" in text
    assert redis_foreign.command_reply("HGETALL", "t-count-0$prepare") == [b"mine", b"not weir's"]
    got = run(capsys, "state", "inspect", "--verify", "--url", redis_foreign.url)
    assert got.code == 1 and "'t-count-0$prepare'" in got.out


@pytest.mark.parametrize(
    ("command", "found"),
    [
        (("HSET", "t-count-0$txid", "epoch", "three"), "epoch, commit or prepare field that is not a number"),
        (("HSET", "t-count-0$txid", "commit", "garbage"), "commit=b'garbage'"),
        (("SET", "t-count-0$txid", "hello"), "is not a hash"),
    ],
)
def test_a_garbage_txid_record_is_named_and_left_alone(
    redis_foreign: RedisServer, command: tuple[str, ...], found: str
) -> None:
    redis_foreign.flushall()
    redis_foreign.command_reply(*command)
    from weir.state.factory import StateFactory

    backend = StateFactory.from_url(redis_foreign.url).backend
    texts = []
    for action in (
        lambda: backend.txids("t-count-0"),
        lambda: backend.write_prepared("t-count-0", 4, {b"k": b"1"}, 1),
        lambda: backend.commit_prepared("t-count-0", 4, 1),
    ):
        try:
            action()
        except StateError as exc:
            texts.append(str(exc))
    assert texts, "garbage in the txid record went unnoticed"
    assert any(found in t for t in texts), texts
    assert all("namespace 't-count-0'" in t and "t-count-0$txid" in t for t in texts), texts
    assert redis_foreign.command_reply("EXISTS", "t-count-0$txid") == 1
