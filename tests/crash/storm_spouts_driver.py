"""A driver the Storm spout crash tests run as a separate process and SIGKILL.

Usage: python storm_spouts_driver.py KIND BROKER_URL QUEUE RECORD_URL PG_URL STATE_DIR NAME N

KIND is ``redis`` (RedisQueueSpout) or ``rabbitmq`` (RabbitMQSpout). The topology (see
tests/storm_spouts/_topology.py) counts each message id; the driver runs continuously and, once N
ids are counted and N broker acks recorded, stops the topology and prints ``DONE``. Progress lines:
``BATCH <txid> <tuples>``, and ``RESTARTS <n>`` when supervision restarted the query (a RabbitMQ
spout whose broker stayed away through every attempt of a batch); exits 1 if the topology fails.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.storm_spouts

import redis  # noqa: E402

import weir  # noqa: E402
from tests.storm_spouts._topology import RecordingRedisQueueSpout, all_counts, rabbit_spout, topology  # noqa: E402


def main() -> int:
    kind, broker, queue, record_url, pg_url, state_dir, name, n = sys.argv[1:9]
    if kind == "redis":
        spout = RecordingRedisQueueSpout(broker, queue, record_url, pg_url, name)
        spout.max_per_call = 3
    else:
        spout = rabbit_spout(broker, queue, record_url, pg_url, name)
        spout.connect_timeout_s = 1  # a broker still down after 1 s fails the attempt (TransientSourceError)
        spout.max_per_call = 3
    conf = {
        "weir.state.dir": state_dir,
        "weir.spark.master": "local[2]",
        "topology.state.provider.config": {"url": pg_url},
        "topology.state.checkpoint.interval.ms": 300,
        "weir.spout.batch.max.tuples": 4,
        "topology.max.spout.pending": 6,
        "weir.batch.max.retries": 3,
        "weir.restart.max": 20,  # a killed broker takes 10-20 s to come back here: several restarts
        "weir.restart.backoff.ms": 500,
    }
    run = weir.submit(name, conf, topology(spout))
    run.start()
    rec = redis.Redis.from_url(record_url)
    last = None
    restarts = 0
    while True:
        st = run.status()
        if st.last_txid != last:
            last = st.last_txid
            print(f"BATCH {st.last_txid} {st.tuples_in}", flush=True)
        if st.restarts != restarts:
            restarts = st.restarts
            print(f"RESTARTS {restarts}", flush=True)
        if len(all_counts(pg_url, name)) >= int(n) and rec.llen(f"{name}:acks") >= int(n):
            run.stop()
            print("DONE", flush=True)
            return 0
        if not run.query.isActive and st.state != "restarting":
            try:
                run.await_termination(1)
            except Exception as exc:
                print(f"STOPPED {exc}", flush=True)
                return 1
        time.sleep(0.3)


if __name__ == "__main__":
    sys.exit(main())
