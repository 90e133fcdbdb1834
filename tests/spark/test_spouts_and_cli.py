"""The built-in spouts end to end, and the CLI's `weir demo` (the README's main command) and `weir run`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.servers import wait_until
from weir.demo import read_counts
from weir.sources import DataFrameSpout, RateSpout
from weir.topology import Fields, StatefulBolt, TopologyBuilder

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]


class ModCount(StatefulBolt):
    """Counts values by value % 5 (declared output: none)."""

    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute(self, tup: Any) -> None:
        k = int(tup.get_value_by_field("value")) % 5
        self.counts.put(k, self.counts.get(k, 0) + 1)
        self.collector.ack(tup)


def test_rate_spout_rows_are_counted_once(spark: Any, tmp_path: Path) -> None:
    conf = {"weir.state.dir": str(tmp_path / "state")}
    b = TopologyBuilder()
    b.set_spout("rate", RateSpout(rows_per_batch=50, partitions=2))
    b.set_bolt("mod", ModCount(), 2).fields_grouping("rate", Fields("value"))
    run = weir.submit("rate", conf, b.create_topology(), spark=spark)
    run.start()
    try:
        import time

        deadline = time.time() + 120
        while run.status().batches < 3 and time.time() < deadline:
            time.sleep(0.2)
    finally:
        run.stop()
    st = run.status()
    assert st.batches >= 3
    total = 50 * st.last_txid
    got = read_counts(conf, "rate", "mod", 2)
    # rows 0 .. 50*txid-1, each counted once, by value % 5
    assert got == Counter({k: total // 5 for k in range(5)})


def _rate_batches(spark: Any, spout: RateSpout, checkpoint: Path, at_least: int) -> dict[int, list[tuple[int, int]]]:
    """Run the spout's stream with a checkpoint until ``at_least`` batches completed; their rows by batch id."""
    seen: dict[int, list[tuple[int, int]]] = {}

    def record(df: Any, batch_id: int) -> None:
        seen[batch_id] = sorted((int(r["timestamp"]), int(r["value"])) for r in df.collect())

    query = (
        spout.create_stream(spark, None).writeStream.foreachBatch(record)
        .option("checkpointLocation", str(checkpoint)).start()
    )  # fmt: skip
    try:
        wait_until(lambda: len(seen) >= at_least, timeout=180, what=f"{at_least} rate batches", interval=0.2)
    finally:
        query.stop()
    return dict(seen)


def test_rate_spout_batches_are_deterministic(spark: Any, tmp_path: Path) -> None:
    """A batch replayed from the checkpoint (its commit removed, as after a crash) has the same rows."""
    spout = RateSpout(rows_per_batch=40, partitions=2, start_timestamp=5_000)  # ms; a batch advances 1 s
    ckpt = tmp_path / "ckpt"
    first = _rate_batches(spark, spout, ckpt, 3)
    last = max(first)
    for batch_id, rows in first.items():
        assert rows == [(5 + batch_id, v) for v in range(40 * batch_id, 40 * (batch_id + 1))]
    # forget the last batch's commit and any later plan: Spark must run batch `last` again from its offsets
    for log in ("commits", "offsets"):
        for f in (ckpt / log).iterdir():
            n = f.name.lstrip(".").removesuffix(".crc")
            if n.isdigit() and (int(n) > last or (log == "commits" and int(n) == last)):
                f.unlink()
    again = _rate_batches(spark, spout, ckpt, 1)
    assert min(again) == last, f"the restart ran batches {sorted(again)}, not a replay of batch {last}"
    assert again[last] == first[last]


