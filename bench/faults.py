"""Fault harness: seeded random schedules of crashes, pauses and network faults, with counters.

For each configuration (dialect × store; ``kafka`` is a Kafka-in, Kafka-out configuration, below) it
runs ``--schedules`` seeded schedules. A schedule is a
word count over ``--files`` input files (one micro-batch each) whose first driver run gets one
fault when a chosen txid has committed; further runs (no faults, at most ``--recoveries``) follow
until one ends cleanly. The committed counts are then compared with a ``Counter`` of the input, the
way Flink's exactly-once tests count:

- **lost** / **duplicated**: words counted fewer / more times than the input holds (summed);
- **out-of-order**: committed transactions whose txid is not above every txid committed before
  (read from the checkpoint history in the store);
- **silent hang**: a run that neither progressed nor ended within ``--hang-timeout`` seconds;
- **named error**: the schedule ended with a weir error (``ERROR <WeirError type>: ...``) that
  the operator is told about — counts are not compared then (nothing is claimed);
- **unnamed error**: a run that failed without a weir error (a raw traceback).

Faults: ``driver_kill`` (SIGKILL the driver's process group: JVM and Python workers too),
``worker_kill`` (SIGKILL one Spark Python worker), ``store_kill`` (SIGKILL the store and start it
again on its data: Redis with an fsync-always AOF, PostgreSQL), ``store_kill_nopersist`` (a Redis
without persistence restarted empty), ``store_pause`` (SIGSTOP the store for ``--pause`` s),
``proxy_delay`` / ``proxy_blackhole`` / ``proxy_cut`` (weir's loopback proxy,
``tests/faults/proxy.py``, between the driver and the store: 300 ms per chunk, nothing delivered
for ``--pause`` s, every connection closed), ``checkpoint_delete`` (the driver killed, its Spark
checkpoint deleted, then started again) and ``other_cwd`` (the driver killed and started again
from another working directory with the default, relative ``weir.state.dir``).

The ``kafka`` configurations read the words from a private single-node broker (a ``KafkaSpout``,
one record per word, 2 partitions, batches of ``--words`` + 1 records), count them in SQLite, and
(Storm, Trident) write every word exactly once to an output topic (``KafkaBolt`` /
``KafkaStateFactory``); lost / duplicated then also count the output topic as a ``read_committed``
consumer sees it, against the input. The driver reaches the broker only through the proxy (the
broker advertises the proxy's port on a listener of its own), so ``proxy_*`` cut or black-hole the
driver's every broker connection; ``store_kill`` / ``store_pause`` SIGKILL + restart / SIGSTOP the
broker.

Usage::

    python bench/faults.py                                   # 20 schedules × 9 configurations
    python bench/faults.py --dialects storm --stores sqlite,redis --schedules 2 --seed 7
    python bench/faults.py --faults driver_kill,proxy_cut --schedules 3
    python bench/faults.py --stores kafka --dialects storm,trident --schedules 3 --files 3 --words 60

Prints one table row per configuration and writes every schedule to ``bench/results/faults.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import machine, write_results  # noqa: E402
from tests.faults.proxy import FaultProxy  # noqa: E402
from tests.servers import KafkaBroker, PostgresServer, RedisServer, free_port  # noqa: E402

DRIVER = ROOT / "bench" / "_faults_driver.py"
DIALECTS = ("storm", "trident", "streams")
STORES = ("sqlite", "redis", "postgres", "kafka")
FAULTS = (
    "driver_kill",
    "worker_kill",
    "store_kill",
    "store_kill_nopersist",
    "store_pause",
    "proxy_delay",
    "proxy_blackhole",
    "proxy_cut",
    "checkpoint_delete",
    "other_cwd",
)
SERVER_FAULTS = {"store_kill", "store_pause", "proxy_delay", "proxy_blackhole", "proxy_cut"}
WEIR_ERRORS = (
    "WeirError",
    "ConfigError",
    "StateError",
    "FencedError",
    "SerializationError",
    "StoreUnavailableError",
    "TopologyError",
    "CheckpointError",
    "StateLossError",
    "SourceError",
    "SparkDiedError",
)


def applicable(store: str, fault: str) -> bool:
    """Whether ``fault`` can be injected with ``store`` (an embedded SQLite has no server to fault)."""
    if fault == "store_kill_nopersist":
        return store == "redis"
    if fault in SERVER_FAULTS:
        return store != "sqlite"
    if fault == "other_cwd":
        return store != "kafka"  # its SQLite store lives under the state directory: covered by sqlite
    return True


class ProxiedBroker(KafkaBroker):
    """A :class:`KafkaBroker` with a second listener, ``EXTERNAL``, whose advertised port is a proxy's.

    Clients that bootstrap through the proxy are told to reach the broker at the proxy's port, so
    every connection of theirs goes through it; the broker's own (inter-broker) traffic does not.
    """

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.external_port = free_port()
        self.advertised_port = 0  # set to the proxy's port before start()

    def write_config(self) -> None:
        """The base config plus the ``EXTERNAL`` listener."""
        super().write_config()
        lines = []
        for line in self.config_path.read_text().splitlines():
            key, _, value = line.partition("=")
            if key == "listeners":
                value += f",EXTERNAL://127.0.0.1:{self.external_port}"
            elif key == "advertised.listeners":
                value += f",EXTERNAL://127.0.0.1:{self.advertised_port}"
            elif key == "listener.security.protocol.map":
                value += ",EXTERNAL:PLAINTEXT"
            lines.append(f"{key}={value}")
        self.config_path.write_text("\n".join(lines) + "\n")


@dataclass
class Outcome:
    """One schedule's result."""

    dialect: str
    store: str
    seed: int
    fault: str
    at_txid: int
    runs: list[dict[str, Any]] = field(default_factory=list)
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    silent_hang: bool = False
    named_error: str | None = None
    unnamed_error: str | None = None
    fault_error: str | None = None
    output_lost: int = 0
    output_duplicated: int = 0
    seconds: float = 0.0

    @property
    def exact(self) -> bool:
        """Ended cleanly with exactly the input's counts."""
        return not (self.lost or self.duplicated or self.out_of_order or self.silent_hang) and not (
            self.named_error or self.unnamed_error
        )


