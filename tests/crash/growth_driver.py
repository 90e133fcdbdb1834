"""A driver the batch-growth crash test runs as a separate process and SIGKILLs (see WEIR_CRASH_AT).

Usage: python growth_driver.py STATE_DIR GROW

150 records of a replayable spout (``tests.sources._spouts.Numbers``, batches of at most 10) into
a stateful count by key on SQLite, with ``weir.batch.grow.max`` = GROW, under
``process_available()``; prints ``DONE txid=<last txid> batches=<n>``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.sources

import weir  # noqa: E402
from tests.sources._spouts import Numbers, count_topology  # noqa: E402

TOTAL, MAX_RECORDS = 150, 10


def main() -> int:
    state_dir, grow = sys.argv[1], int(sys.argv[2])
    conf = {
        "weir.state.dir": state_dir,
        "weir.spark.master": "local[2]",
        "weir.batch.max.retries": 2,
        "weir.batch.grow.max": grow,
    }
    topo = count_topology({"nums": Numbers(TOTAL, max_records=MAX_RECORDS)})
    st = weir.submit("growwc", conf, topo).process_available()
    print(f"DONE txid={st.last_txid} batches={st.batches}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
