"""On Spark, a real SQLite store: window marks from the source flush a punctuation-based window, the
final mark of a finite run flushes the open one, and the result is exactly the model."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.streams import _punct
from weir._util import stable_hash
from weir.state import StateFactory

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def by_value() -> Iterator[None]:
    """Ship the test topology's classes to the Python workers by value (tests/ is not on their path)."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(_punct)
    try:
        yield
    finally:
        cloudpickle.unregister_pickle_by_value(_punct)


def _files(seed: int, n_files: int) -> list[list[str]]:
    rng = random.Random(seed)
    values = rng.sample(range(100_000), 40 * n_files)  # distinct: the sort order is total
    files = []
    for _ in range(n_files):
        lines = []
        for _ in range(rng.randrange(12, 20)):
            lines.append(f"k{rng.randrange(6)} {values.pop()}")
            if rng.random() < 0.2:
                lines.append(_punct.MARK)
        if lines[-1] == _punct.MARK:
            lines.pop()  # each file ends inside a window: windows span batches
        files.append(lines)
    return files


def test_window_marks_flush_windows_and_the_final_mark_flushes_the_rest(
    spark: Any, tmp_path: Path, by_value: None
) -> None:
    files = _files(5, 2)
    for i, lines in enumerate(files):
        _punct.write_file(tmp_path / "in", i, lines)
    url = f"sqlite:///{tmp_path / 'state.db'}"
    conf = {
        "weir.state.dir": str(tmp_path / "state"),
        "topology.state.provider.config": {"url": url},
        "weir.batch.max.retries": 0,
    }
    run = weir.submit("punct", conf, _punct.build(str(tmp_path / "in")), spark=spark)
    status = run.process_available(timeout=600, final=True)
    # two Spark batches, then the final mark's own transaction
    assert status.last_txid == 3 and status.batches == 3
    everything = [line for lines in files for line in lines]
    provider = StateFactory.from_url(url)
    got = dict(provider.new_state("punct-sink-0"))
    assert got == _punct.model(everything, final=True)
    assert any(len(w) > 1 for w in got.values()) and len(got) >= 6
    # a later run goes on after the final transaction: Spark's next batch is the next txid (not taken
    # for a replay of the final one), the store agrees with Spark's log, and new windows follow
    more = ["k1 100001", _punct.MARK, "k2 100002"]
    _punct.write_file(tmp_path / "in", 2, more)
    run2 = weir.submit("punct", conf, _punct.build(str(tmp_path / "in")), spark=spark)
    status2 = run2.process_available(timeout=600)
    assert status2.last_txid == 4 and status2.batches == 1
    expected = _punct.model(everything, final=True)
    t1 = stable_hash("k1") % _punct.WINDOW_TASKS
    n1 = sum(1 for k in expected if k.startswith(f"{t1}:"))
    expected[f"{t1}:{n1}"] = [["k1", 100001]]  # closed by the mark; k2 stays open (no final mark)
    assert dict(StateFactory.from_url(url).new_state("punct-sink-0")) == expected


def test_a_final_mark_needs_a_finite_run_and_a_topology_that_receives_marks(spark: Any, tmp_path: Path) -> None:
    from weir.errors import ConfigError
    from weir.sources import FileSpout
    from weir.topology import TopologyBuilder

    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(tmp_path / "in")))
    b.set_bolt("parse", _punct.Parse(), 1).shuffle_grouping("lines")
    conf = {"weir.state.dir": str(tmp_path / "state")}
    run = weir.submit("nomarks", conf, b.create_topology(), spark=spark)
    with pytest.raises(ConfigError, match="topology 'nomarks': a final mark .* only by IBM Streams operators"):
        run.process_available(final=True)
    assert run.query is None  # refused before any query started
    marked = weir.submit("marks", conf, _punct.build(str(tmp_path / "in")), spark=spark)
    with pytest.raises(ConfigError, match="start\\(available_now=True, final=True\\)"):
        marked.start(final=True)
