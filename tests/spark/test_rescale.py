"""A Storm word count whose stateful bolt goes 2 → 5 → 3 tasks between runs, counts exact on every store."""

from __future__ import annotations

import json
import os
import random
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import weir
from weir._util import stable_hash
from weir.checkpoint.coordinator import CheckpointPhase, CheckPointState, CheckpointStore
from weir.checkpoint.rescale import Rescaler
from weir.demo import SplitSentence, WordCount, generate_corpus, read_counts, wordcount_topology
from weir.errors import ConfigError
from weir.runtime.spark.config import RuntimeConfig
from weir.runtime.spark.storm.submit import StormDialect, rescale_routes
from weir.runtime.spark.storm.windowed import open_window_state
from weir.sources import FileSpout
from weir.state import StateFactory
from weir.topology import (
    BaseBasicBolt,
    BaseStatefulBolt,
    BaseStatefulWindowedBolt,
    Count,
    Duration,
    Fields,
    TopologyBuilder,
    TupleWindow,
    Values,
)
from weir.topology.tuple import Tuple
from weir.topology.window_manager import WindowManager, window_namespace

pytestmark = pytest.mark.services


def _add_files(corpus: Path, tag: str, seed: int, tmp: Path) -> Counter[str]:
    """Write two more files into ``corpus`` (names after the earlier ones); their exact word counts."""
    src = tmp / f"gen-{tag}"
    counts = generate_corpus(str(src), n_words=1_200, n_distinct=150, n_files=2, seed=seed)
    corpus.mkdir(exist_ok=True)
    for f in sorted(src.iterdir()):
        shutil.copy(f, corpus / f"{tag}-{f.name}")
    return counts


def _layout_ok(url: str, name: str, tasks: int) -> None:
    """Every key sits in the namespace of the task its word's tuples go to; no namespace past the last task."""
    backend = StateFactory.from_url(url).backend
    provider = StateFactory.from_url(url)
    for t in range(tasks):
        for word, _ in provider.new_state(f"{name}-count-{t}"):
            assert stable_hash(word) % tasks == t, (word, t)
    left = [ns for ns in backend.namespaces() if ns.startswith(f"{name}-count-") and int(ns.rsplit("-", 1)[1]) >= tasks]
    assert left == []
    assert not [ns for ns in backend.namespaces() if ns.startswith("$rescale-")]


# the re-partition itself is SIGKILLed on every store through the Backend SPI (tests/crash/test_rescale_crash.py);
# here the whole word count goes through weir.submit three times on each store
@pytest.mark.parametrize("provider_url", ["sqlite", "redis", "postgres", "hbase"], indirect=True)
def test_wordcount_grows_and_shrinks(spark: Any, tmp_path: Path, provider_url: str) -> None:
    corpus = tmp_path / "in"
    conf = {
        "weir.state.dir": str(tmp_path / "state"),
        "weir.spark.master": "local[2]",
        "topology.state.provider.config": {"url": provider_url},
    }
    expected = _add_files(corpus, "a", 1, tmp_path)
    weir.submit("rs", conf, wordcount_topology(str(corpus), parallelism=2), spark=spark).process_available()
    assert read_counts(conf, "rs", parallelism=2) == expected
    # refused when asked to, naming the component and its namespaces
    with pytest.raises(ConfigError, match=r"'count'.*rs-count-0\.\.1.*weir\.rescale=refuse"):
        weir.submit(
            "rs", {**conf, "weir.rescale": "refuse"}, wordcount_topology(str(corpus), parallelism=5), spark=spark
        )
    for tag, seed, tasks in (("b", 2, 5), ("c", 3, 3)):
        expected += _add_files(corpus, tag, seed, tmp_path)
        run = weir.submit("rs", conf, wordcount_topology(str(corpus), parallelism=tasks), spark=spark)
        run.process_available()
        assert read_counts(conf, "rs", parallelism=tasks) == expected
        _layout_ok(provider_url, "rs", tasks)
    rec = StateFactory.from_url(provider_url).backend.get("$checkpointspout-rs", b"__state")
    assert rec is not None and b'"count": 3' in rec


