"""A topology that measures task lifetime: a Storm stateful bolt and two Streams operators, one in a
consistent region and one outside any (never checkpointed during the run), each with 2 tasks.

Used by ``tests/spark/test_ticks_and_lifetime.py`` and ``bench/task_lifetime.py``. ``Tally`` emits its
running count after every tuple; ``Last`` keeps the highest count per (operator, task), so the committed
state shows whether an operator outside a region lost anything it processed (a task move must not).
"""

from __future__ import annotations

from typing import Any

from weir.demo import SplitSentence
from weir.sources import FileSpout
from weir.streams import Checkpoint, Operator, StateHandler
from weir.topology import Fields, StatefulBolt, Topology, TopologyBuilder, Tuple


class Probe(StatefulBolt):
    """Counts its tuples in state; ``prepared`` counts ``prepare()`` calls per instance."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.prepared = getattr(self, "prepared", 0) + 1

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Tuple) -> None:
        self.state.put("n", self.state.get("n", 0) + 1)
        self.state.put("prepared", max(self.state.get("prepared", 0), self.prepared))
        self.collector.ack(tup)


class Tally(Operator, StateHandler):
    """Counts tuples (its handler state); submits ``(name, task, count)`` after each."""

    def __init__(self, name: str) -> None:
        self.name = name

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("op", "task", "n"))

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.n = 0
        self.task = context.task_index

    def process(self, tup: Tuple) -> None:
        self.n += 1
        self.submit([self.name, self.task, self.n])

    def drain(self) -> None:
        pass

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        checkpoint.put("n", self.n)

    def reset(self, checkpoint: Checkpoint) -> None:
        self.n = checkpoint.get("n")

    def reset_to_initial_state(self) -> None:
        self.n = 0

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        pass


class Last(StatefulBolt):
    """The highest count each (operator, task) submitted."""

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Tuple, collector: Any) -> None:
        key = f"{tup[0]}-{tup[1]}"
        self.state.put(key, max(self.state.get(key, 0), tup[2]))


def lifetime_topology(input_dir: str, outreg_period_ms: int = 3_600_000) -> Topology:
    """lines → split (2) → probe (2); split → inreg (2, a region) and outreg (2, no region) → last (1).

    ``outreg_period_ms``: the periodic checkpoint of ``outreg`` (default: never during a run; 0: every
    batch, which makes it exact across a restart too).
    """
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(input_dir, files_per_batch=1))
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("lines")
    b.set_bolt("probe", Probe(), 2).fields_grouping("split", Fields("word"))
    b.set_bolt("inreg", Tally("inreg"), 2).fields_grouping("split", Fields("word"))
    b.set_bolt("outreg", Tally("outreg"), 2).fields_grouping("split", Fields("word")).add_configuration(
        "checkpoint.period.ms", outreg_period_ms
    )
    b.set_bolt("last", Last(), 1).global_grouping("inreg").global_grouping("outreg")
    b.consistent_region("inreg")
    return b.create_topology()


def shares(components: dict[str, dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per component of the status: task-batches, kept instances (Storm) and restores by kind (Streams)."""
    out: dict[str, dict[str, int]] = {}
    for cid in ("probe", "inreg", "outreg"):
        c = components.get(cid, {})
        out[cid] = {k: int(v) for k, v in c.items() if k == "tasks" or k == "kept" or k.startswith("restore_")}
    return out
