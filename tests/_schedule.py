"""Longest work units first under ``-n 2 --dist loadgroup``, from a table of recorded durations.

pytest-xdist hands work units (a test, or a server group such as ``kafka``) to the workers in queue
order and gives a worker the next unit when it is almost out of work. In collection order a long
crash chain can start last and leave the other worker idle for minutes at the end; sorted longest
first (the LPT rule) the short unit tests fill the tail instead. The order of the tests *inside* a
unit, and which tests run, do not change.

``tests/durations.json`` holds the seconds (setup + call + teardown) of each test id from a full run;
regenerate it from a run with ``--durations=0``::

    .venv/bin/python -m tests._schedule LOG_OF_A_RUN_WITH_DURATIONS_0

which also prints per-file and per-unit totals. A test missing from the table (new, renamed) is
estimated from its parametrised siblings, then its file, then its markers.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

TABLE = Path(__file__).with_name("durations.json")

#: one line of pytest's ``--durations`` report: ``12.34s call     tests/x.py::test_y[p]``
_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(tests/\S+::\S.*?)\s*$")


def load_table(path: Path = TABLE) -> dict[str, float]:
    """The recorded seconds per test id (empty when the table is missing or unreadable)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict):
        return {}
    return {str(k): float(v) for k, v in raw.items() if isinstance(v, (int, float))}


def _base(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


class Estimator:
    """Seconds a test is expected to take: recorded, else the mean of its siblings or of its file."""

    def __init__(self, table: Mapping[str, float]) -> None:
        self.table = dict(table)
        by_base: dict[str, list[float]] = defaultdict(list)
        by_file: dict[str, list[float]] = defaultdict(list)
        for nodeid, secs in self.table.items():
            by_base[_base(nodeid)].append(secs)
            by_file[_file(nodeid)].append(secs)
        self.by_base = {k: sum(v) / len(v) for k, v in by_base.items()}
        self.by_file = {k: sum(v) / len(v) for k, v in by_file.items()}

    def __call__(self, nodeid: str) -> float:
        if nodeid in self.table:
            return self.table[nodeid]
        if _base(nodeid) in self.by_base:
            return self.by_base[_base(nodeid)]
        if _file(nodeid) in self.by_file:
            return self.by_file[_file(nodeid)]
        f = _file(nodeid)
        if f.startswith(("tests/crash/", "tests/kafka/")) or "crash" in f:
            return 60.0  # a SIGKILL chain: several Spark driver starts
        if f.startswith(("tests/unit/", "tests/docs/")):
            return 0.5
        return 5.0


def order_units(units: Iterable[tuple[str, Iterable[str]]], estimate: Callable[[str], float]) -> list[str]:
    """The unit names, longest estimated total first (ties keep their given order)."""
    totals = [(name, sum(estimate(n) for n in nodeids)) for name, nodeids in units]
    return [name for name, _ in sorted(totals, key=lambda t: -t[1])]


def parse_durations(lines: Iterable[str]) -> dict[str, float]:
    """Seconds per test id (its setup, call and teardown added) from a ``--durations`` report."""
    out: dict[str, float] = defaultdict(float)
    for line in lines:
        m = _LINE.match(line)
        if m:
            out[m.group(3)] += float(m.group(1))
    return dict(out)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests._schedule LOG_OF_A_PYTEST_RUN_WITH_--durations=0", file=sys.stderr)
        return 2
    log = Path(argv[0])
    durations = parse_durations(log.read_text(encoding="utf-8", errors="replace").splitlines())
    if not durations:
        print(f"{log}: no '--durations' lines found (run pytest with --durations=0)", file=sys.stderr)
        return 1
    from tests.conftest import xdist_group

    per_file: dict[str, float] = defaultdict(float)
    per_unit: dict[str, float] = defaultdict(float)
    for nodeid, secs in durations.items():
        per_file[_file(nodeid)] += secs
        per_unit[xdist_group(nodeid)] += secs
    total = sum(durations.values())
    print(f"{len(durations)} tests, {total:.0f} s of test time in all (setup + call + teardown)\n")
    print(f"{'seconds':>9}  {'share':>6}  file")
    for f, secs in sorted(per_file.items(), key=lambda t: -t[1])[:40]:
        print(f"{secs:9.1f}  {secs / total:6.1%}  {f}")
    print(f"\n{'seconds':>9}  unit (the largest 20: a group, or one test)")
    for u, secs in sorted(per_unit.items(), key=lambda t: -t[1])[:20]:
        print(f"{secs:9.1f}  {u}")
    TABLE.write_text(
        json.dumps({k: round(v, 2) for k, v in sorted(durations.items())}, indent=0) + "\n", encoding="utf-8"
    )
    print(f"\nwrote {TABLE} ({len(durations)} tests)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
