"""Benchmark: Storm spouts (``next_tuple``/``ack``) over RabbitMQ and a Redis list into a stateful word count.

Each variant consumes the same N messages (a line of 5 words from a 1,000-word vocabulary, message
id ``m<i>``) and acknowledges every message on the broker:

a. weir, ``RabbitMQSpout`` (2 tasks, manual acks after COMMITTED) → split bolt → stateful count bolt
   (2 tasks, fields grouping, SQLite);
b. a plain pika consumer loop: ``basic_consume`` (prefetch 1000), count the words in a dict,
   ``basic_ack`` each message;
c. weir, ``RedisQueueSpout`` (2 tasks, ``LMOVE`` to a processing list, ``LREM`` on ack) → the same bolts;
d. a plain redis-py loop: ``LMOVE`` queue → processing, count the words, ``LREM`` each message.

weir's time runs from ``start()`` to the moment every message's count is committed and every
message is acked (the queue and processing lists empty), after a warm-up run on the same
SparkSession; weir's counts are checked against the loop's. The brokers are private: RabbitMQ as its
own node (tests/servers.py ``RabbitMQServer``), ``redis-server`` on a free port.

Usage::

    .venv/bin/python bench/storm_spouts.py                  # 20,000 messages
    .venv/bin/python bench/storm_spouts.py --messages 100000
    .venv/bin/python bench/storm_spouts.py --interval-ms 200 --batch-max 10000   # the earlier batch cut
    .venv/bin/python bench/storm_spouts.py --no-poll-ahead  # weir.spout.poll.ahead off: poll, then run the job

Prints a table and writes ``bench/results/storm_spouts_<N>.json`` (``storm_spouts_<N>_no_ahead.json``
with ``--no-poll-ahead``).
"""

from __future__ import annotations

import argparse
import collections
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # tests.servers: the RabbitMQ node the tests use

from _common import local_spark, machine, redis_server, write_results  # noqa: E402

WORDS = [f"w{i}" for i in range(1000)]


def lines(n: int, seed: int = 7) -> list[str]:
    rnd = random.Random(seed)
    return [" ".join(rnd.choice(WORDS) for _ in range(5)) for _ in range(n)]


def expected(msgs: list[str]) -> collections.Counter[str]:
    return collections.Counter(w for m in msgs for w in m.split())


# ---- publishing ------------------------------------------------------------------------------
def publish_rabbit(url: str, queue: str, msgs: list[str]) -> None:
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.queue_declare(queue, durable=True)
    for i, m in enumerate(msgs):
        ch.basic_publish("", queue, m.encode(), pika.BasicProperties(message_id=f"m{i}"))
    conn.close()


def publish_redis(url: str, queue: str, msgs: list[str]) -> None:
    import redis

    c = redis.Redis.from_url(url)
    pipe = c.pipeline(transaction=False)
    for i, m in enumerate(msgs):
        pipe.lpush(queue, f"m{i} {m}")
    pipe.execute()
    c.close()


# ---- the plain loops ---------------------------------------------------------------------------
def loop_rabbit(url: str, queue: str, n: int) -> tuple[float, collections.Counter[str]]:
    import pika

    counts: collections.Counter[str] = collections.Counter()
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.basic_qos(prefetch_count=1000)
    done = 0
    t0 = time.perf_counter()
    for method, _props, body in ch.consume(queue, auto_ack=False):
        counts.update(body.decode().split())
        ch.basic_ack(method.delivery_tag)
        done += 1
        if done == n:
            break
    ch.cancel()
    secs = time.perf_counter() - t0
    conn.close()
    return secs, counts


def loop_redis(url: str, queue: str, n: int) -> tuple[float, collections.Counter[str]]:
    import redis

    counts: collections.Counter[str] = collections.Counter()
    c = redis.Redis.from_url(url)
    t0 = time.perf_counter()
    for _ in range(n):
        raw = c.lmove(queue, f"{queue}:processing", "RIGHT", "LEFT")
        counts.update(raw.decode().split(" ", 1)[1].split())
        c.lrem(f"{queue}:processing", 1, raw)
    secs = time.perf_counter() - t0
    c.close()
    return secs, counts


