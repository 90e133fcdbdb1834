"""``weir.state.ttl.ms`` on a Trident word count on Spark: time driven by ``weir.batch.clock``.

The clock gives txid *n* the time ``n * 1000`` ms and the state ``counts`` a TTL of 1500 ms, so a
count last written at txid *t* has expired from txid *t + 2* on: a word seen again after that counts
from 1, a word seen again sooner counts on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import weir
from tests.trident._support import Split, Store, word_files
from weir.sources import FileSpout
from weir.trident import Count, TridentTopology

pytestmark = [pytest.mark.spark, pytest.mark.slow]

#: one file per batch (txid 1..5)
BATCHES = [["a b"], ["a"], ["a b"], ["c"], ["b"]]


def clock(txid: int) -> int:
    """``weir.batch.clock``: txid *n* happens at ``n`` seconds."""
    return txid * 1000


def _topology(lines: Path, factory: Any) -> TridentTopology:
    topo = TridentTopology()
    (
        topo.new_stream("lines", FileSpout(str(lines)))
        .each(["line"], Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(factory, Count(), "count")
        .name("counts")
        .parallelism_hint(2)
    )
    return topo


def test_counts_expire_from_the_batch_time_of_their_last_write(spark: Any, sqlite_store: Store, tmp_path: Path) -> None:
    lines = tmp_path / "lines"
    word_files(lines, BATCHES)
    factory = sqlite_store.factory("opaque", "ttlwc")
    topo = _topology(lines, factory)
    conf = {
        "weir.state.dir": str(tmp_path / "state"),
        "weir.batch.max.retries": 0,
        "weir.batch.clock": f"{__name__}.clock",
        "weir.state.ttl.ms": {"counts": 1500},
    }
    status = weir.submit("ttlwc", conf, topo, spark=spark).process_available()
    assert status.last_txid == len(BATCHES)
    # b expired at txid 3 (written at 1) and at 5 (written at 3): it counts from 1 each time; a was
    # seen again at 2 and 3 (never two batches apart): it counts on to 3
    assert sqlite_store.counts("ttlwc") == {"a": 3, "b": 1, "c": 1}
    state = factory.make_state({}, 0, 1)
    state.expire_through(3)  # as txid 5 sees the map: a (last written at 3) has expired
    assert state.multi_get([["a"], ["b"], ["c"]]) == [None, 1, 1]
