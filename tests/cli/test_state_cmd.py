"""``weir state ls|get|dump|put|delete|inspect`` against real stores."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli._support import (
    backend,
    commit_rows,
    fill_trident,
    run,
    run_subprocess,
    table,
    tables,
    trident_factories,
)
from tests.servers import RedisServer, free_port
from weir.checkpoint.coordinator import RECORD_KEY, CheckpointPhase, CheckPointState, checkpoint_namespace
from weir.state.backend import Backend
from weir.state.kv import TransactionalKeyValueState
from weir.state.serializers import IntSerializer, StrSerializer

Cap = pytest.CaptureFixture[str]


@pytest.fixture(params=["sqlite", pytest.param("hbase", marks=pytest.mark.services)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store: a SQLite file, or HBase's emptied ``state`` table."""
    if request.param == "hbase":
        from weir.state.factory import close_backends

        close_backends()
        hbase = request.getfixturevalue("hbase_server")
        hbase.truncate("state")
        return str(hbase.url())
    return f"sqlite:///{tmp_path / 'state.db'}"


@pytest.fixture
def store(url: str) -> Iterator[Backend]:
    """A SQLite store with two word-count namespaces, a typed namespace and a coordinator record."""
    b = backend(url)
    commit_rows(b, "wc-count-0", {"storm": 3, "spark": 5, "héllo wörld": 1, "bin": b"\x00\xff\x10"}, 4)
    commit_rows(b, "wc-count-0", {"storm": 4, "gone": 1}, 5, deletes=["gone"])
    commit_rows(b, "wc-count-1", {7: [1, "two", None], "nested": {"a": {"b": 1.5}}}, 2)
    commit_rows(
        b,
        "typed-bolt-0",
        {"x": 10, "y": 20},
        1,
        key_serializer=StrSerializer(),
        value_serializer=IntSerializer(),
    )
    # the coordinator's record, as the coordinator writes it (raw key __state, JSON value)
    rec = CheckPointState(txid=5, phase=CheckpointPhase.COMMITTED, epoch=2, query_id="q-1", parallelism={"count": 2})
    b.write_direct(checkpoint_namespace("wc"), {RECORD_KEY: rec.to_bytes()}, None)
    try:
        yield b
    finally:
        b.close()


def rec_fields() -> list[str]:
    return list(json.loads(CheckPointState().to_bytes()))


def test_ls(capsys: Cap, store: Backend, url: str) -> None:
    r = run(capsys, "state", "ls", "--url", url)
    assert r.code == 0, r.err
    rows = {row["namespace"]: row for row in table(r.out)}
    assert list(rows) == ["$checkpointspout-wc", "typed-bolt-0", "wc-count-0", "wc-count-1"]
    assert rows["wc-count-0"] == {
        "namespace": "wc-count-0",
        "committed txid": "5",
        "prepared txid": "-",
        "epoch": "0",
        "keys": "4",
    }
    assert rows["wc-count-1"]["committed txid"] == "2"
    assert rows["$checkpointspout-wc"]["committed txid"] == "-"


def test_ls_of_an_empty_store(capsys: Cap, url: str) -> None:
    backend(url).close()  # creates the (empty) database
    r = run(capsys, "state", "ls", "--url", url)
    assert r.code == 0
    assert r.out.startswith(f"no namespaces in {url.split(':')[0]}:")


def test_get(capsys: Cap, store: Backend, url: str) -> None:
    assert run(capsys, "state", "get", "--url", url, "wc-count-0", "storm").out == "4\n"
    assert run(capsys, "state", "get", "--url", url, "wc-count-0", '"storm"').out == "4\n"
    assert run(capsys, "state", "get", "--url", url, "wc-count-0", "héllo wörld").out == "1\n"
    assert run(capsys, "state", "get", "--url", url, "wc-count-0", "bin").out == '{"$bytes":"AP8Q"}\n'
    # 7 is JSON, so the int key 7; "7" would be the string key
    assert run(capsys, "state", "get", "--url", url, "wc-count-1", "7").out == '[1,"two",null]\n'
    assert run(capsys, "state", "get", "--url", url, "wc-count-1", "nested").out == '{"a":{"b":1.5}}\n'
    # the coordinator's record (raw key) is found by its plain name
    r = run(capsys, "state", "get", "--url", url, "$checkpointspout-wc", "__state")
    assert r.code == 0, r.err
    assert json.loads(r.out)["phase"] == "COMMITTED"
    r = run(capsys, "state", "get", "--url", url, "wc-count-1", '"7"')
    assert r.code == 1
    assert 'key "7" not found' in r.err


