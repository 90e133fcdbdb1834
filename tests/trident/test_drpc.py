"""Trident DRPC end to end: seed 004's word-count query answered from committed state, on real stores."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.trident._support import Split, Store, word_files, write_lines
from weir.drpc import Client, DRPCExecutionError, DRPCTimeoutError, DRPCUnknownFunctionError
from weir.drpc.store import REGISTRY_NAMESPACE, log_namespace, queue_namespace, results_namespace
from weir.errors import TopologyError
from weir.sources import FileSpout
from weir.trident import Aggregator, Count, FilterNull, Function, MapGet, Sum, TridentTopology

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BATCHES = [["the cat sat on the mat", "the dog"], ["a cat and a dog", "the man"]]


class Explode(Function):
    """Raises for the word ``boom`` (a user function failing inside the topology)."""

    def execute(self, tup: Any, collector: Any) -> None:
        if tup.get_string(0) == "boom":
            msg = "no booms allowed"
            raise ValueError(msg)
        collector.emit([len(tup.get_string(0))])


def provider_conf(store: Store, tmp_path: Path) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "weir.state.dir": str(tmp_path / "state"),
        "weir.batch.max.retries": 0,
        "topology.state.checkpoint.interval.ms": 200,
    }
    if store.kind != "sqlite":
        conf["topology.state.provider"] = store.kind
        conf["topology.state.provider.config"] = {"url": store.url}
    return conf


def store_url(store: Store, tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state' / 'state.db'}" if store.kind == "sqlite" else store.url


def seed_topology(store: Store, lines: Path) -> TridentTopology:
    """Seed 004's word count and its DRPC query, plus a function that can fail."""
    topology = TridentTopology()
    word_counts = (
        topology.new_stream("spout1", FileSpout(str(lines)))
        .each(["line"], Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(store.factory("transactional", "wc"), Count(), "count")
    )
    (
        topology.new_drpc_stream("words")
        .each(["args"], Split(), ["word:str"])
        .group_by(["word"])
        .state_query(word_counts, ["word"], MapGet(), ["count"])
        .each(["count"], FilterNull())
        .aggregate(["count"], Sum(), ["sum"])
    )
    (
        topology.new_drpc_stream("lengths")
        .each(["args"], Split(), ["word:str"])
        .each(["word"], Explode(), ["n:int"])
        .project(["word", "n"])
    )
    return topology


@pytest.mark.parametrize("kind", ["sqlite", "redis", "postgres"])
def test_seed_query_answered_from_committed_state(
    spark: Any, kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from tests.trident.conftest import make_store

    store = make_store(request, kind, tmp_path)
    lines = tmp_path / "lines"
    expected = word_files(lines, BATCHES)
    run = weir.submit("drpc-wc", provider_conf(store, tmp_path), seed_topology(store, lines), spark=spark)
    run.start()
    client = Client(store_url(store, tmp_path))
    try:
        assert client.functions() == {"words": "drpc-wc", "lengths": "drpc-wc"}
        deadline = time.monotonic() + 120
        while store.counts("wc") != expected:  # the topology counts while the client asks
            assert time.monotonic() < deadline, store.counts("wc")
            time.sleep(0.2)
        want = sum(expected[w] for w in "cat dog the man".split())
        assert client.execute("words", "cat dog the man", timeout=60) == want
        # two concurrent clients, different questions, each its own exact answer
        answers: dict[str, Any] = {}

        def ask(args: str) -> None:
            answers[args] = Client(store_url(store, tmp_path)).execute("words", args, timeout=60)

        threads = [threading.Thread(target=ask, args=(a,)) for a in ("the the", "cat mat zebra")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert answers == {"the the": 2 * expected["the"], "cat mat zebra": expected["cat"] + expected["mat"]}
        if kind != "sqlite":  # the rest is the same protocol on every store: run once, on SQLite
            return
        assert client.execute("words", "zebra unicorn", timeout=60) == 0  # Sum of nothing, as in Storm
        assert client.execute_tuples("words", "dog", timeout=60) == [[expected["dog"]]]
        # more lines while the client asks: the answer follows the committed counts
        write_lines(lines, "f100.txt", ["cat cat dog"])
        expected.update(["cat", "cat", "dog"])
        while client.execute("words", "cat dog", timeout=60) != expected["cat"] + expected["dog"]:
            assert time.monotonic() < deadline
        # a user function raising fails its own request only
        assert client.execute("lengths", "ab c", timeout=60) == [["ab", 2], ["c", 1]]
        with pytest.raises(DRPCExecutionError, match=r"lengths.*no booms allowed") as err:
            client.execute("lengths", "x boom", timeout=60)
        assert err.value.function == "lengths" and err.value.txid is not None
        with pytest.raises(DRPCUnknownFunctionError, match=r"'nope'.*'lengths' \(drpc-wc\)"):
            client.execute("nope", "x")
    finally:
        run.stop()
    backend = client.backend
    assert list(backend.scan(log_namespace("drpc-wc"))) == []  # every taken request was answered
    if kind != "sqlite":
        return
    # stopped: a request times out, named
    with pytest.raises(DRPCTimeoutError, match=r"'words', request \w+: no answer after") as timeout:
        client.execute("words", "cat", timeout=1.5)
    assert timeout.value.waited >= 1.5
    for ns in (queue_namespace("words"), results_namespace("words"), queue_namespace("lengths"),
               results_namespace("lengths"), log_namespace("drpc-wc")):  # fmt: skip
        assert list(backend.scan(ns)) == [], ns  # nothing left behind
    assert {k.decode() for k, _ in backend.scan(REGISTRY_NAMESPACE)} == {"fn/words", "fn/lengths"}


def test_drpc_streams_are_checked_at_build_and_submit(tmp_path: Path, sqlite_store: Store) -> None:
    topology = TridentTopology()
    s = topology.new_drpc_stream("q")
    assert s.fields == ["args"]
    with pytest.raises(TopologyError, match="already has a DRPC stream"):
        topology.new_drpc_stream("q")
    with pytest.raises(TopologyError, match="function name"):
        topology.new_drpc_stream("a b")
    with pytest.raises(TopologyError, match="use each"):
        s.map(lambda t: t, ["x"])
    with pytest.raises(TopologyError, match="only reads states"):
        s.group_by(["args"]).persistent_aggregate(sqlite_store.factory("transactional", "x"), Count(), "c")
    other = topology.new_stream("lines", FileSpout(str(tmp_path)))
    with pytest.raises(TopologyError, match="cannot be merged|cannot combine"):
        topology.merge(s, other)
    counted = s.each(["args"], Split(), ["word"]).group_by(["word"]).aggregate(Count(), ["n"])
    assert counted.fields == ["word", "n"]
    assert counted.project(["n"]).fields == ["n"]
    only = TridentTopology()
    only.new_drpc_stream("alone").each(["args"], FilterNull())
    with pytest.raises(TopologyError, match="only DRPC streams"):
        weir.submit("drpc-only", {"weir.state.dir": str(tmp_path / "st")}, only)
    # two ends: refused at submit, naming the stream
    s.each(["args"], FilterNull())
    with pytest.raises(TopologyError, match="DRPC stream 'q' ends in 2 operations"):
        weir.submit("two-ends", {"weir.state.dir": str(tmp_path / "st")}, topology)


class Tally(Aggregator[dict[str, int]]):
    """Per partition (and request): one ``(word, n)`` per word the partition saw."""

    def init(self, batch_id: int, collector: Any) -> dict[str, int]:
        return {}

    def aggregate(self, val: dict[str, int], tup: Any, collector: Any) -> None:
        val[tup.get_string(0)] = val.get(tup.get_string(0), 0) + 1

    def complete(self, val: dict[str, int], collector: Any) -> None:
        for word, n in val.items():
            collector.emit([word, n])


class Record:
    """A ``peek`` action: appends each word it sees to a file (the executors share this machine)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __call__(self, tup: Any) -> None:
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(str(tup["word"]) + "\n")


def test_partition_aggregate_partition_by_shuffle_and_peek_on_drpc_streams(
    spark: Any, tmp_path: Path, sqlite_store: Store
) -> None:
    lines = tmp_path / "lines"
    expected = word_files(lines, BATCHES)
    peeked = tmp_path / "peeked.txt"
    topology = TridentTopology()
    word_counts = (
        topology.new_stream("spout1", FileSpout(str(lines)))
        .each(["line"], Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(sqlite_store.factory("transactional", "wc"), Count(), "count")
    )
    # partition_by: every copy of a word lands in one partition, so each partition's tally is whole
    (
        topology.new_drpc_stream("tally")
        .each(["args"], Split(), ["word:str"])
        .partition_by(["word"])
        .parallelism_hint(3)
        .partition_aggregate(["word"], Tally(), ["word:str", "n:int"])
    )
    # shuffle + partition_aggregate per partition, then the request's total
    (
        topology.new_drpc_stream("total")
        .each(["args"], Split(), ["word:str"])
        .shuffle()
        .parallelism_hint(2)
        .state_query(word_counts, ["word"], MapGet(), ["count"])
        .each(["count"], FilterNull())
        .partition_aggregate(["count"], Sum(), ["part"])
        .aggregate(["part"], Sum(), ["sum"])
    )
    # peek sees each tuple of the request and passes it on unchanged
    topology.new_drpc_stream("seen").each(["args"], Split(), ["word:str"]).peek(Record(peeked))
    run = weir.submit("drpc-ops", provider_conf(sqlite_store, tmp_path), topology, spark=spark)
    run.start()
    client = Client(store_url(sqlite_store, tmp_path))
    try:
        deadline = time.monotonic() + 300
        while sqlite_store.counts("wc") != expected:
            assert time.monotonic() < deadline, sqlite_store.counts("wc")
            time.sleep(0.2)
        assert client.execute("tally", "the cat the dog the cat zebra", timeout=180) == [
            ["cat", 2], ["dog", 1], ["the", 3], ["zebra", 1]
        ]  # fmt: skip
        question = "the cat dog man zebra the"
        assert client.execute("total", question, timeout=180) == sum(expected[w] for w in question.split())
        assert client.execute("total", "zebra", timeout=180) == 0
        # the answer is the visible fields after peek, unchanged: args and word
        assert client.execute("seen", "b a b", timeout=180) == [["b a b", "a"], ["b a b", "b"], ["b a b", "b"]]
    finally:
        run.stop()
    assert sorted(peeked.read_text(encoding="utf-8").split()) == ["a", "b", "b"]
