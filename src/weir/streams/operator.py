"""A Streams ``Operator``: a bolt-like component whose state is kept through state handlers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from weir.topology.components import Component

if TYPE_CHECKING:
    from weir.topology.collector import OutputCollector
    from weir.topology.tuple import Tuple

__all__ = ["Operator"]


class Operator(Component):
    """A component usable in ``TopologyBuilder`` that checkpoints through ``StateHandler`` callbacks.

    An operator that subclasses :class:`~weir.streams.handler.StateHandler` is registered as a handler
    automatically; others register handlers with ``context.register_state_handler(h)``.
    """

    #: whether this operator takes part in checkpointing (set False for a stateless operator)
    checkpointed: bool = True
    collector: OutputCollector

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: OutputCollector) -> None:
        """Called when the operator's task starts (see docs/streams-handlers.md for lifetime)."""
        self.collector = collector

    def process(self, tup: Tuple) -> None:
        """Process one input tuple."""
        msg = f"{type(self).__name__} must implement process(tup)"
        raise NotImplementedError(msg)

    def cleanup(self) -> None:  # noqa: B027
        """Called when the operator's instance is discarded."""