def test_get_missing_key_and_namespace(capsys: Cap, store: Backend, url: str) -> None:
    r = run(capsys, "state", "get", "--url", url, "wc-count-0", "gone")
    assert (r.code, r.out) == (1, "")
    assert "key \"gone\" not found in namespace 'wc-count-0'" in r.err
    r = run(capsys, "state", "get", "--url", url, "nope-bolt-0", "x")
    assert r.code == 1
    assert "no such namespace" in r.err


def test_get_with_typed_serializers(capsys: Cap, store: Backend, url: str) -> None:
    r = run(
        capsys,
        "state",
        "get",
        "--url",
        url,
        "--key-class",
        "str",
        "--value-class",
        "int",
        "typed-bolt-0",
        "y",
    )
    assert (r.code, r.out) == (0, "20\n")
    # the Storm class names work too, given in the provider config
    conf = json.dumps({"url": url, "keyClass": "java.lang.String", "valueClass": "java.lang.Long"})
    r = run(
        capsys,
        "state", "get", "--conf", f"topology.state.provider={url.split(':')[0]}", "--conf",
        f"topology.state.provider.config={conf}", "typed-bolt-0", "x",
    )  # fmt: skip
    assert (r.code, r.out) == (0, "10\n"), r.err


def test_wrong_serializer_says_what_to_do(capsys: Cap, store: Backend, url: str) -> None:
    r = run(capsys, "state", "dump", "--url", url, "--value-class", "int", "wc-count-1")
    assert r.code == 2
    assert "namespace 'wc-count-1'" in r.err
    assert "--raw" in r.err


def test_dump(capsys: Cap, store: Backend, url: str) -> None:
    r = run(capsys, "state", "dump", "--url", url, "wc-count-0", "wc-count-1", "$checkpointspout-wc")
    assert r.code == 0, r.err
    got = r.json_lines()
    assert [(d["ns"], d["key"]) for d in got] == [
        ("$checkpointspout-wc", "__state"),
        ("wc-count-0", "bin"),
        ("wc-count-0", "héllo wörld"),
        ("wc-count-0", "spark"),
        ("wc-count-0", "storm"),
        ("wc-count-1", "nested"),
        ("wc-count-1", 7),  # sorted by key bytes: b'"nested"' < b'7'
    ]
    assert got[1]["value"] == {"$bytes": "AP8Q"}
    assert got[4]["value"] == 4
    assert "héllo wörld" in r.out  # unicode is kept readable
    # every line is exactly ns, key, value
    assert all(list(d) == ["ns", "key", "value"] for d in got)


def test_dump_all_needs_the_right_serializers_or_raw(capsys: Cap, store: Backend, url: str) -> None:
    # typed-bolt-0 was written with str/int serializers: its keys are not JSON
    r = run(capsys, "state", "dump", "--url", url)
    assert r.code == 2
    assert "typed-bolt-0" in r.err
    r = run(capsys, "state", "dump", "--url", url, "--raw")
    assert r.code == 0
    got = r.json_lines()
    assert len(got) == 1 + 2 + 4 + 2
    assert {"ns": "typed-bolt-0", "key": {"$bytes": "eA=="}, "value": {"$bytes": "MTA="}} in got


def test_dump_unknown_namespace(capsys: Cap, store: Backend, url: str) -> None:
    r = run(capsys, "state", "dump", "--url", url, "wc-count-0", "nope-0")
    assert r.code == 2
    assert "no namespace 'nope-0'" in r.err


def test_put_and_delete(capsys: Cap, store: Backend, url: str) -> None:
    r = run(capsys, "state", "put", "--url", url, "wc-count-0", "flink", "11")
    assert r.code == 0, r.err
    assert store.get("wc-count-0", b'"flink"') == b"11"
    r = run(capsys, "state", "put", "--url", url, "new-bolt-0", "[1,2]", '{"$bytes":"AAE="}')
    assert r.code == 0, r.err
    assert run(capsys, "state", "get", "--url", url, "new-bolt-0", "[1, 2]").out == '{"$bytes":"AAE="}\n'
    # txids are untouched by admin writes
    assert store.txids("wc-count-0").committed == 5
    r = run(capsys, "state", "delete", "--url", url, "wc-count-0", "storm")
    assert r.code == 0, r.err
    assert "was 4" in r.out
    assert store.get("wc-count-0", b'"storm"') is None
    r = run(capsys, "state", "delete", "--url", url, "wc-count-0", "storm")
    assert r.code == 1
    assert "not found" in r.err


