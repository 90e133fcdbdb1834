"""Benchmark: Kafka into an exactly-once Trident count on SQLite, and exactly-once output to Kafka.

A private single-node KRaft broker (Kafka's jars from the weir cache, see ``.ci/setup.d/20-kafka.sh``)
gets N events (key ``k<i mod keys>``) in a topic of ``--partitions`` partitions. They are read by:

* **plain loop** — a confluent-kafka consumer assigned every partition, counting keys in a dict
  (the ceiling; the best of ``--repeat`` runs);
* **KafkaSpout.read()** — the spout's read path alone, outside Spark: every partition's range into
  Arrow record batches (the best of ``--repeat`` runs);
* **Spark alone** — ``KafkaSpout`` as a Spark source, ``groupBy(key).count()`` per batch added to
  SQLite: Spark's own operators, not exactly once. (Spark's own Kafka source,
  ``spark-sql-kafka-0-10``, has no release for Spark 4.3.0 on Maven Central, so it cannot be measured.)
* **weir Trident** — ``group_by(key).persistent_aggregate(SqliteMapState.transactional, Count())``,
  exactly once (targets: ≥ 0.6× the plain loop, ≥ 0.9× Spark alone).

Output: ``--out-records`` records written by a plain transactional producer loop (one transaction
per ``--out-batch`` records) against weir's :class:`~weir.sinks.TransactionalPublisher` (the same,
plus the progress marker and its check), and a Storm topology ``KafkaSpout → KafkaBolt``.

Usage::

    .venv/bin/python bench/kafka.py                         # 1,000,000 events, batches of 250,000
    .venv/bin/python bench/kafka.py --events 200000 --batch 100000

Prints a table and writes ``bench/results/kafka.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # tests.servers: the broker fixture

from _common import cpu_since, cpu_snapshot, local_spark, machine, write_results  # noqa: E402

from sources import spark_alone_run, trident_count  # noqa: E402
from weir.cli._table import format_table, human_rate  # noqa: E402


def key_of(i: int, keys: int) -> str:
    return f"k{i % keys}"


def fill(bootstrap: str, topic: str, n: int, keys: int) -> None:
    from confluent_kafka import Producer

    p = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000, "compression.type": "lz4"}
    )
    for i in range(n):
        while True:
            try:
                p.produce(topic, key=key_of(i, keys), value=b"x")
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(300) == 0


def plain_loop(bootstrap: str, topic: str, partitions: int, n: int) -> Counter[str]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"plain-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    counts: Counter[str] = Counter()
    seen = 0
    try:
        while seen < n:
            msgs = c.consume(10_000, 1.0)
            for m in msgs:
                if m.error() is None:
                    counts[m.key().decode()] += 1
                    seen += 1
    finally:
        c.close()
    return counts


def spout_read(spout: Any, n: int) -> float:
    """Seconds ``KafkaSpout.read()`` takes over every partition's range, outside Spark (Arrow batches)."""
    from weir.sources import ReadLimit

    start = spout.initial_offset()
    end = spout.latest_offset(start, ReadLimit())
    t0 = time.perf_counter()
    rows = sum(b.num_rows for s, e in spout.partitions(start, end) for b in spout.read(s, e))
    secs = time.perf_counter() - t0
    assert rows == n, f"KafkaSpout.read(): {rows} records, expected {n}"
    return secs


def retrying(fn: Any, *args: Any) -> Any:
    """``fn(*args)``, again (twice at most) when Spark could not start a Python worker in time (overload)."""
    for attempt in range(3):
        try:
            return fn(*args)
        except Exception as exc:
            if "failed to connect back" not in str(exc) or attempt == 2:
                raise
            print(f"    (Spark could not start a Python worker in time: run again) {type(exc).__name__}", flush=True)
    raise AssertionError


def trident_run(spark: Any, spout: Any, workdir: Path) -> tuple[float, int, Counter[str]]:
    import sqlite3

    import weir

    name = f"bench_kafka_{uuid.uuid4().hex[:6]}"
    state = workdir / name
    conf = {"weir.state.dir": str(state)}
    db = str(state / "trident.db")
    run = weir.submit(name, conf, trident_count(spout, db, "counts"), spark=spark)
    t0 = time.perf_counter()
    st = run.process_available()
    secs = time.perf_counter() - t0
    with contextlib.closing(sqlite3.connect(db)) as c:
        counts = Counter({json.loads(k)[0]: json.loads(v)[1] for k, v in c.execute('SELECT k, v FROM "counts"')})
    return secs, st.batches, counts


def plain_transactional(bootstrap: str, topic: str, n: int, per_txn: int) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"plain-{uuid.uuid4().hex}", "linger.ms": 5})
    p.init_transactions(60)
    t0 = time.perf_counter()
    for start in range(0, n, per_txn):
        p.begin_transaction()
        for i in range(start, min(n, start + per_txn)):
            while True:
                try:
                    p.produce(topic, key=f"k{i % 100}", value=f"v{i}")
                    break
                except BufferError:
                    p.poll(0.01)
        p.commit_transaction(60)
    return time.perf_counter() - t0