# ---- weir --------------------------------------------------------------------------------------
def topology(spout: Any) -> Any:
    from bench_spout_bolts import CountWords, SplitLine

    from weir.topology import Fields, TopologyBuilder

    b = TopologyBuilder()
    b.set_spout("queue", spout, 2)
    b.set_bolt("split", SplitLine(), 2).shuffle_grouping("queue")
    b.set_bolt("count", CountWords(), 2).fields_grouping("split", Fields("word"))
    return b.create_topology()


#: the batch cut (set from the command line): the checkpoint interval (a batch polls its spout up to
#: that long) and the tuples one spout task may put in one batch
CUT: dict[str, Any] = {"interval_ms": 1000, "batch_max": 50_000, "poll_ahead": True}


def run_weir(spark: Any, name: str, spout: Any, n: int, state_dir: str) -> tuple[float, dict[str, float]]:
    """Seconds from ``start()`` until ``n`` spout tuples are in committed batches, and where they went.

    The batch's acks are sent before its status is recorded, so by then every message is acked too.
    The breakdown: ``first_batch_s`` (start-up until the first batch is recorded), the spout log
    driver's ``poll_s`` / ``log_write_s`` / ``ack_s`` (next_tuple, the store write, ack + flush),
    and ``batches``; the rest is Spark's jobs (the bolts) and the coordinator's commits.
    """
    import weir

    conf = {
        "weir.state.dir": state_dir,
        "topology.state.checkpoint.interval.ms": CUT["interval_ms"],
        "weir.spout.batch.max.tuples": CUT["batch_max"],
        "weir.spout.poll.ahead": CUT["poll_ahead"],
    }
    run = weir.submit(name, conf, topology(spout), spark)
    t0 = time.perf_counter()
    first = None
    run.start()
    try:
        while (st := run.status()).tuples_in < n:
            if first is None and st.batches:
                first = time.perf_counter() - t0
            if not run.query.isActive:
                run.await_termination(1)
            time.sleep(0.05)
        secs = time.perf_counter() - t0
        parts = {k: round(v, 3) for k, v in run.runner.spout_driver.timings_now().items()}
        return secs, {"first_batch_s": round(first or secs, 3), **parts, "batches": st.batches}
    finally:
        run.stop()