def test_bad_bytes_form_is_refused(capsys: Cap, store: Backend, url: str) -> None:
    r = run(capsys, "state", "put", "--url", url, "new-bolt-0", "k", '{"$bytes": "not base64!"}')
    assert r.code == 2
    assert "is not valid base64" in r.err
    r = run(capsys, "state", "put", "--url", url, "new-bolt-0", "k", "not json at all")
    assert r.code == 0
    assert store.get("new-bolt-0", b'"k"') == b'"not json at all"'


def test_put_with_typed_serializers(capsys: Cap, store: Backend, url: str) -> None:
    r = run(
        capsys,
        "state",
        "put",
        "--url",
        url,
        "--key-class",
        "str",
        "--value-class",
        "int",
        "typed-bolt-0",
        "z",
        "30",
    )
    assert r.code == 0, r.err
    assert store.get("typed-bolt-0", b"z") == b"30"
    r = run(capsys, "state", "put", "--url", url, "--value-class", "int", "typed-bolt-0", "z", "thirty")
    assert r.code == 2
    assert "'thirty' is not a valid int" in r.err


def test_admin_writes_are_refused_during_a_prepare(capsys: Cap, store: Backend, url: str) -> None:
    s = TransactionalKeyValueState(store, "wc-count-0")
    s.put("storm", 100)
    s.delete("spark")
    s.put("kafka", 1)
    s.prepare_commit(6)
    for argv in (("put", "wc-count-0", "storm", "1"), ("delete", "wc-count-0", "storm")):
        r = run(capsys, "state", argv[0], "--url", url, *argv[1:])
        assert r.code == 2
        assert "namespace 'wc-count-0'" in r.err
        assert "txid 6" in r.err
        assert "weir state inspect" in r.err
    assert store.get("wc-count-0", b'"storm"') == b"4"
    # other namespaces are not blocked
    assert run(capsys, "state", "put", "--url", url, "wc-count-1", "x", "1").code == 0

    r = run(capsys, "state", "inspect", "--url", url)
    assert r.code == 0
    pending, coords = tables(r.out)
    assert pending == [
        {
            "namespace": "wc-count-0",
            "prepared txid": "6",
            "committed txid": "5",
            "upserts": "2",
            "tombstones": "1",
            "epoch": "0",
        }
    ]
    assert len(coords) == 1
    # every field of the record is shown, txid/phase/epoch first
    fields = list(coords[0])
    assert fields[:4] == ["topology", "txid", "phase", "epoch"]
    assert set(fields[4:]) == set(rec_fields()) - {"txid", "phase", "epoch"}
    assert {k: coords[0][k] for k in ("topology", "txid", "phase", "epoch", "query_id", "parallelism")} == {
        "topology": "wc",
        "txid": "5",
        "phase": "COMMITTED",
        "epoch": "2",
        "query_id": "q-1",
        "parallelism": '{"count":2}',
    }
    s.commit(6)
    assert run(capsys, "state", "put", "--url", url, "wc-count-0", "storm", "1").code == 0


def test_inspect_without_pending_prepares(capsys: Cap, store: Backend, url: str) -> None:
    r = run(capsys, "state", "inspect", "--url", url, "wc-count-1")
    assert r.code == 0
    assert "no pending prepares (1 namespaces)" in r.out
    # namespace wc-count-1 belongs to topology "wc" (prefix "wc-"): its coordinator is shown
    assert table(r.out)[0]["topology"] == "wc"
    r = run(capsys, "state", "inspect", "--url", url, "typed-bolt-0")
    assert "no coordinator records" in r.out


def test_inspect_shows_a_preparing_coordinator(capsys: Cap, store: Backend, url: str) -> None:
    # a record written through a KeyValueState (JSON key) is found too
    coord = TransactionalKeyValueState(store, "$checkpointspout-other")
    coord.put("__state", {"phase": "PREPARING", "txid": 9, "epoch": 1})
    coord.commit()
    r = run(capsys, "state", "inspect", "--url", url)
    coords = tables(r.out)[-1]
    assert [(c["topology"], c["txid"], c["phase"]) for c in coords] == [
        ("other", "9", "PREPARING"),
        ("wc", "5", "COMMITTED"),
    ]
    assert coords[0]["query_id"] == "-"


