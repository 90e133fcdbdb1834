"""Orders from a Redis stream, summed per customer exactly once into PostgreSQL.

A shop appends orders to the Redis stream ``orders`` (``XADD orders * customer alice amount 12.5``);
this topology reads them by entry-id range (a transactional spout: Spark replays a failed batch with
the same ids), and a stateful bolt keeps each customer's order count and total in PostgreSQL, where
any service can query them while the topology runs::

    psql "$PG_URL" -c "SELECT ns, convert_from(k, 'UTF8') AS customer, convert_from(v, 'UTF8') AS totals
                       FROM weir_kv WHERE ns LIKE 'orders-totals-%'"    # tables: docs/state.md
    weir state dump --url "$PG_URL" orders-totals-0

Run it::

    weir run examples/redis_stream_to_postgres.py --conf topology.state.provider.config='{"url": "postgresql://..."}'
    python examples/redis_stream_to_postgres.py redis://127.0.0.1:6379/0 postgresql://postgres@127.0.0.1/shop

When the stream does not exist yet, the script first writes 1000 demo orders into it. Back-pressure:
``max_records_per_batch`` caps each micro-batch, so a long backlog is worked off in several
bounded batches (``run.process_available()``) instead of one huge one.
"""

from __future__ import annotations

import os
import sys

from weir.sources import Guarantee, RedisStreamSpout
from weir.topology import Fields, StatefulBolt, TopologyBuilder, Values

NAME = "orders"
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
PG_URL = os.environ.get("PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
CONF = {
    "topology.state.provider.config": {"url": PG_URL},  # postgresql:// → the postgres provider
    "topology.state.checkpoint.interval.ms": 1000,  # one micro-batch (= one checkpoint) per second
    "weir.deadletter": "./weir-state/dead-letters",  # a malformed order is set aside, not fatal
}


class CustomerTotals(StatefulBolt):
    """Per customer: ``{"orders": n, "total": x}`` in a KeyValueState (one namespace per task)."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("customer", "orders", "total"))

    def init_state(self, state):
        self.totals = state

    def execute(self, tup):
        customer = tup["customer"]
        acc = self.totals.get(customer, {"orders": 0, "total": 0.0})
        acc = {"orders": acc["orders"] + 1, "total": round(acc["total"] + tup["amount"], 2)}
        self.totals.put(customer, acc)
        self.collector.emit(Values(customer, acc["orders"], acc["total"]), anchors=[tup])
        self.collector.ack(tup)


def topology(redis_url: str = REDIS_URL):
    spout = RedisStreamSpout(
        redis_url,
        streams=["orders"],
        schema="customer STRING, amount DOUBLE",  # parsed from the entry's fields; a bad amount is malformed
        id_field="order_id",  # the entry id, e.g. for idempotent downstream writes
        max_records_per_batch=10_000,
        guarantee=Guarantee.TRANSACTIONAL,  # a trimmed, unread range stops the topology instead of skipping
    )
    builder = TopologyBuilder()
    builder.set_spout("orders", spout)
    builder.set_bolt("totals", CustomerTotals(), 2).fields_grouping("orders", Fields("customer"))
    return builder.create_topology()


def write_demo_orders(redis_url: str, n: int = 1000) -> None:
    import random

    import redis

    r = redis.Redis.from_url(redis_url)
    rng = random.Random(1)
    pipe = r.pipeline(transaction=False)
    for _ in range(n):
        customer = rng.choice(["alice", "bob", "carol", "dave"])
        pipe.xadd("orders", {"customer": customer, "amount": f"{rng.uniform(1, 99):.2f}"})
    pipe.execute()


if __name__ == "__main__":
    import weir
    from weir.state import StateFactory

    redis_url = sys.argv[1] if len(sys.argv) > 1 else REDIS_URL
    pg_url = sys.argv[2] if len(sys.argv) > 2 else PG_URL
    import redis

    if not redis.Redis.from_url(redis_url).exists("orders"):
        write_demo_orders(redis_url)  # a first run on an empty server: something to count
    from weir.cli import Progress

    conf = {**CONF, "topology.state.provider.config": {"url": pg_url}}
    run = weir.submit(NAME, conf, topology(redis_url))
    with Progress(run):  # the live status line on stderr
        status = run.process_available()
    print(f"committed txid {status.last_txid} after {status.batches} batches ({status.tuples_in} orders)")
    provider = StateFactory.from_url(pg_url)
    for task in range(2):
        for customer, acc in sorted(provider.new_state(f"{NAME}-totals-{task}")):
            print(f"{customer:>8}: {acc['orders']:5d} orders, {acc['total']:10.2f} total")
