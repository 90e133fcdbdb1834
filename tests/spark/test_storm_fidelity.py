"""Storm fidelity on Spark: the seeds' WordCountBolts give exact counts; un-acked tuples fail the batch
(or commit with acking off); the windowing example runs as written."""

from __future__ import annotations

import re
import runpy
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from weir.demo import SplitSentence, generate_corpus, read_counts
from weir.errors import TopologyError
from weir.sources import FileSpout
from weir.state import StateFactory
from weir.topology import Count, Fields, TopologyBuilder

from ._fidelity import ForgetsSomeAcks, Seed000WordCountBolt, Seed003WordCountBolt, TumblingNumbers

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def _conf(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"weir.state.dir": str(tmp_path / "state"), "weir.spark.master": "local[2]", **extra}


def test_seed_000_and_003_word_count_bolts_ported_verbatim_count_exactly(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    expected = generate_corpus(str(corpus), n_words=3_000, n_distinct=150, n_files=2, seed=4)
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(corpus)))
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("lines")
    b.set_bolt("count000", Seed000WordCountBolt(), 2).fields_grouping("split", Fields("word"))
    b.set_bolt("count003", Seed003WordCountBolt(), 2).fields_grouping("split", Fields("word"))
    conf = _conf(tmp_path)
    st = weir.submit("seeds", conf, b.create_topology(), spark=spark).process_available()
    assert st.last_txid == 2
    assert read_counts(conf, "seeds", "count000") == expected
    assert read_counts(conf, "seeds", "count003") == expected
    assert st.components["count000"]["out"] == st.components["count003"]["out"] == sum(expected.values())


def _forgetful(corpus: Path) -> Any:
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(corpus)))
    b.set_bolt("split", SplitSentence()).shuffle_grouping("lines")
    b.set_bolt("count", ForgetsSomeAcks(), 2).fields_grouping("split", Fields("word"))
    return b.create_topology()


def test_unacked_tuples_fail_the_batch_and_acking_off_commits_them(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "a.txt").write_text("a xa b xa xb a\n")
    conf = _conf(tmp_path, **{"weir.batch.max.retries": 0})
    with pytest.raises(TopologyError) as info:
        weir.submit("unacked", conf, _forgetful(corpus), spark=spark).process_available()
    err = info.value
    assert (err.component, err.txid) == ("count", 1)
    text = str(err)
    assert f"component 'count', task {err.task}, txid 1: " in text
    assert "input tuple(s) were never acked or failed" in text
    assert read_counts(conf, "unacked") == Counter()  # rolled back: nothing committed

    off = _conf(tmp_path / "off", **{"weir.batch.max.retries": 0, "topology.acker.executors": 0})
    weir.submit("unacked", off, _forgetful(corpus), spark=spark).process_available()
    assert read_counts(off, "unacked") == Counter({"a": 2, "xa": 2, "b": 1, "xb": 1})


def test_count_windows_on_spark_spill_and_resume_across_batches(spark: Any, tmp_path: Path) -> None:
    import os

    corpus = tmp_path / "in"
    corpus.mkdir()
    for f in range(3):  # 50 numbers per file = per micro-batch
        path = corpus / f"n{f}.txt"
        path.write_text("\n".join(str(f * 50 + i) for i in range(50)) + "\n")
        os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))
    bolt = TumblingNumbers().with_tumbling_window(Count.of(20)).with_persistence().with_max_events_in_memory(8)
    b = TopologyBuilder()
    b.set_spout("numbers", FileSpout(str(corpus)))
    b.set_bolt("win", bolt, 1).shuffle_grouping("numbers")
    conf = _conf(tmp_path)
    st = weir.submit("countwin", conf, b.create_topology(), spark=spark).process_available()
    assert st.last_txid == 3
    provider = StateFactory.from_url(f"sqlite:///{tmp_path / 'state' / 'state.db'}")
    state = dict(provider.new_state("countwin-win-0"))
    assert state.pop("windows") == 7  # 150 tuples: 7 full windows of 20, 10 tuples wait in the window
    windows = [state[f"w{k}"] for k in range(1, 8)]
    assert all(len(w) == 20 for w in windows)
    seen = [n for w in windows for n in w]
    assert len(set(seen)) == 140 and set(seen) <= set(range(150))
    for k in range(2):  # a batch's tuples enter in one of their orders, but batches stay in sequence
        assert set(windows[k]) <= set(range(50))
    assert set(windows[2]) & set(range(50)) and set(windows[2]) & set(range(50, 100))
    meta = next(v for k, v in provider.new_state("countwin-win-0-window") if k == "meta")
    assert (meta["seq"], meta["last_end"]) == (150, 140)
    assert sum(meta["slices"].values()) == 30  # sequence numbers 121..150: what the next window still needs
    # the same topology with another window length is refused at submit: the stored window would be misread
    b2 = TopologyBuilder()
    b2.set_spout("numbers", FileSpout(str(corpus)))
    other = TumblingNumbers().with_tumbling_window(Count.of(25)).with_max_events_in_memory(8)
    b2.set_bolt("win", other, 1).shuffle_grouping("numbers")
    with pytest.raises(TopologyError, match="topology 'countwin', windowed bolt 'win': the stored window was written"):
        weir.submit("countwin", conf, b2.create_topology(), spark=spark)


def test_sliding_window_average_example_runs_as_written(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    example = ROOT / "examples" / "sliding_window_average.py"
    monkeypatch.setattr(sys, "argv", [str(example), "--dir", str(tmp_path / "ex"), "--files", "3"])
    runpy.run_path(str(example), run_name="__main__")
    out = capsys.readouterr().out
    assert "processed up to txid 3 (3 new micro-batches)" in out
    assert "late readings: 2" in out
    assert re.search(r"\n(boiler|pump|valve|fan)@\d+: average [\d.]+ over \d+ readings\n", out), out
    # a second run adds files and continues from the committed windows
    monkeypatch.setattr(sys, "argv", [str(example), "--dir", str(tmp_path / "ex"), "--files", "1"])
    runpy.run_path(str(example), run_name="__main__")
    assert "processed up to txid 4 (1 new micro-batches)" in capsys.readouterr().out
