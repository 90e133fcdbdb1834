"""A driver the Kafka crash test runs as a separate process and SIGKILLs: a Kafka topic into a Storm
stateful count (PostgreSQL) plus an exactly-once KafkaBolt output, and a Trident persistent_aggregate
(PostgreSQL), two queries in one driver.

Usage: python kafka_driver.py MODE STATE_DIR PG_URL BOOTSTRAP TOPIC OUT_TOPIC NAME

MODE ``run`` runs until killed (exits 1 if a query fails), ``drain`` processes what is available and
prints ``DONE``. Progress lines: ``BATCH <kind> <txid> <tuples>``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.sources

import weir  # noqa: E402
from tests.sources._spouts import CountByKey  # noqa: E402
from weir.sinks import KafkaBolt  # noqa: E402
from weir.sources import KafkaSpout  # noqa: E402
from weir.topology import Fields, TopologyBuilder  # noqa: E402

MAX_RECORDS = 100
#: the drain reads what is left in larger batches (a batch's range, once planned, replays as it was)
DRAIN_MAX_RECORDS = 1000


def spout(bootstrap: str, topic: str, limit: int = MAX_RECORDS) -> KafkaSpout:
    return KafkaSpout(bootstrap, topic, max_records_per_batch=limit, connect_timeout_s=20)


def storm_topology(bootstrap: str, topic: str, out_topic: str, limit: int) -> Any:
    b = TopologyBuilder()
    b.set_spout("kafka", spout(bootstrap, topic, limit))
    b.set_bolt("count", CountByKey("key"), 2).fields_grouping("kafka", Fields("key"))
    b.set_bolt("out", KafkaBolt(bootstrap, out_topic, value_field="value", key_field="key"), 2).shuffle_grouping(
        "kafka"
    )
    return b.create_topology()


def trident_topology(bootstrap: str, topic: str, pg_url: str, table: str, limit: int) -> Any:
    from weir.trident import Count, TridentTopology
    from weir.trident.backing import PostgresMapState

    t = TridentTopology()
    factory = PostgresMapState.transactional(pg_url, table=table, key_columns={"key": "TEXT"}, value_type="BIGINT")
    stream = t.new_stream("kafka", spout(bootstrap, topic, limit))
    stream.group_by(["key"]).persistent_aggregate(factory, Count(), "count")
    return t


def main() -> int:
    mode, state_dir, pg_url, bootstrap, topic, out_topic, name = sys.argv[1:8]
    conf = {
        "weir.state.dir": state_dir,
        "weir.spark.master": "local[2]",
        "topology.state.provider.config": {"url": pg_url},
        "topology.state.checkpoint.interval.ms": 300,
        "weir.batch.max.retries": 5,
    }
    limit = DRAIN_MAX_RECORDS if mode == "drain" else MAX_RECORDS
    runs = {
        "storm": weir.submit(f"{name}_storm", conf, storm_topology(bootstrap, topic, out_topic, limit)),
        "trident": weir.submit(
            f"{name}_trident", conf, trident_topology(bootstrap, topic, pg_url, f"{name}_trident", limit)
        ),
    }
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
            # a query weir's supervisor is restarting (a transient failure) is inactive for a moment:
            # only a run that ended is stopped (await_termination re-raises the error that ended it)
            if not run.query.isActive and run.await_termination(1):
                print(f"STOPPED {kind}", flush=True)
                return 1
        time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