def weir_counts(state_dir: str, name: str) -> collections.Counter[str]:
    from weir.state.factory import StateFactory

    p = StateFactory.from_url(f"sqlite:///{state_dir}/state.db")
    out: collections.Counter[str] = collections.Counter()
    for i in range(2):
        for k, v in p.new_state(f"{name}-count-{i}"):
            out[k] += v
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--interval-ms", type=int, default=1000, help="topology.state.checkpoint.interval.ms")
    ap.add_argument("--batch-max", type=int, default=50_000, help="weir.spout.batch.max.tuples")
    ap.add_argument("--no-poll-ahead", action="store_true", help="weir.spout.poll.ahead = false (the old cut)")
    args = ap.parse_args()
    n = args.messages
    CUT.update(interval_ms=args.interval_ms, batch_max=args.batch_max, poll_ahead=not args.no_poll_ahead)
    import redis
    from tests.servers import RabbitMQServer

    from weir.sources import RabbitMQSpout, RedisQueueSpout

    msgs = lines(n)
    want = expected(msgs)
    spark = local_spark("bench-storm-spouts")
    rows: list[dict[str, Any]] = []
    tmp = Path(tempfile.mkdtemp(prefix="weir-bench-spouts-"))
    try:
        with RabbitMQServer(tmp / "rabbit") as rabbit, redis_server() as rurl:
            rc = redis.Redis.from_url(rurl)

            # warm-up: JVM, Python workers, connections (small, not timed)
            for kind in ("rabbit", "redis"):
                q = f"warm-{kind}"
                if kind == "rabbit":
                    publish_rabbit(rabbit.url, q, msgs[:200])
                    run_weir(spark, q, RabbitMQSpout(rabbit.url, q, ["line"]), 200, str(tmp / q))
                else:
                    publish_redis(rurl, q, msgs[:200])
                    sp = RedisQueueSpout(rurl, q, ["line"], message_id=lambda m: m.split(" ", 1)[0])
                    run_weir(spark, q, sp, 200, str(tmp / q))

            publish_rabbit(rabbit.url, "weir", msgs)
            secs, where = run_weir(spark, "weir_rabbit", RabbitMQSpout(rabbit.url, "weir", ["line"],
                                   prefetch=20_000), n, str(tmp / "a"))  # fmt: skip
            assert weir_counts(str(tmp / "a"), "weir_rabbit") == want, "weir's RabbitMQ counts are wrong"
            assert rabbit_unacked(rabbit, "weir") == 0, "weir left RabbitMQ messages un-acked"
            rows.append({"variant": "a. weir RabbitMQSpout → stateful count", "seconds": secs, "where": where})
            publish_rabbit(rabbit.url, "loop", msgs)
            secs, got = loop_rabbit(rabbit.url, "loop", n)
            assert got == want
            rows.append({"variant": "b. pika consumer loop (ack each)", "seconds": secs})

            publish_redis(rurl, "weir", msgs)
            sp = RedisQueueSpout(rurl, "weir", ["line"], message_id=lambda m: m.split(" ", 1)[0])
            secs, where = run_weir(spark, "weir_redis", sp, n, str(tmp / "c"))
            assert rc.llen("weir") == 0 and not any(rc.llen(k) for k in rc.keys("weir:processing:*"))
            got_w = weir_counts(str(tmp / "c"), "weir_redis")
            ids = collections.Counter({f"m{i}": 1 for i in range(n)})
            got_w = got_w - ids  # the split bolt counts the id too
            assert got_w == want, "weir's Redis counts are wrong"
            rows.append({"variant": "c. weir RedisQueueSpout → stateful count", "seconds": secs, "where": where})
            publish_redis(rurl, "loop", msgs)
            secs, got = loop_redis(rurl, "loop", n)
            assert got == want
            rows.append({"variant": "d. redis-py LMOVE/LREM loop (ack each)", "seconds": secs})
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    for r in rows:
        r["messages_per_s"] = round(n / r["seconds"], 1)
        r["seconds"] = round(r["seconds"], 3)
    rows[0]["vs_loop"] = round(rows[0]["messages_per_s"] / rows[1]["messages_per_s"], 2)
    rows[2]["vs_loop"] = round(rows[2]["messages_per_s"] / rows[3]["messages_per_s"], 2)
    print(f"\n{n} messages of 5 words, every message acked on the broker; batch cut: {CUT}\n")
    print(f"{'variant':46} {'seconds':>9} {'msgs/s':>10} {'vs loop':>8}")
    for r in rows:
        print(f"{r['variant']:46} {r['seconds']:>9.2f} {r['messages_per_s']:>10.0f} {r.get('vs_loop', ''):>8}")
    print("\nwhere weir's time went (s): start-up to the first batch, next_tuple on the batch's path, log writes,")
    print("acks; the rest is Spark's jobs (split + count bolts) and the coordinator's commits. 'ahead' is")
    print("next_tuple time spent polling the next batch while a job ran (it overlaps 'rest')")
    for r in rows:
        if "where" in r:
            w = r["where"]
            rest = r["seconds"] - w["first_batch_s"] - w["poll_s"] - w["log_write_s"] - w["ack_s"]
            print(
                f"  {r['variant'][:2]} first batch {w['first_batch_s']:.2f}  poll {w['poll_s']:.2f}  log write "
                f"{w['log_write_s']:.2f}  ack {w['ack_s']:.2f}  rest {rest:.2f}  ({w['batches']} batches)"
                f"  ahead {w.get('poll_ahead_s', 0.0):.2f}"
            )
    suffix = "" if CUT["poll_ahead"] else "_no_ahead"
    path = write_results(f"storm_spouts_{n}{suffix}", {"messages": n, "cut": CUT, "machine": machine(), "rows": rows})
    print(f"\nwrote {path}")
    return 0


def rabbit_unacked(rabbit: Any, queue: str) -> int:
    """Un-acked deliveries of ``queue`` (``rabbitmqctl list_queues``), 0 when the queue is idle."""
    import os
    import subprocess

    env = {**os.environ, "HOME": str(rabbit.workdir), "ERL_EPMD_PORT": str(rabbit.epmd_port)}
    out = subprocess.run(
        ["/usr/lib/rabbitmq/bin/rabbitmqctl", "-n", rabbit.node, "list_queues", "name", "messages_unacknowledged",
         "--no-table-headers", "-q"],
        env=env, capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == queue:
            return int(parts[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
