"""The Storm runtime over Spark Connect: DataFrame stages route, report and fail as the classic RDD job.

A batch job (:class:`~weir.runtime.spark.storm.batch.BatchJob`) runs the same batch through classic
PySpark (the batch's RDD) and through a real Spark Connect server (the batch's Connect DataFrame:
``mapInArrow`` stages, reports as rows); the tuples every task of every grouping received must be
the same, exactly.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import weir
from weir.runtime.spark.config import RuntimeConfig
from weir.runtime.spark.storm.submit import submit_topology
from weir.sources import FileSpout
from weir.topology import BaseBasicBolt, Fields, TopologyBuilder, Values

from ._topologies import Router

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def connect(spark_connect_url: str) -> Iterator[Any]:
    """A Spark Connect client session on the test server."""
    from pyspark.sql import SparkSession

    session = SparkSession.builder.remote(spark_connect_url).create()
    try:
        yield session
    finally:
        session.stop()
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)  # set by create(): the module's tests are done


class Recorder(BaseBasicBolt):
    """Appends ``txid word`` for every input to ``<test.record.dir>/<component>-<task>.txt``; fails on ``boom``."""

    def prepare(self, conf: Any, context: Any) -> None:
        self.path = Path(conf["test.record.dir"]) / f"{context.component_id}-{context.task_index}.txt"
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("word"))

    def execute(self, tup: Any, collector: Any) -> None:
        word = tup.get_value(0)
        if word == "boom":
            msg = "boom is not a word"
            raise ValueError(msg)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(f"{tup.txid} {word}\n")
        collector.emit(Values(word))


def _recorded(d: Path) -> dict[str, Counter[str]]:
    return {p.stem: Counter(p.read_text().split()) for p in sorted(d.glob("*.txt"))}


def _grouping_topology(corpus: Path) -> Any:
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(corpus)))
    b.set_bolt("route", Router(), 2).shuffle_grouping("lines")
    b.set_bolt("global", Recorder(), 3).global_grouping("route", "short")
    b.set_bolt("all", Recorder(), 2).all_grouping("route", "long")
    b.set_bolt("fields", Recorder(), 3).fields_grouping("route", "long", Fields("word"))
    b.set_bolt("direct", Recorder(), 2).direct_grouping("route", "direct")
    b.set_bolt("after", Recorder(), 2).shuffle_grouping("fields")  # 3 tasks to 2: through an exchange
    b.set_bolt("chained", Recorder(), 2).shuffle_grouping("direct")  # 2 tasks to 2: in its producer's stage
    return b.create_topology()


def _split_then_count(connect: Any, tmp_path: Path, name: str, splits: int, counts: int) -> tuple[dict[str, Any], Any]:
    """A word count's shape over Connect: a spout, a stateless ``split`` (:class:`Recorder`), a stateful ``rec``.

    ``split`` reads the spout with a shuffle grouping (in its stage), ``rec`` (a
    :class:`~tests.spark._topologies.TaskRecorder`) reads ``split`` behind a fields grouping.
    """
    from ._topologies import TaskRecorder

    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(tmp_path / "unused")))
    b.set_bolt("split", Recorder(), splits).shuffle_grouping("lines")
    b.set_bolt("rec", TaskRecorder(), counts).fields_grouping("split", Fields("word"))
    conf = {"weir.state.dir": str(tmp_path / "state"), "test.record.dir": str(tmp_path / "rec")}
    return conf, weir.submit(name, conf, b.create_topology(), spark=connect)


def _first_attempt(run: Any, bid: int, df: Any) -> dict[str, Any]:
    """Run batch ``bid`` (the Connect DataFrame ``df``) through the coordinator: its components' stats.

    The batch must commit as txid ``bid + 1`` at its first attempt.
    """

    def job(txid: int, epoch: int | None, attempt: int) -> Any:
        return run.runner.run(df, "lines", txid, epoch)

    rep = run.coordinator.run_batch("query", bid, job)
    assert (rep.txid, rep.attempts) == (bid + 1, 1), rep
    comps: dict[str, Any] = rep.stats["components"]
    return comps


def _job(spark: Any, name: str, topology: Any, conf: dict[str, Any]) -> Any:
    plan = submit_topology(name, conf, topology, RuntimeConfig.from_conf(name, conf), spark)
    return plan.job


def test_every_grouping_routes_alike_on_classic_and_connect(spark: Any, connect: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    corpus.mkdir()
    words = ["a", "bb", "ccc", "dddd", "eeeee", "a", "bb", "ffffff", "gggg", "hhhhhhh"]
    (corpus / "a.txt").write_text(" ".join(words[:5]) + "\n" + " ".join(words[5:]) + "\n", encoding="utf-8")
    seen = {}
    stats = {}
    for dialect in ("classic", "connect"):
        conf = {"weir.state.dir": str(tmp_path / dialect / "state"), "test.record.dir": str(tmp_path / dialect)}
        job = _job(spark, f"grp{dialect}", _grouping_topology(corpus), conf)
        batch = spark.read.text(str(corpus)).rdd if dialect == "classic" else connect.read.text(str(corpus))
        out = job.run(batch, "lines", 7, None)
        assert out.ok, out.failures
        seen[dialect] = _recorded(tmp_path / dialect)
        stats[dialect] = out.stats["components"]
    short = Counter(w for w in words if len(w) <= 3)
    long_ = Counter(w for w in words if len(w) > 3)
    for dialect, rec in seen.items():
        got = {k: Counter({w: n for w, n in c.items() if w != "7"}) for k, c in rec.items()}
        assert got["global-0"] == short and "global-1" not in got and "global-2" not in got, dialect
        assert got["all-0"] == long_ and got["all-1"] == long_, dialect
        assert sum((got.get(f"fields-{i}", Counter()) for i in range(3)), Counter()) == long_
        assert got["direct-0"] == Counter(w for w in words if len(w) % 2 == 0)
        assert got["direct-1"] == Counter(w for w in words if len(w) % 2 == 1)
        assert sum((got.get(f"after-{i}", Counter()) for i in range(2)), Counter()) == long_
        assert sum((got.get(f"chained-{i}", Counter()) for i in range(2)), Counter()) == Counter(words)
        assert all(c["7"] == sum(c.values()) - c["7"] for c in rec.values())  # every tuple carried txid 7
    # the same task of the same component received the same tuples (fields: the same stable hash); a
    # shuffle's round robin depends on the order its producer task read its input in, which may differ
    exact = ("global", "all", "fields", "direct", "chained")
    assert {k: c for k, c in seen["classic"].items() if k.startswith(exact)} == {
        k: c for k, c in seen["connect"].items() if k.startswith(exact)
    }
    for comp in ("route", "global", "all", "fields", "direct", "after", "chained"):
        assert stats["connect"][comp]["in"] == stats["classic"][comp]["in"], comp
        assert stats["connect"][comp]["tasks"] == stats["classic"][comp]["tasks"], comp


def test_a_failing_task_is_named_over_connect_and_its_dead_letters_come_back_as_rows(
    spark: Any, connect: Any, tmp_path: Path
) -> None:
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "a.txt").write_text("a boom b\n", encoding="utf-8")
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(corpus)))
    b.set_bolt("split", Router(), 1).shuffle_grouping("lines")
    b.set_bolt("rec", Recorder(), 2).global_grouping("split", "long")
    b.set_bolt("rec2", Recorder(), 2).global_grouping("split", "short")
    conf = {"weir.state.dir": str(tmp_path / "state"), "test.record.dir": str(tmp_path / "rec")}
    job = _job(spark, "fail", b.create_topology(), conf)
    out = job.run(connect.read.text(str(corpus)), "lines", 3, None)
    assert not out.ok
    (failure,) = out.failures
    assert (failure.component, failure.task) == ("rec", 0)
    assert "ValueError" in failure.error and "boom is not a word" in failure.error
    assert "boom is not a word" in failure.traceback

    dead_dir = tmp_path / "dead"
    conf = {**conf, "weir.deadletter": str(dead_dir), "test.record.dir": str(tmp_path / "rec-dl")}
    job = _job(spark, "faildl", b.create_topology(), conf)
    out = job.run(connect.read.text(str(corpus)), "lines", 4, None)
    assert out.ok, out.failures
    assert out.stats["dead_letters"] == 1
    dead = [json.loads(x) for p in sorted(dead_dir.rglob("*")) if p.is_file() for x in p.read_text().splitlines()]
    assert [(d["component"], d["task"], d["txid"], d["values"]) for d in dead] == [("rec", 0, 4, ["boom"])]
    assert _recorded(tmp_path / "rec-dl") == {"rec2-0": Counter({"4": 2, "a": 1, "b": 1})}


def test_a_batch_of_connect_reads_no_job_local_property_and_no_accumulator(
    spark: Any, connect: Any, tmp_path: Path
) -> None:
    """Two batches in a row over Connect: each task reads the txid its functions were made with."""
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "a.txt").write_text("a bb ccc dddd\n", encoding="utf-8")
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(corpus)))
    b.set_bolt("split", Router(), 2).shuffle_grouping("lines")
    b.set_bolt("rec", Recorder(), 2).fields_grouping("split", "long", Fields("word"))
    conf = {"weir.state.dir": str(tmp_path / "state"), "test.record.dir": str(tmp_path / "rec")}
    job = _job(spark, "twice", b.create_topology(), conf)
    for txid in (11, 12):
        out = job.run(connect.read.text(str(corpus)), "lines", txid, None)
        assert out.ok, out.failures
        assert out.stats["components"]["rec"]["in"] == 1
        assert out.stats["components"]["split"]["in"] == 1
    got = sum(_recorded(tmp_path / "rec").values(), Counter())
    assert got == Counter({"11": 1, "12": 1, "dddd": 2})


@pytest.mark.parametrize("dialect", ["classic", "connect"])
def test_a_failed_batch_resets_only_its_streams_region_on_classic_and_connect(
    dialect: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Streams operators in two independent consistent regions, driven batch by batch by the coordinator:
    a failure in region ``b`` rolls back and resets only ``b`` (to its checkpoint of the batch before);
    ``a`` keeps its cut and does not run again; both totals are exact."""
    from tests.crash.streams_regions_driver import Parse, Summer
    from weir.streams import load_checkpoint

    session = request.getfixturevalue("spark" if dialect == "classic" else "connect")
    batches = [[1, 2, 3], [10, 11, 12], [20, 21, 22]]
    inputs, markers, log = tmp_path / "in", tmp_path / "markers", tmp_path / "calls.log"
    inputs.mkdir()
    markers.mkdir()
    files = []
    for i, values in enumerate(batches):
        f = inputs / f"f{i}.txt"
        f.write_text("".join(f"{v}\n" for v in values))
        files.append(f)
    (markers / "fail-11").write_text("")  # b fails once on 11 (batch 2)
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(inputs)))
    b.set_bolt("parse", Parse(), 1).shuffle_grouping("lines")
    b.set_bolt("a", Summer("a", str(log)), 1).shuffle_grouping("parse")
    b.set_bolt("b", Summer("b", str(log), str(markers)), 1).shuffle_grouping("parse")
    b.consistent_region("a")
    b.consistent_region("b", max_consecutive_reset_attempts=2)
    url = f"sqlite:///{tmp_path / 'state.db'}"
    name = f"regions{dialect}"
    conf = {
        "weir.state.dir": str(tmp_path / "state"),
        "topology.state.provider.config": {"url": url},
        "weir.batch.max.retries": 2,
    }
    run = weir.submit(name, conf, b.create_topology(), spark=session)

    def read(f: Path) -> Any:
        df = session.read.text(str(f))
        return df.rdd if dialect == "classic" else df

    reports = _drive(run, read, files, [0, 1, 2])
    assert [(r.txid, r.attempts) for r in reports] == [(1, 1), (2, 2), (3, 1)]
    assert not (markers / "fail-11").exists()
    calls: dict[str, list[tuple[str, str]]] = {"a": [], "b": []}
    events: list[tuple[str, str, tuple[str, str]]] = []  # (operator, Python worker's pid, call) in log order
    for line in log.read_text().splitlines():
        op, pid, method, *arg = line.split()
        calls[op].append((method, arg[0] if arg else ""))
        events.append((op, pid, (method, arg[0] if arg else "")))
    every = [v for values in batches for v in values]
    # a ran each batch once: its cut of batch 2 was kept through b's failure
    assert [int(v) for m, v in calls["a"] if m == "process"] == every
    # b failed on 11, was reset to its checkpoint of batch 1, and ran batch 2 again
    assert [int(v) for m, v in calls["b"] if m == "process"] == [1, 2, 3, 10, 11, 10, 11, 12, 20, 21, 22]
    # the instance that ran batch 2 again held checkpoint 1's state: reset to it after the failure, or (a task
    # that moved to another Python worker) the instance kept there since it took checkpoint 1, idle since
    again = [k for k, (op, _, c) in enumerate(events) if op == "b" and c == ("process", "10")][1]
    pid = events[again][1]
    before = [c for op, p, c in events[:again] if op == "b" and p == pid]
    assert before and before[-1] in (("reset", "1"), ("checkpoint", "1")), events
    for op in ("a", "b"):  # any other reset: a task that moved to another Python worker, handed its state
        seq = [c for c in calls[op] if c[0] in ("checkpoint", "reset", "reset_to_initial_state")]
        assert ("reset_to_initial_state", "") not in seq, (op, seq)
        for i, (method, arg) in enumerate(seq):
            if method == "reset":  # always to the latest checkpoint taken before it
                assert [a for m, a in seq[:i] if m == "checkpoint"][-1] == arg, (op, seq)
    for op in ("a", "b"):
        ck = load_checkpoint(url, name, op, 0)
        assert ck is not None and ck.sequence_id == 3 and ck.get("total") == sum(every), op


