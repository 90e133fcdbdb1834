"""``weir state migrate``: copies rows and txid records between providers, verified."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli._support import (
    Result,
    backend,
    commit_rows,
    fill_trident,
    run,
    run_subprocess,
    table,
    trident_factories,
)
from tests.servers import HBaseServer, PostgresDatabase, RedisCluster, RedisServer
from weir.cli.state_migrate import checksum
from weir.state.kv import TransactionalKeyValueState
from weir.state.serializers import BytesSerializer

Cap = pytest.CaptureFixture[str]
JSON_NAMESPACES = ["wc-count-0", "wc-count-1", "$checkpointspout-wc"]
RAW_NS = "raw-bolt-0"


def fill(url: str) -> dict[str, tuple[int | None, int]]:
    """Several namespaces: 10k JSON keys, unicode and nested values, arbitrary binary keys and values,
    a coordinator record written directly, different txids and epochs. Returns ``{ns: (txid, epoch)}``."""
    rnd = random.Random(42)
    b = backend(url)
    try:
        # epoch 3, as after three driver starts
        for _ in range(3):
            b.acquire_epoch("wc-count-0")
        commit_rows(b, "wc-count-0", {f"word{i}": i for i in range(6000)}, 10, epoch=3)
        commit_rows(b, "wc-count-0", {f"word{i}": -i for i in range(5000, 10000)}, 11, deletes=["word1"], epoch=3)
        commit_rows(
            b,
            "wc-count-1",
            {
                "héllo wörld ✓": {"n": [1, 2.5, None, True]},
                "": "empty key",
                "日本": "語",
                "big": "x" * 100_000,
            },
            7,
        )
        raw = {}
        for _ in range(300):
            key = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 40)))
            raw[key] = bytes(range(256)) * rnd.randrange(3)
        raw[b"\x00"] = b""
        raw[b"\xff\xfe"] = b"\x00\x00"
        commit_rows(b, RAW_NS, raw, 123456789012, key_serializer=BytesSerializer(), value_serializer=BytesSerializer())
        coord = TransactionalKeyValueState(b, "$checkpointspout-wc")
        coord.put("__state", {"txid": 11, "phase": "COMMITTED", "epoch": 3})
        coord.commit()
        names = b.namespaces()
        return {ns: (b.txids(ns).committed, b.txids(ns).epoch) for ns in names}
    finally:
        b.close()


def dumps(capsys: Cap, url: str) -> tuple[str, str]:
    """The JSON dump of the JSON namespaces and the raw dump of everything."""
    r1 = run(capsys, "state", "dump", "--url", url, *JSON_NAMESPACES)
    r2 = run(capsys, "state", "dump", "--url", url, "--raw")
    assert r1.code == 0 and r2.code == 0, r1.err + r2.err
    return r1.out, r2.out


def records(url: str) -> dict[str, tuple[int | None, int]]:
    b = backend(url)
    try:
        return {ns: (b.txids(ns).committed, b.txids(ns).epoch) for ns in b.namespaces()}
    finally:
        b.close()


def migrate(capsys: Cap, src: str, dst: str, *extra: str) -> Result:
    return run(capsys, "state", "migrate", "--from", src, "--to", dst, *extra)


def assert_verified(r: Result, namespaces: list[str]) -> None:
    assert r.code == 0, r.err
    rows = table(r.out)
    assert [row["namespace"] for row in rows] == sorted(namespaces)
    assert {row["status"] for row in rows} == {"OK"}


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    redis_server.flushall()
    return redis_server.url


@pytest.fixture
def cluster_url(redis_cluster: RedisCluster) -> str:
    redis_cluster.flushall()
    return redis_cluster.url


@pytest.fixture
def hbase_url(hbase_server: HBaseServer) -> str:
    from weir.state.factory import close_backends

    close_backends()
    hbase_server.truncate("state")
    return hbase_server.url()


@pytest.fixture
def pg_url(postgres_database: PostgresDatabase) -> Iterator[str]:
    postgres_database.truncate_all()
    yield postgres_database.url


@pytest.mark.services
@pytest.mark.slow
def test_round_trip_sqlite_redis_postgres_sqlite(capsys: Cap, tmp_path: Path, redis_url: str, pg_url: str) -> None:
    first = f"sqlite:///{tmp_path / 'first.db'}"
    last = f"sqlite:///{tmp_path / 'last.db'}"
    expected = fill(first)
    assert expected["wc-count-0"] == (11, 3)
    assert expected[RAW_NS] == (123456789012, 0)
    json_dump, raw_dump = dumps(capsys, first)
    assert len(json_dump.splitlines()) == 9999 + 4 + 1
    chain = [first, redis_url, pg_url, last]
    for src, dst in zip(chain, chain[1:], strict=False):
        r = migrate(capsys, src, dst, "--chunk-size", "2500")
        assert_verified(r, list(expected))
        assert "migrated 4 namespaces" in r.err
        assert records(dst) == expected, dst
        assert dumps(capsys, dst) == (json_dump, raw_dump), dst
    # the copy is a working store: a topology continues after the copied txid
    b = backend(last)
    try:
        s = TransactionalKeyValueState(b, "wc-count-0", epoch=3)
        with pytest.raises(Exception, match="txid 11"):
            s.prepare_commit(11)
        s.put("word2", 0)
        s.prepare_commit(12)
        s.commit(12)
        assert b.txids("wc-count-0").committed == 12
    finally:
        b.close()


@pytest.mark.services
@pytest.mark.slow
def test_round_trip_sqlite_hbase_redis(capsys: Cap, tmp_path: Path, redis_url: str, hbase_url: str) -> None:
    first = f"sqlite:///{tmp_path / 'first.db'}"
    expected = fill(first)
    before = dumps(capsys, first)
    assert_verified(migrate(capsys, first, hbase_url, "--chunk-size", "2500"), list(expected))
    assert records(hbase_url) == expected
    assert dumps(capsys, hbase_url) == before
    assert_verified(migrate(capsys, hbase_url, redis_url), list(expected))
    assert records(redis_url) == expected
    assert dumps(capsys, redis_url) == before


@pytest.mark.services
@pytest.mark.slow
def test_round_trip_through_redis_cluster(capsys: Cap, tmp_path: Path, cluster_url: str) -> None:
    first = f"sqlite:///{tmp_path / 'first.db'}"
    last = f"sqlite:///{tmp_path / 'last.db'}"
    expected = fill(first)
    before = dumps(capsys, first)
    assert_verified(migrate(capsys, first, cluster_url), list(expected))
    assert_verified(migrate(capsys, cluster_url, last), list(expected))
    assert records(last) == expected
    assert dumps(capsys, last) == before


def test_subset_and_chunks(capsys: Cap, tmp_path: Path) -> None:
    src, dst = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    b = backend(src)
    commit_rows(b, "a-bolt-0", {i: i * i for i in range(103)}, 3)
    commit_rows(b, "b-bolt-0", {"x": 1}, 4)
    b.close()
    r = migrate(capsys, src, dst, "--namespace", "a-bolt-0", "--chunk-size", "7")
    assert_verified(r, ["a-bolt-0"])
    assert table(r.out)[0]["keys"] == "103"
    assert "copied a-bolt-0: 103 keys, committed txid 3" in r.err
    assert list(records(dst)) == ["a-bolt-0"]
    r = migrate(capsys, src, dst, "--namespace", "nope-bolt-0")
    assert r.code == 2
    assert "no namespace 'nope-bolt-0'" in r.err


def test_refuses_a_non_empty_target_unless_forced(capsys: Cap, tmp_path: Path) -> None:
    src, dst = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    b = backend(src)
    commit_rows(b, "a-bolt-0", {"k": 1, "j": 2}, 3)
    commit_rows(b, "b-bolt-0", {"k": 1}, 1)
    b.close()
    t = backend(dst)
    commit_rows(t, "a-bolt-0", {"k": 100, "stale": 5}, 9)
    t.close()
    r = migrate(capsys, src, dst)
    assert r.code == 2
    assert "namespace 'a-bolt-0' is not empty in the target (2 keys, committed txid 9" in r.err
    assert "--force" in r.err
    assert list(records(dst)) == ["a-bolt-0"]  # nothing was written, not even b-bolt-0
    r = migrate(capsys, src, dst, "--force")
    assert_verified(r, ["a-bolt-0", "b-bolt-0"])
    assert records(dst) == {"a-bolt-0": (3, 0), "b-bolt-0": (1, 0)}
    assert run(capsys, "state", "get", "--url", dst, "a-bolt-0", "stale").code == 1


def test_refuses_a_prepared_source_namespace_unless_forced(capsys: Cap, tmp_path: Path) -> None:
    src, dst = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    b = backend(src)
    s = commit_rows(b, "a-bolt-0", {"k": 1}, 3)
    s.put("k", 2)
    s.prepare_commit(4)
    r = migrate(capsys, src, dst)
    assert r.code == 2
    assert "namespace 'a-bolt-0' has a prepared transaction (txid 4)" in r.err
    assert records(dst) == {}
    r = migrate(capsys, src, dst, "--force")
    assert_verified(r, ["a-bolt-0"])
    assert "prepared txid 4 not copied" in r.err
    assert run(capsys, "state", "get", "--url", dst, "a-bolt-0", "k").out == "1\n"
    t = backend(dst)
    assert t.load_prepared("a-bolt-0") is None
    assert t.txids("a-bolt-0").committed == 3
    t.close()
    b.close()


def test_verification_detects_mismatches(capsys: Cap, tmp_path: Path) -> None:
    src, dst = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    b = backend(src)
    for ns in ("a-bolt-0", "b-bolt-0", "c-bolt-0", "d-bolt-0"):
        commit_rows(b, ns, {f"k{i}": i for i in range(50)}, 5)
    b.close()
    assert_verified(migrate(capsys, src, dst), ["a-bolt-0", "b-bolt-0", "c-bolt-0", "d-bolt-0"])
    t = backend(dst)
    t.write_direct("a-bolt-0", {b'"k3"': b"333"}, None)  # same count, other value
    t.write_direct("b-bolt-0", {b'"k3"': None}, None)  # one key missing
    commit_rows(t, "c-bolt-0", {}, 6)  # same rows, other committed txid
    t.close()
    r = migrate(capsys, src, dst, "--verify-only")
    assert r.code == 1
    rows = {row["namespace"]: row for row in table(r.out)}
    assert {ns: row["status"] for ns, row in rows.items()} == {
        "a-bolt-0": "MISMATCH",
        "b-bolt-0": "MISMATCH",
        "c-bolt-0": "MISMATCH",
        "d-bolt-0": "OK",
    }
    assert rows["a-bolt-0"]["keys"] == "50"
    assert "≠" in rows["a-bolt-0"]["checksum"]
    assert rows["b-bolt-0"]["keys"] == "50 ≠ 49"
    assert rows["c-bolt-0"]["committed txid"] == "5 ≠ 6"
    assert "verification FAILED for 3 namespace(s): a-bolt-0, b-bolt-0, c-bolt-0" in r.err


def test_checksum_ignores_order_but_not_content() -> None:
    rows = [(b"a", b"1"), (b"b", b"2"), (b"c", b"")]
    assert checksum(rows) == checksum(list(reversed(rows)))
    assert checksum(rows)[0] == 3
    assert checksum(rows) != checksum([(b"a", b"1"), (b"b", b"2"), (b"c", b"x")])
    # the key/value boundary counts: ("ab", "c") is not ("a", "bc")
    assert checksum([(b"ab", b"c")]) != checksum([(b"a", b"bc")])


def test_same_store_and_bad_urls(capsys: Cap, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    backend(url).close()
    r = migrate(capsys, url, url)
    assert r.code == 2
    assert "same store" in r.err
    r = migrate(capsys, "bogus://x", url)
    assert r.code == 2
    assert r.err.startswith("weir: error: --from: state URL 'bogus://x' has an unknown scheme")
    r = run(capsys, "state", "migrate", "--to", url)
    assert r.code == 2
    assert "--from" in r.err


def test_migrate_as_a_subprocess(tmp_path: Path) -> None:
    src, dst = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    b = backend(src)
    commit_rows(b, "a-bolt-0", {"k": "v"}, 1)
    b.close()
    r = run_subprocess("state", "migrate", "--from", src, "--to", dst)
    assert r.code == 0, r.err
    assert table(r.out)[0]["status"] == "OK"
    assert run_subprocess("state", "dump", "--url", dst).out == '{"ns":"a-bolt-0","key":"k","value":"v"}\n'


# ---- Trident map states ----------------------------------------------------------------------
MAPS = ["trident:plain", "trident:wc_opaque", "trident:wc_tx"]


def map_dump(capsys: Cap, url: str) -> list[str]:
    r = run(capsys, "state", "dump", "--url", url, *MAPS)
    assert r.code == 0, r.err
    return r.lines()


@pytest.mark.services
def test_trident_maps_round_trip_sqlite_redis_sqlite(capsys: Cap, tmp_path: Path, redis_url: str) -> None:
    first, last = f"sqlite:///{tmp_path / 'first.db'}", f"sqlite:///{tmp_path / 'last.db'}"
    fill_trident(first)
    b = backend(first)
    commit_rows(b, "wc-count-0", {"storm": 3}, 4)
    b.close()
    before = map_dump(capsys, first)
    assert len(before) == 6
    for src, dst in ((first, redis_url), (redis_url, last)):
        r = migrate(capsys, src, dst, "--chunk-size", "1")
        assert_verified(r, ["wc-count-0", *MAPS])
        assert "copied trident:wc_opaque: 2 keys, opaque map state" in r.err
        assert map_dump(capsys, dst) == before, dst
    # the copies are working map states: a replay of txid 2 keeps prev, a new batch moves on
    opaque = trident_factories(last)["opaque"].make_state({}, 0, 1)
    opaque.begin_commit(3)
    opaque.multi_put([["man"]], [8])
    opaque.commit(3)
    r = run(capsys, "state", "get", "--url", last, "trident:wc_opaque", "man")
    assert r.json_lines() == [{"txid": 3, "curr": 8, "prev": 5}]


def test_trident_maps_refused_when_present_in_the_target_unless_forced(capsys: Cap, tmp_path: Path) -> None:
    src, dst = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    fill_trident(src)
    assert_verified(migrate(capsys, src, dst, "--namespace", "trident:wc_tx"), ["trident:wc_tx"])
    r = migrate(capsys, src, dst, "--namespace", "trident:wc_tx")
    assert r.code == 2
    assert "Trident map state 'trident:wc_tx' already exists in the target (transactional, 2 keys)" in r.err
    # a changed target cell is caught by --verify-only, and --force replaces the map state
    tx = trident_factories(dst)["transactional"].make_state({}, 0, 1)
    tx.begin_commit(9)
    tx.multi_put([["man"]], [1])
    tx.commit(9)
    r = migrate(capsys, src, dst, "--namespace", "trident:wc_tx", "--verify-only")
    assert r.code == 1 and table(r.out)[0]["status"] == "MISMATCH"
    assert_verified(migrate(capsys, src, dst, "--namespace", "trident:wc_tx", "--force"), ["trident:wc_tx"])
    assert run(capsys, "state", "get", "--url", dst, "trident:wc_tx", "man").json_lines() == [{"txid": 2, "val": 5}]
    r = migrate(capsys, src, "memory://elsewhere")
    assert r.code == 2 and "cannot hold Trident map states" in r.err
