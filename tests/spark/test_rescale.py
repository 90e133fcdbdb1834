"""A Storm word count whose stateful bolt goes 2 → 5 → 3 tasks between runs, counts exact on every store."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from weir._util import stable_hash
from weir.demo import generate_corpus, read_counts, wordcount_topology
from weir.errors import ConfigError
from weir.state import StateFactory

pytestmark = pytest.mark.services


def _add_files(corpus: Path, tag: str, seed: int, tmp: Path) -> Counter[str]:
    """Write two more files into ``corpus`` (names after the earlier ones); their exact word counts."""
    src = tmp / f"gen-{tag}"
    counts = generate_corpus(str(src), n_words=1_200, n_distinct=150, n_files=2, seed=seed)
    corpus.mkdir(exist_ok=True)
    for f in sorted(src.iterdir()):
        shutil.copy(f, corpus / f"{tag}-{f.name}")
    return counts


def _layout_ok(url: str, name: str, tasks: int) -> None:
    """Every key sits in the namespace of the task its word's tuples go to; no namespace past the last task."""
    backend = StateFactory.from_url(url).backend
    provider = StateFactory.from_url(url)
    for t in range(tasks):
        for word, _ in provider.new_state(f"{name}-count-{t}"):
            assert stable_hash(word) % tasks == t, (word, t)
    left = [ns for ns in backend.namespaces() if ns.startswith(f"{name}-count-") and int(ns.rsplit("-", 1)[1]) >= tasks]
    assert left == []
    assert not [ns for ns in backend.namespaces() if ns.startswith("$rescale-")]


# the re-partition itself runs on every store through the Backend SPI (tests/crash/test_rescale_crash.py);
# here the whole word count goes through weir.submit three times (on SQLite, to keep the suite's time)
@pytest.mark.parametrize("provider_url", ["sqlite"], indirect=True)
def test_wordcount_grows_and_shrinks(spark: Any, tmp_path: Path, provider_url: str) -> None:
    corpus = tmp_path / "in"
    conf = {
        "weir.state.dir": str(tmp_path / "state"),
        "weir.spark.master": "local[2]",
        "topology.state.provider.config": {"url": provider_url},
    }
    expected = _add_files(corpus, "a", 1, tmp_path)
    weir.submit("rs", conf, wordcount_topology(str(corpus), parallelism=2), spark=spark).process_available()
    assert read_counts(conf, "rs", parallelism=2) == expected
    # refused when asked to, naming the component and its namespaces
    with pytest.raises(ConfigError, match=r"'count'.*rs-count-0\.\.1.*weir\.rescale=refuse"):
        weir.submit(
            "rs", {**conf, "weir.rescale": "refuse"}, wordcount_topology(str(corpus), parallelism=5), spark=spark
        )
    for tag, seed, tasks in (("b", 2, 5), ("c", 3, 3)):
        expected += _add_files(corpus, tag, seed, tmp_path)
        run = weir.submit("rs", conf, wordcount_topology(str(corpus), parallelism=tasks), spark=spark)
        run.process_available()
        assert read_counts(conf, "rs", parallelism=tasks) == expected
        _layout_ok(provider_url, "rs", tasks)
    rec = StateFactory.from_url(provider_url).backend.get("$checkpointspout-rs", b"__state")
    assert rec is not None and b'"count": 3' in rec
