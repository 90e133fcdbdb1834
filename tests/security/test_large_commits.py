"""Large state: a large change set prepares and commits on SQLite, Redis and PostgreSQL with bounded memory.

``WEIR_LARGE_COMMIT_KEYS`` sets the size (default 100,000; the benchmark runs 1,000,000).

Memory is the growth of the process's peak resident set (``VmHWM``, reset through
``/proc/self/clear_refs``) during ``write_prepared`` + ``commit_prepared`` only (the change set
itself is built before): the backends stream it (executemany from a generator, binary COPY,
MessagePack chunks) and never hold a second copy, so the growth stays far below the size of the
change set (about 150 MB of Python objects for 1M keys).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import PostgresDatabase, RedisServer
from weir.connectors.postgres import PostgresBackend, PostgresOptions
from weir.connectors.redis import COMMIT_CHUNK, RedisBackend, RedisSettings
from weir.connectors.sqlite import SqliteBackend, SqliteOptions
from weir.state.backend import Backend

#: 1M in CI-sized runs would take minutes on 2 shared cores; ``bench/state_providers.py --large``
#: commits 1M keys on each store and reports the same memory growth
N = int(os.environ.get("WEIR_LARGE_COMMIT_KEYS", "100000"))
PEAK_LIMIT = 48 * 1024 * 1024

pytestmark = pytest.mark.slow


def _peak_rss() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    pytest.fail("no VmHWM in /proc/self/status")


def _reset_peak_rss() -> int:
    """Reset the peak RSS to the current RSS (Linux ``clear_refs`` 5) and return it."""
    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("needs Linux /proc/self/clear_refs to measure peak memory")
    with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
        f.write("5")
    return _peak_rss()


@pytest.fixture(scope="module")
def change_set() -> dict[bytes, bytes | None]:
    """N changes: 90% puts, 10% deletes of keys that exist."""
    return {b"key:%07d" % i: (None if i % 10 == 0 else b"%d" % i) for i in range(N)}


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        b: Backend = SqliteBackend.open(SqliteOptions(str(tmp_path / "big.db")))
    elif request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        b = RedisBackend(RedisSettings.from_url(server.url + "?timeout=2000"))
    else:
        db: PostgresDatabase = request.getfixturevalue("postgres_database")
        b = PostgresBackend.open(PostgresOptions(db.url))
    yield b
    b.drop("big-ns")
    b.close()


def test_one_million_key_change_set_commits_with_bounded_memory(
    backend: Backend, change_set: dict[bytes, bytes | None]
) -> None:
    ns = "big-ns"
    backend.drop(ns)
    backend.put_many(ns, ((b"key:%07d" % i, b"old") for i in range(0, N, 10)))  # rows the deletes remove
    scripts_before = _script_calls(backend)
    gc.collect()
    before = _reset_peak_rss()
    backend.write_prepared(ns, 1, change_set, epoch=7)
    backend.commit_prepared(ns, 1, epoch=7)
    growth = _peak_rss() - before
    assert growth < PEAK_LIMIT, f"{backend.kind}: peak RSS grew {growth / 2**20:.1f} MiB committing 1M keys"
    assert backend.txids(ns).committed == 1
    assert backend.load_prepared(ns) is None
    assert backend.count(ns) == N - N // 10
    last = N - 1 if (N - 1) % 10 else N - 2
    assert backend.get_many(ns, [b"key:0000000", b"key:0000001", b"key:%07d" % last]) == [None, b"1", b"%d" % last]
    if isinstance(backend, RedisBackend):
        # the commit ran as several scripts of COMMIT_CHUNK entries, none holding Redis for long
        assert _script_calls(backend) - scripts_before >= N // COMMIT_CHUNK


def _script_calls(backend: Backend) -> int:
    if not isinstance(backend, RedisBackend):
        return 0
    stats = backend.client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))
