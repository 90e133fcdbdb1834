"""Word count from a Kafka topic, exactly once: counts in the embedded SQLite state, and every
``(word, line)`` record written once to an output topic through the transactional ``KafkaBolt``.

    python examples/kafka_wordcount.py 127.0.0.1:9092 lines words    # bootstrap, input, output topic

Both topics must exist. Read the output as a ``read_committed`` consumer (records of a crashed
attempt are in aborted transactions), e.g. with confluent-kafka::

    Consumer({"bootstrap.servers": ..., "group.id": "x", "isolation.level": "read_committed"})
"""

from __future__ import annotations

import sys

from wordcount import WordCountBolt  # the same counting bolt as the file example

from weir.sinks import KafkaBolt
from weir.sources import KafkaSpout
from weir.topology import BasicBolt, Fields, TopologyBuilder, Values

NAME = "wordcount-kafka"
CONF = {"topology.state.checkpoint.interval.ms": 1000}


class Words(BasicBolt):
    """Splits a line into ``(word, line)`` pairs: the word is the output record's key."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("word", "line"))

    def execute(self, tup, collector):
        line = tup["value"] or ""
        for word in line.split():
            collector.emit(Values(word, line))


def topology(bootstrap: str, topic: str, out_topic: str):
    builder = TopologyBuilder()
    builder.set_spout("lines", KafkaSpout(bootstrap, topic, max_records_per_batch=50_000))
    builder.set_bolt("split", Words(), 2).shuffle_grouping("lines")
    builder.set_bolt("count", WordCountBolt(), 2).fields_grouping("split", Fields("word"))
    builder.set_bolt("out", KafkaBolt(bootstrap, out_topic, value_field="line", key_field="word"), 2).fields_grouping(
        "split", Fields("word")
    )
    return builder.create_topology()


if __name__ == "__main__":
    import weir
    from weir.demo import read_counts

    bootstrap, topic, out_topic = (sys.argv[1:4] + ["127.0.0.1:9092", "lines", "words"][len(sys.argv[1:4]) :])[:3]
    status = weir.submit(NAME, CONF, topology(bootstrap, topic, out_topic)).process_available()
    counts = read_counts(CONF, NAME)
    print(f"committed txid {status.last_txid}; top words: {counts.most_common(10)}")
