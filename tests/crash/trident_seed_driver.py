"""A seeded Trident word count the crash tests run as a separate process and SIGKILL (WEIR_CRASH_AT).

Usage: python trident_seed_driver.py STATE_DIR INPUT_DIR MAP_DB

``initial_state`` seeds the state ``counts`` with ``w0 .. w1499`` = their index (two chunks of cells),
then the word count runs over INPUT_DIR.
"""

from __future__ import annotations

import sys
from typing import Any

import weir
from weir.sources import FileSpout
from weir.trident import Count, Function, TridentTopology
from weir.trident.backing import SqliteMapState

SEED = {f"w{i}": i for i in range(1500)}


class Split(Function):
    """One tuple per word."""

    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup.get_string(0).split():
            collector.emit([word])


def submit(state_dir: str, input_dir: str, map_db: str, master: str = "local[2]") -> Any:
    """The seeded word count ``seedcrash`` of ``input_dir`` into ``map_db``: submitting it loads the seed."""
    topology = TridentTopology()
    (
        topology.new_stream("lines", FileSpout(input_dir))
        .each(["line"], Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(SqliteMapState.opaque(map_db, table="seeded"), Count(), "count")
        .name("counts")
        .parallelism_hint(2)
    )
    conf = {"weir.state.dir": state_dir, "weir.spark.master": master, "weir.batch.max.retries": 2}
    return weir.submit("seedcrash", conf, topology, initial_state={"counts": SEED})


def main() -> int:
    st = submit(*sys.argv[1:4]).process_available()
    print(f"DONE txid={st.last_txid} batches={st.batches}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
