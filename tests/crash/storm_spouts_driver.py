"""A driver the Storm spout crash tests run as a separate process and SIGKILL.

Usage: python storm_spouts_driver.py KIND BROKER_URL QUEUE RECORD_URL PG_URL STATE_DIR NAME N

KIND is ``redis`` (RedisQueueSpout) or ``rabbitmq`` (RabbitMQSpout). The topology (see
tests/storm_spouts/_topology.py) counts each message id; the driver runs continuously and, once N
ids are counted and N broker acks recorded, stops the topology and prints ``DONE``. Progress lines:
``BATCH <txid> <tuples>``, and ``RESTARTS <n>`` when supervision restarted the query (a RabbitMQ
spout whose broker stayed away through every attempt of a batch); exits 1 if the topology fails.

Several groups of eight run that many topologies side by side in one SparkSession on ``local[2 * N]``
(the crash barrier of ``WEIR_CRASH_BARRIER``, each armed at its own point): the same lines, each
prefixed with ``NAME ``; the driver ends once every topology is DONE.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.storm_spouts

import redis  # noqa: E402

import weir  # noqa: E402
from tests.storm_spouts._topology import RecordingRedisQueueSpout, all_counts, rabbit_spout, topology  # noqa: E402


def submit(
    kind: str, broker: str, queue: str, record_url: str, pg_url: str, state_dir: str, name: str, n_groups: int = 1
) -> Any:
    """The count of ``kind``'s spout (``redis`` or ``rabbitmq``), submitted (not started)."""
    if kind == "redis":
        spout = RecordingRedisQueueSpout(broker, queue, record_url, pg_url, name)
        spout.max_per_call = 3
    else:
        spout = rabbit_spout(broker, queue, record_url, pg_url, name)
        spout.connect_timeout_s = 1  # a broker still down after 1 s fails the attempt (TransientSourceError)
        spout.max_per_call = 3
    conf = {
        "weir.state.dir": state_dir,
        "weir.spark.master": f"local[{2 * n_groups}]",
        "topology.state.provider.config": {"url": pg_url},
        "topology.state.checkpoint.interval.ms": 300,
        "weir.spout.batch.max.tuples": 4,
        "topology.max.spout.pending": 6,
        "weir.batch.max.retries": 3,
        "weir.restart.max": 20,  # a killed broker takes 10-20 s to come back here: several restarts
        "weir.restart.backoff.ms": 500,
    }
    return weir.submit(name, conf, topology(spout))


class Watch:
    """One started topology of the driver: its progress lines, and whether it is done or failed."""

    def __init__(self, run: Any, record_url: str, pg_url: str, name: str, n: int, prefix: str) -> None:
        self.run, self.pg_url, self.name, self.n, self.prefix = run, pg_url, name, n, prefix
        self.rec = redis.Redis.from_url(record_url)
        self.last: int | None = None
        self.restarts = 0
        self.rc: int | None = None  # 0: DONE, 1: failed

    def poll(self) -> None:
        st = self.run.status()
        if st.last_txid != self.last:
            self.last = st.last_txid
            print(f"{self.prefix}BATCH {st.last_txid} {st.tuples_in}", flush=True)
        if st.restarts != self.restarts:
            self.restarts = st.restarts
            print(f"{self.prefix}RESTARTS {self.restarts}", flush=True)
        if len(all_counts(self.pg_url, self.name)) >= self.n and self.rec.llen(f"{self.name}:acks") >= self.n:
            self.run.stop()
            print(f"{self.prefix}DONE", flush=True)
            self.rc = 0
            return
        if not self.run.query.isActive and st.state != "restarting":
            try:
                self.run.await_termination(1)
            except Exception as exc:
                print(f"{self.prefix}STOPPED {exc}", flush=True)
                self.rc = 1


def main() -> int:
    args = sys.argv[1:]
    groups = [args[i : i + 8] for i in range(0, len(args), 8)]
    watches = []
    for kind, broker, queue, record_url, pg_url, state_dir, name, n in groups:
        run = submit(kind, broker, queue, record_url, pg_url, state_dir, name, len(groups))
        run.start()
        watches.append(Watch(run, record_url, pg_url, name, int(n), f"{name} " if len(groups) > 1 else ""))
    while True:
        for w in watches:
            if w.rc is None:
                w.poll()
        if all(w.rc is not None for w in watches):
            return max(w.rc or 0 for w in watches)
        time.sleep(0.3)


if __name__ == "__main__":
    sys.exit(main())
