"""One driver run of the fault harness (``bench/faults.py`` starts it as its own process group).

Usage::

    python bench/_faults_driver.py DIALECT STORE URL STATE_DIR INPUT_DIR NAME

DIALECT is ``storm`` (split + stateful count bolt), ``trident`` (``persistent_aggregate`` of
``Count`` into an opaque map state of STORE) or ``streams`` (an operator that is its own
``StateHandler``, counting words in its checkpoint); STORE is ``sqlite``, ``redis`` or
``postgres`` and URL its address — or ``kafka``: URL is then the brokers' bootstrap address and
INPUT_DIR the input topic (one record per word, read by a ``KafkaSpout`` in batches of
``$WEIR_FAULTS_BATCH`` records), the state is SQLite under STATE_DIR, and the words also go,
exactly once, to the topic ``<input>-out`` (Storm: ``KafkaBolt``; Trident: ``KafkaStateFactory``).
STATE_DIR may be relative (``weir.state.dir`` — a run from
another working directory then finds another Spark checkpoint). Processes what is in INPUT_DIR,
printing ``TXID <n>`` as batches commit, then ``DONE``; a failure prints ``ERROR <type>: <first
line>`` and exits 3. ``--count`` instead prints the committed counts as JSON.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout (for cloudpickle by value)

import weir  # noqa: E402
from weir.demo import SplitSentence, WordCount, read_counts, wordcount_topology  # noqa: E402
from weir.sinks import KafkaBolt, KafkaStateFactory, KafkaStateUpdater  # noqa: E402
from weir.sources import FileSpout, KafkaSpout  # noqa: E402
from weir.streams import Checkpoint, Operator, OperatorContext, StateHandler, load_checkpoint  # noqa: E402
from weir.topology import BasicBolt, Fields, OutputCollector, TopologyBuilder, Tuple  # noqa: E402
from weir.trident import Count, Function, TridentTopology  # noqa: E402
from weir.trident.backing import PostgresMapState, RedisMapState, SqliteMapState  # noqa: E402

PARALLELISM = 2


class Split(BasicBolt):
    """One tuple per word."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("word"))

    def execute(self, tup: Tuple, collector: Any) -> None:
        for w in tup.get_string(0).split():
            collector.emit([w])


class WordCounter(Operator, StateHandler):
    """A Streams operator counting words; the counts live in its checkpoints."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("word", "count"))

    def prepare(self, conf: Mapping[str, Any], context: OperatorContext, collector: OutputCollector) -> None:
        super().prepare(conf, context, collector)
        self.counts: dict[str, int] = {}

    def process(self, tup: Tuple) -> None:
        w = tup["word"]
        self.counts[w] = self.counts.get(w, 0) + 1

    def drain(self) -> None:
        pass  # nothing is submitted downstream

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        checkpoint.put("counts", dict(self.counts))

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002 - Streams' name
        pass  # nothing outside the checkpoint to clean up

    def reset(self, checkpoint: Checkpoint) -> None:
        self.counts = dict(checkpoint.get("counts", {}))

    def reset_to_initial_state(self) -> None:
        self.counts = {}


class TridentSplit(Function):
    """One tuple per word."""

    def execute(self, tup: Any, collector: Any) -> None:
        for w in tup.get_string(0).split():
            collector.emit([w])


def _map_factory(store: str, url: str, name: str) -> Any:
    table = f"fc_{name}".replace("-", "_")
    if store == "sqlite":
        return SqliteMapState.opaque(url.removeprefix("sqlite:///") + ".trident", table=table)
    if store == "redis":
        return RedisMapState.opaque(url, key_prefix=f"{table}:")
    return PostgresMapState.opaque(url, table=table, key_columns={"word": "TEXT"}, value_type="BIGINT")


def kafka_state_url(state_dir: str) -> str:
    """The SQLite store of a ``kafka`` configuration."""
    return f"sqlite:///{Path(state_dir).resolve()}/store.db"


def kafka_topology(dialect: str, bootstrap: str, topic: str, state_dir: str, name: str) -> Any:
    """KafkaSpout → split → count (SQLite), and the words exactly once to ``<topic>-out`` (Storm, Trident)."""
    spout = KafkaSpout(
        bootstrap, topic, max_records_per_batch=int(os.environ.get("WEIR_FAULTS_BATCH", "100")), connect_timeout_s=10
    )
    out = f"{topic}-out"
    if dialect == "storm":
        b = TopologyBuilder()
        b.set_spout("lines", spout)
        b.set_bolt("split", SplitSentence(), PARALLELISM).shuffle_grouping("lines")
        b.set_bolt("count", WordCount(), PARALLELISM).fields_grouping("split", Fields("word"))
        out_bolt = KafkaBolt(bootstrap, out, value_field="word", key_field="word")
        b.set_bolt("out", out_bolt, PARALLELISM).shuffle_grouping("split")
        return b.create_topology()
    if dialect == "streams":
        b = TopologyBuilder()
        b.set_spout("lines", spout)
        b.set_bolt("split", Split()).shuffle_grouping("lines")
        b.set_bolt("count", WordCounter(), PARALLELISM).fields_grouping("split", Fields("word"))
        return b.create_topology()
    t = TridentTopology()
    words = t.new_stream("lines", spout).each(["key"], TridentSplit(), ["word:str"])
    words.group_by(["word"]).persistent_aggregate(
        _map_factory("sqlite", kafka_state_url(state_dir), name), Count(), "count"
    ).parallelism_hint(PARALLELISM)
    words.partition_persist(
        KafkaStateFactory(bootstrap, out, f"{name}-tx"),
        ["word"],
        KafkaStateUpdater(value_field="word", key_field="word"),
    )
    return t


def topology(dialect: str, store: str, url: str, inp: str, name: str) -> Any:
    """The word count of ``dialect``."""
    if dialect == "storm":
        return wordcount_topology(inp, parallelism=PARALLELISM, files_per_batch=1)
    if dialect == "streams":
        b = TopologyBuilder()
        b.set_spout("lines", FileSpout(inp, files_per_batch=1))
        b.set_bolt("split", Split()).shuffle_grouping("lines")
        b.set_bolt("count", WordCounter(), PARALLELISM).fields_grouping("split", Fields("word"))
        return b.create_topology()
    t = TridentTopology()
    (
        t.new_stream("lines", FileSpout(inp, files_per_batch=1))
        .each(["line"], TridentSplit(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(_map_factory(store, url, name), Count(), "count")
        .parallelism_hint(PARALLELISM)
    )
    return t


def conf_for(store: str, url: str, state_dir: str) -> dict[str, Any]:
    """The run's configuration: the store, small bounds, quick restarts."""
    conf: dict[str, Any] = {
        "weir.state.dir": state_dir,
        "weir.spark.master": "local[2]",
        "topology.state.checkpoint.interval.ms": 200,
        "weir.restart.backoff.ms": 200,
        "weir.restart.max": 3,
        "weir.batch.max.retries": 1,
    }
    if store == "kafka":
        conf["topology.state.provider.config"] = {"url": kafka_state_url(state_dir)}
    elif store == "sqlite":
        conf["topology.state.provider.config"] = {"url": url}
    elif store == "redis":
        conf["topology.state.provider"] = "redis"
        conf["topology.state.provider.config"] = {"url": url}
    else:
        conf["topology.state.provider"] = "postgres"
        conf["topology.state.provider.config"] = {
            "url": url,
            "connectTimeout": 3,
            "socketTimeout": 10,
            "statementTimeout": 5,
        }
    return conf


