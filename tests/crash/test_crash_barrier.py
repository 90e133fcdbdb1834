"""The crash barrier (``WEIR_CRASH_BARRIER``): one driver process, several topologies armed at one point.

The process dies only when every topology of the barrier has reached the point; a topology that
arrives twice (a retried task) counts once; one that never arrives, or a call site that names no
topology, fails the test with the names involved instead of passing or hanging.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.crash._harness import run_driver

DRIVER = str(Path(__file__).with_name("barrier_driver.py"))
POINT = "after_committed@1"


def test_the_process_dies_once_every_topology_has_arrived() -> None:
    res = run_driver([DRIVER, "wc_a:0", "wc_b:0.5", "wc_c:1"], POINT, 120, barrier=["wc_a", "wc_b", "wc_c"])
    assert res.returncode == -signal.SIGKILL, res.stderr
    assert "SURVIVED" not in res.stdout


def test_unarmed_points_do_not_wait_and_an_armed_point_never_reached_fails_the_test() -> None:
    res = run_driver([DRIVER, "wc_a:0", "wc_b:0"], None, 120, barrier=["wc_a", "wc_b"])
    assert (res.returncode, res.stdout.strip()) == (0, "SURVIVED")
    with pytest.raises(pytest.fail.Exception, match=r"never reached: \['wc_a', 'wc_b'\], arrived: \[\]"):
        run_driver([DRIVER, "wc_a:0", "wc_b:0"], "after_committed@2", 120, barrier=["wc_a", "wc_b"])


def test_a_second_arrival_of_one_topology_does_not_stand_in_for_a_missing_one() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"never reached: \['wc_b'\], arrived: \['wc_a'\]"):
        run_driver([DRIVER, "wc_a:0", "wc_a:0.2"], POINT, 120, barrier=["wc_a", "wc_b"], barrier_timeout=2)


def test_a_call_site_without_a_topology_name_fails_the_test() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"never reached: \['wc_b'\].*!unnamed@after_committed"):
        run_driver([DRIVER, "wc_a:0", "-:0.2"], POINT, 120, barrier=["wc_a", "wc_b"])


def test_each_topology_armed_at_its_own_point_dies_there() -> None:
    # wc_b's point is after_committed@1 too, but armed for wc_b alone: wc_a's arrival does not count
    # for it, and a topology armed at a point it never reaches fails the test, named
    res = run_driver([DRIVER, "wc_a:0", "wc_b:0.5"], {"wc_a": POINT, "wc_b": POINT}, 120)
    assert res.returncode == -signal.SIGKILL, res.stderr
    with pytest.raises(pytest.fail.Exception, match=r"never reached: \['wc_b'\], arrived: \['wc_a'\]"):
        run_driver([DRIVER, "wc_a:0", "wc_b:0"], {"wc_a": POINT, "wc_b": "after_committed@2"}, 120, barrier_timeout=2)
    with pytest.raises(pytest.fail.Exception, match=r"never reached: \['wc_a'\], arrived: \[\]"):
        run_driver([DRIVER, "wc_a:0", "wc_b:0"], {"wc_a": "after_committed@2"}, 120, barrier_timeout=2)
    with pytest.raises(pytest.fail.Exception, match=r"!unnamed@after_committed"):
        run_driver([DRIVER, "-:0"], {"wc_a": POINT}, 120)


def test_armed_names_a_point_armed_for_a_topology_at_any_txid(monkeypatch: pytest.MonkeyPatch) -> None:
    from weir._faults import armed

    monkeypatch.setenv("WEIR_CRASH_AT", "wc_a=during_processing@2@1,wc_b=between_commits@4")
    assert armed("during_processing", "wc_a") and armed("between_commits", "wc_b")
    assert not armed("during_processing", "wc_b") and not armed("after_committed", "wc_a")
    monkeypatch.setenv("WEIR_CRASH_AT", "during_processing@3")
    assert armed("during_processing", "wc_b") and armed("during_processing")
    monkeypatch.delenv("WEIR_CRASH_AT")
    assert not armed("during_processing", "wc_a")
