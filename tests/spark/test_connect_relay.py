"""The relay between a Spark Connect server's workers and weir's client, over real loopback sockets.

(A whole run over Connect also needs the server's ``foreachBatch`` worker; these tests cover the
wire: task reports as data, a request without the token, a client that is gone.)
"""

from __future__ import annotations

import json
import pickle
import socket

import pytest

from weir._connect_relay import BatchRelayFunction
from weir.errors import ConfigError
from weir.runtime.spark.connect import ConnectRelay, check_reachable
from weir.runtime.spark.executor import TaskReport


def _refuse(df: object, batch_id: int) -> None:
    raise AssertionError("no batch is handed over in these tests")


def test_task_reports_travel_as_json_and_arrive_before_add_returns() -> None:
    relay = ConnectRelay("sc://127.0.0.1:15002", "wc", _refuse)
    try:
        sink = relay.report_sink()
        # what a stage carries to an executor: the address and the token, not the client's list
        shipped = pickle.loads(pickle.dumps(sink))  # noqa: S301 - our own object, in this test
        assert shipped._relay is None and shipped.addr == relay.addr
        ok = TaskReport("count", 1, 7, n_in=3, n_out=2, ms=1.5)
        failed = TaskReport.from_exception("split", 0, 7, ValueError("bad line 'x'"))
        shipped.add([ok, failed])
        got = sink.value
        assert [(r.component, r.task, r.txid, r.n_in, r.n_out, r.ok) for r in got] == [
            ("count", 1, 7, 3, 2, True),
            ("split", 0, 7, 0, 0, False),
        ]
        assert "bad line 'x'" in str(got[1].error)
        sink.value = []  # a batch starts with none
        assert sink.value == []
    finally:
        relay.close()


def test_a_request_without_the_token_gets_no_answer_and_changes_nothing() -> None:
    relay = ConnectRelay("sc://127.0.0.1:15002", "wc", _refuse)
    try:
        report = TaskReport("count", 0, 1)
        with socket.create_connection(relay.addr, timeout=30) as sock:
            sock.sendall(json.dumps({"t": "guess", "k": "reports", "r": [report.to_text()]}).encode() + b"\n")
            assert sock.makefile("rb").readline() == b""
        assert relay.report_sink().value == []
    finally:
        relay.close()


def test_a_batch_for_a_client_that_is_gone_fails_naming_the_topology() -> None:
    relay = ConnectRelay("sc://127.0.0.1:15002", "wc", _refuse)
    fn = relay.function()
    relay.close()

    class Plan:
        _relation_id = "r1"

    class Session:
        session_id = "s1"

    class Batch:  # the shape of the DataFrame the server's foreachBatch worker passes
        _plan = Plan()
        sparkSession = Session()

    with pytest.raises(RuntimeError, match=r"topology 'wc', batch 4: the weir client .* cannot be reached"):
        fn(Batch(), 4)
    assert isinstance(pickle.loads(pickle.dumps(fn)), BatchRelayFunction)  # noqa: S301


def test_a_server_elsewhere_is_refused() -> None:
    check_reachable("wc", "sc://127.0.0.1:15002")
    check_reachable("wc", "sc://localhost:15002/;token=x")
    with pytest.raises(ConfigError, match=r"topology 'wc': the Spark Connect server sc://10\.0\.0\.5:15002 is not on"):
        check_reachable("wc", "sc://10.0.0.5:15002")


def test_close_ends_the_serving_loop_and_the_listener() -> None:
    relay = ConnectRelay("sc://127.0.0.1:15002", "wc", _refuse)
    relay.report_sink().add([TaskReport("count", 0, 1)])  # it serves until closed
    relay.close()
    relay._thread.join(30)
    assert not relay._thread.is_alive()  # the serving loop has returned: it does not outlive the run
    with pytest.raises(OSError), socket.create_connection(relay.addr, timeout=5):
        pass  # nothing listens on its port any more
