"""The fault harness's own pieces against real servers, and a few seeded schedules of ``bench/faults.py``
that must end exact (or in a named error) today: lost = duplicated = 0, no silent hang."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.faults.proxy import FaultProxy
from tests.servers import RedisServer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def proxied_redis(redis_server: RedisServer) -> Iterator[tuple[FaultProxy, redis.Redis]]:
    with FaultProxy(redis_server.port) as proxy:
        client = redis.Redis(port=proxy.port, socket_timeout=1.0, retry=Retry(NoBackoff(), 0))
        try:
            yield proxy, client
        finally:
            client.close()


@pytest.mark.services
def test_the_proxy_forwards_cuts_and_black_holes(proxied_redis: tuple[FaultProxy, redis.Redis]) -> None:
    proxy, client = proxied_redis
    assert client.set("fp-key", "1") and client.get("fp-key") == b"1"
    assert proxy.cut() >= 1  # every open connection closed...
    client.connection_pool.disconnect()  # (redis-py may retry once on a fresh connection by itself)
    assert client.get("fp-key") == b"1"  # ...new ones work
    proxy.blackhole()
    with pytest.raises(redis.exceptions.TimeoutError):
        client.get("fp-key")  # nothing is delivered: the client's own timeout ends the wait
    proxy.restore()
    client.connection_pool.disconnect()
    assert client.get("fp-key") == b"1"
    proxy.delay(0.05)
    assert client.get("fp-key") == b"1"  # slower, still correct
    proxy.restore()
    client.delete("fp-key")


@pytest.mark.services
def test_a_store_restarted_by_a_fault_keeps_answering(tmp_path: Path) -> None:
    """The harness restarts a killed server on its keeper thread, which outlives the fault.

    Test servers die with the *thread* that started them (``PR_SET_PDEATHSIG``): a restart from a
    short-lived thread was killed again at once — the "Redis behind the proxy never answered again"
    of the last fault run.
    """
    sys.path.insert(0, str(ROOT))
    from bench.faults import Store

    with Store("redis", tmp_path) as store:
        assert store.proxy is not None
        done = threading.Event()
        first_pid = store.server.pid
        store.in_background(store.kill_and_restart)
        store.in_background(done.set)
        assert done.wait(120)
        assert store.server.pid != first_pid and not store.fault_errors, store.fault_errors
        time.sleep(1.0)  # past the death signal a short-lived starter thread would have sent
        client = redis.Redis(port=store.proxy.port, socket_timeout=5.0)
        try:
            assert client.ping()  # through the proxy, on the restarted server
        finally:
            client.close()
        assert store.server.running()


def _opts(**kw: object) -> argparse.Namespace:
    base = {"files": 3, "words": 60, "pause": 3.0, "recoveries": 2, "hang_timeout": 300.0}
    return argparse.Namespace(**{**base, **kw})


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.parametrize(
    ("dialect", "store", "fault", "at"),
    [("storm", "sqlite", "driver_kill", 1), ("storm", "redis", "proxy_cut", 1)],
)
def test_seeded_schedules_end_exact_or_named(dialect: str, store: str, fault: str, at: int) -> None:
    sys.path.insert(0, str(ROOT))
    from bench.faults import run_schedule

    o = run_schedule(dialect, store, 4242, fault, at, _opts())
    assert not o.silent_hang, o
    assert o.unnamed_error is None, o
    assert o.lost == 0 and o.duplicated == 0 and o.out_of_order == 0, o
    assert o.exact or o.named_error, o
    assert len(o.runs) >= (2 if fault == "driver_kill" else 1), o.runs
