"""Trident end to end on classic PySpark and over a real Spark Connect server (parametrized), exact.

Over Connect (``spark=`` a Connect session) the query's ``foreachBatch`` runs in the server and is
relayed to this process, where the coordinator runs; the stages are pickled into each batch's plan
with its txid, and task reports come back through the relay as JSON. Both runs must commit the same
state, emit the same new values and answer the same queries.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.trident._support import (
    LocationDBFactory,
    LocationUpdater,
    QueryLocation,
    Split,
    Store,
    locations,
    record,
    recorded,
    values_of,
    word_files,
    write_lines,
)
from weir.errors import TopologyError
from weir.sources import FileSpout
from weir.trident import Count, Function, MapGet, TridentTopology

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BATCHES = [
    ["the cat sat on the mat", "the dog"],
    ["a cat and a dog", "the end"],
    ["cat cat cat", "zebra"],
]
QUERIES = [["cat dog"], ["the zebra"], ["cat nope"]]
DIALECTS = ["classic", "connect"]


@pytest.fixture(scope="module")
def connect_session(spark_connect_url: str) -> Iterator[Any]:
    """One Spark Connect client session for the module's Connect runs (two shuffle partitions)."""
    from weir.runtime.spark.session import get_spark

    session = get_spark(
        "local[2]", "weir-tests-trident-connect", {"spark.sql.shuffle.partitions": "2"}, remote=spark_connect_url
    )
    try:
        yield session
    finally:
        session.stop()
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)  # set by the Connect session: the module's tests are done


@pytest.fixture(params=DIALECTS)
def session(request: pytest.FixtureRequest) -> Any:
    """The classic session, or the Connect session (which switches PySpark's functions to Connect's)."""
    if request.param == "classic":
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
        return request.getfixturevalue("spark")
    got = request.getfixturevalue("connect_session")
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    return got


def conf_for(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"weir.state.dir": str(tmp_path / "state"), "weir.batch.max.retries": 0, **extra}


