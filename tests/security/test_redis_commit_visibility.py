"""A chunked Redis commit is never seen half applied through weir's readers (real Redis).

A prepared set larger than the commit chunk is applied by several scripts; the first sets the
commit point (``committing`` in the txid record) and readers overlay the entries still prepared.
"""

from __future__ import annotations

import threading

import pytest

from tests.servers import RedisServer
from weir.connectors.redis import RedisBackend, RedisSettings
from weir.connectors.redis.kv import _S_COMMIT

OLD, NEW = b"old", b"new"


def _setup(backend: RedisBackend, ns: str, n: int) -> dict[bytes, bytes | None]:
    """``n`` rows of OLD (and ``n // 10`` to delete); a change set rewriting, adding and deleting."""
    backend.drop(ns)
    backend.put_many(ns, [(b"k%06d" % i, OLD) for i in range(n)])
    backend.put_many(ns, [(b"gone%06d" % i, OLD) for i in range(n // 10)])
    changes: dict[bytes, bytes | None] = {b"k%06d" % i: NEW for i in range(n)}
    changes.update({b"add%06d" % i: NEW for i in range(n // 10)})
    changes.update({b"gone%06d" % i: None for i in range(n // 10)})
    return changes


def _view(backend: RedisBackend, ns: str, keys: list[bytes]) -> set[bytes | None]:
    return set(backend.get_many(ns, keys))


def test_readers_see_a_chunked_commit_whole_or_not_at_all_between_its_scripts(redis_server: RedisServer) -> None:
    backend = RedisBackend(RedisSettings.from_url(redis_server.url))
    backend.commit_chunk = 1000
    ns = "visible-ns"
    n = 3000
    changes = _setup(backend, ns, n)
    backend.write_prepared(ns, 7, changes, epoch=3)
    keys = list(changes)
    rows = [b"k%06d" % i for i in range(n)]
    added = [b"add%06d" % i for i in range(n // 10)]
    gone = [b"gone%06d" % i for i in range(n // 10)]
    before = {**{k: OLD for k in rows}, **{k: OLD for k in gone}}
    after = {**{k: NEW for k in rows}, **{k: NEW for k in added}}

    def check(expected: dict[bytes, bytes]) -> None:
        assert backend.get_many(ns, keys) == [expected.get(k) for k in keys]
        assert backend.get(ns, rows[0]) == expected[rows[0]]
        assert backend.get(ns, gone[-1]) == expected.get(gone[-1])
        assert backend.get(ns, added[-1]) == expected.get(added[-1])
        assert backend.count(ns) == len(expected)
        assert dict(backend.scan(ns)) == expected

    check(before)  # prepared, not committed: nothing visible
    steps = 0
    while _S_COMMIT(backend.client, backend.keys(ns), ["3", "7", 1000]) == 2:
        steps += 1
        # mid-commit (a driver could die right here): the rows alone are half applied ...
        raw = backend.client.hmget(backend.keys(ns)[0], rows)
        assert {OLD, NEW} <= set(raw), "the commit was not chunked"
        # ... but weir's readers see all of it
        check(after)
        assert backend.txids(ns).committed is None
    assert steps >= 2
    check(after)
    assert backend.txids(ns).committed == 7 and backend.load_prepared(ns) is None
    backend.drop(ns)


def test_an_interrupted_chunked_commit_stays_visible_and_recovery_finishes_it(redis_server: RedisServer) -> None:
    backend = RedisBackend(RedisSettings.from_url(redis_server.url))
    backend.commit_chunk = 1000
    ns = "visible-crash-ns"
    changes = _setup(backend, ns, 2500)
    backend.write_prepared(ns, 4, changes, epoch=1)
    assert _S_COMMIT(backend.client, backend.keys(ns), ["1", "4", 1000]) == 2  # then the driver dies
    # a new driver (new client) reads the whole commit, and its recovery finishes it
    again = RedisBackend(RedisSettings.from_url(redis_server.url))
    expected = {k: v for k, v in changes.items() if v is not None}
    assert dict(again.scan(ns)) == expected
    again.commit_prepared(ns, 4, epoch=2)
    assert dict(again.scan(ns)) == expected and again.count(ns) == len(expected)
    assert again.client.hget(again.keys(ns)[2], "committing") is None
    # a later prepared set is never overlaid: only a running commit is
    again.write_prepared(ns, 5, {b"k000000": b"uncommitted"}, epoch=2)
    assert again.get(ns, b"k000000") == NEW
    backend.drop(ns)


@pytest.mark.slow
def test_concurrent_readers_never_see_a_large_commit_half_applied(redis_server: RedisServer) -> None:
    """A 60,000-key commit in scripts of 2,000 while another client reads the keys in a loop."""
    backend = RedisBackend(RedisSettings.from_url(redis_server.url))
    backend.commit_chunk = 2000
    ns = "visible-live-ns"
    n = 60_000
    changes = _setup(backend, ns, n)
    sample = [b"k%06d" % i for i in range(0, n, 30)]  # spread over every chunk
    backend.write_prepared(ns, 2, changes, epoch=None)
    reader = RedisBackend(RedisSettings.from_url(redis_server.url))
    views: list[set[bytes | None]] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            views.append(_view(reader, ns, sample))

    t = threading.Thread(target=read)
    t.start()
    try:
        backend.commit_prepared(ns, 2, epoch=None)
    finally:
        done.set()
        t.join(60)
    views.append(_view(reader, ns, sample))
    mixed = [v for v in views if len(v) != 1]
    assert not mixed, f"{len(mixed)} of {len(views)} reads saw the commit half applied"
    assert views[-1] == {NEW}
    backend.drop(ns)
