"""Windowed state handlers: ``SortedTupleWindow`` and the ``TumblingWindowSort`` operator.

``TumblingWindowSort(size, fields)`` collects ``size`` tuples per task (a count-based tumbling
window), then submits them sorted, each with the window's number, and starts a new window;
``TumblingWindowSort(None, fields)`` is punctuation-based (SPL's ``tumbling, punct()``): each window
mark closes the window. Either way a final mark flushes the open window. Its state — the open
window's tuples and the window number — is checkpointed at every cut and restored on reset, so a
window that spans micro-batches survives failures and restarts exactly.
"""

from __future__ import annotations

import bisect
import enum
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from weir._util import positive_int
from weir.errors import CheckpointError, TopologyError
from weir.streams.checkpoint import Checkpoint
from weir.streams.handler import StateHandler
from weir.streams.operator import InputPort, Operator
from weir.topology.punctuation import Punctuation
from weir.topology.tuple import Fields

if TYPE_CHECKING:
    from weir.streams.context import OperatorContext
    from weir.topology.collector import OutputCollector
    from weir.topology.components import OutputFieldsDeclarer
    from weir.topology.tuple import Tuple

__all__ = ["SortedTupleWindow", "StatefulWindowListener", "TumblingWindowSort", "WindowEvent"]

S = TypeVar("S")


def _identity(values: tuple[Any, ...]) -> Any:
    return values


class SortedTupleWindow(StateHandler):
    """Tuples (as value tuples) kept in sort order; a state handler for its contents.

    Parameters
    ----------
    key : sort key of a tuple's values (default: the values themselves); equal keys keep arrival order
    reverse : iterate in descending order (still stable)

    The checkpoint holds the tuples in sort order (one ``write_object``). In non-blocking mode
    :meth:`prepare_for_non_blocking_checkpoint` takes a snapshot, so inserts may continue while the
    background checkpoint writes it.
    """

    def __init__(self, key: Callable[[tuple[Any, ...]], Any] | None = None, *, reverse: bool = False) -> None:
        self.key = key or _identity
        self.reverse = reverse
        self._items: list[tuple[Any, ...]] = []
        self._snapshot: list[tuple[Any, ...]] | None = None

    # ---- the window ----------------------------------------------------------------------------
    def insert(self, values: Sequence[Any]) -> None:
        """Add a tuple's values in sort position."""
        item = tuple(values)
        try:
            bisect.insort_right(self._items, item, key=self.key)
        except TypeError as exc:
            msg = f"SortedTupleWindow: cannot order {item!r:.100} among the window's tuples: {exc}"
            raise TopologyError(msg) from exc

    def tuples(self) -> list[tuple[Any, ...]]:
        """The window's tuples in sort order."""
        if self.reverse:
            return sorted(self._items, key=self.key, reverse=True)
        return list(self._items)

    def evict(self) -> list[tuple[Any, ...]]:
        """Return every tuple in sort order and empty the window (a tumble)."""
        out = self.tuples()
        self._items = []
        return out

    def clear(self) -> None:
        """Empty the window."""
        self._items = []

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.tuples())

    # ---- StateHandler --------------------------------------------------------------------------
    def drain(self) -> None:
        """Nothing is pending: evictions happen synchronously."""

    def prepare_for_non_blocking_checkpoint(self, id: int) -> None:  # noqa: A002
        """Snapshot the contents for the background checkpoint."""
        self._snapshot = list(self._items)

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        """Write the tuples (the snapshot in non-blocking mode)."""
        items = self._snapshot if self._snapshot is not None else self._items
        self._snapshot = None
        checkpoint.write_object(list(items))

    def reset(self, checkpoint: Checkpoint) -> None:
        """Read the tuples back."""
        items = checkpoint.read_object()
        if not isinstance(items, list) or not all(isinstance(t, tuple) for t in items):
            msg = f"{checkpoint!r}: SortedTupleWindow expected a list of tuples, found {type(items).__name__}"
            raise CheckpointError(msg)
        self._items = items
        self._snapshot = None

    def reset_to_initial_state(self) -> None:
        """Empty the window."""
        self._items = []
        self._snapshot = None

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        """Nothing kept outside the checkpoint."""


class WindowEvent(str, enum.Enum):
    """What happened to a window (IBM Streams' ``StreamWindowEvent.Type``)."""

    INSERTION = "insertion"  #: tuples were inserted
    TRIGGER = "trigger"  #: the window triggered (for a tumbling window: it is full), with its tuples
    EVICTION = "eviction"  #: tuples were evicted


