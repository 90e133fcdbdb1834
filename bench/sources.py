"""Benchmark: events/s from Redis Streams and NATS JetStream into an exactly-once count on SQLite.

The same N events (key ``k<i mod keys>``) are written to a private ``redis-server`` stream and a
private ``nats-server -js`` stream (free loopback ports), then read by:

* **plain loop** — the broker's own Python client reading every event and counting keys in a dict:
  redis-py ``XRANGE`` in pages (with the hiredis parser when it is installed, as ``weir[redis]``
  installs it); nats-py with the idiomatic pull consumer (``fetch``) and with raw ``no_wait`` pull
  requests into a callback (``fetch`` runs once: it is much slower). The fastest plain loop of
  ``--repeat`` runs is the ceiling;
* **Spark alone** — the same spout as a Spark data source, ``groupBy(key).count()`` per
  micro-batch, counts added to SQLite from the driver: Spark's own operators, no exactly-once;
* **weir Trident** — ``group_by(key).persistent_aggregate(SqliteMapState.transactional, Count())``,
  exactly once (the issue's target: ≥ 0.5× the ceiling);
* **weir Storm** — a ``StatefulBolt`` counting per key (2 tasks, fields grouping) on the embedded
  SQLite provider: every tuple runs through Python ``execute``.

Every run uses ``process_available()`` with ``max_records_per_batch`` = ``--batch``, and every
result is checked against the exact counts. A warm-up run per variant first starts the JVM and
the Python workers (with the same number of read partitions). Each weir/Spark variant runs
``--weir-repeat`` times and the best run counts, as for the plain loops.

Usage::

    .venv/bin/python bench/sources.py                  # 1,000,000 events per broker, batches of 250,000
    .venv/bin/python bench/sources.py --events 200000 --batch 100000 --variants trident

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

from _common import (  # noqa: E402
    Unavailable,
    _binary,
    _stop,
    _wait,
    cpu_since,
    cpu_snapshot,
    free_port,
    local_spark,
    machine,
    redis_server,
    write_results,
)

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
        sub = await js.pull_subscribe(
            f"{stream.lower()}.>", stream=stream, config=ConsumerConfig(ack_policy=AckPolicy.NONE)
        )
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
    return local_spark("weir-bench-sources")


def storm_count(spout: Any) -> Any:
    from pyspark import cloudpickle

    from weir.topology import Fields, StatefulBolt, TopologyBuilder

    class CountByKey(StatefulBolt):
        def init_state(self, state: Any) -> None:
            self.counts = state

        def execute(self, tup: Any) -> None:
            k = tup[0]
            self.counts.put(k, self.counts.get(k, 0) + 1)
            self.collector.ack(tup)

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


def spark_alone_run(spark: Any, spout: Any, workdir: Path) -> tuple[float, int, Counter[str]]:
    """Spark's own operators: the spout's stream, ``groupBy(key).count()`` per batch, added to SQLite."""
    import sqlite3

    from weir.topology.context import TopologyContext

    name = f"bench_spark_{uuid.uuid4().hex[:6]}"
    state = workdir / name
    state.mkdir(parents=True)
    conf = {"weir.state.dir": str(state)}
    df = spout.create_stream(spark, TopologyContext(name, "events", 0, 1, conf))
    db = str(state / "counts.db")
    with contextlib.closing(sqlite3.connect(db)) as c:
        c.execute("CREATE TABLE counts (k TEXT PRIMARY KEY, n INTEGER NOT NULL)")
        c.commit()
    batches = [0]

    def add(batch: Any, _batch_id: int) -> None:
        rows = batch.groupBy("key").count().collect()
        with contextlib.closing(sqlite3.connect(db)) as c:
            c.executemany(
                "INSERT INTO counts VALUES (?, ?) ON CONFLICT(k) DO UPDATE SET n = n + excluded.n",
                [(r["key"], r["count"]) for r in rows],
            )
            c.commit()
        batches[0] += 1

    q = df.writeStream.foreachBatch(add).option("checkpointLocation", str(state / "ckpt")).trigger(availableNow=True)
    t0 = time.perf_counter()
    q.start().awaitTermination()
    secs = time.perf_counter() - t0
    with contextlib.closing(sqlite3.connect(db)) as c:
        counts = Counter(dict(c.execute("SELECT k, n FROM counts").fetchall()))
    return secs, batches[0], counts


def weir_run(spark: Any, kind: str, spout: Any, workdir: Path) -> tuple[float, int, Counter[str]]:
    """(seconds, batches, committed counts) of one ``process_available`` run on a fresh state dir."""
    import weir
    from weir.demo import read_counts

    if kind == "spark":
        return spark_alone_run(spark, spout, workdir)
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


def client_versions() -> dict[str, Any]:
    """The broker clients and whether redis-py parses replies in C (hiredis)."""
    out: dict[str, Any] = {}
    try:
        import redis
        from redis.utils import HIREDIS_AVAILABLE

        out["redis-py"] = redis.__version__
        out["hiredis"] = bool(HIREDIS_AVAILABLE)
    except ImportError:
        pass
    try:
        from importlib.metadata import version

        out["nats-py"] = version("nats-py")
    except Exception:  # noqa: S110 - informational
        pass
    return out


VARIANT_LABEL = {"spark": "Spark alone (not exactly-once)", "trident": "weir Trident", "storm": "weir Storm"}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=int, default=1_000_000, help="events per broker")
    p.add_argument("--keys", type=int, default=1000)
    p.add_argument("--batch", type=int, default=250_000, help="max_records_per_batch")
    p.add_argument("--variants", default="spark,trident,storm", help="spark, trident, storm")
    p.add_argument("--brokers", default="redis,nats")
    p.add_argument("--repeat", type=int, default=3, help="runs of each plain loop (the best counts)")
    p.add_argument("--weir-repeat", type=int, default=2, help="runs of each Spark/weir variant (the best counts)")
    args = p.parse_args()
    n, keys, per_batch = args.events, args.keys, args.batch
    warm_n = 40_000
    variants = [v for v in args.variants.split(",") if v]
    brokers = [b for b in args.brokers.split(",") if b]
    expected = Counter(key_of(i, keys) for i in range(n))
    warm_expected = Counter(key_of(i, keys) for i in range(warm_n))
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
                (fill_redis if b == "redis" else fill_nats)(urls[b], "WARMUP", warm_n, keys)

            for b in brokers:
                loops = {
                    "redis": [("XRANGE pages", lambda: plain_redis(urls["redis"], "EVENTS"))],
                    "nats": [
                        ("pull fetch()", lambda: plain_nats_fetch(urls["nats"], "EVENTS", n)),
                        ("raw no_wait pulls", lambda: plain_nats_raw(urls["nats"], "EVENTS", n)),
                    ],
                }[b]
                for label, fn in loops:
                    times = []
                    slow = label == "pull fetch()"  # informational, not the ceiling: once is enough
                    cpus = []
                    load = os.getloadavg()[0]
                    for _ in range(1 if slow else args.repeat):
                        c0, t0 = cpu_snapshot(), time.perf_counter()
                        got = fn()
                        times.append(time.perf_counter() - t0)
                        cpus.append(cpu_since(c0))
                        assert got == expected, f"plain loop {b} {label}: wrong counts"
                    secs = min(times)
                    rows.append(
                        {
                            "broker": b,
                            "variant": f"plain loop: {label}",
                            "seconds": secs,
                            "events_per_s": n / secs,
                            "batches": None,
                            "runs_s": times,
                            "cpu_s": min(cpus),
                            "load_1m": load,
                        }
                    )
                    print(f"  {b:5s} plain loop ({label}): {human_rate(n / secs)}", flush=True)

            spark = get_spark()
            for b in brokers:
                for kind in variants:
                    if kind == "trident":
                        try:
                            import weir.trident  # noqa: F401
                        except ImportError:
                            continue
                    # warm-up: JVM, Python workers for every read partition
                    _, _, got = weir_run(spark, kind, spouts[b]("WARMUP", warm_n // 2), workdir)
                    assert got == warm_expected, f"{kind} from {b}: warm-up counts differ"
                    runs, cpus = [], []
                    load = os.getloadavg()[0]
                    for _ in range(args.weir_repeat):
                        c0 = cpu_snapshot()
                        secs, batches, got = weir_run(spark, kind, spouts[b]("EVENTS", per_batch), workdir)
                        cpus.append(cpu_since(c0))
                        assert got == expected, f"{kind} from {b}: counts differ from the events written"
                        runs.append(secs)
                    secs = min(runs)
                    rows.append(
                        {
                            "broker": b,
                            "variant": VARIANT_LABEL[kind],
                            "seconds": secs,
                            "events_per_s": n / secs,
                            "batches": batches,
                            "runs_s": runs,
                            "cpu_s": min(cpus),
                            "load_1m": load,
                        }
                    )
                    print(f"  {b:5s} {VARIANT_LABEL[kind]}: {human_rate(n / secs)} ({batches} batches)", flush=True)
            spark.stop()
    except Unavailable as exc:
        print(f"cannot run: {exc}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    ceiling = {
        b: max(r["events_per_s"] for r in rows if r["broker"] == b and r["variant"].startswith("plain"))
        for b in brokers
    }
    table = []
    for r in rows:
        r["vs_ceiling"] = r["events_per_s"] / ceiling[r["broker"]]
        if r["variant"] == VARIANT_LABEL["trident"]:
            ok = "ok" if r["vs_ceiling"] >= TARGET else "BELOW"
        else:
            ok = ""
        table.append(
            [
                r["broker"],
                r["variant"],
                f"{r['seconds']:.2f} s",
                human_rate(r["events_per_s"]),
                "" if r["batches"] is None else r["batches"],
                f"{r['vs_ceiling']:.2f}x",
                ok,
                f"{r['cpu_s']:.1f} s",
                f"{r['load_1m']:.1f}",
            ]
        )
    clients = client_versions()
    print()
    print(
        f"{n:,} events per broker, batches of {per_batch:,}; clients: "
        + ", ".join(f"{k} {v}" for k, v in clients.items())
    )
    print(
        format_table(
            ["broker", "variant", "time", "events/s", "batches", "vs ceiling", f"≥{TARGET}x", "CPU", "load"], table
        )
    )
    print("CPU: seconds of this process and its children (Spark's JVM, Python workers), the servers left out;")
    print("load: the 1-minute load average when the variant started (wall times are only comparable when low)")
    path = write_results(
        "sources",
        {
            "events": n,
            "keys": keys,
            "max_records_per_batch": per_batch,
            "target_vs_ceiling": TARGET,
            "target_applies_to": VARIANT_LABEL["trident"],
            "clients": clients,
            "machine": machine(),
            "results": rows,
        },
    )
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
