"""``weir.submit(..., initial_state=...)`` for a Trident word count: the first batch counts on from the seed."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.trident._support import Split, Store, word_files
from weir.errors import ConfigError, StateError
from weir.sources import FileSpout
from weir.state.evolution import EvolutionError
from weir.trident import Count, TridentTopology

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BATCHES = [["the cat sat on the mat", "a cat and a dog"]]


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


def test_a_seeded_word_count_counts_on_from_the_loaded_values(spark: Any, sqlite_store: Store, tmp_path: Path) -> None:
    lines = tmp_path / "lines"
    expected = word_files(lines, BATCHES)
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.batch.max.retries": 0}
    topo = _topology(lines, sqlite_store.factory("opaque", "wc"))
    with pytest.raises(
        ConfigError, match=r"topology 'seeded': initial_state names 'words', which is no state.*'counts'"
    ):
        weir.submit("seeded", conf, topo, spark=spark, initial_state={"words": {"the": 1}})
    seed = spark.createDataFrame([("the", 100), ("zebra", 5)], "key string, value long")
    run = weir.submit("seeded", conf, topo, spark=spark, initial_state={"trident:counts": seed})
    assert sqlite_store.counts("wc") == {"the": 100, "zebra": 5}  # loaded before the first batch
    status = run.process_available()
    assert status.last_txid == len(BATCHES)
    assert sqlite_store.counts("wc") == expected + Counter({"the": 100, "zebra": 5})
    # a restarted program passing the same initial_state: nothing to do; other rows: refused at submit
    weir.submit("seeded", conf, topo, spark=spark, initial_state={"counts": {"the": 100, "zebra": 5}})
    with pytest.raises(StateError, match=r"topology 'seeded', state 'counts'.*committed state \(txid 1\)"):
        weir.submit("seeded", conf, topo, spark=spark, initial_state={"counts": {"the": 1}})
    assert sqlite_store.counts("wc") == expected + Counter({"the": 100, "zebra": 5})
    # the map state's recorded encoding (value type any) is checked by the written rules at submit
    typed = {**conf, "weir.state.value.type": {"counts": "int"}}
    with pytest.raises(
        EvolutionError,
        match=rf"topology 'seeded', state 'counts' \(Trident map state trident:wc_{sqlite_store.tag}\).*rule V2",
    ):
        weir.submit("seeded", typed, topo, spark=spark)
    with pytest.raises(ConfigError, match=r"weir.state.ttl.ms of a Trident topology names its map states"):
        weir.submit("seeded", {**conf, "weir.state.ttl.ms": 1000}, topo, spark=spark)
