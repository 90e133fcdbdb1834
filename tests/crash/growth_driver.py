"""A driver the batch-growth crash test runs as a separate process and SIGKILLs (see WEIR_CRASH_AT).

Usage: python growth_driver.py STATE_DIR GROW [WC_STATE_DIR CORPUS PROVIDER_URL WC_GROW]

150 records of a replayable spout (``tests.sources._spouts.Numbers``, batches of at most 10) into
a stateful count by key on SQLite (topology ``growwc``), with ``weir.batch.grow.max`` = GROW, under
``process_available()``; prints ``DONE txid=<last txid> batches=<n>``. With the four more
arguments, the word count of ``CORPUS`` (one file per batch, topology ``crashwc``, its state in
PROVIDER_URL, ``weir.batch.grow.max`` = WC_GROW) runs beside it in the same SparkSession (the crash
barrier of ``WEIR_CRASH_BARRIER``), and each prints ``NAME DONE txid=<last txid> batches=<n>``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.sources

import weir  # noqa: E402
from tests.sources._spouts import Numbers, count_topology  # noqa: E402
from weir.demo import wordcount_topology  # noqa: E402

TOTAL, MAX_RECORDS = 150, 10


def main() -> int:
    args = sys.argv[1:]
    state_dir, grow = args[0], int(args[1])
    master = "local[2]" if len(args) == 2 else "local[4]"
    conf = {
        "weir.state.dir": state_dir,
        "weir.spark.master": master,
        "weir.batch.max.retries": 2,
        "weir.batch.grow.max": grow,
    }
    topo = count_topology({"nums": Numbers(TOTAL, max_records=MAX_RECORDS)})
    if len(args) == 2:
        st = weir.submit("growwc", conf, topo).process_available()
        print(f"DONE txid={st.last_txid} batches={st.batches}", flush=True)
        return 0
    wc_state, corpus, url, wc_grow = args[2:6]
    wc_conf = {
        "weir.state.dir": wc_state,
        "weir.spark.master": master,
        "topology.state.provider.config": {"url": url},
        "weir.batch.max.retries": 2,
        "weir.batch.grow.max": int(wc_grow),
    }
    wordcount = wordcount_topology(corpus, parallelism=2, files_per_batch=1)
    runs: list[tuple[str, Any]] = [
        ("growwc", weir.submit("growwc", conf, topo).start(available_now=True)),
        ("crashwc", weir.submit("crashwc", wc_conf, wordcount).start(available_now=True)),
    ]
    for name, run in runs:
        run.await_termination()
        st = run.status()
        print(f"{name} DONE txid={st.last_txid} batches={st.batches}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
