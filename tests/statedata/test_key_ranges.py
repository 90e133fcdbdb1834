"""Big namespaces read as key ranges, one Spark partition each, still at one committed txid (SQLite, PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.statedata.test_read import TASKS, _rows, build
from weir._util import stable_hash
from weir.state import StateFactory
from weir.statedata import read

pytestmark = pytest.mark.services

WORDS = [[f"w{i:03d}" for i in range(90)], [f"w{i:03d}" for i in range(0, 90, 3)], ["-w004", "-w007"]]


@pytest.mark.parametrize("provider_url", ["sqlite", "postgres"], indirect=True)
def test_big_namespaces_are_read_as_key_ranges(spark: Any, provider_url: str) -> None:
    counts = build(provider_url, batches=WORDS)
    backend: Any = StateFactory.from_url(provider_url).backend
    for t in range(TASKS):  # the ranges cover every committed row once, in any store layout
        ns = f"wc-count-{t}"
        ranges = backend.key_ranges(ns, 4)
        assert len(ranges) > 1 and ranges[0][0] is None and ranges[-1][1] is None
        got = [kv for r in ranges for kv in backend.scan_range(ns, r)]
        assert sorted(got) == sorted(backend.scan(ns))
    df = read(spark, provider_url, "wc", rows_per_partition=8)  # ~29 rows per namespace: ~4 ranges each
    assert df.rdd.getNumPartitions() > TASKS
    expected = sorted(("count", stable_hash(w) % TASKS, w, n, 3) for w, n in counts.items())
    assert _rows(df) == expected
    assert read(spark, provider_url, "wc").rdd.getNumPartitions() == TASKS  # small: one per namespace
    # a commit during the read is still named by the range that sees it
    late = StateFactory.from_url(provider_url).new_state("wc-count-1")
    late.put("late", 1)
    late.prepare_commit(4)
    late.commit(4)
    with pytest.raises(Exception, match=r"StateReadConflictError.*'wc-count-1'"):
        df.collect()
