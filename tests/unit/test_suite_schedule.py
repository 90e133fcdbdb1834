"""The CI suite's unit order (tests/_schedule.py): longest recorded work units first."""

from __future__ import annotations

from pathlib import Path

from tests._schedule import Estimator, load_table, order_units, parse_durations

REPORT = """\
============================= slowest durations =============================
210.20s call     tests/kafka/test_kafka_e2e.py::test_exactly_once[a b]
3.50s setup    tests/kafka/test_kafka_e2e.py::test_exactly_once[a b]
0.25s teardown tests/kafka/test_kafka_e2e.py::test_exactly_once[a b]
12.00s call     tests/crash/test_x.py::test_chain[sqlite]
(2 durations < 0.005s hidden.  Use -vv to show these durations.)
"""


def test_a_report_adds_setup_call_and_teardown_per_test_id() -> None:
    got = parse_durations(REPORT.splitlines())
    assert got == {
        "tests/kafka/test_kafka_e2e.py::test_exactly_once[a b]": 213.95,
        "tests/crash/test_x.py::test_chain[sqlite]": 12.0,
    }


def test_units_are_ordered_longest_first_and_unknown_tests_are_estimated() -> None:
    est = Estimator({"tests/crash/test_x.py::test_chain[sqlite]": 100.0, "tests/unit/test_u.py::test_a": 0.1})
    assert est("tests/crash/test_x.py::test_chain[redis]") == 100.0  # its parametrised sibling
    assert est("tests/crash/test_x.py::test_other") == 100.0  # its file
    assert est("tests/crash/test_new.py::test_y") > est("tests/spark/test_new.py::test_y") > est("tests/unit/n.py::t")
    units = [
        ("tests/unit/test_u.py::test_a", ["tests/unit/test_u.py::test_a"]),
        ("kafka", ["tests/kafka/test_k.py::test_1", "tests/kafka/test_k.py::test_2"]),
        ("tests/crash/test_x.py::test_chain[sqlite]", ["tests/crash/test_x.py::test_chain[sqlite]"]),
        ("tests/spark/test_s.py::test_b", ["tests/spark/test_s.py::test_b"]),
    ]
    assert order_units(units, est) == [
        "kafka",  # two unknown Kafka tests at 60 s each
        "tests/crash/test_x.py::test_chain[sqlite]",
        "tests/spark/test_s.py::test_b",
        "tests/unit/test_u.py::test_a",
    ]


def test_the_checked_in_table_loads_and_a_missing_one_is_empty(tmp_path: Path) -> None:
    table = load_table()
    assert table and all(k.startswith("tests/") and "::" in k and v >= 0 for k, v in table.items())
    assert load_table(tmp_path / "missing.json") == {}
