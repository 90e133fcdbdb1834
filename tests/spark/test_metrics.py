"""The Prometheus endpoint of a running topology (``weir.metrics.port``), scraped over HTTP.

Also: the checkpoint history a real Storm topology leaves in its store, and the spouts' lag hook
against real Redis and NATS servers.
"""

from __future__ import annotations

import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import weir
from weir.checkpoint.history import load_history, load_topology_shape
from weir.demo import SplitSentence, generate_corpus, read_counts, wordcount_topology
from weir.errors import ConfigError, TopologyError
from weir.sources import FileSpout
from weir.state import StateFactory
from weir.topology import Fields, TopologyBuilder

from ._topologies import PickyCount

pytestmark = pytest.mark.spark


def _conf(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"weir.state.dir": str(tmp_path / "state"), "weir.spark.master": "local[2]", **extra}


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the endpoint: ``(name, sorted labels) -> value``."""
    with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310 - a loopback URL
        assert resp.status == 200
        text = resp.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def sample(samples: dict[Any, float], name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def test_metrics_endpoint_reports_batches_tuples_state_and_spark_progress(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    expected = generate_corpus(str(corpus), n_words=2_000, n_distinct=50, n_files=2, seed=3)
    conf = _conf(tmp_path, **{"weir.metrics.port": 0, "weir.metrics.host": "127.0.0.1"})
    run = weir.submit("mwc", conf, wordcount_topology(str(corpus)), spark=spark)
    try:
        st = run.process_available()
        assert st.metrics_url is not None and st.metrics_url.startswith("http://127.0.0.1:")
        t = "mwc"
        m = scrape(st.metrics_url)
        assert sample(m, "weir_batches_total", topology=t, outcome="committed") == st.batches == 2
        assert sample(m, "weir_last_txid", topology=t) == 2
        assert sample(m, "weir_checkpoint_phase", topology=t, weir_checkpoint_phase="COMMITTED") == 1
        assert sample(m, "weir_checkpoint_phase", topology=t, weir_checkpoint_phase="PREPARING") == 0
        total = sum(expected.values())
        assert sample(m, "weir_tuples_total", topology=t, component="count", direction="in") == total
        assert sample(m, "weir_tuples_total", topology=t, component="split", direction="out") == total
        assert sample(m, "weir_batch_duration_seconds_count", topology=t) == 2
        assert sample(m, "weir_commit_duration_seconds_count", topology=t) == 2
        keys = {dict(labels)["namespace"]: v for (name, labels), v in m.items() if name == "weir_state_keys"}
        assert sum(keys.values()) == len(expected) and len(keys) == 2  # count has 2 tasks
        written = sum(v for (name, _), v in m.items() if name == "weir_state_keys_written_total")
        assert written >= len(expected)  # a word in both batches is written twice
        # Spark's progress events arrive on the listener bus shortly after each batch
        deadline = time.monotonic() + 60
        while sample(m, "weir_spark_batch_id", topology=t) != 1 and time.monotonic() < deadline:
            time.sleep(0.2)
            m = scrape(st.metrics_url)
        assert sample(m, "weir_spark_batch_id", topology=t) == 1
        lines = sum(1 for f in corpus.iterdir() for _ in f.read_text().splitlines())
        assert sample(m, "weir_spark_input_rows_total", topology=t) == lines
        assert sample(m, "weir_spark_trigger_duration_seconds_count", topology=t) == 2
        # a file spout cannot tell its lag: no series rather than a made-up number
        assert not [k for k in m if k[0] == "weir_source_lag_records"]
    finally:
        run.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(st.metrics_url, timeout=5)  # noqa: S310 - stop() closed the endpoint


def test_failures_and_retries_are_counted_and_kept_in_history(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "a.txt").write_text("good fine good\n", encoding="utf-8")
    conf = _conf(tmp_path, **{"weir.batch.max.retries": 1, "weir.metrics.port": 0})
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(str(corpus)))
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("lines")
    b.set_bolt("count", PickyCount(raise_instead=True), 2).fields_grouping("split", Fields("word"))
    weir.submit("mpicky", conf, b.create_topology(), spark=spark).process_available()
    (corpus / "b.txt").write_text("fine badword fine\n", encoding="utf-8")
    run = weir.submit("mpicky", conf, b.create_topology(), spark=spark)
    try:
        with pytest.raises(TopologyError):
            run.process_available()
        url = run.status().metrics_url
        assert url is not None
        m = scrape(url)
        assert sample(m, "weir_task_failures_total", topology="mpicky", component="count") == 2
        assert sample(m, "weir_batches_total", topology="mpicky", outcome="failed") == 1
    finally:
        run.stop()
    assert read_counts(conf, "mpicky") == Counter({"good": 2, "fine": 1})
    backend = StateFactory.get_provider(conf).backend  # type: ignore[attr-defined]
    entries = load_history(backend, "$checkpointspout-mpicky")
    assert [(e.txid, e.status, e.attempts) for e in entries] == [(1, "committed", 1), (2, "failed", 2)]
    assert entries[0].components["count"]["in"] == 3
    assert sum(entries[0].keys_written.values()) == 2  # good, fine
    f = entries[1].failures[0]
    assert f["component"] == "count" and "badword" in f["error"] and "cannot count" in f["traceback"]
    shape = load_topology_shape(backend, "$checkpointspout-mpicky")
    assert shape is not None
    comps = {c["id"]: c for c in shape["components"]}
    assert comps["count"]["stateful"] and comps["count"]["parallelism"] == 2
    assert comps["count"]["inputs"] == [
        {"source": "split", "stream": "default", "grouping": "fields", "fields": ["word"]}
    ]


def test_a_bad_metrics_port_fails_at_submit(spark: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    corpus.mkdir()
    with pytest.raises(ConfigError, match="weir.metrics.port"):
        weir.submit(
            "badport", _conf(tmp_path, **{"weir.metrics.port": 70000}), wordcount_topology(str(corpus)), spark=spark
        )
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"weir.metrics.port {port}"):
            weir.submit(
                "badport",
                _conf(tmp_path, **{"weir.metrics.port": port, "weir.metrics.host": "127.0.0.1"}),
                wordcount_topology(str(corpus)),
                spark=spark,
            )
