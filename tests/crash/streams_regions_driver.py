"""Two independent consistent regions on Spark; the crash test SIGKILLs it (``WEIR_CRASH_AT``).

lines → parse → ``a`` (region 0) and ``b`` (region 1), both summing the values they see. ``b`` raises
on a value ``v`` while the file ``MARKER_DIR/fail-v`` exists (removing it first: one failure).
Every call is appended to CALL_LOG as ``<component> <pid> <method> <arg>``.

Usage: python streams_regions_driver.py STATE_DIR INPUT_DIR PROVIDER_URL CALL_LOG MARKER_DIR
"""

from __future__ import annotations

import os
import sys
from typing import Any

import weir
from weir.sources import FileSpout
from weir.streams import Checkpoint, Operator, StateHandler
from weir.topology import BasicBolt, Fields, TopologyBuilder

NAME = "regions"


class Parse(BasicBolt):
    """One int per line."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("v"))

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([int(tup.get_string(0))])


class Summer(Operator, StateHandler):
    """Sums its input; logs every call; fails once per marker file."""

    def __init__(self, name: str, log: str, markers: str | None = None) -> None:
        self.name, self.log_path, self.markers = name, log, markers

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("v"))

    def log(self, method: str, arg: Any = "") -> None:
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(f"{self.name} {os.getpid()} {method} {arg}\n")

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.total = 0

    def process(self, tup: Any) -> None:
        v = tup[0]
        self.log("process", v)
        if self.markers:
            marker = os.path.join(self.markers, f"fail-{v}")
            try:
                os.remove(marker)
            except FileNotFoundError:
                pass
            else:
                msg = f"{self.name}: injected failure on {v}"
                raise RuntimeError(msg)
        self.total += v

    def drain(self) -> None:
        self.log("drain")

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        self.log("checkpoint", checkpoint.sequence_id)
        checkpoint.put("total", self.total)

    def reset(self, checkpoint: Checkpoint) -> None:
        self.log("reset", checkpoint.sequence_id)
        self.total = checkpoint.get("total")

    def reset_to_initial_state(self) -> None:
        self.log("reset_to_initial_state")
        self.total = 0

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        pass


def submit(state_dir: str, input_dir: str, url: str, log: str, markers: str, master: str = "local[2]") -> Any:
    """The two-region topology :data:`NAME` of ``input_dir`` with its state in ``url``, submitted (not started)."""
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(input_dir, files_per_batch=1))
    b.set_bolt("parse", Parse(), 1).shuffle_grouping("lines")
    b.set_bolt("a", Summer("a", log), 1).shuffle_grouping("parse")
    b.set_bolt("b", Summer("b", log, markers), 1).shuffle_grouping("parse")
    b.consistent_region("a")
    b.consistent_region("b", max_consecutive_reset_attempts=2)
    conf = {
        "weir.state.dir": state_dir,
        "weir.spark.master": master,
        "topology.state.provider.config": {"url": url},
        "weir.batch.max.retries": 2,
    }
    return weir.submit(NAME, conf, b.create_topology())


def main() -> int:
    st = submit(*sys.argv[1:6]).process_available()
    print(f"DONE txid={st.last_txid} batches={st.batches} retries={st.retries}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
