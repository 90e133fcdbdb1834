"""Adaptive micro-batch sizing (``weir.batch.grow.max``): a backlog is read in fewer, larger batches.

The sizing never decides what a *replayed* batch reads (Spark's offset log does): the SIGKILL chains
across grown batches are in ``tests/crash/test_batch_growth_crash.py`` (which also checks a replayable
spout's slow-started batch ends in the offset log); the block in docs/sources.md runs a replayable
backlog of 150 records in 4 batches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

import weir
from tests.sources._spouts import Numbers, count_topology
from weir.demo import generate_corpus, read_counts, wordcount_topology
from weir.errors import ConfigError
from weir.sources.backlog import BatchGrowth, batch_growth
from weir.sources.replayable import _SpoutReader


def test_growth_doubles_while_backlogged_and_resets_when_caught_up() -> None:
    g = BatchGrowth(8)
    seen = []
    for backlogged in (True, True, True, True, False, True):
        g.observe(backlogged=backlogged)
        seen.append(g.scale)
    assert seen == [2, 4, 8, 8, 1, 2]
    assert g.grown(10) == 20
    assert g.grown(None) is None
    assert not BatchGrowth(1).enabled


def test_the_key_is_checked_at_submit(tmp_path: Path) -> None:
    assert batch_growth({}) == 1
    assert batch_growth({"weir.batch.grow.max": "4"}) == 4
    for bad in (0, -2, "many", 1.5, True):
        with pytest.raises(ConfigError, match=r"weir\.batch\.grow\.max"):
            batch_growth({"weir.batch.grow.max": bad})
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.batch.grow.max": 0}
    with pytest.raises(ConfigError, match=r"weir\.batch\.grow\.max must be an integer ≥ 1"):
        weir.submit("grow-bad", conf, count_topology({"nums": Numbers(10)}))


def test_the_planner_grows_a_backlogged_limit_and_shrinks_it_for_a_trickle(tmp_path: Path) -> None:
    """The reader Spark's planner keeps for a query: batch ends decided with the grown limit."""
    logs = tmp_path / "logs"
    logs.mkdir()
    spout = Numbers(10_000, max_records=10, log_dir=str(logs))
    reader = _SpoutReader(spout, "spout 'nums'", {"n": 0}, grow_max=8)
    limit = ReadMaxRows(10)
    (logs / "available").write_text("150")  # a backlog of 150 records
    ends, start = [], {"n": 0}
    for _ in range(5):
        start = reader.latestOffset(start, limit)
        ends.append(start["n"])
    assert ends == [10, 30, 70, 150, 150]  # 10, 20, 40, then the 80 left (8 x 10); then nothing new
    assert reader.growth.scale == 1  # the last batch took everything ready
    (logs / "available").write_text("155")  # a trickle: small batches again
    assert reader.latestOffset(start, limit) == {"n": 155}
    assert reader.growth.scale == 1
    # no limit configured: nothing to grow, one batch takes what is there
    free = _SpoutReader(Numbers(40), "spout 'free'", {"n": 0}, grow_max=8)
    assert free.latestOffset({"n": 0}, ReadAllAvailable()) == {"n": 40}


@pytest.mark.spark
@pytest.mark.slow
def test_a_file_backlog_is_read_in_fewer_batches_exactly(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    expected = generate_corpus(str(corpus), n_words=3_000, n_distinct=50, n_files=6, seed=5)
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.batch.grow.max": 4}
    topo = wordcount_topology(str(corpus), parallelism=2, files_per_batch=1)
    st = weir.submit("filegrow", conf, topo, spark=spark).process_available(timeout=600)
    assert (st.batches, st.last_txid) == (2, 2)  # 4 files, then 2; not 6 batches of one file
    assert read_counts(conf, "filegrow", "count", 2) == expected
