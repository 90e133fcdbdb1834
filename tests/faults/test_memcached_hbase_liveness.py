"""A frozen or black-holed memcached or HBase Thrift gateway (issue 25, retriable vs permanent): every
call is bounded, logs while it waits, and ends in a named :class:`StoreUnavailableError` (retriable);
what the server refuses (a missing table or family, an over-long value) is a named permanent error,
never retried.

memcached is a private server (SIGSTOP); HBase is the session's server, reached through weir's
loopback proxy (``tests/faults/proxy.py``) for the black hole, and its Thrift gateway JVM SIGSTOPped
for the freeze. Bounds are small (a timeout of 300-500 ms per attempt).
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
from tests.servers import HBaseServer, Memcached
from weir.connectors.hbase.client import HBaseClient, HBaseSettings
from weir.errors import StateError, StoreUnavailableError, WeirError
from weir.runtime.spark.supervision import transient_reason
from weir.state.config import parse_provider_config
from weir.state.factory import open_backend
from weir.state.watchdog import WATCHDOG
from weir.trident import StateType
from weir.trident.backing import HBaseMapState, MemcachedMapState

pytestmark = [pytest.mark.services]


@pytest.fixture
def fast_warnings() -> Iterator[None]:
    before = WATCHDOG.warn_every_s
    WATCHDOG.warn_every_s = 0.5
    try:
        yield
    finally:
        WATCHDOG.warn_every_s = before


def _bounded(call: Any) -> tuple[BaseException, float]:
    started = time.monotonic()
    with pytest.raises(WeirError) as info:
        call()
    return info.value, time.monotonic() - started


def _waits(caplog: pytest.LogCaptureFixture, needle: str) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if "still waiting after" in r.getMessage() and needle in r.getMessage()
    ]


# ---- memcached -------------------------------------------------------------------------------
@pytest.mark.xdist_group("memcached-private")
def test_memcached_frozen_or_black_holed_is_unavailable_within_its_bound_a_refusal_is_permanent(
    fast_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="weir.state")
    with Memcached() as server, FaultProxy(server.port) as proxy:
        cells = MemcachedMapState.store(f"memcached://127.0.0.1:{server.port}", key_prefix="mf:", timeout=0.5)
        cells_bh = MemcachedMapState.store(f"memcached://127.0.0.1:{proxy.port}", key_prefix="mb:", timeout=0.5)
        m, mb = cells.backing_map(StateType.OPAQUE), cells_bh.backing_map(StateType.OPAQUE)
        m.multi_put([["a"]], [None])
        mb.multi_put([["a"]], [None])
        os.kill(server.pid or 0, signal.SIGSTOP)
        try:
            err, waited = _bounded(lambda: m.multi_put([["a"]], [None]))
            assert type(err) is StoreUnavailableError, err
            assert f"127.0.0.1:{server.port}" in str(err) and "multi_put of 1 keys" in str(err), err
            assert "did not answer after" in str(err) and "timeout=0.5 s" in str(err), err
            assert waited < 30 and transient_reason(err) is not None
        finally:
            os.kill(server.pid or 0, signal.SIGCONT)
        assert m.multi_get([["a"]]) == [None]  # a new connection answers again
        proxy.blackhole()
        err, waited = _bounded(lambda: mb.multi_get([["a"]]))
        assert type(err) is StoreUnavailableError and "multi_get of 1 keys" in str(err), err
        assert waited < 30 and transient_reason(err) is not None
        proxy.restore()
        assert _waits(caplog, "MemcachedMapState")  # the wait was logged while it lasted (0.5 s warnings)
        # an item over memcached's size limit is refused by the server: permanent, named, not retried
        huge = MemcachedMapState.store(f"memcached://127.0.0.1:{server.port}", key_prefix="mh:", timeout=0.5)
        hm = huge.backing_map(StateType.NON_TRANSACTIONAL)
        err, _ = _bounded(lambda: hm.multi_put([["big"]], ["x" * 2_000_000]))
        assert type(err) is StateError and "mh:" in str(err), err
        assert transient_reason(err) is None


# ---- HBase -----------------------------------------------------------------------------------
@pytest.mark.xdist_group("hbase")
def test_hbase_black_holed_or_frozen_gateway_is_unavailable_within_its_bound_a_missing_table_is_permanent(
    hbase_server: HBaseServer, fast_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="weir.state")
    with FaultProxy(hbase_server.thrift_port) as proxy:
        url = f"hbase://127.0.0.1:{proxy.port}/state?family=cf&timeout=500"
        conf = {"topology.state.provider": "hbase", "topology.state.provider.config": {"url": url}}
        backend = open_backend(parse_provider_config(conf))
        try:
            backend.write_direct("hbh", {b"a": b"1"}, None)
            proxy.blackhole()
            err, waited = _bounded(lambda: backend.get("hbh", b"a"))
            assert type(err) is StoreUnavailableError, err
            text = str(err)
            assert "namespace 'hbh'" in text and f"127.0.0.1:{proxy.port}" in text and "did not answer" in text, text
            assert "timeout=500 ms" in text and waited < 60, (text, waited)
            assert transient_reason(err) is not None
            assert _waits(caplog, "HBase")
            proxy.restore()
            proxy.cut()
            assert backend.get("hbh", b"a") == b"1"
        finally:
            proxy.restore()
            backend.close()
    # the gateway's JVM frozen: the map state's calls end unavailable, then work again
    direct = f"hbase://127.0.0.1:{hbase_server.thrift_port}/trident?family=cf&timeout=500"
    cells = HBaseMapState.store(direct, key_prefix="hbf:").backing_map(StateType.OPAQUE)
    cells.multi_put([["a"]], [None])
    os.kill(hbase_server.thrift.pid or 0, signal.SIGSTOP)
    try:
        err, waited = _bounded(lambda: cells.multi_get([["a"]]))
        assert type(err) is StoreUnavailableError and "multi_get of 1 keys" in str(err), err
        assert waited < 60 and transient_reason(err) is not None
    finally:
        os.kill(hbase_server.thrift.pid or 0, signal.SIGCONT)
    assert cells.multi_get([["a"]]) == [None]
    # a table that does not exist: HBase refuses at once, named, not retried
    missing = HBaseClient(HBaseSettings("127.0.0.1", hbase_server.thrift_port, table="no_such_table", timeout_ms=500))
    try:
        err, waited = _bounded(lambda: missing.get_rows([b"r"], [b"cf:c"]))
        assert type(err) is StateError and "no_such_table" in str(err) and "not retried" in str(err), err
        assert transient_reason(err) is None
    finally:
        missing.close()