class _Parse(BaseBasicBolt):
    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("key", "ts"))

    def execute(self, tup: Any, collector: Any) -> None:
        key, ts = tup.get_string(0).split()
        collector.emit(Values(key, int(ts)))


class _KeyCount(BaseStatefulWindowedBolt):
    """Per window: (key, end, count) of every key in it."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("key", "end", "count"))

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, window: TupleWindow) -> None:
        counts = Counter(t.get_string_by_field("key") for t in window.get_iter())
        for key, n in sorted(counts.items()):
            self.collector.emit(window.get(), Values(key, window.get_end_timestamp(), n))


class _Sink(BaseStatefulBolt):
    """Every window output under ``key:end``, as a list (a window fired twice shows as two entries)."""

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Any, collector: Any) -> None:
        k = f"{tup['key']}:{tup['end']}"
        self.state.put(k, [*self.state.get(k, []), tup["count"]])


def _window_topology(input_dir: str, tasks: int) -> Any:
    b = TopologyBuilder()
    b.set_spout("readings", FileSpout(input_dir, files_per_batch=1))
    b.set_bolt("parse", _Parse(), 1).shuffle_grouping("readings")
    win = _KeyCount().with_tumbling_window(Duration.of(1000)).with_timestamp_field("ts").with_persistence()
    b.set_bolt("win", win, tasks).fields_grouping("parse", Fields("key"))
    b.set_bolt("sink", _Sink(), 1).global_grouping("win")
    return b.create_topology()


def _readings(n: int, rng: random.Random) -> list[list[tuple[str, int]]]:
    """``n`` batches of (key, ts) readings, one per 2.5 s of event time; every key's last reading is at
    the batch's end, so every task's watermark is the same after every batch (exact re-partition)."""
    keys, batches = [f"k{i}" for i in range(12)], []
    for f in range(n):
        lo, hi = f * 2500, (f + 1) * 2500 - 1
        rows = sorted(
            [(rng.choice(keys), rng.randrange(lo, hi)) for _ in range(80)] + [(k, hi) for k in keys],
            key=lambda r: r[1],
        )
        batches.append(rows)
    return batches


def _window_batch(provider: Any, tasks: int, rows: list[tuple[str, int]], txid: int, out: dict[str, list[int]]) -> None:
    """One micro-batch of the windowed bolt's ``tasks`` tasks as the runtime runs it (route by the fields
    grouping, add, fire at the watermark, flush, prepare, commit); window outputs into ``out``."""
    cfg = _window_topology("unused", tasks).components["win"].obj.window_config
    fields = Fields("key", "ts")
    for t in range(tasks):
        wstate = open_window_state(provider, window_namespace(f"rw-win-{t}"))
        mgr = WindowManager(
            cfg, wstate, lambda ev: Tuple(ev[5], fields, ev[1], ev[2], ev[3], ev[4]), [("parse", "default")]
        )
        for k, ts in rows:
            if stable_hash(k) % tasks == t:
                assert mgr.add(Tuple([k, ts], fields, "parse", "default", 0, txid), 0.0)
        for w in mgr.fire(mgr.clock(0.0)):
            for k, n in Counter(tup.get_value(0) for tup in w.get()).items():
                out.setdefault(f"{k}:{w.get_end_timestamp()}", []).append(n)
        mgr.flush()
        wstate.prepare_commit(txid)
        wstate.commit(txid)


@pytest.mark.parametrize("provider_url", ["sqlite"], indirect=True)
def test_event_time_windows_move_with_their_keys(provider_url: str) -> None:
    """A per-key count over 1 s event-time windows, fields grouping 2 → 3 tasks: every window exactly once."""
    provider = StateFactory.from_url(provider_url)
    store = CheckpointStore(provider.backend, "rw")
    out: dict[str, list[int]] = {}
    batches = _readings(5, random.Random(7))
    for txid, rows in enumerate(batches[:2], start=1):
        _window_batch(provider, 2, rows, txid, out)
    epoch = store.acquire_epoch()
    store.save(CheckPointState(txid=2, phase=CheckpointPhase.COMMITTED, parallelism={"win": 2}), epoch)
    routes = rescale_routes(_window_topology("unused", 3), provider)
    Rescaler("rw", routes).run(store, epoch, {"win": 3})
    for txid, rows in enumerate(batches[2:], start=3):
        _window_batch(provider, 3, rows, txid, out)
    seen = [r for rows in batches for r in rows]
    wm = max(ts for _, ts in seen)  # no lag: the last watermark
    expected = Counter((k, (ts + 999) // 1000 * 1000) for k, ts in seen)
    assert out == {f"{k}:{end}": [n] for (k, end), n in expected.items() if end <= wm}
    # the tuples not fired yet sit in the window namespace of their key's task; nothing left of the old layout
    backend = provider.backend
    assert not [ns for ns in backend.namespaces() if ns.startswith(("$rescale-", "rw-win-3", "rw-win-4"))]
    for t in range(3):
        for skey, sval in backend.scan(f"rw-win-{t}-window"):
            if skey.startswith(b"["):
                assert all(stable_hash(ev[5][0]) % 3 == t for ev in json.loads(sval))
    # count windows and processing-time windows are refused, naming why
    refusals = {c: r.refusal for c, r in rescale_routes(_count_topology(), provider).items()}
    assert "count window holds the last N tuples" in str(refusals["cnt"])
    assert "processing-time" in str(refusals["proc"])


@pytest.mark.parametrize("provider_url", ["sqlite"], indirect=True)
def test_event_time_windows_at_different_watermarks_are_refused(provider_url: str) -> None:
    """Tasks that fired windows up to different ends: refused before anything is written."""
    provider = StateFactory.from_url(provider_url)
    store = CheckpointStore(provider.backend, "rw")
    keys = [f"k{i}" for i in range(12)]
    a = next(k for k in keys if stable_hash(k) % 2 == 0)
    rows = [(k, 500) for k in keys] + [(a, 2500)]  # task of ``a`` at watermark 2500, the other at 500
    _window_batch(provider, 2, rows, 1, {})
    epoch = store.acquire_epoch()
    store.save(CheckPointState(txid=1, phase=CheckpointPhase.COMMITTED, parallelism={"win": 2}), epoch)
    before = {ns: list(provider.backend.scan(ns)) for ns in provider.backend.namespaces()}
    with pytest.raises(ConfigError, match=r"'win'.*fired windows up to different ends.*rw-win-0-window"):
        Rescaler("rw", rescale_routes(_window_topology("unused", 3), provider)).run(store, epoch, {"win": 3})
    assert {ns: list(provider.backend.scan(ns)) for ns in provider.backend.namespaces()} == before


def _count_topology() -> Any:
    b = TopologyBuilder()
    b.set_spout("readings", FileSpout("unused"))
    b.set_bolt("parse", _Parse(), 1).shuffle_grouping("readings")
    b.set_bolt("cnt", _KeyCount().with_tumbling_window(Count.of(3)).with_persistence(), 2).fields_grouping(
        "parse", Fields("key")
    )
    b.set_bolt("proc", _KeyCount().with_tumbling_window(Duration.of(1000)).with_persistence(), 2).fields_grouping(
        "parse", Fields("key")
    )
    return b.create_topology()


@pytest.mark.parametrize("provider_url", ["sqlite"], indirect=True)
def test_windowed_count_through_submit_2_to_3(spark: Any, tmp_path: Path, provider_url: str) -> None:
    """The same per-key window count through weir.submit: 2 tasks for two batches, then 3 tasks for two more."""
    conf = {
        "weir.state.dir": str(tmp_path / "state"),
        "weir.spark.master": "local[2]",
        "topology.state.provider.config": {"url": provider_url},
    }
    corpus, batches = tmp_path / "readings", _readings(4, random.Random(3))
    corpus.mkdir()

    def write(first: int, last: int) -> None:
        for f in range(first, last):  # one file per batch; Spark's file source takes them by mtime
            path = corpus / f"r{f:03d}.txt"
            path.write_text("".join(f"{k} {ts}\n" for k, ts in batches[f]))
            os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))

    write(0, 2)
    weir.submit("rw2", conf, _window_topology(str(corpus), 2), spark=spark).process_available()
    write(2, 4)
    weir.submit("rw2", conf, _window_topology(str(corpus), 3), spark=spark).process_available()
    seen = [r for rows in batches for r in rows]
    wm = max(ts for _, ts in seen)
    expected = Counter((k, (ts + 999) // 1000 * 1000) for k, ts in seen)
    got = dict(StateFactory.from_url(provider_url).new_state("rw2-sink-0"))
    assert got == {f"{k}:{end}": [n] for (k, end), n in expected.items() if end <= wm}
    rec = StateFactory.from_url(provider_url).backend.get("$checkpointspout-rw2", b"__state")
    assert rec is not None and json.loads(rec)["parallelism"]["win"] == 3


class _HookedCount(WordCount):
    """The demo's count, appending every pre_commit / pre_rollback it gets to a file (a side effect a user's
    bolt would have, e.g. publishing what it staged) with the task and parallelism it was prepared as."""

    def __init__(self, log: str) -> None:
        self.log = log

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.where = f"{context.task_index}/{context.parallelism}"

    def _note(self, what: str) -> None:
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(f"{what} {self.where}\n")

    def pre_commit(self, txid: int) -> None:
        self._note(f"pre_commit {txid}")

    def pre_rollback(self) -> None:
        self._note("pre_rollback")


def _hooked_topology(input_dir: str, log: str, tasks: int) -> Any:
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(input_dir, files_per_batch=1))
    b.set_bolt("split", SplitSentence(), 1).shuffle_grouping("lines")
    b.set_bolt("count", _HookedCount(log), tasks).fields_grouping("split", Fields("word"))
    return b.create_topology()


@pytest.mark.parametrize("phase", [CheckpointPhase.COMMITTING, CheckpointPhase.PREPARING])
@pytest.mark.parametrize("provider_url", ["sqlite"], indirect=True)
def test_rescale_runs_the_old_tasks_hooks_when_it_resolves_their_prepares(
    spark: Any, tmp_path: Path, provider_url: str, phase: CheckpointPhase
) -> None:
    """A driver died with txid n prepared in the 2 old tasks: the rescale to 3 that the Storm dialect
    plans commits (COMMITTING) or discards (PREPARING) it as recovery would, after each old task's
    ``pre_commit(n)`` / ``pre_rollback()`` on an instance prepared as that task of the old layout."""
    corpus, log = tmp_path / "in", tmp_path / "hooks.log"
    conf = {"weir.state.dir": str(tmp_path / "state"), "topology.state.provider.config": {"url": provider_url}}
    expected = _add_files(corpus, "a", 1, tmp_path)
    weir.submit("rh", conf, _hooked_topology(str(corpus), str(log), 2), spark=spark).process_available()
    assert read_counts(conf, "rh", parallelism=2) == expected
    # what a driver killed in the commit of the next txid leaves: every old task's set prepared
    provider = StateFactory.from_url(provider_url)
    store = CheckpointStore(provider.backend, "rh")
    rec = store.load()
    assert rec is not None
    txid = rec.txid + 1
    epoch = store.acquire_epoch()
    for t in range(2):
        state = provider.new_state(f"rh-count-{t}")
        state.put(f"pending{t}", 7)
        state.prepare_commit(txid)
    store.save(replace(rec, txid=txid, phase=phase), epoch)
    log.write_text("")
    dialect = StormDialect()
    plan = dialect.prepare(
        "rh", conf, _hooked_topology(str(corpus), str(log), 3), RuntimeConfig.from_conf("rh", conf), spark
    )
    rescaler = dialect.rescaler(plan)
    assert rescaler is not None
    rescaler.run(store, store.acquire_epoch(), {"count": 3})
    hooks = log.read_text().splitlines()
    if phase is CheckpointPhase.COMMITTING:
        assert sorted(hooks) == [f"pre_commit {txid} 0/2", f"pre_commit {txid} 1/2"]
        expected.update({"pending0": 7, "pending1": 7})
    else:
        assert sorted(hooks) == ["pre_rollback 0/2", "pre_rollback 1/2"]
    assert read_counts(conf, "rh", parallelism=3) == expected
    _layout_ok(provider_url, "rh", 3)
