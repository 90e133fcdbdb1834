"""A Trident driver over a Storm spout (RedisQueueSpout) that the crash tests run and SIGKILL.

Usage: python trident_spout_driver.py BROKER_URL QUEUE RECORD_URL PG_URL TABLE STATE_DIR NAME N [REMOTE]

``REMOTE`` (``sc://HOST:PORT``): run as a Spark Connect client of that server (the spout, its log and
the coordinator stay in this process; the query runs on the server).

The topology (tests/storm_spouts/_topology.py ``trident_topology``) counts each message id in an
opaque PostgreSQL map state; the driver runs continuously and, once N ids are counted and N broker
acks recorded, stops and prints ``DONE``. Progress lines: ``BATCH <txid> <tuples>``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.storm_spouts

import redis  # noqa: E402

import weir  # noqa: E402
from tests.storm_spouts._topology import TridentRecordingSpout, trident_counts, trident_topology  # noqa: E402


def main() -> int:
    broker, queue, record_url, pg_url, table, state_dir, name, n_s = sys.argv[1:9]
    n = int(n_s)
    spout = TridentRecordingSpout(broker, queue, record_url, pg_url, name, table, n)
    spout.max_per_call = 3
    conf = {
        "weir.state.dir": state_dir,
        "weir.spark.master": "local[2]",
        "topology.state.provider.config": {"url": pg_url},
        "topology.state.checkpoint.interval.ms": 300,
        "weir.spout.batch.max.tuples": 8,
        "weir.batch.max.retries": 3,
    }
    if len(sys.argv) > 9:
        del conf["weir.spark.master"]
        conf["weir.spark.remote"] = sys.argv[9]
        conf["weir.spark.conf"] = {"spark.sql.shuffle.partitions": "2"}
    run = weir.submit(name, conf, trident_topology(spout, pg_url, table))
    run.start()
    rec = redis.Redis.from_url(record_url)
    ids = [f"m{i}" for i in range(n)]
    last = None
    while True:
        st = run.status()
        if st.last_txid != last:
            last = st.last_txid
            print(f"BATCH {st.last_txid} {st.tuples_in}", flush=True)
        if len(trident_counts(pg_url, table, ids)) >= n and rec.llen(f"{name}:acks") >= n:
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