class StatefulWindowListener(StateHandler, Generic[S]):
    """A window listener with state per window partition, checkpointed with the window.

    IBM Streams' ``StatefulWindowListener``: it receives the window's events and keeps one state
    object per partition (``None`` for an unpartitioned window). The state is a state handler of its
    own: ``checkpoint()`` writes every partition's state, ``reset()`` reads it back and
    ``reset_to_initial_state()`` forgets it, so what it computed survives failures and restarts
    exactly like the window's contents. Pass listeners to a window operator
    (``TumblingWindowSort(..., listeners=[...])``), which registers them after its window.

    Subclasses implement :meth:`initial_state` and :meth:`handle_event`. The state must be data a
    checkpoint can hold (numbers, strings, lists, dicts, ...).

    Example
    -------
    >>> class Totals(StatefulWindowListener):
    ...     def initial_state(self, partition): return {"windows": 0, "tuples": 0}
    ...     def handle_event(self, event, tuples, partition, state):
    ...         if event is WindowEvent.TRIGGER:
    ...             state["windows"] += 1
    ...             state["tuples"] += len(tuples)
    """

    def __init__(self) -> None:
        self._states: dict[Any, S] = {}

    @abstractmethod
    def initial_state(self, partition: Any) -> S:
        """The state of a partition seen for the first time (and after ``reset_to_initial_state``)."""

    @abstractmethod
    def handle_event(self, event: WindowEvent, tuples: list[tuple[Any, ...]], partition: Any, state: S) -> S | None:
        """React to ``event`` on ``tuples``; return the new state, or None to keep ``state`` (mutated)."""

    def state(self, partition: Any = None) -> S:
        """The state of ``partition`` (created with :meth:`initial_state` on first use)."""
        if partition not in self._states:
            self._states[partition] = self.initial_state(partition)
        return self._states[partition]

    @property
    def partitions(self) -> list[Any]:
        """Partitions that have a state."""
        return list(self._states)

    def on_event(self, event: WindowEvent, tuples: list[tuple[Any, ...]], partition: Any = None) -> None:
        """Called by the window operator: pass the event to :meth:`handle_event` with the partition's state."""
        new = self.handle_event(event, tuples, partition, self.state(partition))
        if new is not None:
            self._states[partition] = new

    # ---- StateHandler --------------------------------------------------------------------------
    def drain(self) -> None:
        """Events are handled as they happen: nothing is pending."""

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        """Write ``[[partition, state], ...]``."""
        checkpoint.write_object([[p, st] for p, st in self._states.items()])

    def reset(self, checkpoint: Checkpoint) -> None:
        """Read the partitions' states back."""
        pairs = checkpoint.read_object()
        if not isinstance(pairs, list) or not all(isinstance(x, (list, tuple)) and len(x) == 2 for x in pairs):
            msg = f"{checkpoint!r}: {type(self).__qualname__} expected [[partition, state], ...], found {pairs!r:.80}"
            raise CheckpointError(msg)
        self._states = {(tuple(p) if isinstance(p, list) else p): st for p, st in pairs}

    def reset_to_initial_state(self) -> None:
        """Forget every partition's state."""
        self._states = {}

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        """Nothing kept outside the checkpoint."""


