"""Lost store data is detected at start, never silent: real stores lose data, Spark's commit log tells.

Each test runs the word count on the session's Spark so Spark's checkpoint holds committed batches,
makes the store lose data the way real deployments do, and submits again: ``weir.submit`` refuses
with a :class:`StateLossError` naming what was lost and the ways out. One test accepts the loss.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import weir
from weir.checkpoint.coordinator import CheckpointStore
from weir.demo import read_counts, wordcount_topology
from weir.errors import StateLossError
from weir.state.config import parse_provider_config
from weir.state.factory import close_backends, open_backend

from ..servers import PostgresDatabase, RedisServer, redis_command

pytestmark = pytest.mark.spark


def _conf(tmp_path: Path, url: str, **extra: Any) -> dict[str, Any]:
    return {
        "weir.state.dir": str(tmp_path / "state"),
        "weir.spark.master": "local[2]",
        "topology.state.provider.config": {"url": url},
        **extra,
    }


def _write(corpus: Path, n: int, words: str = "alpha beta alpha") -> None:
    corpus.mkdir(parents=True, exist_ok=True)
    (corpus / f"part-{n:05d}.txt").write_text(words + "\n", encoding="utf-8")


def _run(spark: Any, conf: dict[str, Any], corpus: Path, name: str = "lossy") -> Any:
    run = weir.submit(name, conf, wordcount_topology(str(corpus), parallelism=2, files_per_batch=1), spark=spark)
    return run.process_available()


def _truncate(db: Path) -> None:
    """``state.db`` cut to zero bytes; its write-ahead log goes with it.

    A new zero-byte file replaces it (rather than truncating in place) because this test session's
    Spark Python workers outlive the run and still hold the old file's locks, which a real driver's
    exit would release.
    """
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    db.write_bytes(b"")


def _refused(spark: Any, conf: dict[str, Any], corpus: Path) -> str:
    close_backends()
    with pytest.raises(StateLossError) as info:
        weir.submit("lossy", conf, wordcount_topology(str(corpus), parallelism=2, files_per_batch=1), spark=spark)
    text = str(info.value)
    assert "topology 'lossy': committed state was lost" in text
    assert "restore the store from a backup" in text and "--accept-state-loss" in text
    assert "weir.accept.state.loss" in text
    return text


def test_redis_without_persistence_restarted_then_the_loss_accepted(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    with RedisServer() as server:
        conf = _conf(tmp_path, server.url)
        for i in range(2):
            _write(corpus, i)
        assert _run(spark, conf, corpus).last_txid == 2
        server.kill_and_restart()  # no RDB, no AOF: everything is gone
        text = _refused(spark, conf, corpus)
        assert "has no coordinator record" in text and "committed batches up to 1" in text
        # accepted: the record is re-based at once, so a restart without new data is not refused again
        close_backends()
        run = weir.submit(
            "lossy",
            {**conf, "weir.accept.state.loss": True},
            wordcount_topology(str(corpus), parallelism=2, files_per_batch=1),
            spark=spark,
        )
        assert run.coordinator is not None
        close_backends()
        rec = CheckpointStore(open_backend(parse_provider_config(conf)), "lossy").load()
        assert rec is not None and rec.last_committed == 0 and rec.txid_base == -1
        _write(corpus, 2, "gamma")
        assert _run(spark, conf, corpus).last_txid == 1  # no flag needed any more
        assert read_counts(conf, "lossy") == {"gamma": 1}  # alpha/beta of the lost batches stay lost
        close_backends()


def test_rdb_only_redis_killed_after_its_snapshot(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    with RedisServer(extra_args=["--save", "3600 1", "--dbfilename", "dump.rdb"]) as server:
        conf = _conf(tmp_path, server.url)
        for i in range(2):
            _write(corpus, i)
        assert _run(spark, conf, corpus).last_txid == 2
        assert redis_command(server.port, "SAVE") == "OK"  # the last snapshot: txid 2
        _write(corpus, 2)
        _write(corpus, 3)
        assert _run(spark, conf, corpus).last_txid == 4
        server.kill_and_restart()  # SIGKILL: txids 3 and 4 were never snapshotted
        text = _refused(spark, conf, corpus)
        assert "holds committed txid 2" in text and "committed batch 3 = txid 4" in text
        assert "txids 3..4 (Spark batches 2..3) are missing" in text
        close_backends()


def test_sqlite_file_truncated(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    db = tmp_path / "state.db"
    conf = _conf(tmp_path, f"sqlite:///{db}")
    for i in range(2):
        _write(corpus, i)
    assert _run(spark, conf, corpus).last_txid == 2
    close_backends()
    _truncate(db)
    text = _refused(spark, conf, corpus)
    assert "has no coordinator record" in text
    close_backends()


def test_postgres_table_dropped(spark: Any, tmp_path: Path, postgres_database: PostgresDatabase) -> None:
    postgres_database.truncate_all()
    corpus = tmp_path / "in"
    conf = _conf(tmp_path, postgres_database.url)
    for i in range(2):
        _write(corpus, i)
    assert _run(spark, conf, corpus).last_txid == 2
    close_backends()
    import psycopg

    with psycopg.connect(postgres_database.url, autocommit=True) as conn:
        conn.execute("DROP TABLE weir_kv")
    text = _refused(spark, conf, corpus)
    assert "has no coordinator record" in text and "committed batches up to 1" in text
    close_backends()
