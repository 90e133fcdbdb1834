"""A Streams ``Operator``: a bolt-like component whose state is kept through state handlers.

Lifetime: an operator instance is created and ``prepare``-d once, then kept by the Python worker
and used for the same task's next batches while its last batch is the committed one. When Spark
runs the task in another Python worker of the machine, that worker's instance is ``reset`` from
the state the previous worker handed off after the batch; after a failed batch or a driver restart
it is restored with ``reset(Checkpoint)`` from the store — see ``docs/streams-handlers.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from weir.errors import TopologyError
from weir.topology.components import Component
from weir.topology.punctuation import Punctuation
from weir.topology.tuple import DEFAULT_STREAM

if TYPE_CHECKING:
    from weir.streams.context import OperatorContext
    from weir.topology.collector import OutputCollector
    from weir.topology.tuple import Tuple

__all__ = ["InputPort", "Operator"]


class InputPort(NamedTuple):
    """An operator's input port: one subscription ``(component, stream)`` and its kind.

    ``kind`` is ``"data"``, ``"control"`` or ``"autonomous"`` (see :attr:`Operator.control_ports`).
    """

    component: str
    stream: str
    kind: str = "data"


class Operator(Component):
    """A component usable in ``TopologyBuilder`` that checkpoints through ``StateHandler`` callbacks.

    Subclasses implement :meth:`process` and declare their output fields. An operator that also
    subclasses :class:`~weir.streams.handler.StateHandler` is registered as a handler automatically;
    others register handlers with ``context.register_state_handler(h)`` in :meth:`prepare`.

    Example
    -------
    >>> from weir.streams import Operator, StateHandler
    >>> class Count(Operator, StateHandler):
    ...     def prepare(self, conf, context, collector):
    ...         super().prepare(conf, context, collector)
    ...         self.n = 0
    ...     def process(self, tup): self.n += 1
    ...     def drain(self): pass
    ...     def checkpoint(self, ckpt): ckpt.write_object(self.n)
    ...     def reset(self, ckpt): self.n = ckpt.read_object()
    ...     def reset_to_initial_state(self): self.n = 0
    ...     def retire_checkpoint(self, id): pass
    """

    #: whether this operator takes part in checkpointing (False: a stateless operator, no namespace)
    checkpointed: bool = True
    #: control input ports: component ids or (component, stream) pairs whose tuples are processed after
    #: ``drain()`` and before ``checkpoint()`` of each cut (IBM Streams' control ports)
    control_ports: Sequence[str | tuple[str, str]] = ()
    #: autonomous input ports: their tuples are not part of the cut; they are processed after the
    #: cut's ``checkpoint()``, so they never delay it (their effect is in the next checkpoint)
    autonomous_ports: Sequence[str | tuple[str, str]] = ()
    collector: OutputCollector
    context: OperatorContext

    def is_bolt(self) -> bool:
        """An operator consumes streams: ``set_bolt`` takes it."""
        return True

    def is_stateful(self) -> bool:
        """Whether it takes part in checkpointing (:attr:`checkpointed`)."""
        return bool(self.checkpointed)

    def prepare(self, conf: Mapping[str, Any], context: OperatorContext, collector: OutputCollector) -> None:
        """Called once when the instance is created; keeps ``context`` and ``collector``.

        Register state handlers and call ``enable_non_blocking_checkpoint()`` here.
        """
        self.context = context
        self.collector = collector

    def process(self, tup: Tuple) -> None:
        """Process one input tuple."""
        msg = f"{type(self).__name__} must implement process(tup)"
        raise NotImplementedError(msg)

    def submit(self, values: Sequence[Any], stream: str = DEFAULT_STREAM) -> None:
        """Submit a tuple on ``stream`` (Streams' spelling of ``collector.emit``)."""
        self.collector.emit(values, stream=stream)

    def process_punctuation(self, port: InputPort, mark: Punctuation) -> None:
        """A mark arrived on ``port`` (IBM Streams' ``processPunctuation``).

        Called in the mark's place among the port's tuples, once per port: a window mark once every
        upstream task of the port has sent it, a final mark once every upstream task has ended its
        stream. The default forwards a window mark to every output stream; a final mark is
        forwarded by the runtime itself once every input port has received one, so an override
        need not (and a window operator flushes its open window here).
        """
        if mark is Punctuation.WINDOW_MARKER:
            self.submit_punctuation(mark)

    def submit_punctuation(self, mark: Punctuation = Punctuation.WINDOW_MARKER, stream: str | None = None) -> None:
        """Submit ``mark`` on ``stream`` (default: every output stream), in order with submitted tuples.

        Every task of every consumer receives it (IBM Streams' ``StreamingOutput.punctuate``).
        """
        if not isinstance(mark, Punctuation):
            msg = f"submit_punctuation expects a weir.streams.Punctuation, got {mark!r:.80}"
            raise TopologyError(msg, component=self.context.component_id, task=self.context.task_index)
        streams = list(self.collector._arity) if stream is None else [stream]
        for s in streams:
            if s not in self.collector._arity:
                msg = (
                    f"{self.context.where}: submit_punctuation on undeclared stream {s!r} "
                    f"(declared: {', '.join(sorted(self.collector._arity)) or 'none'})"
                )
                raise TopologyError(msg, component=self.context.component_id, task=self.context.task_index)
            self.collector.emitted.append((s, mark, None))  # type: ignore[arg-type]

    def cleanup(self) -> None:  # noqa: B027
        """Called when the instance is discarded (driver-side hook instances, ``clear_live_instances``)."""
