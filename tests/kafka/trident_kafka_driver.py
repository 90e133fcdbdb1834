"""A driver the Trident Kafka-state crash test runs as a separate process and SIGKILLs (WEIR_CRASH_AT):
a Kafka topic into ``partition_persist(KafkaStateFactory)``, i.e. exactly-once output to another topic.

Usage: python trident_kafka_driver.py STATE_DIR BOOTSTRAP TOPIC OUT_TOPIC TRANSACTIONAL_ID NAME

Processes what is available, then prints ``DONE txid=<last> batches=<n>``. Several groups of six run
that many copies side by side in one SparkSession on ``local[2 * N]`` (each its own state directory,
output topic, transactional id and name; the crash barrier of ``WEIR_CRASH_BARRIER``, each copy
armed at its own point) and print ``NAME DONE txid=<last> batches=<n>`` each.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

import weir  # noqa: E402
from weir.sinks import KafkaStateFactory, KafkaStateUpdater  # noqa: E402
from weir.sources import KafkaSpout  # noqa: E402
from weir.trident import TridentTopology  # noqa: E402

MAX_RECORDS = 40


def submit(state_dir: str, bootstrap: str, topic: str, out_topic: str, tid: str, name: str, n: int = 1) -> Any:
    """The Trident copy ``name`` of ``topic`` into ``out_topic`` (Kafka transactions), submitted (not started)."""
    t = TridentTopology()
    spout = KafkaSpout(bootstrap, topic, max_records_per_batch=MAX_RECORDS, connect_timeout_s=20)
    t.new_stream("kafka", spout).partition_persist(
        KafkaStateFactory(bootstrap, out_topic, tid),
        ["key", "value"],
        KafkaStateUpdater(value_field="value", key_field="key"),
    )
    conf = {"weir.state.dir": state_dir, "weir.spark.master": f"local[{2 * n}]"}
    return weir.submit(name, conf, t)


def main() -> int:
    args = sys.argv[1:]
    if len(args) == 6:
        st = submit(*args).process_available(timeout=600)
        print(f"DONE txid={st.last_txid} batches={st.batches}", flush=True)
        return 0
    groups = [args[i : i + 6] for i in range(0, len(args), 6)]
    runs = [(g[5], submit(*g, n=len(groups)).start(available_now=True)) for g in groups]
    for name, run in runs:
        if not run.await_termination(600):
            print(f"{name} TIMEOUT", flush=True)
            return 1
        st = run.status()
        print(f"{name} DONE txid={st.last_txid} batches={st.batches}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
