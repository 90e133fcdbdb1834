"""Secrets never appear in errors, status, ``weir state`` output or Spark conf: every case of issue 18."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli._support import run
from tests.security._servers import PasswordRedis
from tests.servers import NatsServer, PostgresDatabase, RedisServer, free_port
from weir._redact import (
    SPARK_REDACTION_REGEX,
    SPARK_STRING_REDACTION_REGEX,
    collect_secrets,
    redact_config,
    redact_text,
    redact_url,
)
from weir.cli._conf import expand_env, read_conf_file
from weir.connectors.nats.spout import NatsSpout
from weir.errors import ConfigError, SourceError, WeirError
from weir.state import StateFactory
from weir.state.config import parse_provider_config
from weir.state.factory import close_backends, open_backend

SECRET = "Pw-Sup3rSecret"  # noqa: S105 - a test password


def _provider(provider: str | None, options: object) -> dict[str, object]:
    conf: dict[str, object] = {"topology.state.provider.config": options}
    if provider:
        conf["topology.state.provider"] = provider
    return conf


def _error_text(fn: object, *args: object) -> str:
    with pytest.raises(WeirError) as info:
        fn(*args)  # type: ignore[operator]
    chain = []
    exc: BaseException | None = info.value
    while exc is not None:  # the message and every chained cause (what a traceback would print)
        chain.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return "\n".join(chain)


# ---- the helper ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"redis://:{SECRET}@h:6379/0", "redis://:***@h:6379/0"),
        (f"redis://{SECRET}@h:6379/0", "redis://***@h:6379/0"),
        (f"rediss://user:{SECRET}@h:6380/1", "rediss://user:***@h:6380/1"),
        (
            f"postgresql://weir:{SECRET}@db:5432/app?sslmode=require",
            "postgresql://weir:***@db:5432/app?sslmode=require",
        ),
        (f"postgresql://weir@db/app?password={SECRET}", "postgresql://weir@db/app?password=***"),
        (f"nats://{SECRET}@n:4222", "nats://***@n:4222"),
        (f"nats://u:{SECRET}@n:4222", "nats://u:***@n:4222"),
        (f"u:{SECRET}@host:5432/db", "u:***@host:5432/db"),
        ("postgresql://weir@db/app", "postgresql://weir@db/app"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_redact_config_knows_store_and_kafka_secrets() -> None:
    conf = {
        "topology.state.provider.config": {"url": f"redis://:{SECRET}@h/0", "jedisPoolConfig": {"password": SECRET}},
        "kafka": {
            "bootstrap.servers": "k:9092",
            "sasl.password": SECRET,
            "ssl.key.password": SECRET,
            "ssl.truststore.password": SECRET,
            "sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required password="{SECRET}";',  # noqa: E501
        },
        "nats": {"token": SECRET, "password": SECRET, "nkey_seed": SECRET},
    }
    out = json.dumps(redact_config(conf))
    assert SECRET not in out
    assert '"bootstrap.servers": "k:9092"' in out and "***" in out
    assert set(collect_secrets(conf)) >= {SECRET}
    assert redact_text(f"auth failed for {SECRET} at x", collect_secrets(conf)) == "auth failed for *** at x"


def test_spark_redaction_regexes_match_secret_keys_and_url_userinfo() -> None:
    # Spark applies these (Java regexes, same syntax here) to its conf on the UI's environment page
    for key in ("spark.weir.kafka.sasl.password", "spark.hadoop.fs.s3a.secret.key", "x.sasl.jaas.config", "x.nkey"):
        assert re.search(SPARK_REDACTION_REGEX, key), key
    assert not re.search(SPARK_REDACTION_REGEX, "spark.sql.shuffle.partitions")
    value = f"redis://:{SECRET}@cache:6379/0 and postgresql://u:{SECRET}@db/x"
    assert SECRET not in re.sub(SPARK_STRING_REDACTION_REGEX, "*********(redacted)", value)


# ---- the cases of the issue ------------------------------------------------------------------
def test_unknown_url_scheme_hides_the_password() -> None:
    text = _error_text(parse_provider_config, _provider(None, {"url": f"reddis://:{SECRET}@h:6379/0"}))
    assert SECRET not in text and "unknown scheme 'reddis'" in text


def test_provider_mismatch_hides_the_password() -> None:
    text = _error_text(parse_provider_config, _provider("redis", {"url": f"postgresql://u:{SECRET}@h/db"}))
    assert SECRET not in text and "does not match provider 'redis'" in text


def test_non_string_password_is_not_echoed() -> None:
    text = _error_text(parse_provider_config, _provider("redis", {"jedisPoolConfig": {"password": 98765432109}}))
    assert "98765432109" not in text and "jedisPoolConfig.password must be str" in text


def test_unparsable_postgres_uri_hides_the_password() -> None:
    for url in (
        f"postgresql://u:{SECRET}@127.0.0.1:notaport/db",
        f"postgresql://u:{SECRET}@127.0.0.1:5432/db?sslmode=bogus",
        f"postgres ql://u:{SECRET}@h/db",
    ):
        conf = _provider("postgres", {"url": url})
        text = _error_text(lambda c: open_backend(parse_provider_config(c), fresh=True), conf)
        assert SECRET not in text, text


def test_provider_config_repr_and_status_hide_passwords() -> None:
    cfg = parse_provider_config(_provider("redis", {"url": f"redis://:{SECRET}@h:1/0"}))
    assert SECRET not in repr(cfg) and SECRET not in json.dumps(cfg.redacted())
    provider = StateFactory.from_url(f"redis://:{SECRET}@127.0.0.1:1/0")
    assert SECRET not in repr(provider.config)


# ---- PostgreSQL and Redis with real passwords --------------------------------------------------
@pytest.fixture(scope="module")
def redis_with_password(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with PasswordRedis(tmp_path_factory.mktemp("redis-pw"), extra_args=["--requirepass", SECRET]) as server:
        yield server


def test_weir_state_cli_reads_the_password_from_the_environment(
    redis_with_password: RedisServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("WEIR_TEST_REDIS_PW", SECRET)
    url = f"redis://:${{WEIR_TEST_REDIS_PW}}@127.0.0.1:{redis_with_password.port}/0"
    conf_file = tmp_path / "store.json"
    conf_file.write_text(json.dumps({"topology.state.provider.config": {"url": url}}))
    try:
        put = run(capsys, "state", "put", "--conf-file", str(conf_file), "secret-ns", '"k"', "41")
        assert put.code == 0, put.err
        got = run(capsys, "state", "get", "--conf-file", str(conf_file), "secret-ns", '"k"')
        assert got.code == 0 and got.out.strip() == "41"
        listed = run(capsys, "state", "ls", "--conf-file", str(conf_file))
        assert "secret-ns" in listed.out
        for r in (put, got, listed):
            assert SECRET not in r.out + r.err
        # a wrong password: the error names the server, never the password
        monkeypatch.setenv("WEIR_TEST_REDIS_PW", SECRET + "-wrong")
        bad = run(capsys, "state", "ls", "--conf-file", str(conf_file))
        assert bad.code != 0 and SECRET not in bad.out + bad.err
        assert f"127.0.0.1:{redis_with_password.port}" in bad.err
    finally:
        close_backends()


def test_conf_file_and_env_expansion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEIR_TEST_PG_PW", SECRET)
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"a": {"url": "postgresql://u:${WEIR_TEST_PG_PW}@h/db"}, "b": ["$${literal}"], "n": 3}))
    conf = expand_env(read_conf_file(str(path)))
    assert conf == {"a": {"url": f"postgresql://u:{SECRET}@h/db"}, "b": ["${literal}"], "n": 3}
    monkeypatch.delenv("WEIR_TEST_PG_PW")
    with pytest.raises(ConfigError, match="WEIR_TEST_PG_PW is not set"):
        expand_env(read_conf_file(str(path)))
    path.write_text('{"url": "redis://:' + SECRET + '@h", oops}')
    with pytest.raises(ConfigError) as info:
        read_conf_file(str(path))
    assert SECRET not in str(info.value) and "line 1" in str(info.value)


def test_postgres_wrong_password_hides_it(postgres_database: PostgresDatabase) -> None:
    # trust auth ignores the password, so send it somewhere that refuses: a database that does not exist
    url = postgres_database.url.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@") + "_nope"
    text = _error_text(lambda: open_backend(parse_provider_config(_provider("postgres", {"url": url})), fresh=True))
    assert SECRET not in text and "does not exist" in text


# ---- NATS ------------------------------------------------------------------------------------
def test_every_nats_spout_error_hides_credentials(nats_server: NatsServer) -> None:
    dead = f"nats://user:{SECRET}@127.0.0.1:{free_port()}"
    spout = NatsSpout(dead, "S", connect_timeout_s=0.5)
    assert SECRET not in spout.describe() and SECRET not in repr(spout)
    with pytest.raises(SourceError) as info:
        spout.initial_offset()
    assert SECRET not in str(info.value) and "cannot connect" in str(info.value)
    # reachable, but the stream does not exist
    live = NatsSpout(nats_server.url.replace("nats://", f"nats://{SECRET}@"), "NO_SUCH_STREAM", connect_timeout_s=2)
    text = _error_text(live.initial_offset)
    assert SECRET not in text and "does not exist" in text
    # bad arguments
    for kwargs in ({"format": "xml"}, {"start": 0}, {"fetch_batch": 0}, {"creds_file": "/nonexistent.creds"}):
        text = _error_text(lambda kw=kwargs: NatsSpout(dead, "S", **kw))
        assert SECRET not in text
    text = _error_text(lambda: NatsSpout(dead, "S", token=12345))
    assert "12345" not in text


def test_weir_run_conf_precedence_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from weir.cli.run_cmd import build_conf

    monkeypatch.setenv("WEIR_TEST_RUN_PW", SECRET)
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    url = "redis://:${WEIR_TEST_RUN_PW}@h/0"
    first.write_text(json.dumps({"x": 1, "y": 1, "topology.state.provider.config": {"url": url}}))
    second.write_text(json.dumps({"y": 2, "z": 2}))
    conf = build_conf({"x": 0, "w": 0}, [str(first), str(second)], ["z=3"], "local[1]")
    assert conf == {
        "x": 1,
        "w": 0,
        "y": 2,
        "z": 3,
        "topology.state.provider.config": {"url": f"redis://:{SECRET}@h/0"},
        "weir.spark.master": "local[1]",
    }
    with pytest.raises(ConfigError, match="missing.json"):
        build_conf({}, [str(tmp_path / "missing.json")], [])
