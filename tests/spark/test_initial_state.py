"""``weir.submit(..., initial_state=...)``: a word count seeded from a DataFrame, then run, counts exact."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from weir._util import stable_hash
from weir.demo import generate_corpus, read_counts, wordcount_topology
from weir.errors import ConfigError, StateError
from weir.state import StateFactory
from weir.state.evolution import EvolutionError

pytestmark = pytest.mark.services


@pytest.mark.parametrize("provider_url", ["sqlite"], indirect=True)
def test_wordcount_seeded_from_a_dataframe(spark: Any, tmp_path: Path, provider_url: str) -> None:
    corpus = tmp_path / "in"
    expected = generate_corpus(str(corpus), n_words=1_500, n_distinct=120, n_files=2, seed=5)
    conf = {
        "weir.state.dir": str(tmp_path / "state"),
        "weir.spark.master": "local[2]",
        "topology.state.provider.config": {"url": provider_url},
    }
    history = {w: 1000 + i for i, w in enumerate(sorted(expected)[:40])} | {"never-seen": 7}
    df = spark.createDataFrame(sorted(history.items()), "key string, value long")
    topo = wordcount_topology(str(corpus), parallelism=3)
    with pytest.raises(ConfigError, match=r"initial_state names 'split', which is not a stateful component"):
        weir.submit("seeded", conf, topo, spark=spark, initial_state={"split": df})
    run = weir.submit("seeded", conf, topo, spark=spark, initial_state={"count": df})
    provider = StateFactory.from_url(provider_url)
    for t in range(3):  # loaded before the first batch, each key in the task its tuples reach
        for word, _ in provider.new_state(f"seeded-count-{t}"):
            assert stable_hash(word) % 3 == t
    run.process_available()
    assert read_counts(conf, "seeded", parallelism=3) == expected + Counter(history)
    # a restarted program passing the same initial state: nothing to do; another one: refused
    weir.submit("seeded", conf, topo, spark=spark, initial_state={"count": df}).process_available()
    assert read_counts(conf, "seeded", parallelism=3) == expected + Counter(history)
    with pytest.raises(StateError, match=r"topology 'seeded', component 'count': .*committed state"):
        weir.submit("seeded", conf, topo, spark=spark, initial_state={"count": {"x": 1}})


@pytest.mark.parametrize("provider_url", ["sqlite", "redis", "postgres"], indirect=True)
def test_submit_follows_the_schema_evolution_rules(spark: Any, tmp_path: Path, provider_url: str) -> None:
    conf = {
        "weir.state.dir": str(tmp_path / "state"),
        "weir.spark.master": "local[2]",
        "topology.state.provider.config": {"url": provider_url},
    }
    topo = wordcount_topology(str(tmp_path / "in"), parallelism=2)
    (tmp_path / "in").mkdir()
    weir.submit("evo", {**conf, "weir.state.value.type": "int"}, topo, spark=spark)  # recorded
    weir.submit("evo", {**conf, "weir.state.value.type": "float"}, topo, spark=spark)  # int widens to float
    with pytest.raises(
        EvolutionError, match=r"topology 'evo', component 'count' \(namespaces evo-count-\*\).*V2.*float to int"
    ):
        weir.submit("evo", {**conf, "weir.state.value.type": "int"}, topo, spark=spark)
    with pytest.raises(EvolutionError, match=r"rule S1: the value serializer may not change \(json -> str\)"):
        weir.submit(
            "evo",
            {**conf, "topology.state.provider.config": {"url": provider_url, "valueSerializerClass": "str"}},
            topo,
            spark=spark,
        )
