"""IBM Streams state handling on weir: ``StateHandler``, ``Checkpoint``, ``Operator``, consistent regions.

An :class:`Operator` is a bolt-like component for ``TopologyBuilder``. Its state is kept through
:class:`StateHandler` callbacks: inside a consistent region (the whole topology by default, or the
components named in ``builder.consistent_region(...)``) every micro-batch is a cut — ``drain()`` then
``checkpoint(Checkpoint)`` per task, complete when the coordinator commits the batch. See
``docs/streams-handlers.md`` for the call order, failure handling and storage.
"""

from weir.streams.checkpoint import Checkpoint
from weir.streams.context import ConsistentRegionContext, OperatorContext
from weir.streams.handler import StateHandler
from weir.streams.handlers import DelegateStateHandler, OrderedStateHandlers
from weir.streams.operator import InputPort, Operator
from weir.streams.store import load_checkpoint
from weir.streams.windows import SortedTupleWindow, StatefulWindowListener, TumblingWindowSort, WindowEvent
from weir.topology.punctuation import Punctuation

__all__ = [
    "Checkpoint",
    "ConsistentRegionContext",
    "DelegateStateHandler",
    "InputPort",
    "Operator",
    "OperatorContext",
    "OrderedStateHandlers",
    "Punctuation",
    "SortedTupleWindow",
    "StateHandler",
    "StatefulWindowListener",
    "TumblingWindowSort",
    "WindowEvent",
    "load_checkpoint",
]
