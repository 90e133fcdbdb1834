"""Benchmark: events/s from Redis Streams and NATS JetStream into an exactly-once count on SQLite.

The same N events (key ``k<i mod keys>``) are written to a private ``redis-server`` stream and a
private ``nats-server -js`` stream (free loopback ports), then read by:

* **plain loop** — the broker's own Python client reading every event and counting keys in a dict:
  redis-py ``XRANGE`` in pages; nats-py with the idiomatic pull consumer (``fetch``) and with raw
  ``no_wait`` pull requests into a callback (the faster of the two is the ceiling);
* **weir Storm** — ``RedisStreamSpout`` / ``NatsSpout`` → a ``StatefulBolt`` counting per key
  (2 tasks, fields grouping) on the embedded SQLite provider, ``process_available()`` with
  ``max_records_per_batch`` = N / batches;
* **weir Trident** — the same spouts → ``group_by(key).persistent_aggregate(SqliteMapState, Count())``.

Every weir variant is checked against the exact counts. Before the timed runs one small warm-up run
per variant takes the JVM and Python-worker start-up. The target is ≥ 0.5× the plain loop.

Usage::

    .venv/bin/python bench/sources.py                  # 200,000 events per broker
    .venv/bin/python bench/sources.py --events 50000 --variants storm

Prints a table and writes ``bench/results/sources.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import Unavailable, _binary, _stop, _wait, free_port, machine, redis_server, write_results  # noqa: E402

from weir.cli._table import format_table, human_rate  # noqa: E402

TARGET = 0.5


# ---- servers and data ----------------------------------------------------------------------------
@contextlib.contextmanager
def nats_server() -> Iterator[str]:
    """A ``nats-server -js`` on a free loopback port; yields its URL."""
    workdir = Path(tempfile.mkdtemp(prefix="weir-bench-nats-"))
    port = free_port()
    cmd = [_binary("nats-server"), "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(workdir / "js")]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def ready() -> bool:
        import socket

        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                return b'"jetstream":true' in s.recv(4096)
        except OSError:
            return False

    try:
        _wait(ready, f"nats-server on port {port}")
        yield f"nats://127.0.0.1:{port}"
    finally:
        _stop(proc)
        shutil.rmtree(workdir, ignore_errors=True)


def key_of(i: int, keys: int) -> str:
    return f"k{i % keys}"


def fill_redis(url: str, stream: str, n: int, keys: int) -> None:
    import redis

    r = redis.Redis.from_url(url)
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd(stream, {"key": key_of(i, keys)})
        if i % 10_000 == 9_999:
            pipe.execute()
    pipe.execute()


def fill_nats(url: str, stream: str, n: int, keys: int) -> None:
    async def go() -> None:
        import nats

        nc = await nats.connect(url)
        js = nc.jetstream()
        await js.add_stream(name=stream, subjects=[f"{stream.lower()}.>"])
        subject = f"{stream.lower()}.events"
        for i in range(n):
            await nc.publish(subject, key_of(i, keys).encode())  # core publish: stored, no ack wait
        await nc.flush()
        while (await js.stream_info(stream)).state.messages < n:
            await asyncio.sleep(0.05)
        await nc.close()

    asyncio.run(go())


# ---- plain loops (the ceiling) -----------------------------------------------------------------
def plain_redis(url: str, stream: str) -> Counter[str]:
    import redis

    r = redis.Redis.from_url(url)
    counts: Counter[str] = Counter()
    lo = "-"
    while True:
        page = r.xrange(stream, min=lo, max="+", count=10_000)
        for _eid, fields in page:
            counts[fields[b"key"].decode()] += 1
        if len(page) < 10_000:
            return counts
        lo = "(" + page[-1][0].decode()


def plain_nats_fetch(url: str, stream: str, n: int) -> Counter[str]:
    async def go() -> Counter[str]:
        import nats
        from nats.js.api import AckPolicy, ConsumerConfig

        nc = await nats.connect(url)
        js = nc.jetstream()
        sub = await js.pull_subscribe(f"{stream.lower()}.>", stream=stream,
                                      config=ConsumerConfig(ack_policy=AckPolicy.NONE))
        counts: Counter[str] = Counter()
        got = 0
        while got < n:
            for m in await sub.fetch(batch=min(5000, n - got), timeout=5):
                counts[m.data.decode()] += 1
                got += 1
        await nc.close()
        return counts

    return asyncio.run(go())


def plain_nats_raw(url: str, stream: str, n: int) -> Counter[str]:
    async def go() -> Counter[str]:
        import nats
        from nats.js.api import AckPolicy, ConsumerConfig

        nc = await nats.connect(url)
        js = nc.jetstream()
        name = "plain" + uuid.uuid4().hex[:6]
        await js.add_consumer(stream, ConsumerConfig(name=name, ack_policy=AckPolicy.NONE))
        counts: Counter[str] = Counter()
        state = {"got": 0, "want": 0}
        done = asyncio.Event()

        async def cb(m: Any) -> None:
            if m.headers and not m.data:
                done.set()
                return
            counts[m.data.decode()] += 1
            state["got"] += 1
            if state["got"] >= state["want"]:
                done.set()

        inbox = nc.new_inbox()
        await nc.subscribe(inbox, cb=cb, pending_msgs_limit=1_000_000, pending_bytes_limit=1 << 30)
        while state["got"] < n:
            batch = min(5000, n - state["got"])
            state["want"] = state["got"] + batch
            done.clear()
            req = json.dumps({"batch": batch, "no_wait": True}).encode()
            await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}", req, reply=inbox)
            await asyncio.wait_for(done.wait(), 10)
        await nc.close()
        return counts

    return asyncio.run(go())


# ---- weir ----------------------------------------------------------------------------------------
def get_spark() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("weir-bench-sources")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def storm_count(spout: Any) -> Any:
    from pyspark import cloudpickle

    from weir.topology import Fields, StatefulBolt, TopologyBuilder

    class CountByKey(StatefulBolt):
        def init_state(self, state: Any) -> None:
            self.counts = state

        def execute(self, tup: Any) -> None:
            k = tup[0]
            self.counts.put(k, self.counts.get(k, 0) + 1)

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    b = TopologyBuilder()
    b.set_spout("events", spout)
    b.set_bolt("count", CountByKey(), 2).fields_grouping("events", Fields("key"))
    return b.create_topology()


def trident_count(spout: Any, db: str, table: str) -> Any:
    from weir.trident import Count, TridentTopology
    from weir.trident.backing import SqliteMapState

    t = TridentTopology()
    (
        t.new_stream("events", spout)
        .group_by(["key"])
        .persistent_aggregate(SqliteMapState.transactional(db, table=table), Count(), "count")
        .parallelism_hint(2)
    )
    return t


def weir_run(spark: Any, kind: str, spout: Any, workdir: Path) -> tuple[float, int, Counter[str]]:
    """(seconds, batches, committed counts) of one ``process_available`` run on a fresh state dir."""
    import weir
    from weir.demo import read_counts

    name = f"bench_{kind}_{uuid.uuid4().hex[:6]}"
    state = workdir / name
    conf = {"weir.state.dir": str(state)}
    db = str(state / "trident.db")
    topo = storm_count(spout) if kind == "storm" else trident_count(spout, db, "counts")
    run = weir.submit(name, conf, topo, spark=spark)
    t0 = time.perf_counter()
    st = run.process_available()
    secs = time.perf_counter() - t0
    if kind == "storm":
        counts = read_counts(conf, name)
    else:
        import sqlite3

        with contextlib.closing(sqlite3.connect(db)) as c:
            counts = Counter({json.loads(k)[0]: json.loads(v)[1] for k, v in c.execute('SELECT k, v FROM "counts"')})
    return secs, st.batches, counts


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=int, default=200_000, help="events per broker")
    p.add_argument("--keys", type=int, default=1000)
    p.add_argument("--batches", type=int, default=2, help="micro-batches per run (max_records_per_batch)")
    p.add_argument("--variants", default="storm,trident", help="weir variants: storm, trident")
    p.add_argument("--brokers", default="redis,nats")
    args = p.parse_args()
    n, keys = args.events, args.keys
    per_batch = -(-n // args.batches)
    variants = [v for v in args.variants.split(",") if v]
    brokers = [b for b in args.brokers.split(",") if b]
    expected = Counter(key_of(i, keys) for i in range(n))
    from weir.sources import NatsSpout, RedisStreamSpout

    rows: list[dict[str, Any]] = []
    workdir = Path(tempfile.mkdtemp(prefix="weir-bench-sources-"))
    try:
        with contextlib.ExitStack() as stack:
            urls = {}
            if "redis" in brokers:
                urls["redis"] = stack.enter_context(redis_server())
            if "nats" in brokers:
                urls["nats"] = stack.enter_context(nats_server())
            spouts: dict[str, Callable[[str, int], Any]] = {
                "redis": lambda s, m: RedisStreamSpout(urls["redis"], s, ["key"], max_records_per_batch=m),
                "nats": lambda s, m: NatsSpout(urls["nats"], s, fields=["key"], max_records_per_batch=m),
            }
            print(f"writing {n:,} events ({keys} keys) to {', '.join(brokers)} ...", flush=True)
            for b in brokers:
                (fill_redis if b == "redis" else fill_nats)(urls[b], "EVENTS", n, keys)
                (fill_redis if b == "redis" else fill_nats)(urls[b], "WARMUP", 2000, keys)

            for b in brokers:
                loops = {"redis": [("XRANGE pages", lambda: plain_redis(urls["redis"], "EVENTS"))],
                         "nats": [("pull fetch()", lambda: plain_nats_fetch(urls["nats"], "EVENTS", n)),
                                  ("raw no_wait pulls", lambda: plain_nats_raw(urls["nats"], "EVENTS", n))]}[b]
                for label, fn in loops:
                    t0 = time.perf_counter()
                    got = fn()
                    secs = time.perf_counter() - t0
                    assert got == expected, f"plain loop {b} {label}: wrong counts"
                    rows.append({"broker": b, "variant": f"plain loop: {label}", "seconds": secs,
                                 "events_per_s": n / secs, "batches": None})
                    print(f"  {b:5s} plain loop ({label}): {human_rate(n / secs)}", flush=True)

            spark = get_spark()
            for b in brokers:
                for kind in variants:
                    if kind == "trident":
                        try:
                            import weir.trident  # noqa: F401
                        except ImportError:
                            continue
                    weir_run(spark, kind, spouts[b]("WARMUP", 1000), workdir)  # warm-up: JVM, workers
                    secs, batches, got = weir_run(spark, kind, spouts[b]("EVENTS", per_batch), workdir)
                    assert got == expected, f"weir {kind} from {b}: counts differ from the events written"
                    rows.append({"broker": b, "variant": f"weir {kind}", "seconds": secs,
                                 "events_per_s": n / secs, "batches": batches})
                    print(f"  {b:5s} weir {kind}: {human_rate(n / secs)} ({batches} batches)", flush=True)
            spark.stop()
    except Unavailable as exc:
        print(f"cannot run: {exc}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    ceiling = {b: max(r["events_per_s"] for r in rows if r["broker"] == b and r["variant"].startswith("plain"))
               for b in brokers}
    table = []
    for r in rows:
        r["vs_ceiling"] = r["events_per_s"] / ceiling[r["broker"]]
        ok = "" if r["variant"].startswith("plain") else ("ok" if r["vs_ceiling"] >= TARGET else "BELOW")
        table.append([r["broker"], r["variant"], f"{r['seconds']:.2f} s", human_rate(r["events_per_s"]),
                      "" if r["batches"] is None else r["batches"], f"{r['vs_ceiling']:.2f}x", ok])
    print()
    print(format_table(["broker", "variant", "time", "events/s", "batches", "vs ceiling", f"≥{TARGET}x"], table))
    path = write_results("sources", {
        "events": n, "keys": keys, "max_records_per_batch": per_batch, "target_vs_ceiling": TARGET,
        "machine": machine(), "results": rows,
    })
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