def test_dataframe_spout_over_a_streaming_dataframe(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "csv"
    src.mkdir()
    (src / "a.csv").write_text("k,v\na,1\nb,2\na,3\n")
    df = spark.readStream.option("header", "true").schema("k STRING, v INT").csv(str(src))

    class SumByKey(StatefulBolt):
        def init_state(self, state: Any) -> None:
            self.sums = state

        def execute(self, tup: Any) -> None:
            self.sums.put(tup["k"], self.sums.get(tup["k"], 0) + tup["v"])
            self.collector.ack(tup)

    conf = {"weir.state.dir": str(tmp_path / "state")}
    b = TopologyBuilder()
    b.set_spout("rows", DataFrameSpout(df))
    b.set_bolt("sum", SumByKey(), 2).fields_grouping("rows", Fields("k"))
    weir.submit("dfs", conf, b.create_topology(), spark=spark).process_available()
    assert read_counts(conf, "dfs", "sum", 2) == Counter({"a": 4, "b": 2})


def test_two_spouts_share_the_query_each_with_its_own_columns_and_types(spark: Any, tmp_path: Path) -> None:
    """Several spouts are one query (their union as tagged JSON rows); each bolt input keeps its types and nulls."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "1.csv").write_text("k,v\nx,1\ny,2\n")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "1.csv").write_text("name,n,note\nx,10,\ny,20,hi\n")
    dfa = spark.readStream.option("header", "true").schema("k STRING, v INT").csv(str(tmp_path / "a"))
    dfb = spark.readStream.option("header", "true").schema("name STRING, n INT, note STRING").csv(str(tmp_path / "b"))

    class SumBoth(StatefulBolt):
        def init_state(self, state: Any) -> None:
            self.sums = state

        def execute(self, tup: Any) -> None:
            if tup.source_component == "a":
                k, v = tup["k"], tup["v"]
            else:  # a null note arrives as None (not missing); n arrives as an int, not text
                k, v = tup["name"], tup["n"] + (0 if tup["note"] is None else 100)
            self.sums.put(k, self.sums.get(k, 0) + v)
            self.collector.ack(tup)

    conf = {"weir.state.dir": str(tmp_path / "state")}
    b = TopologyBuilder()
    b.set_spout("a", DataFrameSpout(dfa))
    b.set_spout("b", DataFrameSpout(dfb))
    b.set_bolt("sum", SumBoth(), 2).fields_grouping("a", Fields("k")).fields_grouping("b", Fields("name"))
    weir.submit("two", conf, b.create_topology(), spark=spark).process_available()
    assert read_counts(conf, "two", "sum", 2) == Counter({"x": 11, "y": 122})


def _cli(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    return subprocess.run(
        [sys.executable, "-m", "weir", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
def test_weir_demo_runs_and_verifies(tmp_path: Path) -> None:
    res = _cli(["demo", "--words", "20000", "--distinct", "500", "--files", "4"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "verified: all" in res.stdout
    assert "rank" in res.stdout and "txid 2 committed" in res.stdout
    assert (tmp_path / "weir-state" / "state.db").exists()
    # a second run starts fresh and verifies again
    res2 = _cli(["demo", "--words", "20000", "--distinct", "500", "--files", "4"], tmp_path)
    assert res2.returncode == 0 and "verified: all" in res2.stdout


@pytest.mark.slow
def test_weir_run_example_with_progress(tmp_path: Path) -> None:
    inp = tmp_path / "input"
    inp.mkdir()
    (inp / "a.txt").write_text("to be or not to be\n")
    env_cwd = tmp_path
    os.environ["WORDCOUNT_INPUT"] = str(inp)
    try:
        res = _cli(["run", str(ROOT / "examples" / "wordcount.py"), "--available-now", "--name", "cliwc"], env_cwd)
    finally:
        del os.environ["WORDCOUNT_INPUT"]
    assert res.returncode == 0, res.stderr[-3000:]
    assert "[stopped]  txid 1" in res.stderr  # the live status line, final form
    assert "last txid 1, 1 batches" in res.stdout
    conf = {"weir.state.dir": str(tmp_path / "weir-state")}
    assert read_counts(conf, "cliwc") == Counter("to be or not to be".split())


def test_weir_run_bad_target_is_one_clear_line(tmp_path: Path) -> None:
    res = _cli(["run", str(tmp_path / "missing.py")], tmp_path, timeout=60)
    assert res.returncode == 2
    assert res.stderr.strip().startswith("weir: error: weir run: no such file")
