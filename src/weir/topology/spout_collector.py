"""Storm's ``SpoutOutputCollector``: what a Storm spout's ``next_tuple`` emits with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from weir.errors import TopologyError
from weir.topology.tuple import DEFAULT_STREAM

__all__ = ["SpoutEmit", "SpoutOutputCollector"]

#: one emitted tuple: ``(stream, values, msg_id, direct task or None)``
SpoutEmit = tuple[str, tuple[Any, ...], Any, int | None]


class SpoutOutputCollector:
    """Collects a spout task's emits (Storm's ``SpoutOutputCollector``).

    ``emit(values, msg_id=None, stream="default")`` and ``emit_direct(task, values, msg_id=None,
    stream="default")``; Storm's positional order ``emit(stream, values, msg_id)`` works too. A tuple
    emitted with a ``msg_id`` is tracked: ``ack(msg_id)`` is called once its batch is COMMITTED. A
    tuple without one is fire-and-forget, as in Storm. ``emit`` returns an empty list (Storm returns
    the receiving task ids, which weir does not know before the batch runs).
    """

    def __init__(
        self,
        topology: str,
        component_id: str,
        task_index: int,
        output_fields: Mapping[str, Sequence[str]],
        direct_streams: frozenset[str] = frozenset(),
    ) -> None:
        self.topology = topology
        self.component_id = component_id
        self.task_index = task_index
        self._arity = {s: len(f) for s, f in output_fields.items()}
        self._direct = direct_streams
        self.emitted: list[SpoutEmit] = []
        self.errors: list[str] = []

    def _error(self, text: str) -> TopologyError:
        where = f"topology {self.topology!r}, spout {self.component_id!r}, task {self.task_index}"
        return TopologyError(f"{where}: {text}", topology=self.topology, component=self.component_id,
                             task=self.task_index)  # fmt: skip

    def _values(self, stream: str, values: Any) -> tuple[Any, ...]:
        arity = self._arity.get(stream)
        if arity is None:
            declared = ", ".join(sorted(self._arity)) or "none"
            msg = f"emit on undeclared stream {stream!r} (declared: {declared}); declare it in declare_output_fields"
            raise self._error(msg)
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            msg = f"emit takes a list of values, got {type(values).__name__}"
            raise self._error(msg)
        vals = tuple(values)
        if len(vals) != arity:
            msg = f"emit of {len(vals)} value(s) on stream {stream!r}, which declares {arity} field(s)"
            raise self._error(msg)
        return vals

    def emit(self, *args: Any, msg_id: Any = None, stream: str | None = None) -> list[int]:
        """Emit ``values`` (optionally with ``msg_id``) on ``stream`` (default ``"default"``).

        Accepts ``emit(values)``, ``emit(values, msg_id)``, ``emit(stream, values)`` and
        ``emit(stream, values, msg_id)``, and the keywords ``msg_id=`` / ``stream=``.
        """
        stream, values, msg_id = self._shape("emit", args, msg_id, stream)
        if stream in self._direct:
            msg = f"stream {stream!r} is declared direct: use emit_direct(task, values, ...)"
            raise self._error(msg)
        self.emitted.append((stream, self._values(stream, values), msg_id, None))
        return []

    def emit_direct(self, task: int, *args: Any, msg_id: Any = None, stream: str | None = None) -> None:
        """Emit to task ``task`` of each consumer of a direct stream (declared with ``direct=True``)."""
        stream, values, msg_id = self._shape("emit_direct", args, msg_id, stream)
        if stream not in self._direct:
            msg = f"emit_direct on stream {stream!r}, which is not declared direct"
            raise self._error(msg)
        if not isinstance(task, int) or task < 0:
            msg = f"emit_direct: task must be a task index >= 0, got {task!r}"
            raise self._error(msg)
        self.emitted.append((stream, self._values(stream, values), msg_id, task))

    def _shape(self, what: str, args: tuple[Any, ...], msg_id: Any, stream: str | None) -> tuple[str, Any, Any]:
        if args and isinstance(args[0], str) and len(args) >= 2:
            if stream is not None:
                msg = f"{what}: the stream is given twice"
                raise self._error(msg)
            stream, args = args[0], args[1:]
        if not args or len(args) > 2:
            msg = f"{what} takes (values), (values, msg_id), (stream, values) or (stream, values, msg_id)"
            raise self._error(msg)
        if len(args) == 2:
            if msg_id is not None:
                msg = f"{what}: the msg_id is given twice"
                raise self._error(msg)
            msg_id = args[1]
        return stream or DEFAULT_STREAM, args[0], msg_id

    def report_error(self, error: BaseException) -> None:
        """Storm's ``reportError``: logged with the batch's report."""
        self.errors.append(f"{type(error).__name__}: {error}")

    def take(self) -> list[SpoutEmit]:
        """The emits since the last call (the driver takes them after every ``next_tuple``)."""
        out, self.emitted = self.emitted, []
        return out