def _store(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> Store:
    tag = uuid.uuid4().hex[:8]
    if kind == "sqlite":
        return Store("sqlite", f"sqlite:///{tmp_path / 'trident.db'}", tag)
    return Store("redis", request.getfixturevalue("redis_server").url, tag)


@pytest.mark.parametrize(("kind", "state_type"), [("sqlite", "opaque"), ("redis", "transactional")])
def test_word_count_with_state_query_new_values_and_a_restart(
    session: Any, request: pytest.FixtureRequest, tmp_path: Path, kind: str, state_type: str
) -> None:
    store = _store(request, kind, tmp_path)
    lines_dir, query_dir = tmp_path / "lines", tmp_path / "queries"
    expected = word_files(lines_dir, BATCHES)
    word_files(query_dir, QUERIES)
    rec = str(tmp_path / "record.db")
    topo = TridentTopology()
    counts = (
        topo.new_stream("lines", FileSpout(str(lines_dir)))
        .each(["line"], Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(store.factory(state_type, "wc"), Count(), "count")
        .parallelism_hint(2)
    )
    record(counts.new_values_stream(), rec, "new_values")
    queried = (
        topo.new_stream("queries", FileSpout(str(query_dir)))
        .each(["line"], Split(), ["word"])
        .state_query(counts, ["word"], MapGet(), ["count"])
        .project(["word", "count"])
    )
    record(queried, rec, "answers")
    status = weir.submit("wc", conf_for(tmp_path), topo, spark=session).process_available()
    assert status.error is None and status.batches == len(BATCHES) and status.last_txid == len(BATCHES)
    assert status.tuples_in == sum(len(b) for b in BATCHES) + len(QUERIES)
    assert store.counts("wc") == expected
    running: Counter[str] = Counter()
    want_new, want_answers = [], []
    for txid, (lines, queries) in enumerate(zip(BATCHES, QUERIES, strict=True), start=1):
        words: Counter[str] = Counter(w for line in lines for w in line.split())
        running.update(words)
        want_new += [(txid, w, running[w]) for w in words]
        want_answers += [(txid, w, running.get(w)) for q in queries for w in q.split()]
    assert sorted((t, *v) for t, _, v in recorded(rec, "new_values")) == sorted(want_new)
    assert sorted((t, *v) for t, _, v in recorded(rec, "answers")) == sorted(want_answers, key=str)
    # a restart (a second submit on the same checkpoint) continues with the next txid, exact
    write_lines(lines_dir, "f003.txt", ["cat"])
    write_lines(query_dir, "f003.txt", ["cat"])
    status = weir.submit("wc", conf_for(tmp_path), topo, spark=session).process_available()
    assert status.error is None and status.last_txid == len(BATCHES) + 1
    assert store.counts("wc") == expected + Counter(["cat"])


def test_partition_persist_and_state_query_with_location_db(session: Any, tmp_path: Path) -> None:
    updates, lookups = tmp_path / "updates", tmp_path / "lookups"
    write_lines(updates, "f000.json", ['{"userid": 1, "location": "Paris"}', '{"userid": 2, "location": "Oslo"}'])
    write_lines(updates, "f001.json", ['{"userid": 2, "location": "Bergen"}'])
    write_lines(lookups, "f000.json", ['{"userid": 1}', '{"userid": 2}', '{"userid": 9}'])
    write_lines(lookups, "f001.json", ['{"userid": 2}'])
    db, rec = str(tmp_path / "locations.db"), str(tmp_path / "record.db")
    topo = TridentTopology()
    located = (
        topo.new_stream("locations", FileSpout(str(updates), format="json", schema="userid BIGINT, location STRING"))
        .partition_by(["userid"])
        .partition_persist(LocationDBFactory(db), ["userid", "location"], LocationUpdater(), ["userid", "location"])
        .parallelism_hint(2)
    )
    record(located.new_values_stream(), rec, "persisted")
    static = topo.new_static_state(LocationDBFactory(db)).parallelism_hint(2)
    answers = topo.new_stream("lookups", FileSpout(str(lookups), format="json", schema="userid BIGINT")).state_query(
        static, ["userid"], QueryLocation(), ["location:str"]
    )
    record(answers, rec, "answers")
    status = weir.submit("loc", conf_for(tmp_path), topo, spark=session).process_available()
    assert status.error is None and status.last_txid == 2
    assert locations(db) == {1: "Paris", 2: "Bergen"}
    assert values_of(recorded(rec, "persisted")) == [(1, "Paris"), (2, "Bergen"), (2, "Oslo")]
    got = sorted((t, *v) for t, _, v in recorded(rec, "answers"))
    assert got == sorted([(1, 1, "Paris"), (1, 2, "Oslo"), (1, 9, None), (2, 2, "Bergen")], key=str)


class FailOnce(Function):
    """Splits lines; raises on ``zebra`` while the marker file exists (and removes it): one failed attempt."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def execute(self, tup: Any, collector: Any) -> None:
        line = tup.get_string(0)
        if "zebra" in line and os.path.exists(self.marker):
            os.remove(self.marker)
            msg = "zebra seen on the first attempt"
            raise ValueError(msg)
        for word in line.split():
            collector.emit([word])


def test_a_failed_attempt_is_retried_with_the_same_txid_and_stays_exact(session: Any, tmp_path: Path) -> None:
    store = Store("sqlite", f"sqlite:///{tmp_path / 'trident.db'}", uuid.uuid4().hex[:8])
    expected = word_files(tmp_path / "lines", BATCHES)
    marker = tmp_path / "fail-once"
    marker.write_text("1")
    topo = TridentTopology()
    (
        topo.new_stream("lines", FileSpout(str(tmp_path / "lines")))
        .each(["line"], FailOnce(str(marker)), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(store.factory("opaque", "retried"), Count(), "count")
        .parallelism_hint(2)
    )
    status = weir.submit(
        "retry", conf_for(tmp_path, **{"weir.batch.max.retries": 2}), topo, spark=session
    ).process_available()
    assert status.error is None and status.last_txid == len(BATCHES)
    assert not marker.exists()  # batch 3's first attempt failed, its retry (txid 3 again) committed
    assert store.counts("retried") == expected


class Boom(Function):
    def execute(self, tup: Any, collector: Any) -> None:
        if "zebra" in tup.get_string(0):
            msg = "no zebras allowed"
            raise ValueError(msg)
        collector.emit([tup.get_string(0)])


def test_a_failing_function_stops_the_topology_naming_component_task_and_txid(session: Any, tmp_path: Path) -> None:
    store = Store("sqlite", f"sqlite:///{tmp_path / 'trident.db'}", uuid.uuid4().hex[:8])
    word_files(tmp_path / "lines", BATCHES)
    topo = TridentTopology()
    (
        topo.new_stream("lines", FileSpout(str(tmp_path / "lines")))
        .each(["line"], Boom(), ["copy"])
        .name("guard")
        .group_by(["copy"])
        .persistent_aggregate(store.factory("opaque", "guarded"), Count(), "n")
    )
    run = weir.submit("boom", conf_for(tmp_path), topo, spark=session)
    with pytest.raises(TopologyError) as info:
        run.process_available()
    err = info.value
    assert err.component == "guard" and err.txid == 3 and err.task is not None and err.task >= 0
    assert "no zebras allowed" in str(err) and "ValueError" in (err.remote_traceback or "")
    assert sum(store.counts("guarded").values()) == 4  # batches 1 and 2 were committed


class WorkerOf(Function):
    """Appends the Python worker's parent (Spark's worker daemon) to a file; passes the tuple on."""

    def __init__(self, path: str) -> None:
        self.path = path

    def execute(self, tup: Any, collector: Any) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getppid()}\n")
        collector.emit([tup.get_string(0)])


def test_queries_of_one_connect_session_share_the_python_workers(connect_session: Any, tmp_path: Path) -> None:
    """Each query runs in a clone of the client's session; its stages use the server's shared workers.

    With Spark's artifact isolation (the Connect server's default) every session, so every query,
    gets a Python worker daemon of its own, and each query's first batch waits for new workers.
    weir starts the query with isolation off for the clone: both runs' tasks are forked by one daemon,
    and the client's own session keeps its setting. ``weir.connect.share.workers: false`` keeps
    Spark's isolation: that query's tasks get a daemon of their own.
    """
    from weir.runtime.spark.connect import ISOLATION

    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    before = connect_session.conf.get(ISOLATION)
    daemons: list[set[str]] = []
    for run, share in enumerate((True, True, False)):
        lines_dir, out = tmp_path / f"lines{run}", tmp_path / f"daemons{run}.txt"
        expected = word_files(lines_dir, BATCHES)
        store = Store("sqlite", f"sqlite:///{tmp_path / 'trident.db'}", f"run{run}")
        topo = TridentTopology()
        (
            topo.new_stream("lines", FileSpout(str(lines_dir)))
            .each(["line"], WorkerOf(str(out)), ["same:str"])
            .each(["same"], Split(), ["word:str"])
            .group_by(["word"])
            .persistent_aggregate(store.factory("opaque", "wc"), Count(), "count")
            .parallelism_hint(2)
        )
        conf = conf_for(tmp_path / f"run{run}", **{"weir.connect.share.workers": share})
        status = weir.submit(f"shared-{run}", conf, topo, spark=connect_session).process_available()
        assert status.error is None and status.batches == len(BATCHES)
        assert store.counts("wc") == expected
        daemons.append(set(out.read_text().split()))
        assert connect_session.conf.get(ISOLATION) == before
    assert len(daemons[0]) == 1, daemons  # local[2]: one worker daemon forks every task's worker
    assert daemons[1] == daemons[0]  # the second query's tasks ran on the first query's daemon
    assert len(daemons[2]) == 1 and daemons[2] != daemons[0]  # isolated: a daemon of its own


def test_drpc_over_connect_answers_from_committed_state(connect_session: Any, tmp_path: Path) -> None:
    """Seed 004's DRPC query over Connect: the requests reach the batch as a DataFrame the client makes,
    the answers are written by the client's coordinator, every request is answered once (classic:
    tests/trident/test_drpc.py; SIGKILLs over Connect: tests/crash/test_drpc_crash.py)."""
    from tests.trident.test_drpc import BATCHES as DRPC_BATCHES
    from tests.trident.test_drpc import provider_conf, seed_topology, store_url
    from weir.drpc import Client, DRPCExecutionError
    from weir.drpc.store import log_namespace, queue_namespace, results_namespace

    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    store = Store("sqlite", f"sqlite:///{tmp_path / 'trident.db'}", uuid.uuid4().hex[:8])
    lines = tmp_path / "lines"
    expected = word_files(lines, DRPC_BATCHES)
    run = weir.submit("cdrpc", provider_conf(store, tmp_path), seed_topology(store, lines), spark=connect_session)
    run.start()
    client = Client(store_url(store, tmp_path))
    try:
        assert client.functions() == {"words": "cdrpc", "lengths": "cdrpc"}
        deadline = time.monotonic() + 180
        while store.counts("wc") != expected:
            assert time.monotonic() < deadline, store.counts("wc")
            time.sleep(0.2)
        answers: dict[tuple[str, str], Any] = {}

        def ask(fn: str, args: str) -> None:  # concurrent clients: answered by the same batches
            try:
                answers[(fn, args)] = Client(store_url(store, tmp_path)).execute(fn, args, timeout=180)
            except DRPCExecutionError as exc:
                answers[(fn, args)] = exc

        asks = [("words", "cat dog the man"), ("words", "zebra unicorn"), ("lengths", "ab c"), ("lengths", "x boom")]
        threads = [threading.Thread(target=ask, args=a) for a in asks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert answers[("words", "cat dog the man")] == sum(expected[w] for w in "cat dog the man".split())
        assert answers[("words", "zebra unicorn")] == 0  # Sum of nothing, as in Storm
        assert answers[("lengths", "ab c")] == [["ab", 2], ["c", 1]]
        boom = answers[("lengths", "x boom")]
        assert isinstance(boom, DRPCExecutionError) and "no booms allowed" in str(boom), boom
    finally:
        run.stop()
    backend = client.backend
    for ns in (queue_namespace("words"), results_namespace("words"), queue_namespace("lengths"),
               results_namespace("lengths"), log_namespace("cdrpc")):  # fmt: skip
        assert list(backend.scan(ns)) == [], ns  # every request answered once and read, nothing left behind


def test_the_end_of_a_run_closes_the_clients_of_the_querys_session(
    connect_session: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relay opens a client on each query's session (the server's clone) to run its batches.

    When the run ends, that client is closed (its channel only: the query's session ends with the
    query). An open one would, at the process's exit, send PySpark's clean-up command to the
    server, and retry it for minutes if the server was gone by then. The ended run's status is
    then read without a request to the server.
    """
    from weir.runtime.spark.connect import ConnectRelay

    opened: list[Any] = []
    session_of = ConnectRelay._session

    def spy(relay: ConnectRelay, session_id: str) -> Any:  # the real method, recording what it opens
        got = session_of(relay, session_id)
        opened.append(got)
        return got

    monkeypatch.setattr(ConnectRelay, "_session", spy)
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    lines_dir = tmp_path / "lines"
    expected = word_files(lines_dir, BATCHES)
    store = Store("sqlite", f"sqlite:///{tmp_path / 'trident.db'}", "closed")
    topo = TridentTopology()
    (
        topo.new_stream("lines", FileSpout(str(lines_dir)))
        .each(["line"], Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(store.factory("opaque", "wc"), Count(), "count")
    )
    run = weir.submit("closed", conf_for(tmp_path), topo, spark=connect_session)
    status = run.process_available()
    assert status.error is None and status.batches == len(BATCHES)
    assert store.counts("wc") == expected
    assert opened and all(s.client.is_closed for s in opened)  # one per batch, the same client
    assert not connect_session.client.is_closed  # the user's own session stays open

    from pyspark.sql.connect.client.core import SparkConnectClient

    sent: list[Any] = []
    execute = SparkConnectClient._execute_and_fetch_as_iterator

    def counted(self: Any, *a: Any, **kw: Any) -> Any:
        sent.append(a)
        return execute(self, *a, **kw)

    monkeypatch.setattr(SparkConnectClient, "_execute_and_fetch_as_iterator", counted)
    assert run.status().state == "stopped" and sent == []  # an ended run's status asks the server nothing
