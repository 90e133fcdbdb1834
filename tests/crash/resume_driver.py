"""A driver the store-is-the-truth crash test runs as a separate process and SIGKILLs.

Usage: python resume_driver.py STATE_DIR LOG_DIR NAME TOTAL

Counts :class:`tests.sources._spouts.Numbers` (100 records a batch, as many as ``LOG_DIR/available``
says) by key into the embedded SQLite store under ``STATE_DIR``, processes what is available, and
prints ``DONE <last txid>``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.sources

import weir  # noqa: E402
from tests.sources._spouts import Numbers, count_topology  # noqa: E402


def main() -> int:
    state_dir, log_dir, name, total = sys.argv[1:5]
    conf = {"weir.state.dir": state_dir, "weir.spark.master": "local[2]"}
    spout = Numbers(int(total), keys=7, max_records=100, log_dir=log_dir)
    status = weir.submit(name, conf, count_topology({"numbers": spout})).process_available()
    print(f"DONE {status.last_txid}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
