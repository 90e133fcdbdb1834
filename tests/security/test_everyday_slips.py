"""Everyday slips of issue 25 (item 8): each refused or named, nothing exposed.

- the metrics endpoint binds 127.0.0.1 unless told otherwise;
- ``weir ui`` answers only requests whose ``Host`` names it (DNS rebinding);
- a topology name that is not a safe path component is refused at submit;
- a misspelled secret URL parameter (``?pasword=``) is named, its value never echoed.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path

import pytest

import weir
from tests.servers import PostgresDatabase, RedisServer
from tests.unit.test_history import sqlite_backend
from weir.demo import wordcount_topology
from weir.errors import ConfigError
from weir.runtime.spark.config import RuntimeConfig
from weir.state.config import parse_provider_config
from weir.state.factory import open_backend
from weir.ui import StoreReader, UiServer


def test_the_metrics_endpoint_binds_loopback_by_default(tmp_path: Path) -> None:
    rc = RuntimeConfig.from_conf("m", {"weir.state.dir": str(tmp_path), "weir.metrics.port": 0})
    assert rc.metrics_host == "127.0.0.1"
    rc = RuntimeConfig.from_conf("m", {"weir.state.dir": str(tmp_path), "weir.metrics.host": "0.0.0.0"})
    assert rc.metrics_host == "0.0.0.0"  # noqa: S104 - asked for explicitly


@pytest.mark.parametrize("name", ["..", ".", "a/b", "back\\slash", "nul\x00", "tab\tname", "\ud800", "$cp", "n" * 201])
def test_unsafe_topology_names_are_refused_at_submit(name: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="topology name") as info:
        weir.submit(name, {"weir.state.dir": str(tmp_path)}, wordcount_topology(str(tmp_path)))
    assert "safe path component" in str(info.value) or "non-empty" in str(info.value)
    assert not (tmp_path / "spark").exists()  # nothing was created for it


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[UiServer]:
    backend = sqlite_backend(tmp_path / "state.db")
    server = UiServer(StoreReader(backend), port=0, extra_hosts=["weir.internal.example"]).start()
    try:
        yield server
    finally:
        server.stop()
        backend.close()


def _get(port: int, host: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/api/topologies", headers={"Host": host})
        return conn.getresponse().status
    finally:
        conn.close()


def test_weir_ui_refuses_a_foreign_host_header(ui: UiServer) -> None:
    assert _get(ui.port, f"127.0.0.1:{ui.port}") == 200
    assert _get(ui.port, f"localhost:{ui.port}") == 200
    assert _get(ui.port, "weir.internal.example") == 200  # --allowed-host
    assert _get(ui.port, f"attacker.example:{ui.port}") == 400  # a rebound DNS name
    assert _get(ui.port, "127.0.0.1.attacker.example") == 400


@pytest.mark.services
@pytest.mark.parametrize("kind", ["sqlite", "redis", "postgres"])
def test_a_misspelled_password_parameter_is_named_without_its_value(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 's.db'}?pasword=Hunter2secret"
    elif kind == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        url = f"{server.url}?pasword=Hunter2secret"
    else:
        db: PostgresDatabase = request.getfixturevalue("postgres_database")
        url = f"{db.url}?pasword=Hunter2secret"
    cfg = parse_provider_config({"topology.state.provider": kind, "topology.state.provider.config": {"url": url}})
    with pytest.raises(ConfigError) as info:
        open_backend(cfg).close()
    text = str(info.value)
    assert "Hunter2secret" not in text, text
    assert "pasword" in text, text
