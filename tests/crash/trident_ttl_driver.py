"""A Trident word count with ``weir.state.ttl.ms`` the crash tests run as a process and SIGKILL (WEIR_CRASH_AT).

Usage: python trident_ttl_driver.py STATE_DIR INPUT_DIR MAP_DB STATE_TYPE

One file per batch; the batch clock is ``txid * 1000`` ms (``weir.batch.clock``) and the state
``counts`` has a TTL of 2500 ms, so a count last written at txid *t* has expired from txid *t + 3* on
(and is deleted by the commit of that txid, one cell per sweep chunk).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable
from typing import Any

import weir
from weir.sources import FileSpout
from weir.trident import Count, Function, TridentTopology
from weir.trident.backing import SqliteMapState

TTL_MS = 2500
NAME = "tridentttl"


def clock(txid: int) -> int:
    """The time of transaction ``txid``: one second per batch."""
    return txid * 1000


def model(files: Iterable[list[str]]) -> dict[str, tuple[int, int]]:
    """Word → (stored count, txid of its last write) after batches 1..n (file i is batch i)."""
    cells: dict[str, tuple[int, int]] = {}
    for txid, words in enumerate(files, start=1):
        now = clock(txid)
        for w, c in Counter(words).items():
            n, t = cells.get(w, (0, 0))
            if t and clock(t) + TTL_MS <= now:  # expired: counts from the aggregator's init
                n = 0
            cells[w] = (n + c, txid)
    return cells


class Split(Function):
    """One tuple per word."""

    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup.get_string(0).split():
            collector.emit([word])


def submit(state_dir: str, input_dir: str, map_db: str, state_type: str, master: str = "local[2]") -> Any:
    """The expiring Trident word count :data:`NAME` of ``input_dir`` into ``map_db``, submitted (not started)."""
    from weir.runtime.spark.trident import ttl

    ttl.SWEEP_CHUNK = 1  # the commit's sweep deletes one cell at a time: a kill lands in the middle of it
    topology = TridentTopology()
    (
        topology.new_stream("lines", FileSpout(input_dir))
        .each(["line"], Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(SqliteMapState.factory(state_type, map_db, table="ttl"), Count(), "count")
        .name("counts")
        .parallelism_hint(2)
    )
    conf = {
        "weir.state.dir": state_dir,
        "weir.spark.master": master,
        "weir.batch.max.retries": 2,
        "weir.batch.clock": "tests.crash.trident_ttl_driver:clock",
        "weir.state.ttl.ms": {"counts": TTL_MS},
    }
    return weir.submit(NAME, conf, topology)


def main() -> int:
    st = submit(*sys.argv[1:5]).process_available()
    print(f"DONE txid={st.last_txid} batches={st.batches}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