def weir_publisher(bootstrap: str, topic: str, n: int, per_txn: int) -> float:
    from weir.sinks import TransactionalPublisher

    pub = TransactionalPublisher({"bootstrap.servers": bootstrap}, topic, f"bench-{uuid.uuid4().hex}")
    pub.published(0)  # open: init_transactions and the marker read, as a restarted writer does
    t0 = time.perf_counter()
    for txid, start in enumerate(range(0, n, per_txn), 1):
        pub.publish(txid, [(f"k{i % 100}", f"v{i}") for i in range(start, min(n, start + per_txn))])
    return time.perf_counter() - t0


def storm_out_run(spark: Any, bootstrap: str, src: str, out: str, per_batch: int, workdir: Path) -> tuple[float, int]:
    import weir
    from weir.sinks import KafkaBolt
    from weir.sources import KafkaSpout
    from weir.topology import TopologyBuilder

    b = TopologyBuilder()
    b.set_spout("events", KafkaSpout(bootstrap, src, max_records_per_batch=per_batch))
    b.set_bolt("out", KafkaBolt(bootstrap, out, value_field="value", key_field="key"), 2).shuffle_grouping("events")
    name = f"bench_kout_{uuid.uuid4().hex[:6]}"
    run = weir.submit(name, {"weir.state.dir": str(workdir / name)}, b.create_topology(), spark=spark)
    t0 = time.perf_counter()
    st = run.process_available()
    return time.perf_counter() - t0, st.batches


def count_topic(bootstrap: str, topic: str, partitions: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "count", "isolation.level": "read_committed"})
    total = 0
    for p in range(partitions):
        _, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)
        c.assign([TopicPartition(topic, p, 0)])
        while c.position([TopicPartition(topic, p)])[0].offset < high:
            total += sum(1 for m in c.consume(10_000, 0.5) if m.error() is None)
    c.close()
    return total


def close_kafka_clients() -> None:
    """Close the Kafka clients weir caches in this process, so none outlives the broker (and logs refusals)."""
    import gc

    from weir.connectors.kafka import client as _kafka
    from weir.connectors.kafka import sink as sinks
    from weir.connectors.kafka import spout as sources

    for _pid, consumer in list(sources._CONSUMERS.values()):
        with contextlib.suppress(Exception):
            consumer.close()
    sources._CONSUMERS.clear()
    for pub in list(sinks._PUBLISHERS.values()):
        producer = pub._producer
        if producer is not None:
            with contextlib.suppress(Exception):
                producer.flush(5)
        pub._producer = None
    sinks._PUBLISHERS.clear()
    _kafka._ADMINS.clear()
    gc.collect()  # the last references: librdkafka handles are destroyed with their Python objects


