"""End to end, exactly once through Kafka: a producer writes N keyed events into a topic of a 3-broker
cluster (replication 3, min.insync.replicas=2) while a driver runs a Storm stateful count and an
exactly-once KafkaBolt output, and a Trident persistent_aggregate (state in PostgreSQL). The driver
is SIGKILLed at protocol steps and at seeded random moments; the leader of the input partition is
SIGKILLed and restarted mid-run. Final counts are exact, no prepared txid is left, and the output
topic read ``read_committed`` holds every event exactly once."""

from __future__ import annotations

import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.crash._harness import run_driver
from tests.crash.test_sources_e2e import Driver, storm_counts, trident_counts
from tests.kafka.conftest import HAVE_CLIENT, create_topic
from tests.servers import KafkaCluster, PostgresDatabase, require_service
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.slow, pytest.mark.services]

DRIVER = Path(__file__).with_name("kafka_driver.py")
SEED = int(os.environ.get("WEIR_E2E_SEED", "20240611"))
N = 600
KEYS = 12


class Producer(threading.Thread):
    """Writes events ``e<i>`` keyed ``k<i % KEYS>`` (idempotent producer: retries never duplicate)."""

    def __init__(self, bootstrap: str, topic: str, seconds: float) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.pause = bootstrap, topic, seconds / N
        self.expected: Counter[str] = Counter(f"k{i % KEYS}" for i in range(N))
        self.errors: list[str] = []

    def run(self) -> None:
        from confluent_kafka import Producer as P

        p = P({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "message.timeout.ms": 300000})

        def done(err: object, _m: object) -> None:
            if err is not None:
                self.errors.append(str(err))

        for i in range(N):
            p.produce(self.topic, key=f"k{i % KEYS}", value=f"e{i}", on_delivery=done)
            p.poll(0)
            time.sleep(self.pause)
        assert p.flush(300) == 0


class KafkaDriver(Driver):
    """The shared crash-test driver harness, running ``kafka_driver.py``."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(DRIVER), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.out: list[str] = []
        self.err: list[str] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.out, True), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.err, False), daemon=True).start()


#: Spark's own start-up failure on an overloaded machine (its 10 s accept timeout for a new Python
#: worker): the run did nothing, so it is run again; anything else fails the test
SPARK_OVERLOAD = "Python worker failed to connect back"


def run_driver_retrying(args: list[str], crash: str | None, expect_rc: int) -> subprocess.CompletedProcess[str]:
    """``run_driver``, again (at most four times) when Spark could not start a Python worker in time."""
    for _ in range(5):
        res = run_driver(args, crash, timeout=900)
        if res.returncode == expect_rc or SPARK_OVERLOAD not in res.stderr:
            return res
    return res


def read_committed(bootstrap: str, topic: str) -> list[tuple[str, str]]:
    """Every record of ``topic`` as a read_committed consumer sees it."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "check",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    out: list[tuple[str, str]] = []
    try:
        for p in md.topics[topic].partitions:
            tp = TopicPartition(topic, p)
            low, high = c.get_watermark_offsets(tp, timeout=30, cached=False)
            if high <= low:
                # an empty partition: nothing to read, and a consumer that reads nothing keeps its position
                # at OFFSET_INVALID (-1001) forever, so the loop below would wait out its deadline
                continue
            c.assign([TopicPartition(topic, p, 0)])
            deadline = time.monotonic() + 60
            while c.position([tp])[0].offset < high and time.monotonic() < deadline:
                for m in c.consume(1000, 0.5):
                    if m.error() is None:
                        out.append((m.key().decode(), m.value().decode()))
    finally:
        c.close()
    return out


@pytest.mark.timeout(1800)  # four driver starts and a 3-node cluster: minutes on a loaded 2-core machine
def test_exactly_once_through_kafka_with_driver_and_leader_crashes(
    tmp_path: Path, postgres_database: PostgresDatabase
) -> None:
    require_service(HAVE_CLIENT, "confluent-kafka is not installed")
    rng = random.Random(SEED)
    name = f"ke2e_{uuid.uuid4().hex[:6]}"
    with KafkaCluster(workdir=tmp_path / "kafka") as cluster:
        topic = create_topic(cluster.bootstrap, 3, 3, name="events")
        out_topic = create_topic(cluster.bootstrap, 2, 3, name="counted")
        producer = Producer(cluster.bootstrap, topic, seconds=12)
        args = [str(tmp_path / "state"), postgres_database.url, cluster.bootstrap, topic, out_topic, name]
        env = {k: v for k, v in os.environ.items() if k not in ("WEIR_CRASH_AT", "WEIR_CRASH_PGID")}
        env["PYSPARK_PYTHON"] = sys.executable
        producer.start()

        # 1., 2. crashes at protocol steps: COMMITTING stored (nothing published); a KafkaBolt task
        # published its Kafka transaction but the state is not committed — both rolled forward later
        for crash in ("after_committing@3", "kafka_after_publish@5"):
            res = run_driver_retrying([str(DRIVER), "run", *args], crash, -signal.SIGKILL)
            assert res.returncode == -signal.SIGKILL, f"{crash}: should have crashed itself\n{res.stderr[-4000:]}"

        # 3. SIGKILL at a seeded random moment while the input partition's leader is SIGKILLed and restarted
        d = KafkaDriver(["run", *args], env)
        first = d.wait_for("BATCH", 300)
        assert first is not None, f"the driver made no progress\n{d.stderr_tail()}"
        leader = cluster.broker(cluster.leader_of(topic, 0))
        time.sleep(rng.uniform(0.5, 2.0))
        leader.kill()
        time.sleep(rng.uniform(1.5, 3.0))
        leader.start()
        time.sleep(rng.uniform(1.0, 3.0))
        ended_by_itself = d.proc.poll() is not None
        d.kill()
        assert ended_by_itself or d.proc.returncode == -signal.SIGKILL

        for node in cluster.brokers:  # every node is up again (a broker that died is a failure, with its log)
            assert node.running(), f"kafka node {node.node_id} is not running: {node.log_tail()}"
        producer.join(300)
        assert not producer.is_alive() and not producer.errors, producer.errors
        # 4. drain: what the crashes left is recovered; everything produced is counted and published once
        res = run_driver_retrying([str(DRIVER), "drain", *args], None, 0)
        assert res.returncode == 0, res.stderr[-4000:]
        assert res.stdout.count("DONE") == 2
        assert storm_counts(postgres_database.url, name) == producer.expected
        provider = StateFactory.from_url(postgres_database.url)
        for i in range(2):
            assert provider.backend.txids(f"{name}_storm-out-{i}").prepared is None
        assert trident_counts(postgres_database.url, f"{name}_trident") == producer.expected
        published = read_committed(cluster.bootstrap, out_topic)
        assert Counter(v for _, v in published) == Counter(f"e{i}" for i in range(N))
        assert all(k == f"k{int(v[1:]) % KEYS}" for k, v in published)
