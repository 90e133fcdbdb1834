"""Operators and handlers for the Streams tests; every callback is recorded in :data:`CALLS`.

A record is ``(role, handler, method, *args)`` where ``role`` is ``"task"`` for the instance that
processes tuples and ``"hook"`` for the driver-side instance that receives ``region_checkpointed``
and ``retire_checkpoint``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from weir.streams import Checkpoint, Operator, OperatorContext, StateHandler
from weir.topology import Fields, OutputCollector, Tuple

CALLS: list[tuple[Any, ...]] = []


def calls(role: str | None = "task", *, methods: tuple[str, ...] | None = None) -> list[tuple[Any, ...]]:
    """Recorded calls of ``role`` (without the role), optionally only ``methods``."""
    out = []
    for c in CALLS:
        if role is not None and c[0] != role:
            continue
        if methods is not None and c[2] not in methods:
            continue
        out.append(c[1:] if role is not None else c)
    return out


class Recorded(StateHandler):
    """Keeps the values it saw; records every callback."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.role = "task"
        self.seen: list[Any] = []
        self.snapshot: list[Any] | None = None
        self.checkpoint_delay = 0.0
        self.checkpoint_done = threading.Event()
        self.checkpoint_thread = ""

    def rec(self, method: str, *args: Any) -> None:
        CALLS.append((self.role, self.name, method, *args))

    def drain(self) -> None:
        self.rec("drain")

    def prepare_for_non_blocking_checkpoint(self, id: int) -> None:  # noqa: A002
        self.rec("prepare_for_non_blocking_checkpoint", id)
        self.snapshot = list(self.seen)

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        self.checkpoint_thread = threading.current_thread().name
        self.rec("checkpoint", checkpoint.sequence_id)
        if self.checkpoint_delay:
            time.sleep(self.checkpoint_delay)
        data = self.snapshot if self.snapshot is not None else self.seen
        self.snapshot = None
        checkpoint.write_object(list(data))
        self.checkpoint_done.set()

    def reset(self, checkpoint: Checkpoint) -> None:
        self.rec("reset", checkpoint.sequence_id)
        self.seen = checkpoint.read_object()

    def reset_to_initial_state(self) -> None:
        self.rec("reset_to_initial_state")
        self.seen = []

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        self.rec("retire_checkpoint", id)

    def region_checkpointed(self, id: int) -> None:  # noqa: A002
        self.rec("region_checkpointed", id)

    def close(self) -> None:
        self.rec("close")


class Summer(Operator, StateHandler):
    """Sums values; drain() submits (batch count, running total). Registers handler ``a``.

    The operator is itself a handler (registered automatically, first) that checkpoints its total.
    """

    def __init__(self, *, non_blocking: bool = False, every: int = 0, raise_in: str = "") -> None:
        self.non_blocking = non_blocking
        self.every = every  # operator-driven checkpoint every N tuples (outside regions)
        self.raise_in = raise_in
        self.total = 0

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("count", "total"))

    def rec(self, method: str, *args: Any) -> None:
        CALLS.append((self.role, "op", method, *args))

    def prepare(self, conf: Mapping[str, Any], context: OperatorContext, collector: OutputCollector) -> None:
        super().prepare(conf, context, collector)
        self.role = "hook" if context.hooks_only else "task"
        self.rec("prepare")
        self.total = 0
        self.batch = 0
        self.a = Recorded("a")
        self.a.role = self.role
        context.register_state_handler(self.a)
        region = context.consistent_region_context
        if self.non_blocking and region is not None:
            region.enable_non_blocking_checkpoint()

    def process(self, tup: Tuple) -> None:
        v = tup[0]
        self.rec("process", v)
        if v == "boom":
            raise ValueError("cannot add 'boom'")
        self.total += v
        self.batch += 1
        self.a.seen.append(v)
        if self.every and len(self.a.seen) % self.every == 0:
            self.rec("created", self.context.create_checkpoint())

    def drain(self) -> None:
        self.rec("drain")
        if self.raise_in == "drain":
            raise RuntimeError("drain exploded")
        self.submit([self.batch, self.total])
        self.batch = 0

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        self.rec("checkpoint", checkpoint.sequence_id)
        if self.raise_in == "checkpoint":
            raise ValueError("disk on fire")
        checkpoint.write_object(self.total)
        checkpoint.put("total", self.total)

    def reset(self, checkpoint: Checkpoint) -> None:
        self.rec("reset", checkpoint.sequence_id)
        self.total = checkpoint.read_object()
        assert checkpoint.get("total") == self.total
        self.batch = 0

    def reset_to_initial_state(self) -> None:
        self.rec("reset_to_initial_state")
        self.total = 0
        self.batch = 0

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        self.rec("retire_checkpoint", id)

    def prepare_for_non_blocking_checkpoint(self, id: int) -> None:  # noqa: A002
        self.rec("prepare_for_non_blocking_checkpoint", id)

    def region_checkpointed(self, id: int) -> None:  # noqa: A002
        self.rec("region_checkpointed", id)

    def close(self) -> None:
        self.rec("close")

    def cleanup(self) -> None:
        self.rec("cleanup")


class BadReader(Operator, StateHandler):
    """Writes raw junk to the stream and reads it back with read_object (a handler bug)."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("x"))

    def process(self, tup: Tuple) -> None:
        pass

    def drain(self) -> None:
        pass

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        checkpoint.output_stream.write(b"\x80\x05junk-that-is-no-pickle")

    def reset(self, checkpoint: Checkpoint) -> None:
        checkpoint.read_object()

    def reset_to_initial_state(self) -> None:
        pass

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        pass


class Blob(Operator, StateHandler):
    """Holds ``size`` bytes of state; each tuple changes one byte (benchmarks, chunking tests)."""

    def __init__(self, size: int, *, non_blocking: bool = False) -> None:
        self.size = size
        self.non_blocking = non_blocking

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("n"))

    def prepare(self, conf: Mapping[str, Any], context: OperatorContext, collector: OutputCollector) -> None:
        super().prepare(conf, context, collector)
        self.data = bytearray(self.size)
        self.frozen: bytes | None = None
        region = context.consistent_region_context
        if self.non_blocking and region is not None:
            region.enable_non_blocking_checkpoint()

    def process(self, tup: Tuple) -> None:
        i = tup[0] % self.size
        self.data[i] = (self.data[i] + 1) % 256

    def drain(self) -> None:
        pass

    def prepare_for_non_blocking_checkpoint(self, id: int) -> None:  # noqa: A002
        self.frozen = bytes(self.data)

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        data = self.frozen if self.frozen is not None else self.data
        self.frozen = None
        checkpoint.output_stream.write(data)

    def reset(self, checkpoint: Checkpoint) -> None:
        self.data = bytearray(checkpoint.input_stream.read())

    def reset_to_initial_state(self) -> None:
        self.data = bytearray(self.size)

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        pass
