"""Supervision: transient failures restart the query (bounded, with backoff) and the run ends exact.

The failures are real: a Python worker process is SIGKILLed in the middle of a batch, and the
Redis store is stopped and started again while the topology runs. A permanent error (the user's
bolt failing past ``weir.batch.max.retries``) still stops the run at once with the named error.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.servers import RedisServer, wait_until
from weir.demo import read_counts
from weir.errors import ConfigError, FencedError, TopologyError
from weir.runtime.spark.supervision import MAX_BACKOFF_MS, RestartPolicy, transient_reason
from weir.sources import FileSpout
from weir.topology import BasicBolt, Fields, StatefulBolt, TopologyBuilder, Values

pytestmark = [pytest.mark.spark]


def _write_inputs(directory: Path, files: int, start: int = 0) -> Counter[str]:
    directory.mkdir(parents=True, exist_ok=True)
    expected: Counter[str] = Counter()
    for f in range(start, start + files):
        words = [f"file{f}"] + [f"w{(f * 7 + i) % 13}" for i in range(30)]
        expected.update(words)
        tmp = directory / f".part-{f:03d}.tmp"
        tmp.write_text(" ".join(words) + "\n")
        os.utime(tmp, (1_700_000_000 + f, 1_700_000_000 + f))  # Spark orders files by mtime
        os.replace(tmp, directory / f"part-{f:03d}.txt")
    return expected


class Split(BasicBolt):
    """Splits lines; on a line with ``stall_word`` it records its pid and waits to be killed (once)."""

    def __init__(self, marker: str = "", stall_word: str = "") -> None:
        self.marker = marker
        self.stall_word = stall_word

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("word"))

    def execute(self, tup: Any, collector: Any) -> None:
        line = tup.get_string(0)
        if self.stall_word and self.stall_word in line.split() and not os.path.exists(self.marker):
            with open(self.marker + ".tmp", "w") as fh:
                fh.write(str(os.getpid()))
            os.replace(self.marker + ".tmp", self.marker)
            time.sleep(60)  # the test SIGKILLs this Python worker meanwhile
        for w in line.split():
            collector.emit(Values(w))


class Count(StatefulBolt):
    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("word", "count"))

    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute(self, tup: Any) -> None:
        w = tup.get_string(0)
        n = self.counts.get(w, 0) + 1
        self.counts.put(w, n)
        self.collector.emit(Values(w, n), anchors=[tup])
        self.collector.ack(tup)


class Broken(BasicBolt):
    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("word"))

    def execute(self, tup: Any, collector: Any) -> None:
        msg = "this bolt always fails"
        raise ValueError(msg)


def _topology(inp: Path, split: BasicBolt) -> Any:
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(inp), files_per_batch=1))
    b.set_bolt("split", split, 1).shuffle_grouping("lines")
    b.set_bolt("count", Count(), 2).fields_grouping("split", Fields("word"))
    return b.create_topology()


# ---- the policy and the classification (no Spark) --------------------------------------------
def test_backoff_doubles_and_is_capped() -> None:
    p = RestartPolicy(max_restarts=10, backoff_ms=500)
    assert [p.delay_s(n) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert p.delay_s(30) == MAX_BACKOFF_MS / 1000


def test_transient_and_permanent_failures_are_told_apart() -> None:
    import redis.exceptions as rexc

    assert transient_reason(rexc.ConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused."))
    spark_job = TopologyError(
        "component '<spark>' task -1 failed txid 3", component="<spark>",
        remote_traceback="org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)",
    )  # fmt: skip
    assert transient_reason(spark_job)
    wrapped = TopologyError("txid 4: commit failed")
    wrapped.__cause__ = ConnectionRefusedError(111, "Connection refused")
    assert transient_reason(wrapped)
    user = TopologyError("component 'split' task 0 failed txid 3 4 times: ValueError: x", component="split")
    assert transient_reason(user) is None
    assert transient_reason(FencedError("a newer driver took over")) is None
    assert transient_reason(ConfigError("unknown provider")) is None
    assert transient_reason(ValueError("bad value")) is None


@pytest.mark.parametrize(("key", "value"), [("weir.restart.max", -1), ("weir.restart.backoff.ms", "soon")])
def test_restart_keys_are_validated_at_submit(key: str, value: Any, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=key):
        weir.submit("sv-bad", {key: value, "weir.state.dir": str(tmp_path)}, _topology(tmp_path, Split()))


# ---- real failures ---------------------------------------------------------------------------
@pytest.mark.slow
def test_killed_python_worker_restarts_the_query_and_counts_stay_exact(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="weir.runtime")
    inp = tmp_path / "input"
    expected = _write_inputs(inp, 3)
    marker = tmp_path / "stalled.pid"
    conf = {
        "weir.state.dir": str(tmp_path / "state"),
        "weir.batch.max.retries": 0,  # the failed batch is not retried in place: the query restarts
        "weir.restart.backoff.ms": 200,
    }
    run = weir.submit("sv-kill", conf, _topology(inp, Split(str(marker), stall_word="file1")), spark)
    killed: list[int] = []

    def killer() -> None:
        wait_until(marker.exists, timeout=300, what="the batch of txid 2 to start")
        pid = int(marker.read_text())
        os.kill(pid, signal.SIGKILL)  # the Python worker running the task dies mid-batch
        killed.append(pid)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    status = run.process_available(timeout=600)
    t.join(5)
    assert killed, "the worker was never killed"
    assert status.restarts >= 1, status
    assert status.state == "stopped" and status.last_txid == 3, status
    assert read_counts(conf, "sv-kill") == expected
    restarts = [r.getMessage() for r in caplog.records if "transient failure" in r.getMessage()]
    assert restarts and "restart 1 of at most 5" in restarts[0], restarts


@pytest.mark.slow
def test_redis_store_stopped_and_restarted_mid_run_finishes_exact(spark: Any, tmp_path: Path) -> None:
    inp = tmp_path / "input"
    expected = _write_inputs(inp, 2)
    with RedisServer(tmp_path / "redis", appendonly=True) as server:
        conf = {
            "weir.state.dir": str(tmp_path / "state"),
            "topology.state.provider.config": {"url": server.url},
            "topology.state.checkpoint.interval.ms": 300,
            "weir.restart.backoff.ms": 500,
            "weir.restart.max": 20,
        }
        run = weir.submit("sv-redis", conf, _topology(inp, Split()), spark).start()
        try:
            wait_until(lambda: run.status().last_txid == 2, timeout=300, what="the first two batches")
            server.stop()  # the store goes away...
            expected += _write_inputs(inp, 3, start=2)  # ...while new input arrives
            # down until the run failed on it and was restarted at least once (asserted below; a fixed 6 s before)
            wait_until(lambda: run.status().restarts >= 1, timeout=300, what="a restart while Redis is down")
            server.start()  # ...and comes back on the same port, with its data (AOF)
            wait_until(
                lambda: run.status().last_txid == 5 and run.status().state == "running",
                timeout=300,
                what="the batches written while Redis was down",
            )
            status = run.status()
        finally:
            run.stop()
        assert status.restarts >= 1, status
        assert read_counts(conf, "sv-redis") == expected


@pytest.mark.slow
def test_permanent_error_stops_the_run_without_restarts(spark: Any, tmp_path: Path) -> None:
    inp = tmp_path / "input"
    _write_inputs(inp, 1)
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.batch.max.retries": 1, "weir.restart.backoff.ms": 100}
    run = weir.submit("sv-perm", conf, _topology(inp, Broken()), spark)
    with pytest.raises(TopologyError, match=r"component 'split' task 0 failed txid 1 2 times.*always fails") as info:
        run.process_available(timeout=600)
    assert info.value.component == "split"
    assert run.status().restarts == 0
    assert run.status().state == "failed"
