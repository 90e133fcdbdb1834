"""``weir state`` on the Trident map states of PostgreSQL, HBase and memcached (real servers).

Each store keeps a registry of its map states, written when a map state is validated (at submit):
a ``weir_trident_maps`` table per PostgreSQL schema, row ``weir:trident:maps`` of the HBase table,
item ``weir:trident:maps`` in memcached. ``ls`` / ``get`` / ``dump`` / ``inspect`` read them;
opaque and transactional map states are read-only; ``migrate`` copies them (memcached, which
cannot list its items, is listed and read key by key only).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.cli._support import Result, run, table, tables
from weir.trident.backing import HBaseMapState, MemcachedMapState, PostgresMapState, SqliteMapState

pytestmark = pytest.mark.services

Cap = pytest.CaptureFixture[str]
KINDS = ("opaque", "transactional", "non_transactional")


def fill(factories: dict[str, Any]) -> None:
    """Two batches into each map state: txid 1 writes man=3, dog=1; txid 2 writes man=5."""
    for kind, factory in factories.items():
        state = factory.make_state({}, 0, 1)
        state.begin_commit(1)
        state.multi_put([["man"], ["dog"]], [3, 1])
        state.commit(1)
        state.begin_commit(2)
        state.multi_put([["man"]], [5])
        state.commit(2)
        assert state.multi_get([["man"], ["dog"]]) == [5, 1], kind


def rows_named(rows: list[dict[str, str]], names: dict[str, str]) -> dict[str, dict[str, str]]:
    """The ``ls`` / ``inspect`` rows of the map states ``names`` (kind → name), by kind."""
    by_ns = {r["trident map state"]: r for r in rows}
    return {kind: by_ns[f"trident:{name}"] for kind, name in names.items()}


def check_read_only(capsys: Cap, url: str, names: dict[str, str]) -> None:
    for kind in ("opaque", "transactional"):
        ns = f"trident:{names[kind]}"
        for argv in (["put", ns, "man", "7"], ["delete", ns, "man"]):
            r = run(capsys, "state", argv[0], "--url", url, *argv[1:])
            assert r.code == 2, argv
            assert f"{ns} is a Trident {kind} map state" in r.err


def check_get(capsys: Cap, url: str, names: dict[str, str]) -> None:
    get = ["state", "get", "--url", url]
    assert run(capsys, *get, f"trident:{names['opaque']}", "man").json_lines() == [{"txid": 2, "curr": 5, "prev": 3}]
    assert run(capsys, *get, f"trident:{names['transactional']}", '["dog"]').json_lines() == [{"txid": 1, "val": 1}]
    assert run(capsys, *get, f"trident:{names['non_transactional']}", "man").json_lines() == [5]
    r = run(capsys, *get, f"trident:{names['opaque']}", "cat")
    assert (r.code, r.err.strip()) == (1, f"weir: key [\"cat\"] not found in 'trident:{names['opaque']}'")


def check_put_delete(capsys: Cap, url: str, names: dict[str, str], factories: dict[str, Any]) -> None:
    ns = f"trident:{names['non_transactional']}"
    r = run(capsys, "state", "put", "--url", url, ns, '["cat"]', "4")
    assert (r.code, r.out) == (0, f'{ns}: ["cat"] = 4\n')
    r = run(capsys, "state", "delete", "--url", url, ns, "dog")
    assert (r.code, r.out) == (0, f'{ns}: deleted ["dog"] (was 1)\n')
    plain = factories["non_transactional"].make_state({}, 0, 1)
    assert plain.multi_get([["cat"], ["dog"], ["man"]]) == [4, None, 5]


def dump_of(capsys: Cap, url: str, *namespaces: str) -> list[Any]:
    r = run(capsys, "state", "dump", "--url", url, *namespaces)
    assert r.code == 0, r.err
    return r.json_lines()


def expected_dump(names: dict[str, str]) -> list[dict[str, Any]]:
    o, t, p = (f"trident:{names[k]}" for k in KINDS)
    rows = [
        {"ns": o, "key": ["dog"], "value": {"txid": 1, "curr": 1, "prev": None}},
        {"ns": o, "key": ["man"], "value": {"txid": 2, "curr": 5, "prev": 3}},
        {"ns": t, "key": ["dog"], "value": {"txid": 1, "val": 1}},
        {"ns": t, "key": ["man"], "value": {"txid": 2, "val": 5}},
        {"ns": p, "key": ["dog"], "value": 1},
        {"ns": p, "key": ["man"], "value": 5},
    ]
    return sorted(rows, key=lambda r: r["ns"])  # dump: namespaces in name order, keys in key order


def assert_verified(r: Result, namespaces: list[str]) -> None:
    assert r.code == 0, r.err
    rows = table(r.out)
    assert [row["namespace"] for row in rows] == sorted(namespaces)
    assert {row["status"] for row in rows} == {"OK"}


# ---- PostgreSQL ------------------------------------------------------------------------------
def pg_maps(url: str) -> tuple[dict[str, str], dict[str, Any]]:
    """Three map states in typed tables of their own (names unique to the test: the database is shared)."""
    tag = uuid.uuid4().hex[:8]
    names = {kind: f"m{tag}_{kind[:5]}" for kind in KINDS}
    factories = {
        kind: getattr(PostgresMapState, kind)(url, table=names[kind], key_columns={"word": "TEXT"}) for kind in KINDS
    }
    return names, factories


def test_postgres_map_states_are_listed_read_and_guarded(capsys: Cap, postgres_url: str) -> None:
    names, factories = pg_maps(postgres_url)
    fill(factories)
    r = run(capsys, "state", "ls", "--url", postgres_url)
    assert r.code == 0, r.err
    maps = rows_named(tables(r.out)[-1], names)
    assert {k: (m["type"], m["keys"]) for k, m in maps.items()} == {k: (k, "2") for k in KINDS}
    r = run(capsys, "state", "inspect", "--url", postgres_url, f"trident:{names['opaque']}")
    assert r.code == 0, r.err
    assert rows_named(tables(r.out)[0], {"opaque": names["opaque"]})["opaque"]["last txid"] == "2"
    check_get(capsys, postgres_url, names)
    assert dump_of(capsys, postgres_url, *(f"trident:{n}" for n in names.values())) == expected_dump(names)
    check_read_only(capsys, postgres_url, names)
    check_put_delete(capsys, postgres_url, names, factories)


def test_postgres_dump_pages_through_a_composite_key_in_key_order(
    capsys: Cap, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import weir.connectors.postgres.maps as pg

    monkeypatch.setattr(pg, "_SCAN_PAGE", 2)  # five rows: three pages, each after the last key read
    name = f"m{uuid.uuid4().hex[:8]}_pairs"
    factory = PostgresMapState.transactional(
        postgres_url, table=name, key_columns=[("word", "TEXT"), ("day", "BIGINT")], value_type="JSONB"
    )
    state = factory.make_state({}, 0, 1)
    keys = [["b", 1], ["a", 2], ["a", 10], ["b", 0], ["c", 5]]
    state.begin_commit(3)
    state.multi_put(keys, [{"n": i} for i in range(5)])
    state.commit(3)
    got = dump_of(capsys, postgres_url, f"trident:{name}")
    assert [(d["key"], d["value"]["val"]) for d in got] == [
        (["a", 2], {"n": 1}),
        (["a", 10], {"n": 2}),
        (["b", 0], {"n": 3}),
        (["b", 1], {"n": 0}),
        (["c", 5], {"n": 4}),
    ]


def test_postgres_map_states_migrate_to_sqlite_and_back(capsys: Cap, postgres_url: str, tmp_path: Path) -> None:
    names, factories = pg_maps(postgres_url)
    fill(factories)
    lite = f"sqlite:///{tmp_path / 'copy.db'}"
    namespaces = [f"trident:{n}" for n in names.values()]
    args = [arg for ns in namespaces for arg in ("--namespace", ns)]
    assert_verified(run(capsys, "state", "migrate", "--from", postgres_url, "--to", lite, *args), namespaces)
    assert dump_of(capsys, lite, *namespaces) == expected_dump(names)
    copy = SqliteMapState.opaque(lite, table=names["opaque"]).make_state({}, 0, 1)
    assert copy.multi_get([["man"]]) == [5]

    # a SQLite map state has no column types: it goes only into a PostgreSQL table that is registered
    new = f"m{uuid.uuid4().hex[:8]}_fresh"
    SqliteMapState.opaque(lite, table=new)
    r = run(capsys, "state", "migrate", "--from", lite, "--to", postgres_url, "--namespace", f"trident:{new}")
    assert r.code == 2 and "key columns and value type" in r.err, r.err
    r = run(capsys, "state", "migrate", "--from", lite, "--to", postgres_url, *args)
    assert r.code == 2 and "already exists in the target" in r.err, r.err
    assert_verified(run(capsys, "state", "migrate", "--from", lite, "--to", postgres_url, *args, "--force"), namespaces)
    assert factories["opaque"].make_state({}, 0, 1).multi_get([["man"], ["dog"]]) == [5, 1]


# ---- HBase -----------------------------------------------------------------------------------
@pytest.fixture
def hbase_trident_url(hbase_server: Any) -> str:
    """The emptied ``trident`` table (column family ``cf``)."""
    hbase_server.truncate("trident")
    return str(hbase_server.url("trident"))


def hbase_maps(url: str) -> tuple[dict[str, str], dict[str, Any]]:
    names = {"opaque": "wc_opaque", "transactional": "wc_tx", "non_transactional": "plain"}
    return names, {kind: getattr(HBaseMapState, kind)(url, key_prefix=names[kind]) for kind in KINDS}


def test_hbase_map_states_are_listed_read_guarded_and_migrated(
    capsys: Cap, hbase_trident_url: str, tmp_path: Path
) -> None:
    url = hbase_trident_url
    names, factories = hbase_maps(url)
    fill(factories)
    r = run(capsys, "state", "ls", "--url", url)
    assert r.code == 0, r.err
    assert {k: (m["type"], m["keys"]) for k, m in rows_named(tables(r.out)[-1], names).items()} == {
        k: (k, "2") for k in KINDS
    }
    check_get(capsys, url, names)
    namespaces = [f"trident:{n}" for n in names.values()]
    assert dump_of(capsys, url, *namespaces) == expected_dump(names)
    check_read_only(capsys, url, names)
    lite = f"sqlite:///{tmp_path / 'copy.db'}"
    assert_verified(run(capsys, "state", "migrate", "--from", url, "--to", lite), namespaces)
    assert dump_of(capsys, lite, *namespaces) == expected_dump(names)
    check_put_delete(capsys, url, names, factories)


# ---- memcached -------------------------------------------------------------------------------
def test_memcached_map_states_are_listed_and_read_key_by_key(
    capsys: Cap, memcached_server: Any, tmp_path: Path
) -> None:
    url = memcached_server.url
    tag = uuid.uuid4().hex[:6]
    names = {kind: f"{tag}{kind[:5]}:" for kind in KINDS}
    factories = {kind: getattr(MemcachedMapState, kind)(url, key_prefix=names[kind]) for kind in KINDS}
    fill(factories)
    r = run(capsys, "state", "ls", "--url", url)
    assert r.code == 0, r.err
    maps = rows_named(tables(r.out)[-1], names)
    assert {k: (m["type"], m["keys"]) for k, m in maps.items()} == {k: (k, "?") for k in KINDS}
    check_get(capsys, url, names)
    check_read_only(capsys, url, names)
    check_put_delete(capsys, url, names, factories)
    r = run(capsys, "state", "dump", "--url", url, f"trident:{names['opaque']}")
    assert r.code == 2 and "memcached cannot list the keys of map state" in r.err, r.err
    r = run(capsys, "state", "migrate", "--from", url, "--to", f"sqlite:///{tmp_path / 'never.db'}")
    assert r.code == 2 and "memcached cannot list the keys" in r.err, r.err
    assert not (tmp_path / "never.db").exists()
    r = run(capsys, "state", "put", "--url", url, "wc-count-0", "k", "1")
    assert r.code == 2 and "holds Trident map states only" in r.err, r.err
