"""Output collectors: how a component emits, acks and fails tuples inside a task."""

from __future__ import annotations

import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from weir.errors import TopologyError
from weir.topology.tuple import DEFAULT_STREAM, Tuple, Values

__all__ = ["BasicOutputCollector", "FailedTuple", "OutputCollector"]


class FailedTuple(Exception):
    """Raised inside ``BasicBolt.execute`` (Storm's ``FailedException``) to fail the input tuple."""


class OutputCollector:
    """Emits tuples on declared streams and tracks acks/fails of the current batch's input tuples.

    ``emit`` validates the stream and the number of values against ``declare_output_fields``.
    Emitted tuples are buffered and handed to downstream components by the runtime.
    """

    def __init__(
        self,
        component_id: str,
        task_index: int,
        output_fields: dict[str, Sequence[str]],
        *,
        topology: str = "",
    ) -> None:
        self.component_id = component_id
        self.task_index = task_index
        self.topology = topology
        self._arity = {s: len(f) for s, f in output_fields.items()}
        self.emitted: list[tuple[str, tuple[Any, ...], int | None]] = []
        self.failed: list[tuple[Tuple, str]] = []
        self.errors: list[str] = []
        self.acked = 0

    def _check(self, stream: str, values: Sequence[Any]) -> tuple[Any, ...]:
        t = type(values)
        if (t is Values or t is tuple or t is list) and len(values) == self._arity.get(stream, -1):
            return tuple(values)  # the common case, without the slower checks below
        if isinstance(values, (str, bytes, bytearray, Mapping)) or not hasattr(values, "__len__"):
            # emit("word") would otherwise silently emit one value per character
            msg = (
                f"topology {self.topology!r}, component {self.component_id!r}, task {self.task_index}: "
                f"emit takes a list of values, e.g. Values(word, count), got {type(values).__name__} "
                f"{values!r:.80} on stream {stream!r}"
            )
            raise TopologyError(
                msg, topology=self.topology, component=self.component_id, task=self.task_index
            )
        arity = self._arity.get(stream)
        if arity is None:
            declared = ", ".join(sorted(self._arity)) or "none"
            msg = (
                f"topology {self.topology!r}, component {self.component_id!r}, task {self.task_index}: "
                f"emit on undeclared stream {stream!r} (declared: {declared}); declare it in "
                "declare_output_fields with declarer.declare_stream(stream, Fields(...))"
            )
            raise TopologyError(
                msg, topology=self.topology, component=self.component_id, task=self.task_index
            )
        if len(values) != arity:
            msg = (
                f"topology {self.topology!r}, component {self.component_id!r}, task {self.task_index}: "
                f"emitted {len(values)} values on stream {stream!r}, which declares {arity} fields"
            )
            raise TopologyError(
                msg, topology=self.topology, component=self.component_id, task=self.task_index
            )
        return tuple(values)

    def emit(
        self,
        values: Sequence[Any],
        anchors: Sequence[Tuple] | Tuple | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """Emit ``values`` on ``stream``; ``anchors`` keep Storm's meaning (the batch is the unit)."""
        self.emitted.append((stream, self._check(stream, values), None))

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        anchors: Sequence[Tuple] | Tuple | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """Emit to task ``task`` of a consumer subscribed with direct grouping."""
        self.emitted.append((stream, self._check(stream, values), int(task)))

    def ack(self, tup: Tuple) -> None:
        """Acknowledge ``tup`` (its batch commits when every task succeeded)."""
        self.acked += 1

    def fail(self, tup: Tuple, reason: str | None = None) -> None:
        """Fail ``tup``: the batch fails and is retried, unless a dead-letter sink takes the tuple."""
        self.failed.append((tup, reason or "failed by the bolt (collector.fail)"))

    def report_error(self, error: BaseException | str) -> None:
        """Record an error for the status display; does not fail anything by itself."""
        if isinstance(error, BaseException):
            text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        else:
            text = str(error)
        self.errors.append(text)


class BasicOutputCollector:
    """The collector of a :class:`~weir.topology.components.BasicBolt`: emits anchored to the input."""

    def __init__(self, out: OutputCollector) -> None:
        self._out = out
        self.current: Tuple | None = None

    def emit(self, values: Sequence[Any], stream: str = DEFAULT_STREAM) -> None:
        """Emit ``values`` on ``stream`` anchored to the current input tuple."""
        self._out.emit(values, anchors=self.current, stream=stream)

    def emit_direct(self, task: int, values: Sequence[Any], stream: str = DEFAULT_STREAM) -> None:
        """Emit directly to task ``task``."""
        self._out.emit_direct(task, values, anchors=self.current, stream=stream)

    def report_error(self, error: BaseException | str) -> None:
        """Record an error."""
        self._out.report_error(error)
