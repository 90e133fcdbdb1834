"""A driver the source crash tests run as a separate process and SIGKILL: Redis Streams and NATS
JetStream into exact per-key counts in PostgreSQL, as a Storm topology and a Trident topology.

Usage: python sources_driver.py MODE STATE_DIR PG_URL REDIS_URL REDIS_STREAM NATS_URL NATS_STREAM NAME [KINDS]

MODE ``run`` runs continuously (until killed; exits 1 if a topology fails), ``drain`` processes what
is available (Trigger.AvailableNow) and prints ``DONE``. KINDS is ``storm``, ``trident`` or
``storm,trident`` (both queries share the driver, and die together). Progress lines:
``BATCH <kind> <txid> <tuples>``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.sources

import weir  # noqa: E402
from tests.sources._spouts import count_topology  # noqa: E402
from weir.sources import NatsSpout, RedisStreamSpout  # noqa: E402

MAX_RECORDS = 150


def spouts(redis_url: str, redis_stream: str, nats_url: str, nats_stream: str) -> dict[str, Any]:
    return {
        "redis": RedisStreamSpout(
            redis_url, redis_stream, ["key"], max_records_per_batch=MAX_RECORDS, connect_timeout_s=15
        ),
        "nats": NatsSpout(
            nats_url, nats_stream, fields=["key"], max_records_per_batch=MAX_RECORDS, connect_timeout_s=15
        ),
    }


def trident_topology(sp: dict[str, Any], pg_url: str, table: str) -> Any:
    from weir.trident import Count, TridentTopology
    from weir.trident.backing import PostgresMapState

    t = TridentTopology()
    merged = t.merge(t.new_stream("redis", sp["redis"]), t.new_stream("nats", sp["nats"]))
    factory = PostgresMapState.transactional(pg_url, table=table, key_columns={"key": "TEXT"}, value_type="BIGINT")
    merged.group_by(["key"]).persistent_aggregate(factory, Count(), "count").parallelism_hint(2)
    return t


def main() -> int:
    mode, state_dir, pg_url, redis_url, redis_stream, nats_url, nats_stream, name = sys.argv[1:9]
    kinds = (sys.argv[9] if len(sys.argv) > 9 else "storm").split(",")
    conf = {
        "weir.state.dir": state_dir,
        "weir.spark.master": "local[2]",
        "topology.state.provider.config": {"url": pg_url},
        "topology.state.checkpoint.interval.ms": 300,
        "weir.batch.max.retries": 3,
    }
    runs = {}
    for kind in kinds:
        sp = spouts(redis_url, redis_stream, nats_url, nats_stream)
        topo = count_topology(sp) if kind == "storm" else trident_topology(sp, pg_url, f"{name}_trident")
        runs[kind] = weir.submit(f"{name}_{kind}", conf, topo)
    if mode == "drain":
        for kind, run in runs.items():
            st = run.process_available()
            print(f"DONE {kind} txid={st.last_txid} batches={st.batches}", flush=True)
        return 0
    for run in runs.values():
        run.start()
    seen: dict[str, Any] = {}
    while True:
        for kind, run in runs.items():
            st = run.status()
            if st.last_txid != seen.get(kind):
                seen[kind] = st.last_txid
                print(f"BATCH {kind} {st.last_txid} {st.tuples_in}", flush=True)
            if not run.query.isActive:
                run.await_termination(1)  # re-raises the error that stopped it
                print(f"STOPPED {kind}", flush=True)
                return 1
        time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
