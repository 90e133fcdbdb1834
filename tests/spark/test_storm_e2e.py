"""End-to-end Storm topologies on the session's local Spark: counts, retries, failures, dead letters,
groupings, hooks, fencing and submit-time errors."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.servers import wait_until
from weir.demo import SplitSentence, generate_corpus, read_counts, wordcount_topology
from weir.errors import ConfigError, FencedError, TopologyError
from weir.sources import FileSpout
from weir.state import StateFactory
from weir.topology import Fields, TopologyBuilder

from ._topologies import (
    FlakyCount,
    HookRecorder,
    KvOps,
    PickyCount,
    Router,
    TaskRecorder,
    TxidRecorder,
    Unpicklable,
)

pytestmark = pytest.mark.spark


def _conf(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"weir.state.dir": str(tmp_path / "state"), "weir.spark.master": "local[2]", **extra}


def _write(d: Path, name: str, lines: list[str]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_wordcount_exact_and_status(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    expected = generate_corpus(str(corpus), n_words=5_000, n_distinct=200, n_files=3, seed=1)
    conf = _conf(tmp_path)
    run = weir.submit("wc", conf, wordcount_topology(str(corpus)), spark=spark)
    st = run.process_available()
    assert read_counts(conf, "wc") == expected
    assert st.last_txid == 3 and st.batches == 3 and st.state == "stopped"
    assert st.components["count"]["in"] == sum(expected.values())
    assert st.components["split"]["out"] == sum(expected.values())
    # a second run over the same checkpoint finds nothing new and keeps the counts
    run2 = weir.submit("wc", conf, wordcount_topology(str(corpus)), spark=spark)
    run2.process_available()
    assert read_counts(conf, "wc") == expected
    # new input continues at the next txid
    _write(corpus, "part-99999.txt", ["alpha beta alpha"])
    run3 = weir.submit("wc", conf, wordcount_topology(str(corpus)), spark=spark)
    st3 = run3.process_available()
    assert st3.last_txid == 4
    expected.update(["alpha", "beta", "alpha"])
    assert read_counts(conf, "wc") == expected


def test_a_run_makes_each_component_function_once_and_every_task_reads_its_own_batch(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyspark.core.rdd as pyrdd

    made: list[str] = []
    real = pyrdd._wrap_function

    def counting(sc: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(func.__qualname__)
        return real(sc, func, *args, **kwargs)

    monkeypatch.setattr(pyrdd, "_wrap_function", counting)
    corpus = tmp_path / "in"
    for i, lines in enumerate([["a1 a2", "a3"], ["b1 b2"], ["c1"]]):
        _write(corpus, f"part-{i}.txt", lines)
        os.utime(corpus / f"part-{i}.txt", (1_700_000_000 + i, 1_700_000_000 + i))  # Spark reads oldest first
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(corpus), files_per_batch=1))
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("lines")
    b.set_bolt("seen", TxidRecorder(), 2).fields_grouping("split", Fields("word"))
    conf = _conf(tmp_path)
    st = weir.submit("once", conf, b.create_topology(), spark=spark).process_available()
    assert (st.last_txid, st.error) == (3, None)
    got: dict[str, int] = {}
    for task in range(2):
        got.update(dict(StateFactory.get_state(f"once-seen-{task}", conf)))
    assert got == {"a1": 1, "a2": 1, "a3": 1, "b1": 2, "b2": 2, "c1": 3}
    # three Python passes (a one-file batch is one partition, so the split tasks are fed by a shuffle:
    # lines + routing, split + routing, the recorder), each pickled once for the run's three batches
    assert [q for q in made if q.startswith("_compose")] == ["_compose.<locals>.run"] * 3


def _flaky_topology(corpus: Path, marker: Path) -> Any:
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(corpus), files_per_batch=5))
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("lines")
    b.set_bolt("count", FlakyCount(str(marker)), 2).fields_grouping("split", Fields("word"))
    return b.create_topology()


def test_task_whose_first_attempt_raises_is_retried_exactly(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    _write(corpus, "a.txt", ["x y z x", "y x"])
    marker = tmp_path / "fail-once"
    marker.write_text("1")
    conf = _conf(tmp_path)
    st = weir.submit("flaky", conf, _flaky_topology(corpus, marker), spark=spark).process_available()
    assert not marker.exists()
    assert st.retries == 1
    assert read_counts(conf, "flaky") == Counter({"x": 3, "y": 2, "z": 1})


def test_always_failing_tuple_stops_with_named_error_and_rolls_back(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    _write(corpus, "a.txt", ["good fine good"])
    conf = _conf(tmp_path, **{"weir.batch.max.retries": 1})
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(corpus)))
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("lines")
    b.set_bolt("count", PickyCount(raise_instead=True), 2).fields_grouping("split", Fields("word"))
    weir.submit("picky", conf, b.create_topology(), spark=spark).process_available()
    assert read_counts(conf, "picky") == Counter({"good": 2, "fine": 1})
    _write(corpus, "b.txt", ["fine badword fine"])
    with pytest.raises(TopologyError) as ei:
        weir.submit("picky", conf, b.create_topology(), spark=spark).process_available()
    err = ei.value
    assert err.component == "count" and err.txid == 2 and err.task in (0, 1)
    assert "badword" in str(err) and "ValueError" in str(err)
    assert err.remote_traceback and "cannot count" in err.remote_traceback
    # the failed batch changed nothing
    assert read_counts(conf, "picky") == Counter({"good": 2, "fine": 1})
    backend = StateFactory.get_provider(conf).backend  # type: ignore[attr-defined]
    assert all(backend.txids(f"picky-count-{i}").prepared is None for i in range(2))
    rec = json.loads(backend.get("$checkpointspout-picky", b"__state"))
    assert (rec["phase"], rec["txid"]) == ("COMMITTED", 1)


@pytest.mark.parametrize("raise_instead", [False, True])
def test_dead_letter_directory_takes_failed_tuples_and_batch_commits(
    spark: Any, tmp_path: Path, raise_instead: bool
) -> None:
    corpus = tmp_path / "in"
    _write(corpus, "a.txt", ["ok badone ok", "badtwo ok"])
    dl = tmp_path / "dead"
    conf = _conf(tmp_path, **{"weir.deadletter": str(dl)})
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(corpus)))
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("lines")
    b.set_bolt("count", PickyCount(raise_instead=raise_instead), 2).fields_grouping("split", Fields("word"))
    st = weir.submit("dl", conf, b.create_topology(), spark=spark).process_available()
    assert read_counts(conf, "dl") == Counter({"ok": 3})
    assert st.dead_letters == 2
    files = sorted((dl / "dl").glob("txid-*.jsonl"))
    assert [f.name for f in files] == ["txid-000000000001.jsonl"]
    rows = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert sorted(r["values"][0] for r in rows) == ["badone", "badtwo"]
    for r in rows:
        assert r["component"] == "count" and r["txid"] == 1 and r["source_component"] == "split"
        assert ("cannot count" in r["error"]) if raise_instead else ("failed" in r["error"])


def test_malformed_json_record_fails_naming_the_spout_or_goes_to_dead_letter(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "json"
    _write(src, "a.json", ['{"word": "a"}', "{not json", '{"word": "b"}'])

    def topo() -> Any:
        b = TopologyBuilder()
        b.set_spout("events", FileSpout(str(src), format="json", schema="word STRING"))
        b.set_bolt("count", TaskRecorder(), 1).shuffle_grouping("events")
        return b.create_topology()

    with pytest.raises(TopologyError) as ei:
        weir.submit("bad", _conf(tmp_path, **{"weir.batch.max.retries": 0}), topo(), spark=spark).process_available()
    assert ei.value.component == "events" and "{not json" in str(ei.value)
    conf = _conf(tmp_path / "second", **{"weir.deadletter": str(tmp_path / "dead")})
    st = weir.submit("bad", conf, topo(), spark=spark).process_available()
    assert st.dead_letters == 1
    assert read_counts(conf, "bad", "count", 1) == Counter({"a": 1, "b": 1})


def test_groupings_global_all_fields_streams_and_direct(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    words = ["a", "bb", "ccc", "dddd", "eeeee", "a", "bb", "ffffff"]
    _write(corpus, "a.txt", [" ".join(words)])
    conf = _conf(tmp_path)
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(corpus)))
    b.set_bolt("route", Router(), 2).shuffle_grouping("lines")
    b.set_bolt("global", TaskRecorder(), 3).global_grouping("route", "short")
    b.set_bolt("all", TaskRecorder(), 2).all_grouping("route", "long")
    b.set_bolt("fields", TaskRecorder(), 3).fields_grouping("route", "long", Fields("word"))
    b.set_bolt("direct", TaskRecorder(), 2).direct_grouping("route", "direct")
    weir.submit("grp", conf, b.create_topology(), spark=spark).process_available()
    provider = StateFactory.get_provider(conf)

    def task_counts(comp: str, n: int) -> list[Counter[str]]:
        return [Counter(dict(provider.new_state(f"grp-{comp}-{i}"))) for i in range(n)]

    short = Counter(w for w in words if len(w) <= 3)
    long_ = Counter(w for w in words if len(w) > 3)
    g = task_counts("global", 3)
    assert g[0] == short and g[1] == Counter() and g[2] == Counter()
    assert task_counts("all", 2) == [long_, long_]
    f = task_counts("fields", 3)
    assert sum(f, Counter()) == long_
    for w in long_:  # each word in exactly one task
        assert sum(1 for c in f if w in c) == 1
    d = task_counts("direct", 2)
    assert d[0] == Counter(w for w in words if len(w) % 2 == 0)
    assert d[1] == Counter(w for w in words if len(w) % 2 == 1)


def _events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in log.read_text().splitlines()]


def test_hooks_run_at_the_right_moments(spark: Any, tmp_path: Path) -> None:
    """pre_prepare / pre_commit per batch; a failed attempt: pre_rollback on every task, then the retry;
    the checkpoint interval spaces the batches of a continuous run.

    The same topology runs a bolt that deletes and iterates its KeyValueState (rolled back and
    redone by the failed attempt of batch 2)."""
    corpus = tmp_path / "in"
    _write(corpus, "a.txt", ["+one +two +three", "?a"])
    log = tmp_path / "hooks.jsonl"
    marker = tmp_path / "fail-once"
    interval_ms = 2000
    conf = _conf(tmp_path, **{"topology.state.checkpoint.interval.ms": interval_ms})
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(corpus)))
    b.set_bolt("rec", HookRecorder(str(log), str(marker)), 2).shuffle_grouping("lines")
    b.set_bolt("kv", KvOps(), 1).global_grouping("lines")
    weir.submit("hooks", conf, b.create_topology(), spark=spark).process_available()
    events = _events(log)
    assert not [e for e in events if e["event"] in ("pre_rollback", "failed")]
    pp = [i for i, e in enumerate(events) if e["event"] == "pre_prepare" and e["txid"] == 1]
    pc = [i for i, e in enumerate(events) if e["event"] == "pre_commit" and e["txid"] == 1]
    assert sorted(events[i]["task"] for i in pp) == [0, 1] and sorted(events[i]["task"] for i in pc) == [0, 1]
    assert max(pp) < min(pc)  # every pre_prepare of a txid before any of its pre_commits

    # batch 2: its first attempt fails in one task of "rec"; the coordinator calls pre_rollback on
    # every stateful task (driver side), then retries the batch, which commits
    _write(corpus, "b.txt", ["-two +one", "?b", "-nothing"])
    marker.write_text("1")
    log.write_text("")
    st = weir.submit("hooks", conf, b.create_topology(), spark=spark).process_available()
    assert st.last_txid == 2 and st.retries == 1 and not marker.exists()
    seq = [(e["event"], e["txid"]) for e in _events(log)]
    failed = seq.index(("failed", None))
    rollbacks = [i for i, e in enumerate(seq) if e[0] == "pre_rollback"]
    retry_prepares = [i for i, e in enumerate(seq) if e == ("pre_prepare", 2) and i > max(rollbacks)]
    commits = [i for i, e in enumerate(seq) if e == ("pre_commit", 2)]
    assert len(rollbacks) == 2, seq  # rec tasks 0 and 1 (kv does not override pre_rollback)
    assert sorted(e["task"] for e in _events(log) if e["event"] == "pre_rollback") == [0, 1]
    assert failed < min(rollbacks), seq
    assert len(retry_prepares) == 2 and len(commits) == 2, seq
    assert max(rollbacks) < min(retry_prepares) and max(retry_prepares) < min(commits), seq
    assert ("pre_commit", 2) not in seq[: max(rollbacks)]  # nothing of the failed attempt committed
    state = dict(StateFactory.get_provider(conf).new_state("hooks-kv-0"))
    assert state == {
        "one": 2, "three": 1, "$iter-?a": ["one", "three", "two"], "$deleted-two": 1,
        "$iter-?b": ["one", "three"], "$deleted-nothing": None,
    }  # fmt: skip

    # a continuous run (start()): one file per batch, batches started at least an interval apart
    for i in range(4):
        _write(corpus, f"c{i}.txt", [f"+c{i}"])
    run = weir.submit("hooks", conf, b.create_topology(), spark=spark).start()
    try:

        def batches() -> list[dict[str, Any]]:
            return [p for p in run.query.recentProgress if p["numInputRows"] > 0]

        wait_until(lambda: len(batches()) >= 4, timeout=300, what="four batches of the continuous run")
        progress = batches()
    finally:
        run.stop()
    from datetime import datetime

    starts = [datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp() for p in progress]
    assert len(starts) == 4, progress

    # Spark starts a processing-time trigger on the interval's grid (multiples of the interval in
    # epoch time): a batch starts at least an interval after the previous one, or — when the previous
    # one overran the interval on a busy machine — on the next grid point after it ended
    def on_grid(t: float) -> bool:
        off = (t * 1000) % interval_ms
        return min(off, interval_ms - off) < 400

    gaps = [(b - a, on_grid(b)) for a, b in zip(starts[1:], starts[2:], strict=False)]
    assert all(g >= interval_ms / 1000 * 0.9 or grid for g, grid in gaps), gaps  # never off-grid and early
    assert {k for k in dict(StateFactory.get_provider(conf).new_state("hooks-kv-0")) if k.startswith("c")} == {
        "c0",
        "c1",
        "c2",
        "c3",
    }


def test_second_driver_fences_the_first(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    generate_corpus(str(corpus), n_words=500, n_distinct=20, n_files=2, seed=5)
    conf = _conf(tmp_path)
    first = weir.submit("fence", conf, wordcount_topology(str(corpus)), spark=spark)
    second = weir.submit("fence", conf, wordcount_topology(str(corpus)), spark=spark)
    with pytest.raises(FencedError) as ei:
        first.process_available()
    assert "another driver" in str(ei.value)
    assert read_counts(conf, "fence") == Counter()  # the fenced driver committed nothing
    second.process_available()
    assert sum(read_counts(conf, "fence").values()) == 500


def test_submit_time_errors(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    _write(corpus, "a.txt", ["x"])
    topo = wordcount_topology(str(corpus))
    with pytest.raises(ConfigError, match="not valid JSON"):
        weir.submit("e2", _conf(tmp_path, **{"topology.state.provider.config": "{nope"}), topo, spark=spark)
    with pytest.raises(ConfigError, match="weir.batch.max.retrys"):
        weir.submit("e3", _conf(tmp_path, **{"weir.batch.max.retrys": 2}), topo, spark=spark)
    with pytest.raises(ConfigError, match="127.0.0.1:1"):
        weir.submit(
            "e4",
            _conf(tmp_path, **{"topology.state.provider.config": {"url": "redis://127.0.0.1:1/0"}}),
            topo,
            spark=spark,
        )
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(corpus)))
    b.set_bolt("locky", Unpicklable()).shuffle_grouping("lines")
    with pytest.raises(TopologyError, match="locky"):
        weir.submit("e5", _conf(tmp_path), b.create_topology(), spark=spark)
    # parallelism differing from the stored one, with weir.rescale=refuse (re-partitioned by default:
    # tests/spark/test_rescale.py)
    conf = _conf(tmp_path, **{"weir.rescale": "refuse"})
    weir.submit("par", conf, wordcount_topology(str(corpus), parallelism=2), spark=spark).process_available()
    with pytest.raises(ConfigError, match="parallelism 3") as ei:
        weir.submit("par", conf, wordcount_topology(str(corpus), parallelism=3), spark=spark)
    assert "par-count-0..1" in str(ei.value)


def test_custom_provider_by_dotted_path_in_local_mode(spark: Any, tmp_path: Path, redis_server: Any) -> None:
    """A user's StateProvider named by dotted path; its coordinator record in Redis, then in SQLite."""
    from tests.spark._custom_provider import read_namespace

    redis_server.flushall()
    corpus = tmp_path / "in"
    expected = generate_corpus(str(corpus), n_words=1_500, n_distinct=60, n_files=2, seed=4)
    custom = {
        "topology.state.provider": "tests.spark._custom_provider.RedisHashProvider",
        "topology.state.provider.config": {"url": redis_server.url},
    }
    conf = _conf(tmp_path, **custom, **{"weir.coordinator.url": redis_server.url})
    st = weir.submit("custom", conf, wordcount_topology(str(corpus)), spark=spark).process_available()
    assert st.last_txid == 2
    got = Counter(read_namespace(redis_server.url, "custom-count-0")) + Counter(
        read_namespace(redis_server.url, "custom-count-1")
    )
    assert got == expected
    rec = json.loads(StateFactory.from_url(redis_server.url).backend.get("$checkpointspout-custom", b"__state"))
    assert (rec["phase"], rec["txid"]) == ("COMMITTED", 2)
    assert not (tmp_path / "state" / "state.db").exists()
    # without weir.coordinator.url the record goes to <weir.state.dir>/state.db (local mode only)
    conf2 = _conf(tmp_path / "b", **custom)
    weir.submit("custom2", conf2, wordcount_topology(str(corpus)), spark=spark).process_available()
    assert (
        Counter(read_namespace(redis_server.url, "custom2-count-0"))
        + Counter(read_namespace(redis_server.url, "custom2-count-1"))
        == expected
    )
    sq = StateFactory.from_url(f"sqlite:///{tmp_path / 'b' / 'state' / 'state.db'}").backend
    assert json.loads(sq.get("$checkpointspout-custom2", b"__state"))["txid"] == 2


