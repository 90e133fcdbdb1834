"""The store is the source of truth: a Spark checkpoint that does not match it never re-counts silently,
and a store that loses data while the topology runs stops it with a named error.

Issue 25, reproductions 1 and 2, against real servers: the Spark checkpoint removed between runs
(SQLite and Redis), a run started from another working directory, a Redis without persistence
emptied or SIGKILLed and restarted mid-run, a supervised restart after the store was emptied, and
a driver SIGKILLed between Spark's offset log and the COMMITTED record. Each ends exact or in
:class:`StateLossError`, with nothing written after it.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from weir.checkpoint.coordinator import CheckpointStore
from weir.demo import read_counts, wordcount_topology
from weir.errors import StateLossError
from weir.state.config import parse_provider_config, spark_checkpoint_location
from weir.state.factory import close_backends, open_backend

from ..crash._harness import run_driver
from ..servers import RedisServer, redis_command
from ..sources._spouts import Numbers, count_topology

pytestmark = pytest.mark.spark

DRIVER = Path(__file__).resolve().parents[1] / "crash" / "resume_driver.py"


def _available(log_dir: Path, n: int) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / "available").write_text(str(n), encoding="utf-8")


def _expected(n: int) -> Counter[str]:
    return Counter(f"k{i % 7}" for i in range(n))


def _numbers_run(spark: Any, conf: dict[str, Any], log_dir: Path, name: str) -> Any:
    spout = Numbers(100_000, keys=7, max_records=100, log_dir=str(log_dir))
    return weir.submit(name, conf, count_topology({"numbers": spout}), spark=spark)


def _record(conf: dict[str, Any], name: str) -> Any:
    close_backends()
    return CheckpointStore(open_backend(parse_provider_config(conf)), name).load()


def test_checkpoint_removed_the_spouts_resume_from_the_store(spark: Any, tmp_path: Path) -> None:
    """Redis here; SQLite in :func:`test_driver_killed_after_committing_then_checkpoint_lost_resumes_exactly`."""
    log_dir = tmp_path / "log"
    conf: dict[str, Any] = {"weir.state.dir": str(tmp_path / "state"), "weir.spark.master": "local[2]"}
    server = RedisServer()
    try:
        server.start()
        conf["topology.state.provider.config"] = {"url": server.url}
        _available(log_dir, 250)
        assert _numbers_run(spark, conf, log_dir, "resume").process_available().last_txid == 3
        rec = _record(conf, "resume")
        assert rec.last_committed == 3 and rec.offsets == {"numbers": {"n": 250}}
        shutil.rmtree(spark_checkpoint_location("resume", conf))  # Spark's checkpoint is gone
        _available(log_dir, 420)
        close_backends()
        status = _numbers_run(spark, conf, log_dir, "resume").process_available()
        assert status.last_txid == 5  # the txids continue after the store's
        assert read_counts(conf, "resume") == _expected(420)  # nothing read twice, nothing skipped
    finally:
        close_backends()
        server.close()


def test_checkpoint_removed_a_file_spout_is_refused_with_both_txids(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "part-00000.txt").write_text("alpha beta alpha\n", encoding="utf-8")
    (corpus / "part-00001.txt").write_text("beta\n", encoding="utf-8")
    with RedisServer() as server:
        conf = {
            "weir.state.dir": str(tmp_path / "state"),
            "weir.spark.master": "local[2]",
            "topology.state.provider.config": {"url": server.url},
        }
        topo = wordcount_topology(str(corpus), parallelism=2, files_per_batch=1)
        assert weir.submit("files", conf, topo, spark=spark).process_available().last_txid == 2
        shutil.rmtree(spark_checkpoint_location("files", conf))
        close_backends()
        with pytest.raises(StateLossError) as info:
            weir.submit("files", conf, topo, spark=spark)
        text = str(info.value)
        assert "topology 'files': committed state was lost" in text
        assert "holds committed txid 2" in text and "is missing or new" in text
        assert "lines (FileSpout) cannot start from offsets kept in the store" in text
        assert "--accept-state-loss" in text and "reset explicitly" in text
        assert read_counts(conf, "files") == Counter({"alpha": 2, "beta": 2})  # nothing was written
        close_backends()


def test_a_run_from_another_working_directory_continues_exactly(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WEIR_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "part-00000.txt").write_text("alpha beta alpha\n", encoding="utf-8")
    with RedisServer() as server:
        conf = {"weir.spark.master": "local[2]", "topology.state.provider.config": {"url": server.url}}
        for n, cwd in enumerate(("a", "b")):
            (tmp_path / cwd).mkdir()
            monkeypatch.chdir(tmp_path / cwd)
            if n:
                (corpus / "part-00001.txt").write_text("beta gamma\n", encoding="utf-8")
            topo = wordcount_topology(str(corpus), parallelism=2, files_per_batch=1)
            assert weir.submit("cwd", conf, topo, spark=spark).process_available().last_txid == n + 1
            close_backends()
        # the checkpoint lives with the store, not in the working directory
        assert spark_checkpoint_location("cwd", conf).startswith(str(tmp_path / "xdg" / "weir" / "spark"))
        assert not (tmp_path / "a" / "weir-state").exists()
        assert read_counts(conf, "cwd") == Counter({"alpha": 2, "beta": 2, "gamma": 1})
        close_backends()


def _run_until_lost(spark: Any, conf: dict[str, Any], log_dir: Path, name: str, lose: Any) -> str:
    """Run continuously, make the store lose everything once txid 2 committed; the run's error text."""
    _available(log_dir, 100_000)
    run = _numbers_run(spark, conf, log_dir, name)
    run.start()
    try:
        deadline = time.monotonic() + 480  # generous: Python workers start slowly on a loaded machine
        while (run.status().last_txid or 0) < 2:
            assert time.monotonic() < deadline, f"no progress: {run.status()}"
            assert run.status().state != "failed", run.status().error
            time.sleep(0.1)
        lose()
        with pytest.raises(StateLossError) as info:
            run.await_termination(480)
    finally:
        run.stop()
    return str(info.value)