# ---- the store of a schedule -----------------------------------------------------------------
class Store:
    """The schedule's store; redis and postgres are private servers reached through a :class:`FaultProxy`.

    Faults that restart the server run on the store's own *keeper* thread, which lives as long as the
    store: the test servers are started with ``PR_SET_PDEATHSIG``, which Linux fires when the
    **thread** that forked the server ends — a server restarted from a short-lived thread was killed
    again as soon as that thread returned, and never answered again.
    """

    def __init__(self, kind: str, workdir: Path, *, persist: bool = True) -> None:
        self.kind = kind
        self.workdir = workdir
        self.server: Any = None
        self.proxy: FaultProxy | None = None
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._keeper = threading.Thread(target=self._keep, name="store-keeper", daemon=True)
        self._keeper.start()
        self.fault_errors: list[str] = []
        if kind == "redis":
            self.server = RedisServer(workdir / "redis", appendonly=persist)
        elif kind == "postgres":
            self.server = PostgresServer()
        elif kind == "kafka":
            self.server = ProxiedBroker(workdir / "kafka")

    def __enter__(self) -> Store:
        if isinstance(self.server, ProxiedBroker):
            self.proxy = FaultProxy(self.server.external_port).__enter__()
            self.server.advertised_port = self.proxy.port
            self.server.start()
        elif self.server is not None:
            self.server.start()
            self.proxy = FaultProxy(self.server.port).__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._jobs.put(None)
        self._keeper.join(120)
        if self.proxy is not None:
            self.proxy.close()
        if self.server is not None:
            self.server.close()

    def _keep(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except Exception as exc:  # noqa: BLE001 - reported with the schedule
                self.fault_errors.append(f"{type(exc).__name__}: {exc}"[:300])

    def in_background(self, job: Callable[[], None]) -> None:
        """Run ``job`` on the keeper thread (after the jobs before it)."""
        self._jobs.put(job)

    @property
    def url(self) -> str:
        """The store's url as the driver sees it (through the proxy)."""
        if self.kind == "sqlite":
            return f"sqlite:///{self.workdir / 'store.db'}"
        assert self.proxy is not None
        if self.kind == "redis":
            return f"redis://127.0.0.1:{self.proxy.port}/0"
        if self.kind == "kafka":
            return f"127.0.0.1:{self.proxy.port}"  # the bootstrap address of the driver: the proxy
        return f"postgresql://postgres@127.0.0.1:{self.proxy.port}/postgres"

    def kill_and_restart(self, gap_s: float = 1.0) -> None:
        """SIGKILL the server, wait ``gap_s``, start it again (same port and data directory)."""
        self.server.kill()
        time.sleep(gap_s)
        self.server.start()

    def pause(self, seconds: float) -> None:
        """SIGSTOP the server for ``seconds`` (every process of it), then SIGCONT."""
        if self.kind == "postgres":
            self.server.freeze()
            time.sleep(seconds)
            self.server.thaw()
        else:
            os.kill(self.server.pid, signal.SIGSTOP)
            time.sleep(seconds)
            os.kill(self.server.pid, signal.SIGCONT)


# ---- one driver run ------------------------------------------------------------------------------
def _python_workers(session: int) -> list[int]:
    """Pids of Spark's forked Python workers in the driver's session."""
    found: list[tuple[int, int]] = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", encoding="utf-8", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{d}/cmdline", "rb") as fh:
                cmd = fh.read()
        except OSError:
            continue
        if int(fields[3]) == session and b"pyspark.daemon" in cmd:
            found.append((int(d), int(fields[1])))
    daemons = {pid for pid, _ in found}
    workers = [pid for pid, ppid in found if ppid in daemons]
    return workers or sorted(daemons)