def test_default_store_is_weir_state_dir(capsys: Cap, tmp_state_dir: Path) -> None:
    r = run(capsys, "state", "ls")
    assert r.code == 2
    assert "no weir state store at" in r.err
    assert not (tmp_state_dir / "state.db").exists()
    assert run(capsys, "state", "put", "wc-count-0", "a", "1").code == 0
    assert (tmp_state_dir / "state.db").exists()
    assert run(capsys, "state", "get", "wc-count-0", "a").out == "1\n"
    # weir.state.dir given as configuration wins over the environment
    other = tmp_state_dir.parent / "other"
    assert run(capsys, "state", "put", "--conf", f"weir.state.dir={other}", "ns-0", "b", "2").code == 0
    assert (other / "state.db").exists()


def test_default_store_in_the_working_directory(tmp_path: Path) -> None:
    env: dict[str, str | None] = {"WEIR_STATE_DIR": None}
    r = run_subprocess("state", "put", "wc-count-0", "a", "1", cwd=tmp_path, env=env)
    assert r.code == 0, r.err
    assert (tmp_path / "weir-state" / "state.db").exists()
    r = run_subprocess("state", "dump", cwd=tmp_path, env=env)
    assert (r.code, r.out) == (0, '{"ns":"wc-count-0","key":"a","value":1}\n')


def test_conf_file(capsys: Cap, store: Backend, url: str, tmp_path: Path) -> None:
    conf = tmp_path / "conf.json"
    conf.write_text(
        json.dumps({"topology.state.provider": url.split(":")[0], "topology.state.provider.config": {"url": url}})
    )
    r = run(capsys, "state", "get", "--conf-file", str(conf), "wc-count-0", "spark")
    assert (r.code, r.out) == (0, "5\n"), r.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--url", "nosuch://x"], "unknown scheme 'nosuch'"),
        (["--conf", "topology.state.provider"], "expected KEY=VALUE"),
        (["--conf", "topology.state.provider=cassandra"], "unknown provider 'cassandra'"),
        (["--conf", "topology.state.provider=hbase"], "the HBase provider needs tableName"),
        (["--conf", "topology.state.provider.config={bad json"], "is not valid JSON"),
        (["--conf-file", "/nonexistent/conf.json"], "cannot be read"),
        (
            [
                "--conf",
                "topology.state.provider=redis",
                "--conf",
                'topology.state.provider.config={"jedisPoolConfig":{"port":"x"}}',
            ],
            "port must be int",
        ),  # noqa: E501
    ],
)
def test_bad_store_options(capsys: Cap, argv: list[str], message: str) -> None:
    r = run(capsys, "state", "ls", *argv)
    assert r.code == 2
    assert message in r.err
    assert "Traceback" not in r.err


@pytest.mark.services
def test_unreachable_redis_is_one_clear_error(capsys: Cap) -> None:
    port = free_port()
    r = run(capsys, "state", "ls", "--url", f"redis://127.0.0.1:{port}/0?timeout=300")
    assert r.code == 2
    assert f"127.0.0.1:{port}" in r.err
    assert len(r.err.strip().splitlines()) == 1


@pytest.mark.services
def test_redis_by_storm_config(capsys: Cap, redis_server: RedisServer) -> None:
    redis_server.flushall()
    pool = json.dumps({"jedisPoolConfig": {"host": "127.0.0.1", "port": redis_server.port, "database": 0}})
    opts = ["--conf", "topology.state.provider=org.apache.storm.redis.state.RedisKeyValueStateProvider",
            "--conf", f"topology.state.provider.config={pool}"]  # fmt: skip
    assert run(capsys, "state", "put", *opts, "wc-count-0", "storm", "3").code == 0
    r = run(capsys, "state", "ls", *opts)
    assert table(r.out) == [
        {"namespace": "wc-count-0", "committed txid": "-", "prepared txid": "-", "epoch": "0", "keys": "1"}
    ]
    r = run(capsys, "state", "get", "--url", redis_server.url, "wc-count-0", "storm")
    assert (r.code, r.out) == (0, "3\n")


