"""A Trident word count over Spark Connect, as a process the crash tests SIGKILL (see WEIR_CRASH_AT).

Usage: python trident_connect_driver.py STATE_DIR INPUT_DIR STORE_URL TABLE STATE_TYPE CONNECT_URL

A Connect client (``weir.spark.remote``): the streaming query and its tasks run on the server; the
query's ``foreachBatch`` is relayed to this process, where the coordinator runs. The crash points
fire here, in the client; the server lives on, and the restarted client's query (same checkpoint,
same query id) stops what is left of the killed client's run. STORE_URL is a Redis URL (the map
state: opaque or transactional values under the key prefix ``TABLE:``).
"""

from __future__ import annotations

import sys
from typing import Any

import weir
from weir.sources import FileSpout
from weir.trident import Count, Function, TridentTopology
from weir.trident.backing import RedisMapState


class Split(Function):
    """One tuple per word."""

    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup.get_string(0).split():
            collector.emit([word])


def main() -> int:
    state_dir, input_dir, url, table, state_type, remote = sys.argv[1:7]
    topology = TridentTopology()
    (
        topology.new_stream("lines", FileSpout(input_dir))
        .each(["line"], Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(RedisMapState.factory(state_type, url, key_prefix=f"{table}:"), Count(), "count")
        .parallelism_hint(2)
    )
    conf = {
        "weir.state.dir": state_dir,
        "weir.spark.remote": remote,
        "weir.batch.max.retries": 2,
        "weir.restart.max": 5,  # the server's foreachBatch worker may miss its 10 s connect-back when loaded
        "weir.spark.conf": {"spark.sql.shuffle.partitions": "2"},
    }
    st = weir.submit("tridentcx", conf, topology).process_available()
    print(f"DONE txid={st.last_txid} batches={st.batches} skipped={st.skipped} error={st.error}", flush=True)
    return 0 if st.error is None else 1


if __name__ == "__main__":
    sys.exit(main())
