"""Fixtures of the Trident store contract: one :class:`StoreKit` per map-state store, on the
session's servers (tests/conftest.py).

``kit`` is parametrised *indirectly* over :data:`KINDS`; each test gets its own table / key prefix,
and every connection the backing maps opened is closed afterwards. ``StoreKit.journal_url`` is a
Storm state store next to the map (the coordinator's store, where the epoch-fenced journal lives):
the same server where weir has a Storm provider for it, a SQLite file for Memcached.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from weir.trident.backing import (
    HBaseMapState,
    MapStateFactory,
    MemcachedMapState,
    PostgresMapState,
    RedisMapState,
    SqliteMapState,
    close_connections,
)
from weir.trident.state import StateType

KINDS = ("sqlite", "redis", "redis-cluster", "memcached", "postgres", "hbase")
"""Every store; parametrise ``kit`` over it with ``indirect=True``."""

PG_KEY_COLUMNS = {"word": "TEXT", "n": "BIGINT"}
"""The PostgreSQL key columns of the contract tests: keys are ``(str, int)`` pairs."""


class Sum:
    """A combiner aggregator (only ``combine`` is used by the updater)."""

    def combine(self, a: int, b: int) -> int:
        return a + b


@dataclass
class StoreKit:
    """How to make factories of one store kind, each in the test's own table / key prefix."""

    kind: str
    name: str
    url: str
    _make: Callable[..., MapStateFactory]
    journal_url: str = ""

    def make(self, state_type: StateType | str, suffix: str = "", **kwargs: Any) -> MapStateFactory:
        """A factory of ``state_type`` in location ``<name>_<state type><suffix>`` (checked)."""
        st = StateType.parse(state_type)
        return self._make(st, f"{self.name}_{st.value}{suffix}", **kwargs)


@pytest.fixture
def kit(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreKit]:
    kind = getattr(request, "param", None)
    name = f"tb_{uuid.uuid4().hex[:10]}"
    journal_url = f"sqlite:///{tmp_path / 'coordinator.db'}"
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'trident.db'}"

        def make(st: StateType, loc: str, **kw: Any) -> MapStateFactory:
            return SqliteMapState.factory(st, url, table=loc, **kw)
    elif kind in ("redis", "redis-cluster"):
        server = request.getfixturevalue("redis_server" if kind == "redis" else "redis_cluster")
        url = journal_url = server.url

        def make(st: StateType, loc: str, **kw: Any) -> MapStateFactory:
            return RedisMapState.factory(st, url, key_prefix=f"{loc}:", **kw)
    elif kind == "memcached":
        url = request.getfixturevalue("memcached_server").url

        def make(st: StateType, loc: str, **kw: Any) -> MapStateFactory:
            return MemcachedMapState.factory(st, url, key_prefix=f"{loc}:", **kw)
    elif kind == "postgres":
        url = journal_url = request.getfixturevalue("postgres_url")

        def make(st: StateType, loc: str, **kw: Any) -> MapStateFactory:
            kw.setdefault("key_columns", PG_KEY_COLUMNS)
            kw.setdefault("value_type", "JSONB")
            return PostgresMapState.factory(st, url, table=loc, **kw)
    elif kind == "hbase":
        hbase = request.getfixturevalue("hbase_server")
        url, journal_url = hbase.url("trident"), hbase.url("state")

        def make(st: StateType, loc: str, **kw: Any) -> MapStateFactory:
            return HBaseMapState.factory(st, url, key_prefix=f"{loc}:", **kw)
    else:
        pytest.fail(f"kit must be parametrised indirectly over {KINDS}, got {kind!r}")
    close_connections()
    try:
        yield StoreKit(kind, name, url, make, journal_url)
    finally:
        close_connections()


@pytest.fixture
def summer() -> Sum:
    return Sum()
