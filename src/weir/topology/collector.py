"""Output collectors: how a component emits, acks and fails tuples inside a task."""

from __future__ import annotations

import os
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

    Storm's call shapes are accepted, dispatched on the argument types (positional arguments in
    Storm's order; ``stream=`` and ``anchors=`` keywords also work)::

        emit(values)                       emit(stream, values)
        emit(anchor, values)               emit(stream, anchor, values)
        emit([anchor, ...], values)        emit(stream, [anchor, ...], values)
        emit_direct(task, [stream,] [anchor(s),] values)

    With ``acking`` on (the runtime's default; ``topology.acker.executors = 0`` turns it off) the
    collector knows which tuples its task received: anchoring to, acking or failing any other tuple
    raises at the call, and :attr:`unacked` counts the received tuples not yet acked or failed.
    """

    def __init__(
        self,
        component_id: str,
        task_index: int,
        output_fields: Mapping[str, Sequence[str]],
        *,
        topology: str = "",
        acking: bool = False,
    ) -> None:
        self.component_id = component_id
        self.task_index = task_index
        self.topology = topology
        self._arity = {s: len(f) for s, f in output_fields.items()}
        self.emitted: list[tuple[str, tuple[Any, ...], int | None]] = []
        self.failed: list[tuple[Tuple, str]] = []
        self.errors: list[str] = []
        self.acked = 0
        self.acking = acking
        #: marks the tuples this task received (``Tuple.owner``); random, so never shared by two tasks
        self.token = int.from_bytes(os.urandom(8), "big") >> 1
        self._pending: dict[int, Tuple] = {}

    def new_batch(self) -> None:
        """Start a new batch on a kept instance: nothing pending, emitted or failed; a new token.

        The tuples of earlier batches can no longer be anchored, acked or failed.
        """
        self.emitted.clear()
        self.failed.clear()
        self.errors.clear()
        self.acked = 0
        self.token = int.from_bytes(os.urandom(8), "big") >> 1
        self._pending = {}

    # ---- the tuples of this task ---------------------------------------------------------------
    def received(self, tup: Tuple, *, acked: bool = False) -> Tuple:
        """Register ``tup`` as an input of this task (the runtime calls it for every tuple it delivers)."""
        tup.owner = self.token
        if self.acking and not acked:
            self._pending[id(tup)] = tup
        return tup

    @property
    def pending(self) -> dict[int, Tuple]:
        """The runtime's handle on the received tuples not yet acked or failed, keyed by ``id(tup)``.

        The task loop registers its inputs in it directly (:meth:`received` inlined for speed) and
        a test harness clears it when its transaction ends; a bolt reads :attr:`unacked` instead.
        """
        return self._pending

    @property
    def unacked(self) -> list[Tuple]:
        """Received tuples neither acked nor failed yet (Storm would time them out)."""
        return list(self._pending.values())

    def _where(self) -> str:
        return f"topology {self.topology!r}, component {self.component_id!r}, task {self.task_index}"

    def _error(self, text: str) -> TopologyError:
        return TopologyError(
            f"{self._where()}: {text}", topology=self.topology, component=self.component_id, task=self.task_index
        )

    def _check_anchor(self, tup: Any, call: str) -> None:
        if not isinstance(tup, Tuple):
            msg = f"{call}: expected an input Tuple, got {type(tup).__name__} {tup!r:.80}"
            raise self._error(msg)
        if self.acking and tup.owner != self.token:
            msg = (
                f"{call}: tuple {list(tup.values)!r:.120} from {tup.source_component!r} was not received by "
                "this task in this batch (anchor, ack and fail only the tuples passed to execute)"
            )
            raise self._error(msg)

    def _check(self, stream: str, values: Sequence[Any]) -> tuple[Any, ...]:
        t = type(values)
        if (t is Values or t is tuple or t is list) and len(values) == self._arity.get(stream, -1):
            return tuple(values)  # the common case, without the slower checks below
        if isinstance(values, (str, bytes, bytearray, Mapping, Tuple)) or not hasattr(values, "__len__"):
            # emit("word") would otherwise silently emit one value per character
            msg = (
                f"emit takes a list of values, e.g. Values(word, count), got {type(values).__name__} "
                f"{values!r:.80} on stream {stream!r}"
            )
            raise self._error(msg)
        arity = self._arity.get(stream)
        if arity is None:
            declared = ", ".join(sorted(self._arity)) or "none"
            msg = (
                f"emit on undeclared stream {stream!r} (declared: {declared}); declare it in "
                "declare_output_fields with declarer.declare_stream(stream, Fields(...))"
            )
            raise self._error(msg)
        if len(values) != arity:
            msg = f"emitted {len(values)} values on stream {stream!r}, which declares {arity} fields"
            raise self._error(msg)
        return tuple(values)

    def _dispatch(
        self, call: str, args: tuple[Any, ...], stream: str | None, anchors: Any
    ) -> tuple[str, Sequence[Any], list[Tuple]]:
        """Storm's overloads: ``[stream,] [anchor | anchors,] values`` (see the class docstring)."""
        usage = _USAGE[call]
        if not args:
            msg = f"{call}() needs the values to emit: {usage}"
            raise self._error(msg)
        rest = list(args)
        values = rest.pop()
        if isinstance(values, str) and rest:
            msg = (
                f"{call}: the last argument is the stream id {values!r}, but the values come last in Storm's "
                f"order; use {usage}"
            )
            raise self._error(msg)
        if isinstance(values, Tuple) or _all_tuples(values):
            msg = (
                f"{call}: the last argument is an input tuple{'' if isinstance(values, Tuple) else ' list'}, "
                f"so the values are missing or the arguments are in the wrong order; use {usage}"
            )
            raise self._error(msg)
        pos_stream: str | None = None
        pos_anchors: Any = None
        if rest and isinstance(rest[0], str):
            pos_stream = rest.pop(0)
        if rest:
            first = rest.pop(0)
            if isinstance(first, Tuple) or _all_tuples(first) or (isinstance(first, (list, tuple)) and not first):
                pos_anchors = first
            elif isinstance(first, str):
                msg = f"{call}: two stream ids ({pos_stream!r}, {first!r}); use {usage}"
                raise self._error(msg)
            else:
                msg = (
                    f"{call}: ambiguous call with two lists ({first!r:.60}, {values!r:.60}): the first must be "
                    f"input tuples (anchors) and the last the values; use {usage}"
                )
                raise self._error(msg)
        if rest:
            msg = f"{call}: too many arguments {args!r:.120}; use {usage}"
            raise self._error(msg)
        if pos_stream is not None and stream is not None:
            msg = f"{call}: the stream is given twice ({pos_stream!r} and stream={stream!r})"
            raise self._error(msg)
        if pos_anchors is not None and anchors is not None:
            msg = f"{call}: the anchors are given twice (positionally and with anchors=)"
            raise self._error(msg)
        anchors = pos_anchors if pos_anchors is not None else anchors
        if anchors is None:
            anchor_list: list[Tuple] = []
        elif isinstance(anchors, Tuple):
            anchor_list = [anchors]
        elif isinstance(anchors, (list, tuple, set, frozenset)):
            anchor_list = list(anchors)
        else:
            msg = f"{call}: anchors must be a Tuple or a list of Tuples, got {type(anchors).__name__}"
            raise self._error(msg)
        for a in anchor_list:
            self._check_anchor(a, call)
        return (pos_stream if pos_stream is not None else (stream or DEFAULT_STREAM)), values, anchor_list

    # ---- emitting --------------------------------------------------------------------------------
    def emit(self, *args: Any, stream: str | None = None, anchors: Any = None) -> None:
        """Emit values; Storm's shapes ``emit([stream,] [anchor(s),] values)`` (dispatched on types).

        Anchors must be tuples this task received in this batch; the micro-batch is the unit of
        replay, so an anchor does not change what is replayed.
        """
        if len(args) == 1:
            values = args[0]
            tv = type(values)
            if tv is Values or ((tv is list or tv is tuple) and not _all_tuples(values)):
                s = stream or DEFAULT_STREAM
                if anchors is None:
                    self.emitted.append((s, self._check(s, values), None))
                    return
                ta = type(anchors)
                if ta is Tuple or ((ta is list or ta is tuple) and len(anchors) == 1 and type(anchors[0]) is Tuple):
                    # emit(values, anchors=[tup]): the other usual call, one anchor this task received
                    a = anchors if ta is Tuple else anchors[0]
                    if self.acking and a.owner != self.token:
                        self._check_anchor(a, "emit")
                    self.emitted.append((s, self._check(s, values), None))
                    return
        if len(args) == 2 and anchors is None and type(args[0]) is Tuple and type(args[1]) in _FAST:
            # emit(anchor, values), Storm's usual call
            if self.acking and args[0].owner != self.token:
                self._check_anchor(args[0], "emit")
            if not _all_tuples(args[1]):
                s = stream or DEFAULT_STREAM
                self.emitted.append((s, self._check(s, args[1]), None))
                return
        s, values, _ = self._dispatch("emit", args, stream, anchors)
        self.emitted.append((s, self._check(s, values), None))

    def emit_direct(self, task: int, *args: Any, stream: str | None = None, anchors: Any = None) -> None:
        """Emit to task ``task`` of a direct-grouped consumer: ``emit_direct(task, [stream,] [anchor(s),] values)``."""
        if isinstance(task, bool) or not isinstance(task, int):
            msg = (
                f"emit_direct: the first argument is the target task index (an int), got "
                f"{type(task).__name__} {task!r:.60}; use emit_direct(task, [stream,] [anchor(s),] values)"
            )
            raise self._error(msg)
        s, values, _ = self._dispatch("emit_direct", args, stream, anchors)
        self.emitted.append((s, self._check(s, values), task))

    # ---- acking ---------------------------------------------------------------------------------
    def ack(self, tup: Tuple) -> None:
        """Acknowledge ``tup`` (its batch commits when every task succeeded); acking twice is a no-op."""
        if self.acking:
            if type(tup) is not Tuple or tup.owner != self.token:
                self._check_anchor(tup, "ack")
            self._pending.pop(id(tup), None)
        self.acked += 1

    def fail(self, tup: Tuple, reason: str | None = None) -> None:
        """Fail ``tup``: the batch fails and is retried, unless a dead-letter sink takes the tuple."""
        if self.acking:
            self._check_anchor(tup, "fail")
            self._pending.pop(id(tup), None)
        self.failed.append((tup, reason or "failed by the bolt (collector.fail)"))

    def reset_timeout(self, tup: Tuple) -> None:
        """Storm's ``resetTimeout``: a no-op, as a tuple's deadline is the end of its micro-batch."""
        if self.acking:
            self._check_anchor(tup, "reset_timeout")

    def report_error(self, error: BaseException | str) -> None:
        """Record an error for the status display; does not fail anything by itself."""
        if isinstance(error, BaseException):
            text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        else:
            text = str(error)
        self.errors.append(text)


class BasicOutputCollector:
    """The collector of a :class:`~weir.topology.components.BasicBolt`: emits anchored to the input.

    Storm's shapes: ``emit(values)``, ``emit(stream, values)``, ``emit_direct(task, values)``,
    ``emit_direct(task, stream, values)`` (``stream=`` also works). Anchoring is automatic, so an
    anchor argument is refused.
    """

    def __init__(self, out: OutputCollector) -> None:
        self._out = out
        self.current: Tuple | None = None

    def _split(self, call: str, args: tuple[Any, ...], stream: str | None) -> tuple[str | None, Any]:
        usage = _BASIC_USAGE[call]
        if len(args) == 2 and isinstance(args[0], str):
            if stream is not None:
                msg = f"{call}: the stream is given twice ({args[0]!r} and stream={stream!r})"
                raise self._out._error(msg)
            return args[0], args[1]
        if len(args) == 1:
            return stream, args[0]
        if any(isinstance(a, Tuple) or _all_tuples(a) for a in args):
            msg = f"{call}: anchors are not accepted here; use {usage}"
            raise self._out._error(msg)
        msg = f"{call}: cannot call with {len(args)} arguments {args!r:.120}; use {usage}"
        raise self._out._error(msg)

    def emit(self, *args: Any, stream: str | None = None) -> None:
        """Emit ``values`` (on ``stream``) anchored to the current input tuple."""
        if len(args) == 1:  # the common case: emit(values)
            values = args[0]
            tv = type(values)
            if tv is Values or ((tv is list or tv is tuple) and not _all_tuples(values)):
                out = self._out
                name = stream or DEFAULT_STREAM
                out.emitted.append((name, out._check(name, values), None))
                return
        s, values = self._split("emit", args, stream)
        self._out.emit(values, anchors=self.current, stream=s)

    def emit_direct(self, task: int, *args: Any, stream: str | None = None) -> None:
        """Emit directly to task ``task``: ``emit_direct(task, [stream,] values)``."""
        s, values = self._split("emit_direct", args, stream)
        self._out.emit_direct(task, values, anchors=self.current, stream=s)

    def report_error(self, error: BaseException | str) -> None:
        """Record an error."""
        self._out.report_error(error)


_FAST = (Values, list, tuple)
_USAGE = {
    "emit": "emit([stream,] [anchor | [anchors],] values) in Storm's order, e.g. emit(tup, Values(word, count)) "
    "or emit('stream', tup, Values(word))",
    "emit_direct": "emit_direct(task, [stream,] [anchor | [anchors],] values) in Storm's order, e.g. "
    "emit_direct(1, tup, Values(word))",
}
_BASIC_USAGE = {
    c: f"BasicOutputCollector.{c}({'task, ' if c == 'emit_direct' else ''}[stream,] values); it anchors to the "
    "input tuple itself"
    for c in ("emit", "emit_direct")
}


def _all_tuples(x: Any) -> bool:
    """Whether ``x`` is a non-empty list/tuple of input :class:`Tuple` objects (anchors); ``Values`` never is."""
    if type(x) is Values or not isinstance(x, (list, tuple, set, frozenset)) or not x:
        return False
    return all(isinstance(t, Tuple) for t in x)
