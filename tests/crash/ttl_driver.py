"""A word count whose counts expire (state TTL), run by the crash tests as a process they SIGKILL.

Usage: python ttl_driver.py STATE_DIR INPUT_DIR PROVIDER_URL

One file per batch; the batch clock is ``txid * 1000`` ms (``weir.batch.clock``), and the ``count``
bolt's ``weir.state.ttl.ms`` is :data:`TTL_MS`: a word not seen for three batches expires, and seen
again it counts from 1. :func:`expected` is the same rule in plain Python.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

import weir
from weir.demo import SplitSentence, WordCount
from weir.sources import FileSpout
from weir.topology import Fields, TopologyBuilder

TTL_MS = 2500
NAME = "ttlwc"


def clock(txid: int) -> int:
    """The time of transaction ``txid``: one second per batch."""
    return txid * 1000


def expected(files: Iterable[list[str]]) -> tuple[dict[str, int], int]:
    """The live counts after batches 1..n (file i is batch i), and the last batch time."""
    counts: dict[str, tuple[int, int]] = {}  # word -> (count, expiry)
    now = 0
    for txid, words in enumerate(files, start=1):
        now = clock(txid)
        for w in words:
            n, exp = counts.get(w, (0, 0))
            n = n if exp > now else 0
            counts[w] = (n + 1, now + TTL_MS)
    return {w: n for w, (n, exp) in counts.items() if exp > now}, now


def main() -> int:
    state_dir, input_dir, url = sys.argv[1:4]
    conf: dict[str, Any] = {
        "weir.state.dir": state_dir,
        "weir.spark.master": os.environ.get("WEIR_TEST_MASTER", "local[2]"),
        "topology.state.provider.config": {"url": url},
        "weir.batch.max.retries": 2,
        "weir.batch.clock": "tests.crash.ttl_driver:clock",
    }
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(input_dir, files_per_batch=1))
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("lines")
    b.set_bolt("count", WordCount(), 2).fields_grouping("split", Fields("word")).add_configuration(
        "weir.state.ttl.ms", TTL_MS
    )
    st = weir.submit(NAME, conf, b.create_topology()).process_available()
    print(f"DONE txid={st.last_txid} batches={st.batches} skipped={st.skipped}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
