"""A frozen or black-holed Redis (issue 25, retriable vs permanent): every call of the Storm backend,
of Trident's map state and of the stream spout is bounded, logs while it waits, and ends in a named
:class:`StoreUnavailableError` (retriable); a refused password or a foreign key is a named permanent
error, never retried.

The server is a private one (``tests.servers.RedisServer``) so it can be SIGSTOPped; the black hole is
weir's loopback proxy (``tests/faults/proxy.py``). Bounds are small (``?timeout=200`` ms per attempt).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.faults.proxy import FaultProxy
from tests.servers import RedisServer
from weir.connectors.redis.client import RedisSettings, call_bound_s, redis_client
from weir.connectors.redis.kv import RedisBackend, open_backend
from weir.connectors.redis.spout import _transient
from weir.errors import ConfigError, StateError, StoreUnavailableError, WeirError
from weir.runtime.spark.supervision import transient_reason
from weir.state.config import parse_provider_config
from weir.state.watchdog import WATCHDOG
from weir.trident import StateType
from weir.trident.backing import RedisMapState

pytestmark = [pytest.mark.services, pytest.mark.xdist_group("redis-private")]

TIMEOUT_MS = 200


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer() as s:
        try:
            yield s
        finally:
            os.kill(s.pid or 0, signal.SIGCONT)


@pytest.fixture
def fast_warnings() -> Iterator[None]:
    before = WATCHDOG.warn_every_s
    WATCHDOG.warn_every_s = 0.5
    try:
        yield
    finally:
        WATCHDOG.warn_every_s = before


def _url(port: int, password: str | None = None) -> str:
    auth = f":{password}@" if password else ""
    return f"redis://{auth}127.0.0.1:{port}/0?timeout={TIMEOUT_MS}"


def _backend(url: str) -> RedisBackend:
    conf = {"topology.state.provider": "redis", "topology.state.provider.config": {"url": url}}
    return open_backend(parse_provider_config(conf))


def _bounded(call: Any) -> tuple[BaseException, float]:
    started = time.monotonic()
    with pytest.raises(WeirError) as info:
        call()
    return info.value, time.monotonic() - started


def _check_unavailable(err: BaseException, waited: float, port: int, *words: str) -> None:
    assert type(err) is StoreUnavailableError, err
    text = str(err)
    assert f"127.0.0.1:{port}" in text and "did not answer after" in text and f"timeout={TIMEOUT_MS} ms" in text, text
    for w in words:
        assert w in text, (w, text)
    bound = call_bound_s(RedisSettings.from_url(_url(port)))
    assert waited < bound + 30, (waited, bound)  # bounded (generous: the machine is loaded)
    assert transient_reason(err) is not None  # supervision retries it


def test_a_frozen_server_fails_each_call_within_its_bound_logging_while_it_waits(
    server: RedisServer, fast_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="weir.state")
    backend = _backend(_url(server.port))
    try:
        backend.write_prepared("frz", 1, {b"k": b"v"}, epoch=None)
        os.kill(server.pid or 0, signal.SIGSTOP)  # the open connection hangs; new ones are never answered
        err, waited = _bounded(lambda: backend.commit_prepared("frz", 1, epoch=None))
        _check_unavailable(err, waited, server.port, "namespace 'frz'", "commit txid 1")
        waits = [r.getMessage() for r in caplog.records if "still waiting after" in r.getMessage()]
        assert waits and "namespace 'frz': commit txid 1 on the redis store" in waits[0], waits
        # a client made while the topology runs (a new executor) names the store too, and is retriable
        err, waited = _bounded(lambda: redis_client(_url(server.port), at_submit=False))
        _check_unavailable(err, waited, server.port, "connect")
        # at submit time the same wait is a configuration to fix
        err, _ = _bounded(lambda: _backend(_url(server.port)))
        assert type(err) is ConfigError and "start the server" in str(err), err
        os.kill(server.pid or 0, signal.SIGCONT)
        backend.commit_prepared("frz", 1, epoch=None)  # the prepared set survived; the commit goes through
        assert backend.get("frz", b"k") == b"v" and backend.txids("frz").committed == 1
    finally:
        os.kill(server.pid or 0, signal.SIGCONT)
        backend.close()


def test_a_black_holed_path_fails_the_backend_and_the_map_state_within_the_bound(
    server: RedisServer, fast_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="weir.state")
    with FaultProxy(server.port) as proxy:
        backend = _backend(_url(proxy.port))
        store = RedisMapState.store(_url(proxy.port), key_prefix="bh:")
        cells = store.backing_map(StateType.OPAQUE)
        try:
            backend.write_direct("bh", {b"a": b"1"}, None)
            cells.multi_put([["a"]], [None])
            proxy.blackhole()  # connections stay open, nothing is delivered
            err, waited = _bounded(lambda: backend.get("bh", b"a"))
            _check_unavailable(err, waited, proxy.port, "namespace 'bh'", "read a key")
            err, waited = _bounded(lambda: cells.multi_get([["a"]]))
            _check_unavailable(err, waited, proxy.port, "key prefix 'bh:'", "multi_get of 1 keys")
            messages = [r.getMessage() for r in caplog.records]
            assert any("still waiting after" in m and "RedisMapState" in m for m in messages), messages
            proxy.restore()
            proxy.cut()  # the old connections are gone; new ones work
            assert backend.get("bh", b"a") == b"1"
            assert cells.multi_get([["a"]]) == [None]
        finally:
            proxy.restore()
            backend.close()


def test_refused_credentials_and_foreign_keys_are_permanent_and_never_retried(server: RedisServer) -> None:
    server.command_reply("CONFIG", "SET", "requirepass", "right")
    err, _ = _bounded(lambda: redis_client(_url(server.port, "wrong"), at_submit=False))
    assert type(err) is ConfigError and "fix the password" in str(err) and "wrong" not in str(err), err
    assert transient_reason(err) is None and not _transient(err)  # the spout does not retry it either
    backend = _backend(_url(server.port, "right"))
    try:
        backend.client.set("ns-foreign$txid", "a string, not a hash")
        err, _ = _bounded(lambda: backend.write_prepared("ns-foreign", 1, {b"k": b"v"}, None))
        assert type(err) is StateError and "is not a hash" in str(err), err
        assert transient_reason(err) is None
        # the password changes while the topology runs: refused, named, not retried
        backend.client.config_set("requirepass", "changed")
        backend.client.connection_pool.disconnect()
        err, _ = _bounded(lambda: backend.get("ns", b"k"))
        assert type(err) is StateError and "refused the credentials" in str(err), err
        assert "not retried" in str(err) and "right" not in str(err) and "changed" not in str(err)
        assert transient_reason(err) is None
    finally:
        backend.close()
