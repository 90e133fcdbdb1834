"""Tick tuples on micro-batches and bolt instances kept between batches, on the session's local Spark."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.crash._tick_topology import tick_state, tick_topology
from weir.demo import SplitSentence, generate_corpus
from weir.errors import ConfigError
from weir.sources import FileSpout
from weir.state import StateFactory
from weir.topology import StatefulBolt, TopologyBuilder, Tuple

pytestmark = pytest.mark.spark


def _conf(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"weir.state.dir": str(tmp_path / "state"), "weir.spark.master": "local[2]", **extra}


def _words_per_file(corpus: Path) -> list[int]:
    return [len(p.read_text().split()) for p in sorted(corpus.glob("part-*.txt"))]


def test_ticks_come_every_n_batches_after_the_batch_tuples(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    expected = generate_corpus(str(corpus), n_words=1_000, n_distinct=50, n_files=5, seed=2)
    conf = _conf(tmp_path)
    st = weir.submit("ticks", conf, tick_topology(str(corpus), freq_secs=2), spark=spark).process_available()
    assert st.last_txid == 5
    states = tick_state(StateFactory.get_provider(conf), "ticks")
    per_file = _words_per_file(corpus)
    # ticks at txids 2 and 4 (2 s at 1000 ms per batch); each came after that batch's tuples: the
    # flush of txid 2 holds files 1-2, that of txid 4 files 3-4, and file 5 is still pending
    assert sum(s["tick-2"][0] for s in states) == per_file[0] + per_file[1]
    assert sum(s["tick-4"][0] for s in states) == per_file[2] + per_file[3]
    assert sum(s["pending"] for s in states) == per_file[4]
    assert [s["flushes"] for s in states] == [2, 2]
    assert sum(s["total"] + s["pending"] for s in states) == sum(expected.values())


class _TickingSpout(FileSpout):
    def get_component_configuration(self) -> dict[str, Any]:
        return {"topology.tick.tuple.freq.secs": 5}


def test_tick_configuration_is_checked_at_submit(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    generate_corpus(str(corpus), n_words=10, n_distinct=5, n_files=1, seed=2)
    with pytest.raises(ConfigError, match=r"component 'flush'.*topology.tick.tuple.freq.secs must be .* got 'often'"):
        weir.submit("badtick", _conf(tmp_path), tick_topology(str(corpus), freq_secs="often"), spark=spark)  # type: ignore[arg-type]
    b = TopologyBuilder()
    b.set_spout("lines", _TickingSpout(str(corpus)))
    b.set_bolt("split", SplitSentence()).shuffle_grouping("lines")
    with pytest.raises(ConfigError, match=r"component 'lines'.*set on a _TickingSpout.*only bolts"):
        weir.submit("spouttick", _conf(tmp_path), b.create_topology(), spark=spark)


class LifetimeProbe(StatefulBolt):
    """Records, per batch, which instance ran the task; refuses an instance that is not exactly one batch behind.

    ``fail_marker``: while that file exists, task 0 of txid 3 removes it and fails in ``pre_prepare``
    (after the instance saw the whole batch), so the retry must not continue with that instance.
    """

    def __init__(self, fail_marker: str) -> None:
        self.fail_marker = fail_marker

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.instance = os.urandom(6).hex()
        self.prepares = getattr(self, "prepares", 0) + 1
        self.last_txid: int | None = None
        self.batches = 0
        self.task = context.task_index

    def init_state(self, state: Any) -> None:
        self.state = state
        self.started = False

    def execute(self, tup: Tuple) -> None:
        if not self.started:
            self.started = True
            if self.last_txid is not None and self.last_txid != tup.txid - 1:
                msg = f"stale instance: it last finished txid {self.last_txid}, this is txid {tup.txid}"
                raise RuntimeError(msg)
        self.collector.ack(tup)

    def pre_prepare(self, txid: int) -> None:
        kept = self.last_txid is not None
        self.last_txid = txid
        self.batches += 1
        self.state.put(f"b{txid}", [self.instance, self.prepares, self.batches, kept])
        if txid == 3 and self.task == 0 and os.path.exists(self.fail_marker):
            os.remove(self.fail_marker)
            msg = "injected failure after the whole batch"
            raise RuntimeError(msg)


def test_a_task_keeps_its_prepared_instance_between_batches_and_never_a_stale_one(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    generate_corpus(str(corpus), n_words=600, n_distinct=40, n_files=6, seed=4)
    marker = tmp_path / "fail-once"
    marker.write_text("x")
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(corpus), files_per_batch=1))
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("lines")
    b.set_bolt("probe", LifetimeProbe(str(marker)), 2).shuffle_grouping("split")
    conf = _conf(tmp_path, **{"weir.batch.max.retries": 2})
    st = weir.submit("lifetime", conf, b.create_topology(), spark=spark).process_available()
    assert st.last_txid == 6 and not marker.exists()  # txid 3 failed once and was retried
    probe = st.components["probe"]
    provider = StateFactory.get_provider(conf)
    rows = [v for i in range(2) for k, v in provider.new_state(f"lifetime-probe-{i}") if k.startswith("b")]
    assert len(rows) == 12  # 6 committed batches x 2 tasks
    assert all(prepares == 1 for _inst, prepares, _n, _kept in rows)  # prepare() once per instance
    kept = sum(1 for *_x, was_kept in rows if was_kept)
    # the status counts the task-batches of committed batches and those that kept their instance
    assert (probe["tasks"], probe.get("kept", 0)) == (12, kept)
    batches_per_instance = Counter(inst for inst, *_x in rows)
    assert sum(batches_per_instance.values()) == 12
    print(f"kept their instance: {kept}/12 task-batches; instances: {len(batches_per_instance)}")


def test_streams_operators_keep_their_state_across_task_moves_without_restores(spark: Any, tmp_path: Path) -> None:
    from tests.spark._lifetime import lifetime_topology, shares

    corpus = tmp_path / "in"
    expected = generate_corpus(str(corpus), n_words=800, n_distinct=60, n_files=6, seed=6)
    conf = _conf(tmp_path)
    st = weir.submit("moves", conf, lifetime_topology(str(corpus)), spark=spark).process_available()
    assert st.last_txid == 6
    provider = StateFactory.get_provider(conf)
    last = dict(provider.new_state("moves-last-0"))
    words = sum(expected.values())
    # outside any region and never checkpointed, yet nothing processed was lost when tasks moved
    assert last["outreg-0"] + last["outreg-1"] == words
    assert last["inreg-0"] + last["inreg-1"] == words
    got = shares(st.components)
    for op in ("inreg", "outreg"):
        assert got[op]["tasks"] == 12
        # no failure happened: a task restored from the store never (only the very first start)
        assert got[op].get("restore_reset", 0) == got[op].get("restore_initial", 0) == 0, got
        assert got[op].get("restore_first", 0) == 2
    probe = [dict(provider.new_state(f"moves-probe-{i}")) for i in range(2)]
    assert sum(p["n"] for p in probe) == words and all(p["prepared"] == 1 for p in probe)
    print(f"task-batches on local[2]: {got}")
