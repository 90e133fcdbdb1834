"""Storm spouts over RabbitMQ and a Redis list: SIGKILL the driver at the spout log's steps, then the broker once.

Each chain runs the driver (tests/crash/storm_spouts_driver.py) several times on one topology; every
run but the last is SIGKILLed at a crash point (the coordinator's steps, after the spout log is
written and before the batch runs, between the spout's acks), and the last one kills (SIGKILL) and
restarts the broker (same port, same data directory) while it runs, after its first batch: the
spout's deliveries are un-acked then (RabbitMQ requeues them all and redelivers them with
``redelivered`` set; the Redis spout's stay in its processing list). At the end every message is
counted exactly once, acked on the broker exactly once and only once its count was committed, and
the broker holds no message (none un-acked).

The two chains' crash runs share their driver starts (one driver per step runs both topologies, each
armed at its own point: the crash barrier); their last runs, each killing its own broker, stay apart.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.crash._harness import run_driver
from tests.servers import RabbitMQServer, RedisServer
from tests.storm_spouts._topology import all_counts

pytestmark = [pytest.mark.crash, pytest.mark.spark, pytest.mark.slow, pytest.mark.services]

DRIVER = str(Path(__file__).resolve().parents[1] / "crash" / "storm_spouts_driver.py")
N = 36

#: the crash points of each chain (``point@txid``): the spout log's own steps — batch 2 polled ahead
#: while batch 1's job runs, not logged; written, the batch
#: not run; COMMITTED, no ack sent; between two acks — plus one of the coordinator's (whose every
#: step tests/crash/test_storm_crash.py covers); a driver start costs ~20-60 s here, so few runs
CHAINS = {
    "redis": ["during_poll_ahead@2", "after_spout_log@2", "after_committed@3"],
    "rabbitmq": ["between_spout_acks@2", "after_preparing@3"],
}


def _driver_args(
    kind: str, broker: str, queue: str, record_url: str, pg_url: str, tmp: Path, name: str, n: int = N
) -> list[str]:
    """The driver stops (DONE) once ``n`` messages are counted and acked: a crash point never reached fails fast."""
    return [kind, broker, queue, record_url, pg_url, str(tmp / f"state-{kind}"), name, str(n)]


def _last_run_with_broker_kill(args: list[str], kill_broker: Any, start_broker: Any = None) -> tuple[str, str]:
    """Run the driver to DONE; after its first batch, SIGKILL the broker (``kill_broker``).

    With ``start_broker``, the broker stays down until supervision has restarted the query once (a
    ``RESTARTS`` line: the spout's reconnects failed every attempt of a batch), then it is started.
    """
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    env.pop("WEIR_CRASH_AT", None)
    proc = subprocess.Popen([sys.executable, DRIVER, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    out: list[str] = []
    killed = False
    started = start_broker is None
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 600
        for line in proc.stdout:
            out.append(line)
            if line.startswith("BATCH") and not killed:
                kill_broker()
                killed = True
            if line.startswith("RESTARTS") and killed and not started:
                start_broker()
                started = True
            if line.startswith("DONE") or time.monotonic() > deadline:
                break
        if "DONE" in "".join(out):
            proc.wait(120)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        err = proc.stderr.read() if proc.stderr else ""
    text = "".join(out)
    assert "DONE" in text, f"the last run did not finish:\n{text}\n{err[-4000:]}"
    assert killed, "the broker was never killed"
    assert started, f"the query was never restarted while the broker was down:\n{text}"
    return text, err


def _check(record_url: str, pg_url: str, name: str) -> None:
    import redis

    counts = all_counts(pg_url, name)
    assert counts == {f"m{i}": 1 for i in range(N)}, f"not counted exactly once: {sorted(counts.items())}"
    rec = redis.Redis.from_url(record_url)
    acks = [json.loads(x) for x in rec.lrange(f"{name}:acks", 0, -1)]
    per_id = Counter(mid for mid, _ in acks)
    assert per_id == Counter({f"m{i}": 1 for i in range(N)}), f"broker acks not exactly once: {per_id}"
    early = [mid for mid, committed in acks if committed != 1]
    assert not early, f"acked before their count was committed: {early}"
    from weir.state.factory import StateFactory

    log = [json.loads(v) for _k, v in StateFactory.from_url(pg_url).backend.scan(f"$spoutlog-{name}")]
    assert all(e["committed"] for e in log), f"uncommitted spout log entries left: {log}"


@pytest.mark.timeout(1800)  # three shared crash runs, two last runs with a broker restart each; far slower loaded
def test_redis_queue_and_rabbitmq_spouts_exactly_once_through_driver_and_broker_crashes(
    rabbitmq_server: RabbitMQServer, redis_server: Any, postgres_url: str, tmp_path: Path
) -> None:
    import pika
    import redis

    record = f"redis://127.0.0.1:{redis_server.port}/0"
    with RedisServer(tmp_path / "broker", appendonly=True) as broker:
        redis_url = f"redis://127.0.0.1:{broker.port}/0"

        def publish_redis(ids: range) -> None:
            c = redis.Redis.from_url(redis_url)
            for i in ids:
                c.lpush("lines", f"m{i} w{i % 3} w{i % 5}")
            c.close()

        def publish_rabbitmq(ids: range) -> None:
            conn = pika.BlockingConnection(pika.URLParameters(rabbitmq_server.url))
            ch = conn.channel()
            ch.queue_declare("lines", durable=True)
            ch.confirm_delivery()  # persistent and confirmed: on disk before the broker is killed
            for i in ids:
                props = pika.BasicProperties(message_id=f"m{i}", delivery_mode=2)
                ch.basic_publish("", "lines", f"m{i} w{i % 3} w{i % 5}".encode(), props)
            conn.close()

        urls = {"redis": redis_url, "rabbitmq": rabbitmq_server.url}
        publish = {"redis": publish_redis, "rabbitmq": publish_rabbitmq}
        for kind in CHAINS:
            publish[kind](range(N // 2))
        # RabbitMQ's crash runs stop once the published half is done (its deliveries may fill txids early, and
        # a crash point never reached then fails fast); Redis' run until killed
        n_crash = {"redis": N, "rabbitmq": N // 2}
        for step in range(max(len(chain) for chain in CHAINS.values())):
            kinds = [k for k, chain in CHAINS.items() if step < len(chain)]
            argv = [DRIVER]
            for kind in kinds:
                argv += _driver_args(kind, urls[kind], "lines", record, postgres_url, tmp_path, f"spouts_{kind}",
                                     n_crash[kind])  # fmt: skip
            crash = {f"spouts_{kind}": CHAINS[kind][step] for kind in kinds}
            res = run_driver(argv, crash, 400)
            assert res.returncode == -signal.SIGKILL, (
                f"{crash}: the driver was not killed (rc {res.returncode}):\n{res.stdout}\n{res.stderr[-4000:]}"
            )
        for kind in CHAINS:
            publish[kind](range(N // 2, N))  # the last run has work when the broker dies

        # Redis: the last run kills (SIGKILL) and restarts the broker after its first batch
        args = _driver_args("redis", redis_url, "lines", record, postgres_url, tmp_path, "spouts_redis")
        _last_run_with_broker_kill(args, broker.kill_and_restart)
        _check(record, postgres_url, "spouts_redis")
        c = redis.Redis.from_url(redis_url)
        assert c.llen("lines") == 0
        leftover = {k.decode(): c.llen(k) for k in c.keys("lines:processing:*")}
        assert not any(leftover.values()), f"messages left un-acked in processing lists: {leftover}"

    # RabbitMQ: the broker stays down until supervision restarted the query (each spout reconnect gives
    # up after 1 s: TransientSourceError), then comes back on the same port and data directory
    args = _driver_args("rabbitmq", rabbitmq_server.url, "lines", record, postgres_url, tmp_path, "spouts_rabbitmq")
    try:
        _out, err = _last_run_with_broker_kill(args, rabbitmq_server.kill, rabbitmq_server.start)
    finally:
        rabbitmq_server.start()  # a no-op when it runs: the session's other tests get their broker back
    _check(record, postgres_url, "spouts_rabbitmq")
    assert "connection lost during" in err, f"the spout never saw the broker die:\n{err[-4000:]}"
    assert "transient failure" in err, f"no supervised restart while the broker was down:\n{err[-4000:]}"
    conn = pika.BlockingConnection(pika.URLParameters(rabbitmq_server.url))
    left = conn.channel().queue_declare("lines", durable=True, passive=True).method.message_count
    conn.close()
    assert left == 0, f"{left} message(s) left in the queue (un-acked, requeued)"
