"""``weir.state.ttl.ms`` on a Trident word count on Spark: time driven by ``weir.batch.clock``.

The clock gives txid *n* the time ``n * 1000`` ms and the state ``counts`` a TTL of 1500 ms, so a
count last written at txid *t* has expired from txid *t + 2* on: a word seen again after that counts
from 1, a word seen again sooner counts on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.cli._support import run
from tests.trident._support import Split, Store, word_files, write_lines
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
    # seen again at 2 and 3 (never two batches apart): it counted on to 3, then expired at txid 5
    # (written at 3), and the commit of txid 5 deleted it from the store
    assert sqlite_store.counts("ttlwc") == {"b": 1, "c": 1}
    state = factory.make_state({}, 0, 1)
    state.expire_through(3)  # as txid 5 sees the map: a (last written at 3) has expired
    assert state.multi_get([["a"], ["b"], ["c"]]) == [None, 1, 1]


#: txid 1 writes four words that all expire at txid 3; e keeps the batches coming
MASS = [["a b c d"], ["e"], ["e"], ["e"]]


def test_the_commit_sweeps_in_chunks_and_readers_hide_what_is_left(
    spark: Any, sqlite_store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = tmp_path / "lines"
    word_files(lines, MASS)
    factory = sqlite_store.factory("opaque", "mass")
    table = factory.store.table
    conf = {
        "weir.state.dir": str(tmp_path / "state"),
        "topology.state.provider": "sqlite",  # the coordinator (and its time log) beside the map state
        "topology.state.provider.config": {"url": sqlite_store.url},
        "weir.batch.max.retries": 0,
        "weir.batch.clock": f"{__name__}.clock",
        "weir.state.ttl.ms": {"counts": 1500},
        "weir.state.ttl.sweep.max": 1,  # one expired cell per commit
    }
    assert weir.submit("mass", conf, _topology(lines, factory), spark=spark).process_available().last_txid == 4
    # a, b, c, d expired at txid 3; the commits of 3 and 4 deleted one each: two are still stored
    stored = sqlite_store.counts("mass")
    assert stored["e"] == 3 and len(stored) == 3 and set(stored) - {"e"} < {"a", "b", "c", "d"}
    left = sorted(set(stored) - {"e"})
    # every reader through weir hides them (expired at the last committed txid, 4)
    df = weir.state.read(spark, sqlite_store.url, "mass", f"trident:{table}")
    assert [(json.loads(r["key"]), json.loads(r["value"])) for r in df.collect()] == [(["e"], 3)]
    got = run(capsys, "state", "dump", "--url", sqlite_store.url, f"trident:{table}")
    assert got.code == 0 and [d["key"] for d in got.json_lines()] == [["e"]]
    got = run(capsys, "state", "get", "--url", sqlite_store.url, f"trident:{table}", left[0])
    assert got.code == 1 and "not found" in got.err
    got = run(capsys, "state", "get", "--url", sqlite_store.url, f"trident:{table}", "e")
    assert json.loads(got.out) == {"txid": 4, "curr": 3, "prev": 2}
    # two more batches: their commits delete the rest
    write_lines(lines, "f004.txt", ["e"])
    write_lines(lines, "f005.txt", ["e"])
    assert weir.submit("mass", conf, _topology(lines, factory), spark=spark).process_available().last_txid == 6
    assert sqlite_store.counts("mass") == {"e": 5}