# ---- exactly once, classic and Connect: the coordinator drives the batch job batch by batch ----------
# (the streaming query's foreachBatch is the runner's; here each batch is one input file read as a
# DataFrame of the session, and the real coordinator makes every batch a transaction in Redis)


def _drive(run: Any, read: Any, files: list[Path], batch_ids: list[int]) -> list[Any]:
    reports = []
    for bid in batch_ids:
        df = read(files[bid])

        def job(txid: int, epoch: int | None, attempt: int, _df: Any = df) -> Any:
            return run.runner.run(_df, "lines", txid, epoch)

        rep = run.coordinator.run_batch("query", bid, job)
        run.runner.after_batch(rep.txid, rep.skipped)
        reports.append(rep)
    return reports


@pytest.mark.parametrize("dialect", ["classic", "connect"])
def test_wordcount_is_exact_through_a_retry_and_a_replay(
    dialect: str, request: pytest.FixtureRequest, redis_server: Any, tmp_path: Path
) -> None:
    from weir.demo import SplitSentence, generate_corpus, read_counts

    from ._topologies import FlakyCount

    session = request.getfixturevalue("spark" if dialect == "classic" else "connect")
    corpus = tmp_path / "in"
    expected = generate_corpus(str(corpus), n_words=1_500, n_distinct=60, n_files=3, seed=5)
    files = sorted(corpus.iterdir())
    marker = tmp_path / "fail-once"
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(corpus)))
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("lines")
    b.set_bolt("count", FlakyCount(str(marker)), 2).fields_grouping("split", Fields("word"))
    name = f"exact{dialect}"
    conf = {
        "weir.state.dir": str(tmp_path / "state"),
        "topology.state.provider": "redis",
        "topology.state.provider.config": {"url": redis_server.url},
    }
    run = weir.submit(name, conf, b.create_topology(), spark=session)

    def read(f: Path) -> Any:
        df = session.read.text(str(f))
        return df.rdd if dialect == "classic" else df

    first = _drive(run, read, files, [0])
    marker.write_text("1")  # batch 1's first attempt fails in a count task: rolled back, retried
    second = _drive(run, read, files, [1, 2])
    replay = _drive(run, read, files, [2])  # Spark replays a batch it did not mark done: skipped
    assert not marker.exists()
    assert [r.txid for r in first + second] == [1, 2, 3]
    assert [r.attempts for r in first + second] == [1, 2, 1]
    assert replay[0].txid == 3 and replay[0].skipped
    assert read_counts(conf, name) == expected
    assert second[1].stats["components"]["count"]["in"] == sum(
        len(line.split()) for line in files[2].read_text().splitlines()
    )


