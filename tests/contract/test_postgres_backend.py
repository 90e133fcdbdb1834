"""Quick tests of the postgres provider against the local server, in a fresh database per run."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from weir.connectors.postgres import PostgresBackend, PostgresOptions, open_backend, redact_url
from weir.errors import ConfigError, FencedError, StateError
from weir.state.config import parse_provider_config
from weir.state.kv import TransactionalKeyValueState

if os.environ.get("WEIR_REQUIRE_SERVICES") == "1":
    import psycopg
else:
    psycopg = pytest.importorskip("psycopg")

ADMIN_URL = os.environ.get("WEIR_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def _with_db(url: str, db: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + db


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    try:
        admin = psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        if os.environ.get("WEIR_REQUIRE_SERVICES") == "1":
            pytest.fail(f"PostgreSQL is required but not reachable at {ADMIN_URL}: {exc}")
        pytest.skip(f"PostgreSQL not reachable at {ADMIN_URL}")
    db = f"weir_test_{uuid.uuid4().hex[:12]}"
    admin.execute(f'CREATE DATABASE "{db}"')
    try:
        yield _with_db(ADMIN_URL, db)
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        admin.close()


def _open(url: str, **opts: object) -> PostgresBackend:
    cfg = parse_provider_config(
        {"topology.state.provider": "postgres", "topology.state.provider.config": {"url": url, **opts}}
    )
    return open_backend(cfg)


@pytest.fixture
def backend(pg_url: str) -> Iterator[PostgresBackend]:
    b = _open(pg_url)
    yield b
    for ns in b.namespaces():
        b.drop(ns)
    b.close()


# ---- configuration and connection errors ---------------------------------------------------------
def test_open_creates_tables_and_describe(pg_url: str, backend: PostgresBackend) -> None:
    assert backend.describe() == pg_url
    assert (backend.kind, backend.durable, backend.distributed) == ("postgres", True, True)
    with psycopg.connect(pg_url) as c:
        names = {r[0] for r in c.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert {"weir_kv", "weir_prepare", "weir_txid"} <= names


def test_custom_schema_and_prefix_created_concurrently(pg_url: str) -> None:
    opened: list[PostgresBackend] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(_open(pg_url, schema="weir_s", tablePrefix="app_"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    b = opened[0]
    assert b.describe().endswith("[weir_s.app_*]")
    b.write_direct("x", {b"k": b"v"}, None)
    with psycopg.connect(pg_url) as c:
        assert c.execute("SELECT k, v FROM weir_s.app_kv").fetchall() == [(b"k", b"v")]
    for o in opened:
        o.close()


@pytest.mark.parametrize(
    ("opts", "match"),
    [
        ({"schema": "public; DROP TABLE x"}, "schema"),
        ({"tablePrefix": "a-b"}, "tablePrefix"),
        ({"connectTimeout": -1}, "connectTimeout"),
    ],
)
def test_bad_options(pg_url: str, opts: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        _open(pg_url, **opts)


def test_missing_database_names_url_without_password(pg_url: str) -> None:
    url = _with_db(pg_url, "weir_no_such_db").replace("postgres@", "postgres:sekrit@")
    with pytest.raises(ConfigError) as info:
        _open(url)
    text = str(info.value)
    assert "sekrit" not in text
    assert "postgres:***@127.0.0.1:5432/weir_no_such_db" in text
    assert "does not exist" in text
    assert "CREATE DATABASE" in text


def test_unreachable_server_is_config_error() -> None:
    with pytest.raises(ConfigError, match=r"127\.0\.0\.1:1/db.*check that PostgreSQL runs"):
        _open("postgresql://postgres@127.0.0.1:1/db", connectTimeout=2)


def test_unknown_role_is_config_error(pg_url: str) -> None:
    url = pg_url.replace("postgres@", "weir_no_such_role@")
    with pytest.raises(ConfigError, match="check the user and password"):
        _open(url)


def test_redact_url() -> None:
    assert redact_url("postgresql://u:p@h:1/d") == "postgresql://u:***@h:1/d"
    assert redact_url("postgresql://u@h/d?password=x&sslmode=require") == (
        "postgresql://u@h/d?password=***&sslmode=require"
    )


# ---- semantics through TransactionalKeyValueState ------------------------------------------------
def test_put_get_delete_and_visibility(backend: PostgresBackend) -> None:
    writer = TransactionalKeyValueState(backend, "t-c-0")
    reader = TransactionalKeyValueState(backend, "t-c-0")
    writer.put("a", 1)
    writer.put("b", {"x": [1, 2]})
    assert writer.get("a") == 1
    assert reader.get("a") is None
    writer.prepare_commit(1)
    assert reader.get("a") is None
    writer.commit(1)
    assert reader.get("a") == 1
    assert reader.get_many(["a", "b", "zz"], default=0) == [1, {"x": [1, 2]}, 0]
    assert writer.delete("a") == 1
    writer.prepare_commit(2)
    writer.commit(2)
    assert reader.get("a") is None
    assert dict(reader) == {"b": {"x": [1, 2]}}
    assert backend.txids("t-c-0").committed == 2


def test_rollback_and_commit_rules(backend: PostgresBackend) -> None:
    s = TransactionalKeyValueState(backend, "ns")
    s.put("k", "v1")
    s.prepare_commit(1)
    s.commit(1)
    s.commit(1)  # idempotent
    s.delete("k")
    s.put("other", 5)
    s.prepare_commit(2)
    assert backend.load_prepared("ns") == (2, {b'"k"': None, b'"other"': b"5"})
    s.rollback()
    assert backend.load_prepared("ns") is None
    assert (s.get("k"), s.get("other")) == ("v1", None)
    with pytest.raises(StateError, match=r"'ns'.*txid 1.*committed txid 1"):
        s.prepare_commit(1)
    with pytest.raises(StateError, match="cannot commit txid 3"):
        backend.commit_prepared("ns", 3, None)


def test_epoch_fencing(backend: PostgresBackend) -> None:
    assert backend.acquire_epoch("ns") == 1
    old = TransactionalKeyValueState(backend, "ns", epoch=1)
    old.put("a", 1)
    old.prepare_commit(1)
    assert backend.acquire_epoch("ns") == 2
    with pytest.raises(FencedError, match=r"'ns'.*epoch 1 is older than the stored epoch 2"):
        old.commit(1)
    for call in (
        lambda: backend.write_prepared("ns", 9, {b"x": b"1"}, 1),
        lambda: backend.write_direct("ns", {b"x": b"1"}, 1),
        lambda: backend.discard_prepared("ns", 1),
    ):
        with pytest.raises(FencedError):
            call()
    assert backend.load_prepared("ns") == (1, {b'"a"': b"1"})
    assert backend.count("ns") == 0
    new = TransactionalKeyValueState(backend, "ns", epoch=2)
    new.rollback()
    new.put("b", 2)
    new.prepare_commit(1)
    new.commit(1)
    assert backend.txids("ns") == backend.txids("ns").__class__(1, None, 2)
    backend.write_direct("ns", {b"z": b"1"}, 5)
    assert backend.txids("ns").epoch == 5


def test_scan_count_get_many_namespaces_drop(backend: PostgresBackend) -> None:
    rows = {f"k{i:05d}".encode(): str(i).encode() for i in range(12_000)}  # > 2 scan pages, > 1 get chunk
    backend.put_many("big", iter(rows.items()))
    assert backend.count("big") == 12_000
    assert dict(backend.scan("big")) == rows
    keys = [b"nope", *rows]
    assert backend.get_many("big", keys) == [None, *rows.values()]
    backend.write_prepared("only-prepared", 3, {b"a": None}, None)
    backend.acquire_epoch("only-epoch")
    assert backend.namespaces() == ["big", "only-epoch", "only-prepared"]
    backend.drop("big")
    assert backend.count("big") == 0
    assert backend.namespaces() == ["only-epoch", "only-prepared"]


def test_commit_applies_tombstones_and_upserts(backend: PostgresBackend) -> None:
    backend.put_many("ns", [(b"a", b"1"), (b"b", b"2"), (b"c", b"3"), (b"a", b"1")])
    backend.write_prepared("ns", 1, {b"a": None, b"b": b"20", b"d": b"4", b"zz": None, b"\x00\xff": b""}, None)
    backend.commit_prepared("ns", 1, None)
    assert dict(backend.scan("ns")) == {b"\x00\xff": b"", b"b": b"20", b"c": b"3", b"d": b"4"}
    assert backend.txids("ns").prepared is None
    backend.write_direct("ns", {b"b": None, b"c": b"30"}, None)
    assert backend.get_many("ns", [b"b", b"c"]) == [None, b"30"]


def test_large_keys_and_plain_sql_reads(pg_url: str, backend: PostgresBackend) -> None:
    big = [os.urandom(n) for n in (3000, 9000, 70_000)]  # past PostgreSQL's btree entry limit
    backend.write_prepared("big-keys", 1, {k: str(len(k)).encode() for k in big}, None)
    backend.commit_prepared("big-keys", 1, None)
    assert backend.get_many("big-keys", big) == [b"3000", b"9000", b"70000"]
    assert backend.get("big-keys", big[2]) == b"70000"
    backend.write_direct("big-keys", {big[0]: None}, None)
    assert dict(backend.scan("big-keys")) == {big[1]: b"9000", big[2]: b"70000"}
    with psycopg.connect(pg_url) as c:  # what another service would run
        row = c.execute(
            "SELECT v FROM weir_kv WHERE ns = %s AND kh = sha256(%s) AND k = %s",
            ("big-keys", big[1], big[1]),
        ).fetchone()
    assert row == (b"9000",)


def test_foreign_table_without_key_hash_refused(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE old_kv (ns TEXT, k BYTEA, v BYTEA, PRIMARY KEY (ns, k))")
    with pytest.raises(ConfigError, match="lack the 'kh' key-hash column"):
        _open(pg_url, tablePrefix="old_")


# ---- connections (processes, threads, fork, SIGKILL: tests/contract/test_processes.py) ----------------
def test_reads_reconnect_after_connection_loss(pg_url: str, backend: PostgresBackend) -> None:
    backend.write_direct("r", {b"a": b"1"}, None)
    pid = backend._conn().info.backend_pid
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    time.sleep(0.1)
    assert backend.get("r", b"a") == b"1"
    assert backend._conn().info.backend_pid != pid


def test_writes_reconnect_when_the_connection_died_idle(pg_url: str, backend: PostgresBackend) -> None:
    backend.write_direct("w", {b"a": b"1"}, None)
    pid = backend._conn().info.backend_pid
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    time.sleep(0.1)
    backend.write_prepared("w", 1, {b"b": b"2"}, None)
    backend.commit_prepared("w", 1, None)
    assert backend.get_many("w", [b"a", b"b"]) == [b"1", b"2"]


def test_options_from_config() -> None:
    cfg = parse_provider_config(
        {
            "topology.state.provider": "postgres",
            "topology.state.provider.config": {
                "url": "postgresql://u@h/d",
                "schema": "s",
                "tablePrefix": "p_",
            },
        }
    )
    o = PostgresOptions.from_config(cfg)
    assert (o.schema, o.table_prefix, o.connect_timeout) == ("s", "p_", 5.0)
    assert o.table("kv") == '"s"."p_kv"'
