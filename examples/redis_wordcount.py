"""The word count with its state in Redis (Storm's RedisKeyValueStateProvider layout), readable by
any Redis client while the topology runs:

    redis-cli HGETALL wordcount-redis-count-0        # committed counts of task 0
    redis-cli HGET wordcount-redis-count-0 hello     # keyClass "str": plain field names

    python examples/redis_wordcount.py ./my-text-dir redis://127.0.0.1:6379/0
    weir run examples/redis_wordcount.py --available-now --conf input=./my-text-dir

The bolts come from examples/wordcount.py; weir ships such modules, imported from the script's
directory, to Spark's Python workers with the topology.
"""

from __future__ import annotations

import sys

from wordcount import SplitSentence, WordCountBolt  # same bolts as the SQLite example

from weir.demo import input_dir_for
from weir.sources import FileSpout
from weir.topology import Fields, TopologyBuilder

NAME = "wordcount-redis"


def conf(url: str = "redis://127.0.0.1:6379/0") -> dict:
    return {
        "topology.state.provider": "org.apache.storm.redis.state.RedisKeyValueStateProvider",
        "topology.state.provider.config": {"url": url, "keyClass": "str", "valueClass": "int"},
    }


CONF = conf()


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

    input_dir = sys.argv[1] if len(sys.argv) > 1 else None
    c = conf(sys.argv[2]) if len(sys.argv) > 2 else CONF
    run = weir.submit(NAME, c, topology(input_dir))
    with Progress(run):  # the live status line on stderr
        status = run.process_available()
    print(f"committed txid {status.last_txid}; try: redis-cli HGETALL {NAME}-count-0")