def test_a_windowed_bolt_commits_the_same_windows_on_classic_and_connect(
    spark: Any, connect: Any, redis_server: Any, tmp_path: Path
) -> None:
    """Event-time sliding windows kept in the store, late tuples on their stream: the same state on both."""
    from tests.crash._window_topology import build, write_readings

    readings = tmp_path / "readings"
    write_readings(str(readings), n_files=3, per_file=30)
    files = sorted(readings.glob("r-*.txt"))
    sinks = {}
    for dialect, session in (("classic", spark), ("connect", connect)):
        name = f"win{dialect}"
        conf = {
            "weir.state.dir": str(tmp_path / dialect),
            "topology.state.provider": "redis",
            "topology.state.provider.config": {"url": redis_server.url},
        }
        run = weir.submit(name, conf, build(str(readings)), spark=session)

        def read(f: Path, _s: Any = session, _classic: bool = dialect == "classic") -> Any:
            df = _s.read.text(str(f))
            return df.rdd if _classic else df

        reports = []
        for bid, f in enumerate(files):
            df = read(f)

            def job(txid: int, epoch: int | None, attempt: int, _df: Any = df, _run: Any = run) -> Any:
                return _run.runner.run(_df, "readings", txid, epoch)

            rep = run.coordinator.run_batch("query", bid, job)
            run.runner.after_batch(rep.txid, rep.skipped)
            reports.append(rep)
        assert [r.txid for r in reports] == [1, 2, 3] and all(r.attempts == 1 for r in reports)
        from weir.state import StateFactory

        sinks[dialect] = dict(StateFactory.get_provider(conf).new_state(f"{name}-sink-0"))
    assert any(k.startswith("w") for k in sinks["classic"]) and any(k.startswith("late:") for k in sinks["classic"])
    assert sinks["connect"] == sinks["classic"]


