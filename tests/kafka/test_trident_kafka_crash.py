"""SIGKILL a driver whose Trident topology writes to Kafka through ``KafkaStateFactory`` at each step
of the batch protocol, restart it, and check that a ``read_committed`` consumer of the output topic
sees every input record exactly once.

The steps: inside the state partition after the batch's records are queued but before they are
published (``trident_after_multi_update``); after the partition published its Kafka transaction with
the marker but before the coordinator knows (``trident_after_partition_commit``: the replay must send
nothing); after the job, before COMMITTING (``after_prepared``); after COMMITTED, before Spark commits
its offsets (``after_committed``: the batch replays and is skipped).

Two copies of the topology read the same input topic side by side in one driver per step (each its
own output topic, transactional id and state), each killed at its own point (the crash barrier): the
first at the state partition's two steps, the second at the coordinator's two, then both drain: 3
driver starts instead of 5."""

from __future__ import annotations

import json
import signal
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.crash._harness import run_driver
from tests.kafka.conftest import create_topic, produce
from tests.kafka.test_kafka_e2e import SPARK_OVERLOAD, read_committed
from tests.servers import KafkaBroker
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.slow, pytest.mark.services]

DRIVER = Path(__file__).with_name("trident_kafka_driver.py")
N = 200  # 5 batches of 40 (trident_kafka_driver.MAX_RECORDS)

CHAIN = [
    ("trident_after_multi_update@2", "PREPARING", 2),
    ("trident_after_partition_commit@3", "PREPARING", 3),
    ("after_prepared@4", "PREPARING", 4),
    ("after_committed@5", "COMMITTED", 5),
]


def _record(state_dir: Path, name: str) -> dict[str, object]:
    backend = StateFactory.from_url(f"sqlite:///{state_dir / 'state.db'}").backend
    data = backend.get(f"$checkpointspout-{name}", b"__state")
    assert data is not None
    return dict(json.loads(data))


def _run(args: list[str], crash: dict[str, str] | None, expect_rc: int) -> str:
    for _ in range(5):  # again when Spark could not even start a Python worker (an overloaded machine)
        res = run_driver([str(DRIVER), *args], crash, timeout=600)
        if res.returncode == expect_rc or SPARK_OVERLOAD not in res.stderr:
            break
    assert res.returncode == expect_rc, f"crash={crash}: rc={res.returncode}\n{res.stderr[-4000:]}"
    return res.stdout


@pytest.mark.timeout(1500)
def test_sigkill_at_each_step_publishes_every_record_once(tmp_path: Path, kafka_broker: KafkaBroker) -> None:
    b = kafka_broker.bootstrap
    src = create_topic(b, 2)
    produce(b, src, [(f"k{i % 7}", f"e{i}") for i in range(N)])
    run = uuid.uuid4().hex[:6]
    # copy name -> (its steps of CHAIN, its state directory, its output topic)
    copies = {
        f"tkcrash_{run}_a": (CHAIN[:2], tmp_path / "state-a", create_topic(b, 1)),
        f"tkcrash_{run}_b": (CHAIN[2:], tmp_path / "state-b", create_topic(b, 1)),
    }
    args: list[str] = []
    for name, (_, state_dir, out) in copies.items():
        args += [str(state_dir), b, src, out, f"tk-{name}", name]
    for step in range(2):
        crash = {name: chain[step][0] for name, (chain, _, _) in copies.items()}
        stdout = _run(args, crash, -signal.SIGKILL)
        assert "DONE" not in stdout
        for name, (chain, state_dir, _) in copies.items():
            point, phase, txid = chain[step]
            rec = _record(state_dir, name)
            assert (rec["phase"], rec["txid"]) == (phase, txid), f"{name}: after the crash at {point}: {rec}"
    stdout = _run(args, None, 0)
    for name, (_, _, out) in copies.items():
        assert f"{name} DONE txid=5 " in stdout, stdout
        published = read_committed(b, out)
        assert Counter(v for _, v in published) == Counter(f"e{i}" for i in range(N)), name  # each exactly once
        assert all(k == f"k{int(v[1:]) % 7}" for k, v in published), name
