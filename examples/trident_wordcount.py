"""Trident word count (seed 004's example) on Spark, with exactly-once counts in an opaque SQLite map state.

    weir run examples/trident_wordcount.py --available-now                  # ./input, or a sample
    weir run examples/trident_wordcount.py --available-now --conf input=./my-text-dir
    python examples/trident_wordcount.py ./my-text-dir      # the same, as a script, then prints the top words

Lines are split by a Python function (run over Arrow batches in the executors); the per-batch
count per word is a Spark SQL ``groupBy().count()``; each of the state's two partitions then does one
``multi_update`` between ``begin_commit(txid)`` and ``commit(txid)``. A second stream of query lines
reads the counts with ``state_query`` + ``MapGet`` (the DRPC example of the Trident tutorial).
"""

from __future__ import annotations

import os
import sys

from weir.demo import input_dir_for
from weir.sources import FileSpout
from weir.trident import Count, Function, MapGet, TridentTopology
from weir.trident.backing import SqliteMapState

NAME = "trident-wordcount"
STATE_DIR = os.environ.get("WEIR_STATE_DIR", "./weir-state")
CONF = {
    "weir.state.dir": STATE_DIR,  # the coordinator record and Spark's checkpoints live here
    "topology.state.checkpoint.interval.ms": 1000,  # one micro-batch (= one Trident batch) per second
}


class Split(Function):
    """Emit one tuple per word of the sentence."""

    def execute(self, tup, collector):
        for word in tup.get_string(0).split():
            collector.emit([word])


def counts_factory():
    """An opaque map state in a SQLite file: exactly-once with transactional and opaque spouts."""
    return SqliteMapState.opaque(os.path.join(STATE_DIR, "trident.db"), table="word_counts")


def topology(input_dir: str | None = None, query_dir: str | None = None, conf: dict | None = None):
    input_dir = input_dir_for(NAME, input_dir, conf)  # the argument, --conf input=DIR, ./input or a sample
    t = TridentTopology()
    word_counts = (
        t.new_stream("spout1", FileSpout(input_dir))
        .each(["line"], Split(), ["word:str"])  # a declared type keeps the column a plain string
        .group_by(["word"])
        .persistent_aggregate(counts_factory(), Count(), "count")
        .parallelism_hint(2)
    )
    if query_dir:
        (
            t.new_stream("queries", FileSpout(query_dir))
            .each(["line"], Split(), ["word:str"])
            .state_query(word_counts, ["word"], MapGet(), ["count"])
            .peek(lambda tup: print(f"query {tup['word']!r}: {tup['count']}"))
        )
    return t


def top_words(n: int = 10):
    """The ``n`` most frequent words: the ``[txid, curr, prev]`` cells of the SQLite table, read with SQL."""
    import json
    import sqlite3

    with sqlite3.connect(os.path.join(STATE_DIR, "trident.db")) as conn:
        rows = [(json.loads(k)[0], json.loads(v)[1]) for k, v in conn.execute("SELECT k, v FROM word_counts")]
    return sorted(rows, key=lambda kv: (-kv[1], kv[0]))[:n]


if __name__ == "__main__":
    import weir
    from weir.cli import Progress

    run = weir.submit(NAME, CONF, topology(*sys.argv[1:3]))
    with Progress(run):  # the live status line on stderr
        status = run.process_available()
    print(f"committed txid {status.last_txid} after {status.batches} batches, {status.tuples_in} lines")
    for word, count in top_words():
        print(f"{count:8d}  {word}")
