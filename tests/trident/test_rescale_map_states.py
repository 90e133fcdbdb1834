"""Trident map states across a parallelism change: 2 → 5 → 3 partitions between runs, exact on every store.

A map state's cells are keyed by the group's values, not by partition, so a new partitioning reads
and writes the same cells (no re-partition step is needed). One topology persists the same grouped
word count into SQLite, Redis, PostgreSQL and Memcached at once (one Spark run per parallelism for
all four), and each store's counts are checked after every run; HBase runs the same steps on its own
(its gateway's tests share one xdist group).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.trident._support import Split, Store, write_lines
from tests.trident.conftest import make_store
from weir.sources import FileSpout
from weir.trident import Count, TridentTopology
from weir.trident.backing import MemcachedMapState

pytestmark = pytest.mark.services

RUNS = [  # (partitions, lines of this run's file)
    (2, ["the cow jumped over the moon", "the man went to the store"]),
    (5, ["four score and seven years ago", "the cow the moon the store"]),
    (3, ["moon moon cow", "a b c d e f g the"]),
]


def _topology(
    lines: Path, stores: list[Store], memcached_url: str | None, tag: str, partitions: int
) -> TridentTopology:
    topo = TridentTopology()
    grouped = topo.new_stream("lines", FileSpout(str(lines))).each(["line"], Split(), ["word:str"]).group_by(["word"])
    for s in stores:
        grouped.persistent_aggregate(s.factory("opaque", "wc"), Count(), "count").parallelism_hint(partitions)
    if memcached_url is not None:
        mc = MemcachedMapState.factory("opaque", memcached_url, key_prefix=f"wc_{tag}:")
        grouped.persistent_aggregate(mc, Count(), "count").parallelism_hint(partitions)
    return topo


def _memcached_counts(url: str, tag: str, words: list[str]) -> Counter[str]:
    cells = MemcachedMapState.store(url, key_prefix=f"wc_{tag}:").backing_map("opaque").multi_get([[w] for w in words])
    return Counter({w: c.curr for w, c in zip(words, cells, strict=True) if c is not None})


def test_map_states_keep_exact_counts_over_2_5_3_partitions_on_every_store(
    spark: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    stores = [make_store(request, kind, tmp_path) for kind in ("sqlite", "redis", "postgres")]
    memcached_url = request.getfixturevalue("memcached_server").url
    tag = stores[0].tag
    lines = tmp_path / "lines"
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.batch.max.retries": 0}
    expected: Counter[str] = Counter()
    for i, (partitions, batch) in enumerate(RUNS):
        write_lines(lines, f"f{i:03d}.txt", batch)
        expected.update(w for line in batch for w in line.split())
        topo = _topology(lines, stores, memcached_url, tag, partitions)
        status = weir.submit("tridentrs", conf, topo, spark=spark).process_available()
        assert status.last_txid == i + 1
        for s in stores:
            assert s.counts("wc") == expected, (s.kind, partitions)
        assert _memcached_counts(memcached_url, tag, sorted(expected)) == expected, ("memcached", partitions)
    from weir.trident.backing import close_connections

    close_connections()


def test_hbase_map_states_keep_exact_counts_over_2_5_3_partitions(
    spark: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = make_store(request, "hbase", tmp_path)
    lines = tmp_path / "lines"
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.batch.max.retries": 0}
    expected: Counter[str] = Counter()
    for i, (partitions, batch) in enumerate(RUNS):
        write_lines(lines, f"f{i:03d}.txt", batch)
        expected.update(w for line in batch for w in line.split())
        topo = _topology(lines, [store], None, store.tag, partitions)
        status = weir.submit("tridentrsh", conf, topo, spark=spark).process_available()
        assert status.last_txid == i + 1
        assert store.counts("wc") == expected, partitions
    from weir.trident.backing import close_connections

    close_connections()
