"""A Trident word count serving seed 004's DRPC query; the DRPC crash tests run it and SIGKILL it.

Usage: python drpc_driver.py [--remote sc://HOST:PORT] STATE_DIR INPUT_DIR NAME [KIND URL]
    [STATE_DIR INPUT_DIR NAME KIND URL]...

``--remote``: run as a Spark Connect client of that server (``weir.spark.remote``; the coordinator,
the DRPC request log and the answers stay in this process, the query runs on the server).

``KIND URL`` (``redis`` or ``postgres`` and the server's URL) put the topology's store (coordinator,
DRPC queues, request log, answers) and the word counts there; without them both live in
``STATE_DIR/state.db`` (``KIND`` ``sqlite``, URL ``sqlite:///STATE_DIR/state.db``). Several groups of
five run that many topologies side by side in one SparkSession (each its own name, store, state
directory and input), as the crash barrier of the DRPC crash test needs (``WEIR_CRASH_BARRIER``).

Runs until the file ``STATE_DIR/STOP`` exists for every topology (the test writes it once it has
read its answers).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import weir
from weir.sources import FileSpout
from weir.trident import Count, FilterNull, Function, MapGet, Sum, TridentTopology
from weir.trident.backing import PostgresMapState, RedisMapState, SqliteMapState


class Split(Function):
    """One tuple per word."""

    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup.get_string(0).split():
            collector.emit([word])


def submit(state_dir: str, input_dir: str, name: str, kind: str, url: str, remote: str | None = None) -> Any:
    """Start the word count of ``input_dir`` serving ``words``, its state in ``url``."""
    if kind == "redis":
        factory = RedisMapState.factory("transactional", url, key_prefix=f"{name}:wc:")
    elif kind == "postgres":
        factory = PostgresMapState.factory(
            "transactional", url, table=f"{name}_wc", key_columns={"word": "TEXT"}, value_type="BIGINT"
        )
    else:
        factory = SqliteMapState.factory("transactional", url, table="wc")
    topology = TridentTopology()
    counts = (
        topology.new_stream("lines", FileSpout(input_dir))
        .each(["line"], Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(factory, Count(), "count")
    )
    (
        topology.new_drpc_stream("words")
        .each(["args"], Split(), ["word:str"])
        .group_by(["word"])
        .state_query(counts, ["word"], MapGet(), ["count"])
        .each(["count"], FilterNull())
        .aggregate(["count"], Sum(), ["sum"])
    )
    conf = {
        "weir.state.dir": state_dir,
        "weir.spark.master": "local[2]",
        "weir.batch.max.retries": 2,
        "topology.state.checkpoint.interval.ms": 300,
    }
    if remote is not None:
        del conf["weir.spark.master"]
        conf["weir.spark.remote"] = remote
        conf["weir.spark.conf"] = {"spark.sql.shuffle.partitions": "2"}
    if kind != "sqlite":
        conf["topology.state.provider"] = kind
        conf["topology.state.provider.config"] = {"url": url}
    return weir.submit(name, conf, topology).start()


def main() -> int:
    args = sys.argv[1:]
    remote = None
    if args[0] == "--remote":
        remote, args = args[1], args[2:]
    if len(args) == 3:
        args += ["sqlite", f"sqlite:///{args[0]}/state.db"]
    groups = [args[i : i + 5] for i in range(0, len(args), 5)]
    runs = [(g[2], Path(g[0]) / "STOP", submit(*g, remote=remote)) for g in groups]
    deadline = time.monotonic() + 600
    while not all(stop.exists() for _, stop, _ in runs) and time.monotonic() < deadline:
        time.sleep(0.2)
    for name, _, run in runs:
        st = run.status()
        run.stop()
        print(f"DONE {name} txid={st.last_txid} batches={st.batches} skipped={st.skipped}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
