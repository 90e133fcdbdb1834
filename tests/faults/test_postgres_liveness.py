"""A frozen PostgreSQL (issue 25, reproduction 7): every call is bounded, logs while it waits, and ends
in a named, classified error; a supervised run gives up within its restart budget and a later run
ends exact.

The server is a private one (``tests.servers.PostgresServer``) so it can be SIGSTOPped: the whole
server (a paused VM — open connections hang) or the postmaster only (open connections answer, new
ones are never accepted).
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.servers import PostgresServer, wait_until
from weir.connectors.postgres import PostgresBackend, PostgresOptions
from weir.demo import read_counts
from weir.errors import ConfigError, StateError, StoreUnavailableError, WeirError
from weir.runtime.spark.supervision import transient_reason
from weir.sources import FileSpout
from weir.state.watchdog import WATCHDOG
from weir.topology import BasicBolt, Fields, StatefulBolt, TopologyBuilder, Values

pytestmark = [pytest.mark.services, pytest.mark.xdist_group("postgres-private")]

BOUNDS = {"connect_timeout": 2, "socket_timeout": 3, "statement_timeout": 2}


@pytest.fixture
def pg() -> Iterator[PostgresServer]:
    server = PostgresServer()  # its own /tmp directory: the server's user must reach it
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def fast_warnings() -> Iterator[None]:
    before = WATCHDOG.warn_every_s
    WATCHDOG.warn_every_s = 0.5
    try:
        yield
    finally:
        WATCHDOG.warn_every_s = before


def _bounded(call: Any) -> tuple[BaseException, float]:
    started = time.monotonic()
    with pytest.raises(WeirError) as info:
        call()
    return info.value, time.monotonic() - started


def test_a_frozen_server_fails_each_call_within_its_bound_logging_while_it_waits(
    pg: PostgresServer, fast_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="weir.state")
    backend = PostgresBackend.open(PostgresOptions(pg.url, **BOUNDS))
    try:
        backend.write_prepared("frz", 1, {b"k": b"v"}, epoch=None)
        pg.freeze()  # every process of the server stopped: the open connection hangs
        err, waited = _bounded(lambda: backend.commit_prepared("frz", 1, epoch=None))
        assert type(err) is StoreUnavailableError, err
        assert "'frz'" in str(err) and "commit txid 1" in str(err) and "socketTimeout=3" in str(err)
        assert waited < 60, waited  # bounded (generous: the machine is loaded)
        waits = [r.getMessage() for r in caplog.records if "still waiting after" in r.getMessage()]
        assert waits and "namespace 'frz': commit txid 1" in waits[0] and "socketTimeout=3" in waits[0], waits
        # the next call needs a new connection, which the frozen postmaster never accepts
        err, waited = _bounded(lambda: backend.txids("frz"))
        assert type(err) is StoreUnavailableError and "connectTimeout=2" in str(err), err
        assert waited < 60, waited
        # a store that does not answer is retriable: supervision restarts the query
        assert transient_reason(err) is not None
        pg.thaw()
        backend.commit_prepared("frz", 1, epoch=None)  # the prepared set survived; the commit goes through
        assert backend.get("frz", b"k") == b"v" and backend.txids("frz").committed == 1
    finally:
        pg.thaw()
        backend.close()


def test_a_frozen_postmaster_fails_new_connections_and_submit_names_the_timeout(pg: PostgresServer) -> None:
    backend = PostgresBackend.open(PostgresOptions(pg.url, **BOUNDS))
    other = PostgresBackend(PostgresOptions(pg.url, **BOUNDS))
    try:
        backend.write_direct("pm", {b"a": b"1"}, None)
        pg.freeze_postmaster()  # open connections still answer; new ones are never accepted
        assert backend.get("pm", b"a") == b"1"
        err, waited = _bounded(lambda: other.get("pm", b"a"))
        assert type(err) is StoreUnavailableError and "read a key (connecting)" in str(err), err
        assert "connectTimeout=2" in str(err) and waited < 60
        # at submit time the same wait is a ConfigError that says what to check
        err, waited = _bounded(lambda: PostgresBackend.open(PostgresOptions(pg.url, **BOUNDS)))
        assert type(err) is ConfigError and "raise connectTimeout" in str(err), err
        assert waited < 60
    finally:
        pg.thaw()
        backend.close()
        other.close()


def test_a_refused_statement_is_permanent_and_short(pg: PostgresServer) -> None:
    backend = PostgresBackend.open(PostgresOptions(pg.url, **BOUNDS))
    try:
        err, _ = _bounded(lambda: backend.write_direct("n" * 1_000_000, {b"k": b"v"}, None))
        assert type(err) is StateError, err  # not "unavailable": retrying cannot help
        assert transient_reason(err) is None
        assert len(str(err)) < 2_000 and "1000000 characters" in str(err) and "shorter" in str(err), str(err)[:500]
    finally:
        backend.close()


# ---- a supervised run on a frozen server -----------------------------------------------------
class _Split(BasicBolt):
    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("word"))

    def execute(self, tup: Any, collector: Any) -> None:
        for w in tup.get_string(0).split():
            collector.emit(Values(w))


class _Count(StatefulBolt):
    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("word", "count"))

    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute(self, tup: Any) -> None:
        w = tup.get_string(0)
        self.counts.put(w, self.counts.get(w, 0) + 1)
        self.collector.ack(tup)


def _write(directory: Path, f: int) -> Counter[str]:
    directory.mkdir(parents=True, exist_ok=True)
    words = [f"file{f}"] + [f"w{(f * 5 + i) % 11}" for i in range(40)]
    tmp = directory / f".p{f}.tmp"
    tmp.write_text(" ".join(words) + "\n")
    os.utime(tmp, (1_700_000_000 + f, 1_700_000_000 + f))
    os.replace(tmp, directory / f"p{f:03d}.txt")
    return Counter(words)


@pytest.mark.spark
@pytest.mark.slow
def test_a_run_on_a_frozen_server_stops_with_a_named_error_within_its_budget_then_resumes_exact(
    spark: Any, pg: PostgresServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    inp = tmp_path / "in"
    expected = _write(inp, 0)
    conf = {
        "weir.state.dir": str(tmp_path / "state"),
        "topology.state.provider": "postgres",
        "topology.state.provider.config": {
            "url": pg.url,
            "connectTimeout": 2,
            "socketTimeout": 3,
            "statementTimeout": 2,
        },
        "topology.state.checkpoint.interval.ms": 200,
        "weir.batch.max.retries": 0,
        "weir.restart.max": 1,
        "weir.restart.backoff.ms": 100,
    }
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(inp), files_per_batch=1))
    b.set_bolt("split", _Split(), 1).shuffle_grouping("lines")
    b.set_bolt("count", _Count(), 2).fields_grouping("split", Fields("word"))
    topology = b.create_topology()
    run = weir.submit("pgfrz", conf, topology, spark).start()
    try:
        wait_until(lambda: run.status().last_txid == 1, timeout=300, what="the first batch")
        pg.freeze()
        expected += _write(inp, 1)
        started = time.monotonic()
        with pytest.raises(WeirError) as info:
            run.await_termination(timeout=600)
        waited = time.monotonic() - started
    finally:
        pg.thaw()
        run.stop()
    text = str(info.value)
    assert "postgres store" in text and ("socketTimeout=3" in text or "connectTimeout=2" in text), text[:2000]
    assert waited < 300, waited  # socket + connect timeouts, one restart: bounded (generous on a loaded box)
    messages = [r.getMessage() for r in caplog.records]
    assert any("the store did not answer" in m and "restart 1 of at most 1" in m for m in messages), messages
    assert any("giving up after 1 consecutive restarts" in m for m in messages), messages
    # the server answers again: a new run recovers the transaction in flight and ends exact
    weir.submit("pgfrz", conf, topology, spark).process_available(timeout=600)
    assert read_counts(conf, "pgfrz") == expected


def test_a_task_whose_store_did_not_answer_is_transient_a_user_error_is_not() -> None:
    from weir.errors import TopologyError

    store = TopologyError(
        "topology 't': component 'count' task 0 failed txid 3 1 times (weir.batch.max.retries=0): "
        "StoreUnavailableError in prepare_commit: namespace 't-count-0': ... socketTimeout=3 s",
        component="count",
    )
    assert transient_reason(store) is not None
    user = TopologyError("component 'count' task 0 failed txid 3 1 times: ValueError in execute: x", component="count")
    assert transient_reason(user) is None