class TumblingWindowSort(Operator, StateHandler):
    """Sort each tumbling window of ``size`` tuples and submit it.

    Parameters
    ----------
    size : tuples per window (count-based eviction), or None: a window closes at each window mark
        (punctuation-based, IBM Streams' ``punct()`` eviction); a final mark closes it in both modes
    fields : the input fields kept, in order; the output fields are these plus ``window_field``
    sort_by : fields to sort on (default: all of ``fields``)
    reverse : descending order
    window_field : name of the output field carrying the window number (per task, from 0), or None
    non_blocking : checkpoint in the background (only inside a consistent region)
    listeners : :class:`StatefulWindowListener` objects told of every insertion, trigger (a full
        window, sorted) and eviction; registered as state handlers after the window

    Checkpoint layout: ``write_object({"window": next window number})`` by the operator, then the
    open window's tuples by its :class:`SortedTupleWindow`, then each listener's states.

    Punctuation: a window mark is forwarded after the window it closed (punctuation-based) or as it
    came (count-based); a final mark first submits the open window, if any.
    """

    def __init__(
        self,
        size: int,
        fields: Sequence[str],
        sort_by: Sequence[str] | None = None,
        *,
        reverse: bool = False,
        window_field: str | None = "window",
        non_blocking: bool = False,
        listeners: Sequence[StatefulWindowListener[Any]] = (),
    ) -> None:
        if size is not None:
            positive_int(
                size,
                "TumblingWindowSort: size",
                error=TopologyError,
                expected="a positive int (or None: punctuation-based)",
            )
        self.size = size
        self.fields = Fields(list(fields))
        by = list(sort_by) if sort_by is not None else list(self.fields)
        unknown = [f for f in by if f not in self.fields]
        if unknown:
            msg = f"TumblingWindowSort: sort_by fields {unknown} are not among fields {self.fields.to_list()}"
            raise TopologyError(msg)
        self.sort_idx = [self.fields.field_index(f) for f in by]
        self.reverse = reverse
        self.window_field = window_field
        self.non_blocking = non_blocking
        self.window_number = 0
        self.listeners = list(listeners)
        bad = [x for x in self.listeners if not isinstance(x, StatefulWindowListener)]
        if bad:
            msg = (
                f"TumblingWindowSort: listeners must be StatefulWindowListener objects, got {type(bad[0]).__qualname__}"
            )
            raise TopologyError(msg)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """``fields`` + ``window_field``."""
        extra = [self.window_field] if self.window_field else []
        declarer.declare(Fields(self.fields.to_list() + extra))

    def prepare(self, conf: Mapping[str, Any], context: OperatorContext, collector: OutputCollector) -> None:
        """Register the window as the second handler (after the operator itself)."""
        super().prepare(conf, context, collector)
        key = itemgetter(*self.sort_idx) if len(self.sort_idx) > 1 else itemgetter(self.sort_idx[0])
        self.window = SortedTupleWindow(key, reverse=self.reverse)
        context.register_state_handler(self.window)
        for listener in self.listeners:
            context.register_state_handler(listener)
        self.window_number = 0
        region = context.consistent_region_context
        if self.non_blocking and region is not None:
            region.enable_non_blocking_checkpoint()

    def process(self, tup: Tuple) -> None:
        """Insert the tuple; when the window is full, submit it sorted and start the next one."""
        values = [tup[f] for f in self.fields]
        self.window.insert(values)
        for listener in self.listeners:
            listener.on_event(WindowEvent.INSERTION, [tuple(values)])
        if self.size is not None and len(self.window) >= self.size:
            self._trigger()

    def _trigger(self) -> None:
        tuples = self.window.evict()
        for listener in self.listeners:
            listener.on_event(WindowEvent.TRIGGER, tuples)
        self.on_window(tuples)
        for listener in self.listeners:
            listener.on_event(WindowEvent.EVICTION, tuples)

    def process_punctuation(self, port: InputPort, mark: Punctuation) -> None:
        """A window mark closes a punctuation-based window; a final mark flushes the open window."""
        if mark is Punctuation.FINAL_MARKER:
            if len(self.window):
                self._trigger()
            return
        if self.size is None and len(self.window):
            self._trigger()
        self.submit_punctuation(mark)

    def on_window(self, tuples: list[tuple[Any, ...]]) -> None:
        """Submit a full window (override to aggregate instead)."""
        n = self.window_number
        self.window_number += 1
        for values in tuples:
            self.submit([*values, n] if self.window_field else list(values))

    # ---- StateHandler (the operator's own state: the window number) -------------------------
    def drain(self) -> None:
        """Full windows are submitted at once; an open window stays open across cuts."""

    def checkpoint(self, checkpoint: Checkpoint) -> None:
        """Write the window number."""
        checkpoint.write_object({"window": self.window_number})

    def reset(self, checkpoint: Checkpoint) -> None:
        """Read the window number back."""
        state = checkpoint.read_object()
        if not isinstance(state, dict) or "window" not in state:
            msg = f"{checkpoint!r}: TumblingWindowSort expected {{'window': n}}, found {state!r:.80}"
            raise CheckpointError(msg)
        self.window_number = int(state["window"])

    def reset_to_initial_state(self) -> None:
        """Window number 0 (the window handler empties itself)."""
        self.window_number = 0

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        """Nothing kept outside the checkpoint."""
