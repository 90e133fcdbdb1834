"""streamparse topologies run unchanged: the DSL's wiring, the bolt and spout adapters, Spark end to end, SIGKILL.

The topologies are written as a streamparse user writes them (tests/streamparse_compat/_topology.py),
streamparse 5.0.1 from PyPI; the spout reads and acks in a real Redis, the count bolt keeps weir state
on Redis, and a bolt writes the running counts into a Redis hash.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from streamparse import BatchingBolt, Bolt, Grouping, JavaBolt, Spout, Stream, TicklessBatchingBolt, Topology

import weir
from tests.streamparse_compat._topology import (
    SplitBolt,
    WordCount,
    WordCountBolt,
    acked,
    lines_for,
    load_lines,
    redis_counts,
)
from weir.cli.run_cmd import load_target
from weir.errors import ConfigError, TopologyError
from weir.streamparse import StreamparseBolt, StreamparseStatefulBolt, to_topology
from weir.topology import GroupingKind, OutputCollector, TopologyContext, Tuple
from weir.topology.ticks import tick_tuple
from weir.topology.tuple import Fields


class Words(Spout):
    outputs = [Stream(["word"]), Stream(["word"], name="direct_words", direct=True)]

    def next_tuple(self) -> None:
        pass


class Echo(Bolt):
    outputs = ["word"]

    def process(self, tup: Any) -> None:
        self.emit([tup.values[0]])


class Many(Topology):
    words = Words.spec(par=2)
    shuffle = Echo.spec(inputs=[words], par=3, config={"topology.tick.tuple.freq.secs": 5})
    fields = Echo.spec(inputs={words: Grouping.fields("word")}, par={"prod": 4, "dev": 1})
    glob = Echo.spec(inputs={words: Grouping.GLOBAL})
    all_ = Echo.spec(name="all", inputs={shuffle: Grouping.ALL})
    none = Echo.spec(inputs={fields: Grouping.NONE})
    local = Echo.spec(inputs={glob: Grouping.LOCAL_OR_SHUFFLE})
    direct = Echo.spec(inputs={words["direct_words"]: Grouping.DIRECT})


def test_the_dsl_wiring_becomes_weir_s_topology() -> None:
    topo = to_topology(Many, {"streamparse.environment": "prod"}, "many")
    kinds = {c: [(s.source, s.stream, s.grouping.kind, s.grouping.fields) for s in spec.inputs]
             for c, spec in topo.components.items()}  # fmt: skip
    assert kinds["shuffle"] == [("words", "default", GroupingKind.SHUFFLE, ())]
    assert kinds["fields"] == [("words", "default", GroupingKind.FIELDS, ("word",))]
    assert kinds["glob"] == [("words", "default", GroupingKind.GLOBAL, ())]
    assert kinds["all"] == [("shuffle", "default", GroupingKind.ALL, ())]
    assert kinds["none"] == [("fields", "default", GroupingKind.NONE, ())]
    assert kinds["local"] == [("glob", "default", GroupingKind.LOCAL_OR_SHUFFLE, ())]
    assert kinds["direct"] == [("words", "direct_words", GroupingKind.DIRECT, ())]
    assert topo.components["words"].parallelism == 2 and topo.components["fields"].parallelism == 4
    assert topo.components["words"].direct_streams == {"direct_words"}
    assert topo.components["shuffle"].obj.get_component_configuration() == {"topology.tick.tuple.freq.secs": 5}
    assert isinstance(topo.components["shuffle"].obj, StreamparseBolt)
    assert to_topology(Many, {"streamparse.environment": "dev"}).components["fields"].parallelism == 1
    with pytest.raises(
        ConfigError,
        match=r"component 'fields': par is given per environment \(\['dev', 'prod'\]\); set streamparse.environment",
    ):
        to_topology(Many, {}, "many")


def test_what_weir_cannot_run_is_refused_naming_the_component() -> None:
    class WithJava(Topology):
        words = Words.spec()
        java = JavaBolt.spec(full_class_name="com.example.Bolt", args_list=[], inputs=[words])

    with pytest.raises(TopologyError, match=r"component 'java'.*Java component.*Java topologies"):
        to_topology(WithJava, {}, "j")

    class Custom(Topology):
        words = Words.spec()
        echo = Echo.spec(inputs={words: Grouping.custom_object("com.example.Grouping", [])})

    with pytest.raises(TopologyError, match=r"component 'echo': input words:default uses a custom \(Java\) grouping"):
        to_topology(Custom, {}, "c")


def _bolt(
    cls: type, outputs: dict[str, Any], stateful: bool = False, field: str = "line"
) -> tuple[Any, OutputCollector]:
    kind = StreamparseStatefulBolt if stateful else StreamparseBolt
    bolt = kind(cls, "b", outputs, {}, {"src": {"default": [field]}})
    out = OutputCollector("b", 0, {s: f for s, (f, _) in outputs.items()}, topology="t", acking=True)
    bolt.prepare({"k": 1}, TopologyContext("t", "b", 0, 1), out)
    return bolt, out


def _tup(out: OutputCollector, *values: Any) -> Tuple:
    return out.received(Tuple(list(values), Fields("line"), "src", "default", 0, 1))


def test_a_bolt_gets_pystorm_tuples_and_its_emits_acks_and_logs_reach_weir_s_collector() -> None:
    seen: list[Any] = []

    class Split(Bolt):
        def initialize(self, conf: Any, ctx: Any) -> None:
            seen.append((conf["k"], conf["topology.name"], ctx["taskid"], ctx["componentid"]))

        def process(self, tup: Any) -> None:
            seen.append((tup.id, tup.component, tup.stream, tup.task, tup.values.line))
            for w in tup.values.line.split():
                self.emit([w])
            self.emit([len(tup.values.line)], stream="sizes")
            self.logger.info("split %s", tup.id)

        def process_tick(self, tup: Any) -> None:
            seen.append(("tick", tup.component, tup.stream, tup.values))

    bolt, out = _bolt(Split, {"default": (["word"], False), "sizes": (["n"], False)})
    bolt.execute(_tup(out, "a b"))
    bolt.execute(tick_tuple(5.0, 1))
    assert seen == [(1, "t", 0, "b"), ("0:1", "src", "default", 0, "a b"), ("tick", "__system", "__tick", (5.0,))]
    assert out.emitted == [("default", ("a",), None), ("default", ("b",), None), ("sizes", (3,), None)]
    assert out.acked == 1 and out.unacked == []  # auto_ack; the tick needs no ack


def test_manual_acks_fails_anchors_and_direct_emits() -> None:
    class Manual(Bolt):
        auto_ack = False

        def process(self, tup: Any) -> None:
            if tup.values.line == "bad":
                self.fail(tup)
                return
            self.emit([tup.values.line], anchors=[tup], stream="d", direct_task=1, need_task_ids=True)
            self.ids = self.emit([tup.values.line], need_task_ids=True)

    bolt, out = _bolt(Manual, {"default": (["w"], False), "d": (["w"], True)})
    good = _tup(out, "ok")
    bolt.execute(good)
    assert out.unacked == [good]  # auto_ack off: the bolt acks itself
    assert out.emitted == [("d", ("ok",), 1), ("default", ("ok",), None)] and bolt.instance.ids == []
    bolt.instance.ack(_pt(bolt, good))
    bolt.instance.ack("0:1")  # acking twice is a no-op, as in Storm
    assert out.unacked == [] and out.acked == 1
    with pytest.raises(TopologyError, match=r"component 'b': ack of tuple id 'x:9', which this task did not receive"):
        bolt.instance.ack("x:9")
    bolt.execute(_tup(out, "bad"))
    assert [reason for _t, reason in out.failed] == ["failed by test_manual_acks_fails_anchors_and_direct_emits."
                                                     "<locals>.Manual (streamparse fail)"]  # fmt: skip


def _pt(bolt: Any, tup: Tuple) -> str:
    return next(k for k, v in bolt._tuples.items() if v is tup)


def test_a_batching_bolt_processes_its_groups_at_the_end_of_every_micro_batch() -> None:
    class Batches(BatchingBolt):
        outputs = ["key", "n"]

        def group_key(self, tup: Any) -> Any:
            return tup.values.line[0]

        def process_batch(self, key: Any, tups: list[Any]) -> None:
            self.emit([key, len(tups)])

    bolt, out = _bolt(Batches, {"default": (["key", "n"], False)})
    assert bolt.get_component_configuration() == {"topology.tick.tuple.freq.secs": 0.001}
    for w in ("ab", "ac", "b"):
        bolt.execute(_tup(out, w))
    assert out.emitted == [] and len(out.unacked) == 3
    bolt.execute(tick_tuple(0.001, 1))  # the tick every batch ends with
    assert sorted(out.emitted) == [("default", ("a", 2), None), ("default", ("b", 1), None)]
    assert out.unacked == [] and out.acked == 3

    class Tickless(TicklessBatchingBolt):
        def process_batch(self, key: Any, tups: list[Any]) -> None:
            self.emit([len(tups)])

    bolt, out = _bolt(Tickless, {"default": (["n"], False)})
    assert not hasattr(bolt.instance, "_batcher")  # no timer thread
    bolt.execute(_tup(out, "x"))
    bolt.execute(tick_tuple(0.001, 1))
    assert out.emitted == [("default", (1,), None)]


def test_a_stateful_bolt_gets_weir_s_state() -> None:
    from weir.state.factory import StateFactory

    bolt, out = _bolt(WordCountBolt, {"default": (["word", "count"], False)}, stateful=True, field="word")
    state = StateFactory.from_url("memory://streamparse-unit").new_state("t-b-0")
    bolt.init_state(state)
    for w in ("x", "y", "x"):
        bolt.execute(out.received(Tuple([w], Fields("word"), "src", "default", 0, 1)))
    assert state.get("x") == 2 and out.emitted[-1] == ("default", ("x", 2), None) and out.unacked == []
    assert isinstance(to_topology(WordCount).components["count_bolt"].obj, StreamparseStatefulBolt)
    assert not isinstance(to_topology(WordCount).components["split_bolt"].obj, StreamparseStatefulBolt)
    assert SplitBolt.outputs[1].name == "lengths"


def _conf(url: str, prefix: str, tmp: Path) -> dict[str, Any]:
    return {
        "weir.state.dir": str(tmp / "state"),
        "topology.state.provider": "redis",
        "topology.state.provider.config": {"url": url},
        "weir.spout.batch.max.tuples": 100,
        "wordcount.redis.url": url,
        "wordcount.prefix": prefix,
    }


def _committed(url: str, name: str, component: str, parallelism: int) -> dict[str, int]:
    from weir.state.factory import StateFactory

    provider = StateFactory.from_url(url)
    out: dict[str, int] = {}
    for i in range(parallelism):
        for k, v in provider.new_state(f"{name}-{component}-{i}"):
            out[k] = out.get(k, 0) + int(v)
    return out


@pytest.mark.spark
@pytest.mark.services
def test_the_streamparse_word_count_is_exact_on_spark(spark: Any, redis_server: Any, tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    lines = lines_for(17)
    load_lines(url, "e2e", lines)
    topology, name, conf = load_target("tests.streamparse_compat._topology:WordCount")
    assert topology is WordCount and name == "_topology"
    run = weir.submit("sp_e2e", {**conf, **_conf(url, "e2e", tmp_path)}, topology, spark)
    run.start()  # a Storm spout's source is open-ended: run until every line is acked (after its commit)
    try:
        deadline = time.monotonic() + 600
        while acked(url, "e2e") < len(lines) and run.query.isActive and time.monotonic() < deadline:
            time.sleep(0.3)
    finally:
        run.stop()
    expected = Counter(w for line in lines for w in line.split())
    assert redis_counts(url, "e2e") == dict(expected)
    assert _committed(url, "sp_e2e", "count_bolt", 2) == dict(expected)
    assert _committed(url, "sp_e2e", "length_bolt", 1) == {"total": sum(len(w) for w in expected.elements())}
    assert acked(url, "e2e") == len(lines)


def test_weir_run_finds_the_streamparse_topology_of_a_file(tmp_path: Path) -> None:
    f = tmp_path / "wordcount.py"
    f.write_text(
        "from tests.streamparse_compat._topology import LineSpout, SplitBolt, Topology\n"
        "class Mine(Topology):\n"
        "    lines = LineSpout.spec()\n"
        "    split = SplitBolt.spec(inputs=[lines])\n"
    )
    topology, name, _ = load_target(str(f))
    assert topology.__name__ == "Mine" and name == "wordcount"
    g = tmp_path / "two.py"
    g.write_text(f.read_text() + f.read_text().split("\n", 1)[1].replace("Mine", "Other"))
    with pytest.raises(ConfigError, match=r"several streamparse topologies \(Mine, Other\); name one as FILE:Class"):
        load_target(str(g))