def main() -> int:  # noqa: PLR0915 - a script
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--keys", type=int, default=1000)
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--batch", type=int, default=250_000, help="max_records_per_batch")
    p.add_argument("--repeat", type=int, default=3, help="runs of the plain loop (the best counts)")
    p.add_argument("--weir-repeat", type=int, default=2, help="runs of each Spark/weir variant (the best counts)")
    p.add_argument("--out-records", type=int, default=200_000)
    p.add_argument("--out-batch", type=int, default=50_000, help="records per Kafka transaction")
    args = p.parse_args()
    n, keys, per_batch = args.events, args.keys, args.batch
    from tests.kafka.conftest import create_topic
    from tests.servers import KafkaBroker

    from weir.sources import KafkaSpout

    expected = Counter(key_of(i, keys) for i in range(n))
    rows: list[dict[str, Any]] = []
    out_rows: list[dict[str, Any]] = []
    workdir = Path(tempfile.mkdtemp(prefix="weir-bench-kafka-"))
    broker = KafkaBroker(workdir / "kafka")
    try:
        broker.start()
        bs = broker.bootstrap
        topic = create_topic(bs, args.partitions, name="events")
        warm = create_topic(bs, args.partitions, name="warmup")
        print(f"writing {n:,} events ({keys} keys, {args.partitions} partitions) ...", flush=True)
        fill(bs, topic, n, keys)
        fill(bs, warm, 40_000, keys)
        times, cpus = [], []
        for _ in range(args.repeat):
            c0, t0 = cpu_snapshot(), time.perf_counter()
            got = plain_loop(bs, topic, args.partitions, n)
            times.append(time.perf_counter() - t0)
            cpus.append(cpu_since(c0))
            assert got == expected, "plain loop: wrong counts"
        rows.append(
            {
                "variant": "plain loop: confluent-kafka consume()",
                "seconds": min(times),
                "events_per_s": n / min(times),
                "batches": None,
                "runs_s": times,
                "cpu_s": min(cpus),
                "load_1m": os.getloadavg()[0],
            }
        )
        print(f"  plain loop: {human_rate(n / min(times))}", flush=True)
        times, cpus = [], []
        for _ in range(args.repeat):
            c0 = cpu_snapshot()
            times.append(spout_read(KafkaSpout(bs, topic), n))
            cpus.append(cpu_since(c0))
        rows.append(
            {
                "variant": "KafkaSpout.read() outside Spark (Arrow batches)",
                "seconds": min(times),
                "events_per_s": n / min(times),
                "batches": None,
                "runs_s": times,
                "cpu_s": min(cpus),
                "load_1m": os.getloadavg()[0],
            }
        )
        print(f"  KafkaSpout.read(): {human_rate(n / min(times))}", flush=True)

        spark = local_spark("weir-bench-kafka")
        for kind in ("spark", "trident"):
            label = "Spark alone (KafkaSpout source, not exactly-once)" if kind == "spark" else "weir Trident"
            run = spark_alone_run if kind == "spark" else trident_run
            retrying(run, spark, KafkaSpout(bs, warm, max_records_per_batch=20_000), workdir)  # warm-up
            runs, cpus = [], []
            batches = 0
            load = os.getloadavg()[0]
            for _ in range(args.weir_repeat):
                spout = KafkaSpout(bs, topic, max_records_per_batch=per_batch)
                c0 = cpu_snapshot()
                secs, batches, got = retrying(run, spark, spout, workdir)
                cpus.append(cpu_since(c0))
                assert got == expected, f"{kind}: counts differ from the events written"
                runs.append(secs)
            rows.append(
                {
                    "variant": label,
                    "seconds": min(runs),
                    "events_per_s": n / min(runs),
                    "batches": batches,
                    "runs_s": runs,
                    "cpu_s": min(cpus),
                    "load_1m": load,
                }
            )
            print(f"  {label}: {human_rate(n / min(runs))} ({batches} batches)", flush=True)

        m, per_txn = args.out_records, args.out_batch
        o1, o2, o3 = (create_topic(bs, args.partitions, name=f"out{i}") for i in range(3))
        secs = plain_transactional(bs, o1, m, per_txn)
        out_rows.append({"variant": "plain transactional producer loop", "seconds": secs, "records_per_s": m / secs})
        secs = weir_publisher(bs, o2, m, per_txn)
        assert count_topic(bs, o2, args.partitions) == m
        out_rows.append(
            {"variant": "weir TransactionalPublisher (records + marker)", "seconds": secs, "records_per_s": m / secs}
        )
        src = create_topic(bs, args.partitions, name="outsrc")
        fill(bs, src, m, keys)
        secs, batches = retrying(storm_out_run, spark, bs, src, o3, per_txn, workdir)
        assert count_topic(bs, o3, args.partitions) == m
        out_rows.append(
            {
                "variant": f"weir Storm KafkaSpout -> KafkaBolt ({batches} batches)",
                "seconds": secs,
                "records_per_s": m / secs,
            }
        )
        spark.stop()
    finally:
        close_kafka_clients()
        broker.close()
        shutil.rmtree(workdir, ignore_errors=True)

    ceiling = rows[0]["events_per_s"]
    spark_alone = next(r["events_per_s"] for r in rows if r["variant"].startswith("Spark"))
    table = []
    for r in rows:
        r["vs_plain"] = r["events_per_s"] / ceiling
        r["vs_spark"] = r["events_per_s"] / spark_alone
        table.append(
            [
                r["variant"],
                f"{r['seconds']:.2f} s",
                human_rate(r["events_per_s"]),
                "" if r["batches"] is None else r["batches"],
                f"{r['vs_plain']:.2f}x",
                f"{r['vs_spark']:.2f}x",
                f"{r['cpu_s']:.1f} s",
                f"{r['load_1m']:.1f}",
            ]
        )
    base = out_rows[0]["records_per_s"]
    out_table = []
    for r in out_rows:
        r["vs_plain"] = r["records_per_s"] / base
        out_table.append(
            [r["variant"], f"{r['seconds']:.2f} s", human_rate(r["records_per_s"]), f"{r['vs_plain']:.2f}x"]
        )
    print()
    print(f"{n:,} events, {args.partitions} partitions, batches of {per_batch:,}")
    print(format_table(["input", "time", "events/s", "batches", "vs plain", "vs Spark alone", "CPU", "load"], table))
    print("CPU: seconds of this process and its children (Spark's JVM, Python workers), the broker left out;")
    print("load: the 1-minute load average when the variant started (wall times are only comparable when low)")
    print()
    print(f"{args.out_records:,} records out, {args.out_batch:,} per Kafka transaction")
    print(format_table(["output", "time", "records/s", "vs plain"], out_table))
    path = write_results(
        "kafka",
        {
            "benchmark": "kafka",
            "events": n,
            "keys": keys,
            "partitions": args.partitions,
            "batch": per_batch,
            "input": rows,
            "output": out_rows,
            "machine": machine(),
            "spark_kafka_source": "unavailable: no spark-sql-kafka-0-10_2.13 4.3.0 on Maven Central",
        },
    )
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