def test_memory_provider_lives_for_the_run_on_local_spark(spark: Any, tmp_path: Path) -> None:
    """Storm's in-memory provider: a run-scoped store (warned about), exact during the run, empty after a restart."""
    from weir.errors import NotDurableWarning

    corpus = tmp_path / "in"
    expected = generate_corpus(str(corpus), n_words=1_000, n_distinct=40, n_files=2, seed=8)
    conf = _conf(tmp_path, **{"topology.state.provider": "memory"})
    with pytest.warns(NotDurableWarning, match="'memory' state provider is not durable"):
        run = weir.submit("memwc", conf, wordcount_topology(str(corpus)), spark=spark)
    run.process_available()
    assert isinstance(run.provider, StateFactory.from_url("sqlite:///x.db").__class__)

    def counts(r: Any) -> Counter[str]:
        return sum((Counter(dict(r.provider.new_state(f"memwc-count-{i}"))) for i in range(2)), Counter())

    assert counts(run) == expected
    _write(corpus, "zzz.txt", ["alpha alpha"])
    with pytest.warns(NotDurableWarning):
        again = weir.submit("memwc", conf, wordcount_topology(str(corpus)), spark=spark)
    again.process_available()
    assert counts(again) == Counter({"alpha": 2})  # a restart starts from empty state (as in Storm)