def test_read_commands_never_create_a_sqlite_file(capsys: Cap, tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such.db"
    for argv in (["ls"], ["dump"], ["inspect"], ["get", "ns-0", "k"], ["delete", "ns-0", "k"]):
        r = run(capsys, "state", *argv, "--url", f"sqlite:///{missing}")
        assert r.code == 2, argv
        assert f"no SQLite state store at {missing}" in r.err
    r = run(capsys, "state", "migrate", "--from", f"sqlite:///{missing}", "--to", f"sqlite:///{tmp_path / 'b.db'}")
    assert r.code == 2
    assert r.err.startswith("weir: error: --from: no SQLite state store")
    assert not (tmp_path / "no").exists()
    assert not (tmp_path / "b.db").exists()


# ---- Trident map states ----------------------------------------------------------------------
@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.services)])
def trident_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store holding a Storm namespace and three Trident map states (see ``fill_trident``)."""
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        server.flushall()
        url = server.url
    else:
        url = f"sqlite:///{tmp_path / 'trident.db'}"
    b = backend(url)
    try:
        commit_rows(b, "wc-count-0", {"storm": 3}, 4)
    finally:
        b.close()
    fill_trident(url)
    return url


def test_ls_and_inspect_show_trident_map_states(capsys: Cap, trident_url: str) -> None:
    r = run(capsys, "state", "ls", "--url", trident_url)
    assert r.code == 0, r.err
    storm, maps = tables(r.out)
    assert [row["namespace"] for row in storm] == ["wc-count-0"]
    assert maps == [
        {"trident map state": "trident:plain", "type": "non_transactional", "keys": "2"},
        {"trident map state": "trident:wc_opaque", "type": "opaque", "keys": "2"},
        {"trident map state": "trident:wc_tx", "type": "transactional", "keys": "2"},
    ]
    r = run(capsys, "state", "inspect", "--url", trident_url, "trident:wc_opaque")
    assert r.code == 0, r.err
    assert tables(r.out)[0] == [
        {"trident map state": "trident:wc_opaque", "type": "opaque", "keys": "2", "last txid": "2"}
    ]


def test_get_and_dump_decode_trident_cells(capsys: Cap, trident_url: str) -> None:
    get = ["state", "get", "--url", trident_url]
    assert run(capsys, *get, "trident:wc_opaque", '["man"]').json_lines() == [{"txid": 2, "curr": 5, "prev": 3}]
    assert run(capsys, *get, "trident:wc_opaque", "man").json_lines() == [{"txid": 2, "curr": 5, "prev": 3}]
    assert run(capsys, *get, "trident:wc_tx", '["dog",2]').json_lines() == [{"txid": 1, "val": 1}]
    assert run(capsys, *get, "trident:plain", '["man"]').json_lines() == [5]
    r = run(capsys, *get, "trident:wc_tx", "cat")
    assert (r.code, r.err.strip()) == (1, "weir: key [\"cat\"] not found in 'trident:wc_tx'")
    r = run(capsys, "state", "dump", "--url", trident_url, "trident:wc_opaque", "wc-count-0")
    assert r.json_lines() == [
        {"ns": "trident:wc_opaque", "key": ["dog", 2], "value": {"txid": 1, "curr": 1, "prev": None}},
        {"ns": "trident:wc_opaque", "key": ["man"], "value": {"txid": 2, "curr": 5, "prev": 3}},
        {"ns": "wc-count-0", "key": "storm", "value": 3},
    ]
    assert len(run(capsys, "state", "dump", "--url", trident_url).json_lines()) == 1 + 3 * 2


def test_writes_refused_on_opaque_and_transactional_maps(capsys: Cap, trident_url: str) -> None:
    for ns in ("trident:wc_opaque", "trident:wc_tx"):
        for argv in (["put", ns, "man", "7"], ["delete", ns, "man"]):
            r = run(capsys, "state", argv[0], "--url", trident_url, *argv[1:])
            assert r.code == 2, argv
            assert f"{ns} is a Trident" in r.err and "replay" in r.err
    opaque = trident_factories(trident_url)["opaque"].make_state({}, 0, 1)
    assert opaque.multi_get([["man"]]) == [5]  # untouched


def test_put_and_delete_on_a_non_transactional_map(capsys: Cap, trident_url: str) -> None:
    r = run(capsys, "state", "put", "--url", trident_url, "trident:plain", '["cat"]', '{"n": 1}')
    assert (r.code, r.out) == (0, 'trident:plain: ["cat"] = {"n":1}\n')
    r = run(capsys, "state", "delete", "--url", trident_url, "trident:plain", '["dog",2]')
    assert (r.code, r.out) == (0, 'trident:plain: deleted ["dog",2] (was 1)\n')
    plain = trident_factories(trident_url)["non_transactional"].make_state({}, 0, 1)
    assert plain.multi_get([["cat"], ["dog", 2], ["man"]]) == [{"n": 1}, None, 5]
