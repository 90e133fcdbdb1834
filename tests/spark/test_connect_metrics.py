"""``weir.metrics.port`` over Spark Connect: the endpoint serves from the client, Spark's progress included.

Over Connect the coordinator runs in the client (the server's ``foreachBatch`` is relayed to it),
so weir's own series come from the same place as on classic PySpark; Spark's progress events
reach the client through a client-side ``StreamingQueryListener`` on the Connect session. Scraped
over HTTP from a run on the suite's real Connect server, for a Storm and a Trident topology.
"""

from __future__ import annotations

import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.spark.test_metrics import sample, scrape
from weir.demo import generate_corpus, wordcount_topology
from weir.sources import FileSpout
from weir.trident import Count, Function, TridentTopology
from weir.trident.backing import SqliteMapState

pytestmark = [pytest.mark.spark, pytest.mark.slow]


class _Split(Function):
    def execute(self, tup: Any, collector: Any) -> None:
        for w in tup.get_string(0).split():
            collector.emit([w])


def _spark_progress(url: str, topology: str, batch_id: int) -> dict[Any, float]:
    """The endpoint's samples once Spark's progress event of ``batch_id`` arrived (events trail the batch)."""
    m = scrape(url)
    deadline = time.monotonic() + 120
    while sample(m, "weir_spark_batch_id", topology=topology) != batch_id and time.monotonic() < deadline:
        time.sleep(0.2)
        m = scrape(url)
    return m


def test_storm_metrics_over_connect(spark_connect: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    expected = generate_corpus(str(corpus), n_words=2_000, n_distinct=50, n_files=2, seed=3)
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.metrics.port": 0, "weir.metrics.host": "127.0.0.1"}
    run = weir.submit("cmwc", conf, wordcount_topology(str(corpus)), spark=spark_connect)
    try:
        st = run.process_available()
        assert st.error is None and st.batches == 2
        assert st.metrics_url is not None and st.metrics_url.startswith("http://127.0.0.1:")
        m = _spark_progress(st.metrics_url, "cmwc", 1)
        t = "cmwc"
        assert sample(m, "weir_batches_total", topology=t, outcome="committed") == 2
        assert sample(m, "weir_last_txid", topology=t) == 2
        assert sample(m, "weir_checkpoint_phase", topology=t, weir_checkpoint_phase="COMMITTED") == 1
        total = sum(expected.values())
        assert sample(m, "weir_tuples_total", topology=t, component="count", direction="in") == total
        assert sample(m, "weir_tuples_total", topology=t, component="split", direction="out") == total
        keys = {dict(labels)["namespace"]: v for (name, labels), v in m.items() if name == "weir_state_keys"}
        assert sum(keys.values()) == len(expected) and len(keys) == 2  # count has 2 tasks
        # Spark's own numbers, from the query's progress events on the client-side listener
        assert sample(m, "weir_spark_batch_id", topology=t) == 1
        lines = sum(1 for f in corpus.iterdir() for _ in f.read_text().splitlines())
        assert sample(m, "weir_spark_input_rows_total", topology=t) == lines
        assert sample(m, "weir_spark_trigger_duration_seconds_count", topology=t) == 2
    finally:
        run.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(st.metrics_url, timeout=5)  # noqa: S310 - stop() closed the endpoint


def test_trident_metrics_over_connect(spark_connect: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    corpus.mkdir()
    lines = [["the cat sat", "the dog"], ["a cat", "the end the"]]
    for i, part in enumerate(lines):
        (corpus / f"f{i}.txt").write_text("\n".join(part) + "\n", encoding="utf-8")
    factory = SqliteMapState.factory("opaque", str(tmp_path / "wc.db"), table="wc")
    topo = TridentTopology()
    (
        topo.new_stream("lines", FileSpout(str(corpus), files_per_batch=1))
        .each(["line"], _Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(factory, Count(), "count")
    )
    conf = {"weir.state.dir": str(tmp_path / "state"), "weir.metrics.port": 0, "weir.metrics.host": "127.0.0.1"}
    run = weir.submit("cmtwc", conf, topo, spark=spark_connect)
    try:
        st = run.process_available()
        assert st.error is None and st.batches == 2
        assert st.metrics_url is not None
        m = _spark_progress(st.metrics_url, "cmtwc", 1)
        t = "cmtwc"
        assert sample(m, "weir_batches_total", topology=t, outcome="committed") == 2
        assert sample(m, "weir_last_txid", topology=t) == 2
        assert sample(m, "weir_spark_batch_id", topology=t) == 1
        assert sample(m, "weir_spark_input_rows_total", topology=t) == 4
    finally:
        run.stop()
    state = factory.make_state({}, 0, 1)
    words = Counter(w for part in lines for line in part for w in line.split())
    got = dict(zip(sorted(words), state.multi_get([[w] for w in sorted(words)]), strict=True))
    assert {k: int(v) for k, v in got.items()} == dict(words)