def test_a_streaming_word_count_runs_end_to_end_over_connect(
    spark_connect_url: str, redis_server: Any, tmp_path: Path
) -> None:
    """``weir.spark.remote``: the query's foreachBatch on the server, relayed to this process's coordinator."""
    from weir.demo import generate_corpus, read_counts, wordcount_topology

    corpus = tmp_path / "in"
    expected = generate_corpus(str(corpus), n_words=1_500, n_distinct=60, n_files=3, seed=9)
    conf = {
        "weir.state.dir": str(tmp_path / "state"),
        "weir.spark.remote": spark_connect_url,
        "topology.state.provider": "redis",
        "topology.state.provider.config": {"url": redis_server.url},
        "weir.restart.max": 5,  # the server's foreachBatch worker may miss its 10 s connect-back when loaded
    }
    st = weir.submit(
        "e2ecx", conf, wordcount_topology(str(corpus), parallelism=2, files_per_batch=1)
    ).process_available()
    assert st.error is None and st.last_txid == 3 and st.batches == 3
    assert read_counts(conf, "e2ecx") == expected
    assert st.components["count"]["in"] == sum(expected.values())


def test_the_spout_stage_reads_the_batch_partitions_without_an_exchange(connect: Any, tmp_path: Path) -> None:
    """A stateful bolt fused into the spout stage (3 tasks), over batches of 1, 3 and 5 Spark partitions.

    Every task runs exactly once per batch, reports, prepares and commits (its namespace holds the
    txid), the tasks without a partition of the batch included; with at most 3 partitions, task *i*
    reads the batch's partition *i*, as the classic job's spout task *i* reads the batch
    RDD's partition *i*; with 5, each partition goes whole to one task; every row is counted once.
    """
    from pyspark.sql import functions as sf

    from weir.state import StateFactory

    from ._topologies import TaskRecorder

    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(tmp_path / "unused")))
    b.set_bolt("rec", TaskRecorder(), 3).shuffle_grouping("lines")
    conf = {"weir.state.dir": str(tmp_path / "state")}
    run = weir.submit("narrow", conf, b.create_topology(), spark=connect)
    sizes = {1: 7, 3: 11, 5: 13}  # Spark partitions of the batch -> rows
    for bid, (parts, rows) in enumerate(sizes.items()):
        df = connect.range(0, rows, 1, parts).select(
            sf.format_string("b%dp%dr%d", sf.lit(bid), sf.spark_partition_id(), sf.col("id")).alias("value")
        )

        comps = _first_attempt(run, bid, df)
        assert (comps["lines"]["tasks"], comps["lines"]["in"]) == (3, rows), (parts, comps)
        assert (comps["rec"]["tasks"], comps["rec"]["in"]) == (3, rows), (parts, comps)
    provider = StateFactory.get_provider(conf)
    states = [provider.new_state(f"narrow-rec-{t}", conf) for t in range(3)]
    assert [s.committed_txid for s in states] == [3, 3, 3]  # every task prepared every txid
    owners: dict[tuple[int, int, int], list[int]] = {}  # (batch, partition, row) -> the tasks that counted it
    for t, s in enumerate(states):
        for word, n in s:
            found = re.fullmatch(r"b(\d+)p(\d+)r(\d+)", word)
            assert found is not None, word
            owners.setdefault((int(found[1]), int(found[2]), int(found[3])), []).extend([t] * n)
    assert sorted((bid, i) for bid, _, i in owners) == [(b, i) for b, n in enumerate(sizes.values()) for i in range(n)]
    assert all(len(tasks) == 1 for tasks in owners.values()), owners  # every row counted once
    for (bid, part, _), (task,) in owners.items():
        if bid < 2:  # at most as many partitions as tasks: partition i is task i
            assert task == part, owners
    for part in range(5):  # more: coalesced, each partition whole in one task
        assert len({t for (bid, p, _), (t,) in owners.items() if (bid, p) == (2, part)}) == 1, owners


