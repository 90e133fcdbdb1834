"""A word count whose counts expire (state TTL), run by the crash tests as a process they SIGKILL.

Usage: python ttl_driver.py STATE_DIR INPUT_DIR PROVIDER_URL [NAME] [STATE_DIR INPUT_DIR PROVIDER_URL NAME]...

Several groups of four run that many word counts side by side in one SparkSession (each its own
name, store and state directory; the crash barrier of ``WEIR_CRASH_BARRIER``) and print
``NAME DONE txid=...`` per topology; one topology (named :data:`NAME` by default) prints ``DONE txid=...``.

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


def submit(state_dir: str, input_dir: str, url: str, name: str, master: str | None = None) -> Any:
    """The expiring word count of ``input_dir`` with its state in ``url``, submitted (not started)."""
    conf: dict[str, Any] = {
        "weir.state.dir": state_dir,
        "weir.spark.master": master or os.environ.get("WEIR_TEST_MASTER", "local[2]"),
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
    return weir.submit(name, conf, b.create_topology())


def main() -> int:
    args = sys.argv[1:]
    if len(args) <= 4:
        st = submit(*args[:3], args[3] if len(args) > 3 else NAME).process_available()
        print(f"DONE txid={st.last_txid} batches={st.batches} skipped={st.skipped}", flush=True)
        return 0
    runs = [(g[3], submit(*g).start(available_now=True)) for g in (args[i : i + 4] for i in range(0, len(args), 4))]
    for name, run in runs:
        run.await_termination()
        st = run.status()
        print(f"{name} DONE txid={st.last_txid} batches={st.batches} skipped={st.skipped}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