def _nothing_after(conf: dict[str, Any], name: str) -> None:
    """The emptied store got no coordinator record and no committed count after the loss."""
    assert _record(conf, name) is None
    backend = open_backend(parse_provider_config(conf))
    assert [backend.count(f"{name}-count-{i}") for i in range(2)] == [0, 0]
    close_backends()


@pytest.mark.timeout(1200)
def test_redis_emptied_while_running_stops_with_state_loss(spark: Any, tmp_path: Path) -> None:
    with RedisServer() as server:
        conf = {
            "weir.state.dir": str(tmp_path / "state"),
            "weir.spark.master": "local[2]",
            "topology.state.provider.config": {"url": server.url},
            "topology.state.checkpoint.interval.ms": 100,
        }
        text = _run_until_lost(spark, conf, tmp_path / "log", "flushed", lambda: redis_command(server.port, "FLUSHALL"))
        assert "topology 'flushed': the store (redis" in text and "namespace '$checkpointspout-flushed'" in text
        assert "lost committed state while the topology ran" in text and "--accept-state-loss" in text
        _nothing_after(conf, "flushed")


@pytest.mark.timeout(1200)
def test_redis_killed_and_restarted_empty_is_caught_by_the_supervised_restart(spark: Any, tmp_path: Path) -> None:
    with RedisServer() as server:
        conf = {
            "weir.state.dir": str(tmp_path / "state"),
            "weir.spark.master": "local[2]",
            "topology.state.provider.config": {"url": server.url},
            "topology.state.checkpoint.interval.ms": 100,
            "weir.restart.backoff.ms": 2000,
        }

        def kill_then_restart() -> None:
            server.kill()  # no RDB, no AOF: everything is gone; the batch in flight fails (transient)
            time.sleep(1.0)
            server.start()

        text = _run_until_lost(spark, conf, tmp_path / "log", "killed", kill_then_restart)
        assert "topology 'killed'" in text and "lost committed state while the topology ran" in text
        assert "this driver last stored txid" in text
        _nothing_after(conf, "killed")


@pytest.mark.timeout(1800)  # two Spark driver starts: far slower on a loaded machine
def test_driver_killed_after_committing_then_checkpoint_lost_resumes_exactly(tmp_path: Path) -> None:
    """SIGKILL between Spark's offset log (batch 2 planned) and COMMITTED(2), then Spark's checkpoint lost."""
    state, log_dir = tmp_path / "state", tmp_path / "log"
    _available(log_dir, 350)
    args = [str(DRIVER), str(state), str(log_dir), "crashy", "100000"]
    first = run_driver(args, "after_committing@2")
    assert first.returncode != 0 and "DONE" not in first.stdout, first.stderr[-2000:]
    shutil.rmtree(state / "spark" / "crashy")
    second = run_driver(args, None)
    assert second.returncode == 0 and "DONE 4" in second.stdout, second.stderr[-3000:]
    conf = {"weir.state.dir": str(state)}
    assert read_counts(conf, "crashy") == _expected(350)
    close_backends()
