"""A driver the Trident Kafka-state crash test runs as a separate process and SIGKILLs (WEIR_CRASH_AT):
a Kafka topic into ``partition_persist(KafkaStateFactory)``, i.e. exactly-once output to another topic.

Usage: python trident_kafka_driver.py STATE_DIR BOOTSTRAP TOPIC OUT_TOPIC TRANSACTIONAL_ID NAME

Processes what is available, then prints ``DONE txid=<last> batches=<n>``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

import weir  # noqa: E402
from weir.sinks import KafkaStateFactory, KafkaStateUpdater  # noqa: E402
from weir.sources import KafkaSpout  # noqa: E402
from weir.trident import TridentTopology  # noqa: E402

MAX_RECORDS = 40


def main() -> int:
    state_dir, bootstrap, topic, out_topic, tid, name = sys.argv[1:7]
    t = TridentTopology()
    spout = KafkaSpout(bootstrap, topic, max_records_per_batch=MAX_RECORDS, connect_timeout_s=20)
    t.new_stream("kafka", spout).partition_persist(
        KafkaStateFactory(bootstrap, out_topic, tid),
        ["key", "value"],
        KafkaStateUpdater(value_field="value", key_field="key"),
    )
    conf = {"weir.state.dir": state_dir, "weir.spark.master": "local[2]"}
    st = weir.submit(name, conf, t).process_available(timeout=600)
    print(f"DONE txid={st.last_txid} batches={st.batches}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