def test_every_consumer_task_runs_from_the_producers_presence_rows_without_a_server_made_union(
    connect: Any, tmp_path: Path
) -> None:
    """A 3-task stateful bolt behind a fields grouping, over a batch of one tuple and an empty batch.

    Every task of the consumer runs once per batch and prepares every txid although at most one
    of them gets a tuple: the producer's task 0 sends each consumer task a presence row through
    the exchange. The exchange reads the producer's stage alone: the batch's analysed plan has no
    ``Union``, no presence rows made by the server in front of the exchange (and the spout stage,
    a stateless split, none either: its sparse layout, which reads the batch coalesced with no
    projection in between).
    """
    from pyspark.sql import functions as sf

    from weir.runtime.spark.storm.batch import _as_block, key_for_grouping
    from weir.runtime.spark.storm.connect import ConnectGraph
    from weir.runtime.spark.storm.instances import LineageTracker
    from weir.state import StateFactory

    conf, run = _split_then_count(connect, tmp_path, "presence", 2, 3)
    batches = [
        connect.range(0, 1, 1, 1).select(sf.lit("one").alias("value")),
        connect.range(0).select(sf.lit("x").alias("value")),
    ]
    for bid, df in enumerate(batches):
        comps = _first_attempt(run, bid, df)
        assert (comps["rec"]["tasks"], comps["rec"]["in"]) == (3, 1 - bid), comps
    provider = StateFactory.get_provider(conf)
    states = [provider.new_state(f"presence-rec-{t}", conf) for t in range(3)]
    assert [s.committed_txid for s in states] == [2, 2, 2]  # every task prepared both txids
    assert sorted(w for s in states for w, _ in s) == ["one"]

    runner = run.runner
    graph = ConnectGraph(
        runner.topology,
        runner.specs,
        runner.loops,
        3,
        None,
        LineageTracker().next(),
        False,
        key_for_grouping,
        _as_block,
    )
    text = graph.job(batches[0], "lines", {})._explain_string(extended=True)
    analysed = text.split("== Analyzed Logical Plan ==")[1].split("== Optimized Logical Plan ==")[0]
    lines = analysed.strip().splitlines()
    exchange = next(i for i, line in enumerate(lines) if "RepartitionByExpression" in line)
    # the spout stage (a stateless split: the sparse layout) reads the batch coalesced, its own columns
    assert "MapInArrow stage()" in lines[exchange + 1], analysed
    assert "Repartition 2, false" in lines[exchange + 2], analysed
    assert "Project [one AS value" in lines[exchange + 3], analysed  # the batch's plan: nothing added before the stage
    assert analysed.count("Union ") == 0, analysed  # and the spout stage (a stateless split) has no presence partition