def test_coordinator_store_is_checked_at_submit() -> None:
    from tests.spark._custom_provider import RedisHashProvider
    from weir.runtime.spark.config import RuntimeConfig
    from weir.runtime.spark.runner import make_coordinator

    rc = RuntimeConfig.from_conf("c", {})
    with pytest.raises(ConfigError, match="weir.coordinator.url"):
        make_coordinator("c", {}, RedisHashProvider(), None, {}, rc, "spark://10.0.0.1:7077")
    rc = RuntimeConfig.from_conf("c", {"weir.coordinator.url": "sqlite:///x.db"})
    with pytest.raises(ConfigError, match="a file on one machine"):
        make_coordinator("c", {}, RedisHashProvider(), None, {}, rc, "spark://10.0.0.1:7077")
    with pytest.raises(ConfigError, match="weir.coordinator.url"):
        RuntimeConfig.from_conf("c", {"weir.coordinator.url": "memory://x"})
    with pytest.raises(ConfigError, match="unknown scheme"):
        RuntimeConfig.from_conf("c", {"weir.coordinator.url": "ftp://x"})
    builtin = StateFactory.from_url("sqlite:///" + "/tmp/weir-never-opened.db")
    rc = RuntimeConfig.from_conf("c", {"weir.coordinator.url": "redis://127.0.0.1:1/0"})
    with pytest.raises(ConfigError, match="for custom state providers"):
        make_coordinator("c", {}, builtin, None, {}, rc, "local[2]")


def test_sqlite_refused_on_a_cluster_master() -> None:
    from weir.runtime.spark.runner import check_local_store

    with pytest.raises(ConfigError, match="sqlite"):
        check_local_store("sqlite", "spark://10.0.0.1:7077", "wc")
    check_local_store("sqlite", "local[2]", "wc")
    with pytest.raises(ConfigError, match="'memory' state provider .* local mode only"):
        check_local_store("memory", "spark://10.0.0.1:7077", "wc")
    check_local_store("memory", "local[2]", "wc")
