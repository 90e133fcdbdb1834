"""End to end, exactly once from brokers: a producer writes N events into a Redis stream and a NATS
JetStream stream while a driver (Storm StatefulBolt count and Trident persistent_aggregate, state in
PostgreSQL) consumes them; the driver is SIGKILLed at a protocol step and at seeded random moments,
each broker is SIGKILLed and restarted once, and the final counts must equal the produced ones."""

from __future__ import annotations

import asyncio
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.crash._harness import run_driver
from tests.servers import NatsServer, PostgresDatabase, RedisServer
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.slow, pytest.mark.services]

DRIVER = Path(__file__).with_name("sources_driver.py")
SEED = int(os.environ.get("WEIR_E2E_SEED", "20240611"))
N = 1500  # events per broker
KEYS = 12


class Driver:
    """A driver subprocess (its own process group) the test kills whenever it likes; output read in a thread."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(DRIVER), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.out: list[str] = []
        self.err: list[str] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.out, True), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.err, False), daemon=True).start()

    def _pump(self, stream: Any, sink: list[str], forward: bool) -> None:
        for line in stream:
            sink.append(line)
            if forward:
                self.lines.put(line.strip())

    def wait_for(self, prefix: str, timeout: float) -> str | None:
        """The next output line starting with ``prefix``; None if the driver ended or time ran out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                if self.proc.poll() is not None:
                    return None
                continue
            if line.startswith(prefix):
                return line
        return None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)

    def stderr_tail(self) -> str:
        return "".join(self.err)[-4000:]


class Producer:
    """Writes event i to Redis (id ``i-0``) and NATS (``Nats-Msg-Id``), retrying through outages.

    Both writes are idempotent, so a retry after an unknown outcome never duplicates an event.
    """

    def __init__(self, redis_port: int, nats_url: str, stream: str, subject: str, seconds: float) -> None:
        self.redis_port, self.nats_url, self.stream, self.subject = redis_port, nats_url, stream, subject
        self.pause = seconds / N
        self.expected: Counter[str] = Counter()
        self.errors = 0
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self._redis, self._nats)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def join(self, timeout: float) -> None:
        for t in self.threads:
            t.join(timeout)
            assert not t.is_alive(), "the producer did not finish"

    def _redis(self) -> None:
        r = redis.Redis(port=self.redis_port, socket_timeout=2, socket_connect_timeout=2)
        for i in range(1, N + 1):
            while True:
                try:
                    r.xadd(self.stream, {"key": f"r{i % KEYS}"}, id=f"{i}-0")
                    break
                except redis.ResponseError as exc:
                    if "equal or smaller" in str(exc):  # written before the connection broke
                        break
                    raise
                except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                    self.errors += 1
                    time.sleep(0.2)
            time.sleep(self.pause)
        self.expected.update(f"r{i % KEYS}" for i in range(1, N + 1))

    def _nats(self) -> None:
        asyncio.run(self._nats_async())
        self.expected.update(f"n{i % KEYS}" for i in range(1, N + 1))

    async def _nats_async(self) -> None:
        import nats

        nc = await nats.connect(self.nats_url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
        js = nc.jetstream(timeout=2)
        for i in range(1, N + 1):
            while True:
                try:
                    await js.publish(self.subject, f"n{i % KEYS}".encode(), headers={"Nats-Msg-Id": f"e{i}"})
                    break
                except Exception:
                    self.errors += 1
                    await asyncio.sleep(0.2)
            await asyncio.sleep(self.pause)
        await nc.close()


def create_nats_stream(url: str, name: str, subject: str) -> None:
    async def go() -> None:
        import nats

        nc = await nats.connect(url)
        await nc.jetstream().add_stream(name=name, subjects=[subject])
        await nc.close()

    asyncio.run(go())


def storm_counts(pg_url: str, name: str) -> Counter[str]:
    provider = StateFactory.from_url(pg_url)
    got: Counter[str] = Counter()
    for i in range(2):
        ns = f"{name}_storm-count-{i}"
        for k, v in provider.new_state(ns):
            got[k] += v
        rec = provider.backend.txids(ns)
        assert rec.prepared is None, f"namespace {ns} still has a prepared txid {rec.prepared}"
    return got


def trident_counts(pg_url: str, table: str) -> Counter[str]:
    import psycopg

    with psycopg.connect(pg_url) as conn:
        return Counter(dict(conn.execute(f'SELECT key, value FROM "{table}"').fetchall()))


def trident_available() -> bool:
    try:
        from weir.trident import Count, TridentTopology  # noqa: F401
        from weir.trident.backing import PostgresMapState  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("kinds", ["storm,trident"])
def test_exactly_once_from_redis_and_nats_through_driver_and_broker_crashes(
    tmp_path: Path, postgres_database: PostgresDatabase, kinds: str
) -> None:
    if "trident" in kinds and not trident_available():
        kinds = "storm"
    rng = random.Random(SEED)
    name = f"e2e_{uuid.uuid4().hex[:6]}"
    redis_server = RedisServer(tmp_path / "redis", appendonly=True).start()
    nats_server = NatsServer(tmp_path / "nats").start()
    try:
        stream, nstream, subject = "events", "EVENTS", "events.in"
        create_nats_stream(nats_server.url, nstream, subject)
        producer = Producer(redis_server.port, nats_server.url, stream, subject, seconds=40)
        args = [
            str(tmp_path / "state"),
            postgres_database.url,
            redis_server.url,
            stream,
            nats_server.url,
            nstream,
            name,
            kinds,
        ]
        env = {k: v for k, v in os.environ.items() if k not in ("WEIR_CRASH_AT", "WEIR_CRASH_PGID")}
        env["PYSPARK_PYTHON"] = sys.executable
        producer.start()

        # 1. a crash at a protocol step: COMMITTING stored, nothing committed yet — rolled forward later
        res = run_driver([str(DRIVER), "run", *args], "after_committing@3", timeout=600)
        assert res.returncode == -signal.SIGKILL, f"run 1 should have crashed itself\n{res.stderr[-4000:]}"

        # 2., 3. SIGKILL at a seeded random moment; meanwhile one broker is killed and restarted
        for broker in (redis_server, nats_server):
            d = Driver(["run", *args], env)
            first = d.wait_for("BATCH", 300)
            assert first is not None, f"the driver made no progress\n{d.stderr_tail()}"
            time.sleep(rng.uniform(0.5, 3.0))
            broker.kill()
            time.sleep(rng.uniform(0.5, 2.0))
            broker.start()
            time.sleep(rng.uniform(1.0, 6.0))
            ended_by_itself = d.proc.poll() is not None  # e.g. a batch failed past its retries: fine
            d.kill()
            assert ended_by_itself or d.proc.returncode == -signal.SIGKILL

        producer.join(180)
        # 4. drain: whatever the crashes left is recovered, everything produced is counted once
        res = run_driver([str(DRIVER), "drain", *args], None, timeout=900)
        assert res.returncode == 0, res.stderr[-4000:]
        assert res.stdout.count("DONE") == len(kinds.split(","))
        assert sum(producer.expected.values()) == 2 * N
        assert storm_counts(postgres_database.url, name) == producer.expected
        if "trident" in kinds:
            assert trident_counts(postgres_database.url, f"{name}_trident") == producer.expected
    finally:
        redis_server.close()
        nats_server.close()