def counts(dialect: str, store: str, url: str, state_dir: str, name: str, inp: str) -> Counter[str]:
    """The committed counts of the run's state (Trident: of the words in ``inp``)."""
    conf = conf_for(store, url, state_dir)
    if dialect == "storm":
        return Counter({str(k): int(v) for k, v in read_counts(conf, name, parallelism=PARALLELISM).items()})
    if dialect == "streams":
        from weir.state import StateFactory

        provider = StateFactory.get_provider(conf)
        got: Counter[str] = Counter()
        for task in range(PARALLELISM):
            ck = load_checkpoint(provider, name, "count", task)
            if ck is not None:
                got.update({str(k): int(v) for k, v in dict(ck.get("counts", {})).items()})
        return got
    if store == "kafka":
        words = sorted(json.loads(os.environ["WEIR_FAULTS_WORDS"]))
        cells = _map_factory("sqlite", kafka_state_url(state_dir), name).backing_map()
        got_cells = cells.multi_get([(w,) for w in words])
        return Counter({w: int(c.curr) for w, c in zip(words, got_cells, strict=True) if c is not None and c.curr})
    words = sorted({w for f in Path(inp).glob("*.txt") for w in f.read_text().split()})
    cells = _map_factory(store, url, name).backing_map().multi_get([(w,) for w in words])
    return Counter({w: int(c.curr) for w, c in zip(words, cells, strict=True) if c is not None and c.curr})


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--count"]
    dialect, store, url, state_dir, inp, name = args[:6]
    if "--count" in sys.argv:
        print(json.dumps(counts(dialect, store, url, state_dir, name, inp)))
        return 0
    try:
        topo = (
            kafka_topology(dialect, url, inp, state_dir, name)
            if store == "kafka"
            else topology(dialect, store, url, inp, name)
        )
        run = weir.submit(name, conf_for(store, url, state_dir), topo)
    except Exception as exc:  # noqa: BLE001 - refused at submit: reported to the harness
        line = (str(exc).strip().splitlines() or [""])[0]
        print(f"ERROR {type(exc).__name__}: {line[:500]}", flush=True)
        return 3
    stop = threading.Event()

    def progress() -> None:
        last = None
        while not stop.wait(0.3):
            try:
                txid = run._status.last_txid
            except Exception:  # noqa: BLE001, S112 - best effort
                continue
            if txid != last and txid is not None:
                print(f"TXID {txid}", flush=True)
                last = txid

    threading.Thread(target=progress, daemon=True).start()
    try:
        run.process_available()
    except Exception as exc:  # noqa: BLE001 - reported to the harness
        stop.set()
        line = (str(exc).strip().splitlines() or [""])[0]
        print(f"ERROR {type(exc).__name__}: {line[:500]}", flush=True)
        return 3
    stop.set()
    time.sleep(0.1)
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