def _partitions_of(df: Any) -> list[list[str]]:
    """The values in each Spark partition of the sparse spout stage's input ``df`` (the batch's own columns)."""
    import pyarrow as pa

    def per_partition(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        values: list[str] = []
        for rb in batches:
            values += rb.column(0).to_pylist()
        ctx = TaskContext.get()
        yield pa.RecordBatch.from_arrays(
            [pa.array([ctx.partitionId() if ctx else -1], pa.int32()), pa.array([json.dumps(sorted(values))])],
            names=["p", "values"],
        )

    assert df.columns == ["value"]  # nothing added to the batch's columns: no projection before the stage
    rows = df.mapInArrow(per_partition, "p int, values string").collect()
    return [json.loads(r["values"]) for r in sorted(rows, key=lambda r: r["p"])]


def test_a_stateless_spout_stage_reads_the_batch_in_as_many_partitions_as_tasks(connect: Any, tmp_path: Path) -> None:
    """A spout and a stateless 3-task bolt in one stage (the word count's shape), over batches of 0-5 partitions.

    The stage's input is the batch coalesced to at most 3 Spark partitions, nothing else: 3 Python
    tasks for a batch of 3 or 5 partitions, not 4 (no partition of presence rows); a batch of *k*
    < 3 partitions runs *k* tasks and the others report idle; a batch of no partition runs no
    task, so the job runs again with a presence partition (no task idle). Partition *i* is task
    *i*; every row is read once; the stateful bolt behind a fields grouping prepares every txid in
    every task, and its counts are exact.
    """
    from pyspark.sql import functions as sf

    from weir.runtime.spark.storm.connect import ConnectGraph
    from weir.state import StateFactory

    conf, run = _split_then_count(connect, tmp_path, "sparse", 3, 2)
    sizes = {0: 0, 1: 5, 2: 7, 3: 11, 5: 13}  # Spark partitions of the batch -> rows
    expected: Counter[str] = Counter()
    for bid, (parts, rows) in enumerate(sizes.items()):
        df = connect.range(0, rows, 1, parts) if parts else connect.range(0, 0)
        df = df.select(sf.format_string("b%dp%dr%d", sf.lit(bid), sf.spark_partition_id(), sf.col("id")).alias("value"))
        spread = _partitions_of(ConnectGraph._spread(df, 3, sparse=True))
        assert len(spread) == min(parts, 3), (parts, spread)
        assert sorted(v for p in spread for v in p) == sorted(df.toPandas()["value"]), parts  # every row once
        if parts == 3:  # one partition of the batch in each, whole
            assert [sorted({v.split("r")[0] for v in p}) for p in spread] == [[f"b{bid}p{i}"] for i in range(3)]

        comps = _first_attempt(run, bid, df)
        assert (comps["split"]["tasks"], comps["split"]["in"]) == (3, rows), (parts, comps)
        idle = max(0, 3 - parts) if parts else 0  # no partition: run again with every task running
        assert (comps["lines"].get("idle", 0), comps["split"].get("idle", 0)) == (idle, idle), (parts, comps)
        assert (comps["rec"]["tasks"], comps["rec"]["in"]) == (2, rows), (parts, comps)
        expected.update(f"b{bid}p{p}r{i}" for p, vals in enumerate(spread) for i in range(len(vals)))
    recorded = _recorded(tmp_path / "rec")
    words_of_task = {t: {w for w in recorded.get(f"split-{t}", Counter()) if not w.isdigit()} for t in range(3)}
    for bid, parts in enumerate(sizes):
        if 0 < parts <= 3:  # partition i of the batch (at most as many as tasks) is task i
            for t in range(3):
                got = {w.split("r")[0] for w in words_of_task[t] if w.startswith(f"b{bid}p")}
                assert got <= {f"b{bid}p{t}"}, (parts, t, got)
    provider = StateFactory.get_provider(conf)
    states = [provider.new_state(f"sparse-rec-{t}", conf) for t in range(2)]
    assert [s.committed_txid for s in states] == [5, 5]  # both tasks prepared every txid, the empty batch's too
    counted: Counter[str] = Counter()
    for s in states:
        for word, n in s:
            counted[word] += n
    assert sum(counted.values()) == sum(sizes.values()) and all(n == 1 for n in counted.values())


def test_only_a_chain_that_does_nothing_without_input_leaves_tasks_unrun(connect: Any, tmp_path: Path) -> None:
    """The sparse layout is chosen for a spout fused with plain stateless bolts only.

    A stateful, windowed or tick-driven bolt fused into the spout's stage, and the final mark's
    batch, keep the layout where every task runs (a presence partition for the tasks without a
    partition of the batch).
    """
    from weir.runtime.spark.storm.batch import _as_block, key_for_grouping
    from weir.runtime.spark.storm.connect import ConnectGraph
    from weir.runtime.spark.storm.instances import LineageTracker
    from weir.topology.ticks import TOPOLOGY_TICK_TUPLE_FREQ_SECS
    from weir.topology.windowing import Count

    from ._fidelity import TumblingNumbers
    from ._topologies import TaskRecorder

    def chosen(name: str, second: Any, *, final: bool = False, ticks: bool = False) -> bool:
        b = TopologyBuilder()
        b.set_spout("lines", FileSpout(str(tmp_path / "unused")))
        d = b.set_bolt("split", Recorder(), 2).shuffle_grouping("lines")
        if ticks:
            d.add_configuration(TOPOLOGY_TICK_TUPLE_FREQ_SECS, 1)
        b.set_bolt("second", second, 2).shuffle_grouping("split")  # fused too: 2 tasks to 2
        conf = {"weir.state.dir": str(tmp_path / name), "test.record.dir": str(tmp_path / "rec")}
        run = weir.submit(name, conf, b.create_topology(), spark=connect)
        r = run.runner
        graph = ConnectGraph(
            r.topology, r.specs, r.loops, 1, None, LineageTracker().next(), final, key_for_grouping, _as_block
        )
        graph.job(connect.range(0, 4, 1, 2).selectExpr("cast(id as string) as value"), "lines", {})
        return bool(graph.sparse)

    assert chosen("plain", Recorder()) is True
    assert chosen("final", Recorder(), final=True) is False
    assert chosen("ticks", Recorder(), ticks=True) is False
    assert chosen("stateful", TaskRecorder()) is False
    assert chosen("windowed", TumblingNumbers().with_window(Count(2))) is False
