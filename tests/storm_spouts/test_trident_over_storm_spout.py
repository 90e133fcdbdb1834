"""Trident over a Storm spout (RedisQueueSpout): batches from the spout log, SIGKILLed at its steps.

A Trident count per message id in an opaque PostgreSQL map state reads a Redis reliable queue. The
driver (tests/crash/trident_spout_driver.py) is SIGKILLed after a batch's spout log entry is written
(before any state saw it) and between the acks of a committed batch, then runs to the end. Every
message is counted exactly once, acked on the broker exactly once and only after its count was
committed, and nothing is left in the queue, the processing lists or the spout log. The same chain
runs with the driver a Spark Connect client (the spout thread, its log and the coordinator are in the
client, which is what is killed; the server lives on).
"""

from __future__ import annotations

import json
import signal
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.crash._harness import run_driver
from tests.servers import RedisServer
from tests.storm_spouts._topology import trident_counts

pytestmark = [pytest.mark.crash, pytest.mark.spark, pytest.mark.slow, pytest.mark.services]

DRIVER = str(Path(__file__).resolve().parents[1] / "crash" / "trident_spout_driver.py")
N = 24
#: the spout log's steps: logged, the batch not run; COMMITTED, between two acks
CHAIN = ["after_spout_log@2", "between_spout_acks@3"]


@pytest.mark.timeout(1800)  # three driver starts: minutes on a loaded machine
@pytest.mark.parametrize("where", ["classic", "connect"])
def test_a_trident_count_over_a_redis_queue_spout_is_exact_through_sigkills(
    redis_server: Any, postgres_url: str, tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    import redis

    from weir.state.factory import StateFactory

    # its own name per run: the store, the record Redis and the spout log are shared with the other variant's run
    name = f"trident_spout_{where}_{uuid.uuid4().hex[:6]}"
    table = f"ts_{uuid.uuid4().hex[:8]}"
    with RedisServer(tmp_path / "broker", appendonly=True) as broker:
        url = f"redis://127.0.0.1:{broker.port}/0"
        c = redis.Redis.from_url(url)
        for i in range(N):
            c.lpush("lines", f"m{i} w{i % 3}")
        record = f"redis://127.0.0.1:{redis_server.port}/0"
        args = [DRIVER, url, "lines", record, postgres_url, table, str(tmp_path / "state"), name, str(N)]
        if where == "connect":  # a Spark Connect client: the spout, its log and the coordinator are the client's
            args.append(request.getfixturevalue("spark_connect_url"))
        for crash in CHAIN:
            res = run_driver(args, crash, 400)
            assert res.returncode == -signal.SIGKILL, (
                f"{crash}: the driver was not killed (rc {res.returncode}):\n{res.stdout}\n{res.stderr[-4000:]}"
            )
        res = run_driver(args, None, 400)
        assert "DONE" in res.stdout, f"the last run did not finish:\n{res.stdout}\n{res.stderr[-4000:]}"
        ids = [f"m{i}" for i in range(N)]
        assert trident_counts(postgres_url, table, ids) == dict.fromkeys(ids, 1), "not counted exactly once"
        rec = redis.Redis.from_url(record)
        acks = [json.loads(x) for x in rec.lrange(f"{name}:acks", 0, -1)]
        assert Counter(m for m, _ in acks) == Counter(dict.fromkeys(ids, 1)), f"broker acks not exactly once: {acks}"
        assert all(committed == 1 for _, committed in acks), f"acked before the count was committed: {acks}"
        assert c.llen("lines") == 0
        leftover = {k.decode(): c.llen(k) for k in c.keys("lines:processing:*")}
        assert not any(leftover.values()), f"messages left un-acked in processing lists: {leftover}"
        log = [json.loads(v) for _k, v in StateFactory.from_url(postgres_url).backend.scan(f"$spoutlog-{name}")]
        # the driver stops once every id is counted and acked; a batch the spout driver had logged by then
        # (empty: nothing was left to poll) may not have run: it replays empty at the next start
        in_flight = [e for e in log if not e["committed"]]
        assert all(not e["tuples"] for e in in_flight) and len(in_flight) <= 1, (
            f"uncommitted spout log entries left: {log}\n{res.stdout}"
        )
        c.close()
