"""A Streams ``Operator``: a bolt-like component whose state is kept through state handlers.

Lifetime (unlike a Storm bolt, whose instance lives for one task of one batch): an operator
instance is created and ``prepare``-d once, then kept by the Python worker and used for the same
task's next batches while its last checkpoint is the latest complete one. Otherwise (another
worker ran the task meanwhile, a batch failed, the driver restarted) the instance is restored with
``reset(Checkpoint)`` — see ``docs/streams-handlers.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from weir.topology.components import Component
from weir.topology.tuple import DEFAULT_STREAM

if TYPE_CHECKING:
    from weir.streams.context import OperatorContext
    from weir.topology.collector import OutputCollector
    from weir.topology.tuple import Tuple

__all__ = ["Operator"]


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

    def cleanup(self) -> None:  # noqa: B027
        """Called when the instance is discarded (driver-side hook instances, ``clear_live_instances``)."""
