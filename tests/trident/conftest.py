"""Fixtures for the Trident tests: durable map-state stores to run against and read back."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.trident._support import Store

STORES = ["sqlite", "redis", "postgres", "hbase"]


def make_store(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> Store:
    """A store of ``kind`` with a fresh table / key-prefix tag (servers come from tests/conftest.py)."""
    tag = uuid.uuid4().hex[:8]
    if kind == "sqlite":
        return Store("sqlite", f"sqlite:///{tmp_path / 'trident.db'}", tag)
    if kind == "redis":
        return Store("redis", request.getfixturevalue("redis_server").url, tag)
    if kind == "postgres":
        return Store("postgres", request.getfixturevalue("postgres_url"), tag)
    if kind == "hbase":
        return Store("hbase", request.getfixturevalue("hbase_server").url("trident"), tag)
    pytest.fail(f"unknown store {kind!r}")


@pytest.fixture
def sqlite_store(tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    """A SQLite file store."""
    return make_store(request, "sqlite", tmp_path)


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Every durable store the Trident tests run against (SQLite, Redis, PostgreSQL, HBase)."""
    yield make_store(request, request.param, tmp_path)
    from weir.trident.backing import close_connections

    close_connections()