def run_driver(
    args: list[str], cwd: Path, hang_timeout: float, on_txid: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """Run the driver once; ``on_txid(txid, pid)`` is called as batches commit. Its record."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    err_file = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=err_file,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    last_progress = [time.monotonic()]

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.strip()
            lines.append(line)
            last_progress[0] = time.monotonic()
            if line.startswith("TXID ") and on_txid is not None:
                on_txid(int(line.split()[1]), proc.pid)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    hung = False
    while proc.poll() is None:
        if time.monotonic() - last_progress[0] > hang_timeout:
            hung = True
            break
        time.sleep(0.5)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # nothing of the run is left behind (JVM, workers)
    except ProcessLookupError:
        pass
    proc.wait()
    t.join(5)
    err_file.seek(0)
    stderr = err_file.read()
    err_file.close()
    error = next((ln[6:] for ln in lines if ln.startswith("ERROR ")), None)
    return {
        "rc": proc.returncode,
        "hung": hung,
        "error": error,
        "done": "DONE" in lines,
        "last_txid": next((int(ln.split()[1]) for ln in reversed(lines) if ln.startswith("TXID ")), None),
        "stderr_tail": "" if "DONE" in lines else stderr[-1500:],
    }


# ---- one schedule --------------------------------------------------------------------------------
def write_input(directory: Path, files: int, words_per_file: int, rng: random.Random) -> Counter[str]:
    """Input files (one per batch, ordered by mtime); the Counter of their words."""
    directory.mkdir(parents=True, exist_ok=True)
    expected: Counter[str] = Counter()
    for f in range(files):
        words = [f"file{f}"] + [f"w{rng.randrange(60)}" for _ in range(words_per_file)]
        expected.update(words)
        tmp = directory / f".part-{f:03d}.tmp"
        tmp.write_text(" ".join(words) + "\n")
        os.utime(tmp, (1_700_000_000 + f, 1_700_000_000 + f))
        os.replace(tmp, directory / f"part-{f:03d}.txt")
    return expected


def write_topic(bootstrap: str, topic: str, files: int, words_per_file: int, rng: random.Random) -> Counter[str]:
    """The input of a ``kafka`` configuration: the words of :func:`write_input`, one record each, in a new topic.

    The output topic ``<topic>-out`` is created too (weir's Kafka writers refuse a missing one).
    """
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(topic, 2, 1), NewTopic(f"{topic}-out", 2, 1)]  # the input, and the exactly-once output
    for f in admin.create_topics(new, operation_timeout=60, request_timeout=60).values():
        f.result(120)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    expected: Counter[str] = Counter()
    for f in range(files):
        words = [f"file{f}"] + [f"w{rng.randrange(60)}" for _ in range(words_per_file)]
        expected.update(words)
        for w in words:
            producer.produce(topic, key=w, value=w)
            producer.poll(0)
    if producer.flush(120) != 0:
        msg = f"could not write the input topic {topic!r}"
        raise RuntimeError(msg)
    return expected


def read_topic(bootstrap: str, topic: str) -> Counter[str]:
    """The keys of every record of ``topic`` a ``read_committed`` consumer sees (an absent topic: none)."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    got: Counter[str] = Counter()
    if topic not in md.topics:
        return got
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "faults-check",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        for p in md.topics[topic].partitions:
            tp = TopicPartition(topic, p)
            low, high = c.get_watermark_offsets(tp, timeout=30, cached=False)
            if high <= low:  # empty: a consumer that reads nothing keeps its position at -1001 (no wait)
                continue
            c.assign([TopicPartition(topic, p, 0)])
            deadline = time.monotonic() + 60
            while c.position([tp])[0].offset < high and time.monotonic() < deadline:
                for m in c.consume(1000, 0.5):
                    if m.error() is None and m.key() is not None:
                        got[m.key().decode()] += 1
    finally:
        c.close()
    return got


def _out_of_order(store: Store, name: str) -> int:
    from weir.checkpoint.history import load_history
    from weir.state.config import parse_provider_config
    from weir.state.factory import open_backend

    provider = {"sqlite": "sqlite", "redis": "redis", "postgres": "postgres", "kafka": "sqlite"}[store.kind]
    url = f"sqlite:///{(store.workdir / 'state').resolve()}/store.db" if store.kind == "kafka" else store.url
    backend = open_backend(
        parse_provider_config({"topology.state.provider": provider, "topology.state.provider.config": {"url": url}})
    )
    try:
        entries = load_history(backend, f"$checkpointspout-{name}")
    finally:
        backend.close()
    bad, top = 0, None
    for e in entries:
        if e.kind == "batch" and e.status == "committed":
            if top is not None and e.txid <= top:
                bad += 1
            top = e.txid if top is None else max(top, e.txid)
    return bad


def run_schedule(
    dialect: str, store_kind: str, seed: int, fault: str, at_txid: int, opts: argparse.Namespace
) -> Outcome:
    """Run one schedule (see the module docs) and count."""
    out = Outcome(dialect, store_kind, seed, fault, at_txid)
    started = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix=f"weir-faults-{dialect}-{store_kind}-"))
    try:
        rng = random.Random(seed)
        name = f"f{seed}"
        with Store(store_kind, base, persist=fault != "store_kill_nopersist") as store:
            if store_kind == "kafka":
                inp = f"in{seed}"
                expected = write_topic(store.server.bootstrap, inp, opts.files, opts.words, rng)
                os.environ["WEIR_FAULTS_BATCH"] = str(opts.words + 1)  # about one "file" a batch
                os.environ["WEIR_FAULTS_WORDS"] = json.dumps(sorted(expected))
            else:
                inp = str(base / "in")
                expected = write_input(base / "in", opts.files, opts.words, rng)
            relative = fault == "other_cwd"
            (base / "a").mkdir()
            (base / "b").mkdir()
            state_dir = "weir-state" if relative else str(base / "state")
            args = [dialect, store_kind, store.url, state_dir, inp, name]
            injected = threading.Event()
            kill_driver = fault in ("driver_kill", "checkpoint_delete", "other_cwd")

            def inject(txid: int, pid: int) -> None:
                if injected.is_set() or txid < at_txid:
                    return
                injected.set()
                if kill_driver:
                    os.killpg(pid, signal.SIGKILL)
                elif fault == "worker_kill":
                    for w in _python_workers(pid)[:1]:
                        os.kill(w, signal.SIGKILL)
                elif fault in ("store_kill", "store_kill_nopersist"):
                    store.in_background(store.kill_and_restart)
                elif fault == "store_pause":
                    store.in_background(lambda: store.pause(opts.pause))
                else:
                    proxy = store.proxy
                    assert proxy is not None
                    if fault == "proxy_cut":
                        proxy.cut()
                    else:
                        (proxy.delay(0.3) if fault == "proxy_delay" else proxy.blackhole())
                        threading.Timer(opts.pause, proxy.restore).start()

            out.runs.append(run_driver(args, base / "a", opts.hang_timeout, inject))
            if fault == "checkpoint_delete":
                shutil.rmtree(base / "state" / "spark", ignore_errors=True)
            cwd = base / ("b" if relative else "a")
            for _ in range(opts.recoveries):
                last = out.runs[-1]
                if last["hung"] or last["done"]:
                    break
                out.runs.append(run_driver(args, cwd, opts.hang_timeout))
            last = out.runs[-1]
            out.silent_hang = any(r["hung"] for r in out.runs)
            if not out.silent_hang and not last["done"]:
                err = last["error"] or ""
                if err.split(":", 1)[0] in WEIR_ERRORS:
                    out.named_error = err[:300]
                else:
                    out.unnamed_error = (err or last["stderr_tail"])[-300:]
            else:
                counted = subprocess.run(
                    [sys.executable, str(DRIVER), *args, "--count"],
                    cwd=cwd,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                got = Counter({k: int(v) for k, v in json.loads(counted.strip().splitlines()[-1]).items()})
                out.lost = sum((expected - got).values())
                out.duplicated = sum((got - expected).values())
                if store_kind == "kafka" and dialect != "streams":  # the output topic, exactly once too
                    published = read_topic(store.server.bootstrap, f"{inp}-out")
                    out.output_lost = sum((expected - published).values())
                    out.output_duplicated = sum((published - expected).values())
                    out.lost += out.output_lost
                    out.duplicated += out.output_duplicated
                out.out_of_order = _out_of_order(store, name)
            out.fault_error = "; ".join(store.fault_errors) or None  # the fault itself failed (a harness bug)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out.seconds = round(time.monotonic() - started, 1)
    return out


def schedules(
    dialect: str, store: str, n: int, seed: int, faults: list[str], files: int
) -> Iterator[tuple[int, str, int]]:
    """``n`` seeded (seed, fault, txid) triples of one configuration."""
    rng = random.Random(f"{seed}/{dialect}/{store}")
    menu = [f for f in faults if applicable(store, f)]
    for i in range(n):
        yield seed * 1000 + i, rng.choice(menu), rng.randint(1, max(1, files - 1))


def table(rows: list[dict[str, Any]]) -> str:
    """The per-configuration table."""
    head = ["dialect", "store", "schedules", "exact", "lost", "duplicated", "out-of-order", "silent-hang",
            "named-error", "unnamed-error"]  # fmt: skip
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        lines.append(" | ".join(str(r[h.replace("-", "_")]) for h in head))
    return "\n".join(lines)


def summarize(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    """One row per configuration."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for o in outcomes:
        r = rows.setdefault(
            (o.dialect, o.store),
            {"dialect": o.dialect, "store": o.store, "schedules": 0, "exact": 0, "lost": 0, "duplicated": 0,
             "out_of_order": 0, "silent_hang": 0, "named_error": 0, "unnamed_error": 0},
        )  # fmt: skip
        r["schedules"] += 1
        r["exact"] += o.exact
        r["lost"] += o.lost
        r["duplicated"] += o.duplicated
        r["out_of_order"] += o.out_of_order
        r["silent_hang"] += o.silent_hang
        r["named_error"] += o.named_error is not None
        r["unnamed_error"] += o.unnamed_error is not None
    return list(rows.values())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dialects", default=",".join(DIALECTS))
    p.add_argument("--stores", default=",".join(STORES))
    p.add_argument("--faults", default=",".join(FAULTS))
    p.add_argument("--schedules", type=int, default=20, help="schedules per configuration (default 20)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--files", type=int, default=5, help="input files, one micro-batch each (default 5)")
    p.add_argument("--words", type=int, default=200, help="words per file (default 200)")
    p.add_argument("--pause", type=float, default=5.0, help="seconds of a pause or black hole (default 5)")
    p.add_argument("--recoveries", type=int, default=3, help="clean runs after the faulted one, at most")
    p.add_argument("--hang-timeout", type=float, default=300.0, help="seconds without progress = a hang")
    p.add_argument("--out", default="faults", help="results file name in bench/results (default faults)")
    opts = p.parse_args(argv)
    faults = [f for f in opts.faults.split(",") if f]
    unknown = set(faults) - set(FAULTS)
    if unknown:
        p.error(f"unknown fault(s) {sorted(unknown)}; known: {', '.join(FAULTS)}")
    outcomes: list[Outcome] = []
    for dialect in opts.dialects.split(","):
        for store in opts.stores.split(","):
            for seed, fault, at in schedules(dialect, store, opts.schedules, opts.seed, faults, opts.files):
                o = run_schedule(dialect, store, seed, fault, at, opts)
                outcomes.append(o)
                verdict = "exact" if o.exact else (
                    f"lost={o.lost} dup={o.duplicated} ooo={o.out_of_order} hang={o.silent_hang} "
                    f"named={o.named_error!r} unnamed={o.unnamed_error!r}"
                )  # fmt: skip
                print(f"{dialect:8} {store:8} seed={seed} {fault}@{at}: {verdict} ({o.seconds} s)", flush=True)
    rows = summarize(outcomes)
    print()
    print(table(rows))
    path = write_results(
        opts.out,
        {"machine": machine(), "options": vars(opts), "rows": rows, "schedules": [asdict(o) for o in outcomes]},
    )
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
