"""Word count in the style of Storm's stateful WordCountBolt, on Spark, with the embedded SQLite state.

    weir run examples/wordcount.py --available-now                          # ./input, or a sample
    weir run examples/wordcount.py --available-now --conf input=./my-text-dir
    python examples/wordcount.py ./my-text-dir          # the same, as a script, then the top words

Without ``./input`` or ``--conf input=DIR`` a small sample text is written under ./weir-state/examples.
"""

from __future__ import annotations

import sys

from weir.demo import input_dir_for
from weir.sources import FileSpout
from weir.topology import BasicBolt, Fields, StatefulBolt, TopologyBuilder, Values

NAME = "wordcount"
CONF = {
    "topology.state.provider": "sqlite",  # the embedded default: ./weir-state/state.db
    "topology.state.checkpoint.interval.ms": 1000,  # one micro-batch (= one checkpoint) per second
}


class SplitSentence(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("word"))

    def execute(self, tup, collector):
        for word in tup.get_string(0).split():
            collector.emit(Values(word))


class WordCountBolt(StatefulBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("word", "count"))

    def init_state(self, state):
        self.counts = state  # a KeyValueState with what was last committed

    def execute(self, tup):
        word = tup.get_string(0)
        count = self.counts.get(word, 0) + 1
        self.counts.put(word, count)
        self.collector.emit(Values(word, count), anchors=[tup])
        self.collector.ack(tup)


def topology(input_dir: str | None = None, conf: dict | None = None):
    input_dir = input_dir_for(NAME, input_dir, conf)  # the argument, --conf input=DIR, ./input or a sample
    builder = TopologyBuilder()
    builder.set_spout("lines", FileSpout(input_dir, files_per_batch=2))
    builder.set_bolt("split", SplitSentence(), 2).shuffle_grouping("lines")
    builder.set_bolt("count", WordCountBolt(), 2).fields_grouping("split", Fields("word"))
    return builder.create_topology()


if __name__ == "__main__":
    import weir
    from weir.cli import Progress
    from weir.demo import read_counts

    run = weir.submit(NAME, CONF, topology(sys.argv[1] if len(sys.argv) > 1 else None))
    with Progress(run):  # the live status line on stderr
        status = run.process_available()
    print(f"committed txid {status.last_txid} after {status.batches} batches")
    for word, count in read_counts(CONF, NAME).most_common(10):
        print(f"{count:8d}  {word}")
