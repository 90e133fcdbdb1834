"""A Trident word-count driver the crash tests run as a separate process and SIGKILL (WEIR_CRASH_AT).

Usage: python trident_driver.py STATE_DIR INPUT_DIR STORE_KIND STORE_URL TABLE STATE_TYPE SPOUT_KIND [NAME] [...]

STORE_KIND is sqlite, redis, postgres, hbase or memcached (behind a ``CachedMap`` of 64 keys, so the
cache takes part in the crash too); STATE_TYPE opaque or transactional; SPOUT_KIND
transactional (a FileSpout) or opaque (the same files, declared OPAQUE: the test rewrites a file
between a crash and the restart). Several groups of eight (NAME given) run that many topologies side
by side in one SparkSession (the crash barrier of ``WEIR_CRASH_BARRIER``) on ``local[2 * N]``: each
topology may hold both its state partitions' task slots while it waits at an executor-side crash
point. They print ``NAME DONE txid=...`` each; one topology prints ``DONE txid=...``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.crash

import weir  # noqa: E402
from tests.crash import _side_by_side as side_by_side  # noqa: E402
from weir.sources import FileSpout, Guarantee  # noqa: E402
from weir.trident import Count, Function, TridentTopology  # noqa: E402
from weir.trident.backing import (  # noqa: E402
    HBaseMapState,
    MemcachedMapState,
    PostgresMapState,
    RedisMapState,
    SqliteMapState,
)


class Split(Function):
    """One tuple per word."""

    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup.get_string(0).split():
            collector.emit([word])


class OpaqueFileSpout(FileSpout):
    """Text files declared opaque: a replayed batch may hold other lines."""

    guarantee = Guarantee.OPAQUE


def factory(kind: str, url: str, table: str, state_type: str) -> Any:
    if kind == "sqlite":
        return SqliteMapState.factory(state_type, url, table=table)
    if kind == "redis":
        return RedisMapState.factory(state_type, url, key_prefix=f"{table}:")
    if kind == "memcached":
        return MemcachedMapState.factory(state_type, url, key_prefix=f"{table}:", cache_size=64)
    if kind == "hbase":
        return HBaseMapState.factory(state_type, url, key_prefix=f"{table}:")
    return PostgresMapState.factory(state_type, url, table=table, key_columns={"word": "TEXT"}, value_type="BIGINT")


def submit(
    state_dir: str, input_dir: str, kind: str, url: str, table: str, state_type: str, spout_kind: str, name: str, n: int
) -> Any:
    """The Trident word count of ``input_dir`` into ``kind``'s map state, submitted (not started)."""
    spout = OpaqueFileSpout(input_dir) if spout_kind == "opaque" else FileSpout(input_dir)
    topology = TridentTopology()
    (
        topology.new_stream("lines", spout)
        .each(["line"], Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(factory(kind, url, table, state_type), Count(), "count")
        .parallelism_hint(2)
    )
    conf = {"weir.state.dir": state_dir, "weir.spark.master": f"local[{2 * n}]", "weir.batch.max.retries": 2}
    return weir.submit(name, conf, topology)


def main() -> int:
    args = sys.argv[1:]
    if len(args) <= 8:
        st = submit(*args[:7], args[7] if len(args) > 7 else "tridentcrash", n=1).process_available()
        print(f"DONE txid={st.last_txid} batches={st.batches} skipped={st.skipped}", flush=True)
        return 0
    groups = side_by_side.groups(args, 8)
    runs = [(g[7], submit(*g, n=len(groups)).start(available_now=True)) for g in groups]
    return side_by_side.await_each(runs)


if __name__ == "__main__":
    sys.exit(main())
