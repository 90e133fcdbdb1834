"""Components of a topology: spouts, bolts, basic bolts and stateful bolts (Storm's lifecycle).

Instance lifetime differs from Storm: a bolt instance lives for **one task of one micro-batch**.
``prepare`` runs at the start of every batch's task, ``cleanup`` at its end; the hooks
``pre_prepare``/``pre_commit``/``pre_rollback`` may run on a fresh instance prepared with the same
task context. Anything that must survive a batch belongs in state.
"""

from __future__ import annotations

import enum
import inspect
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from weir.topology.tuple import DEFAULT_STREAM, Fields, Tuple

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from weir.state.base import State
    from weir.topology.collector import BasicOutputCollector, OutputCollector
    from weir.topology.context import TopologyContext

__all__ = [
    "BasicBolt",
    "Bolt",
    "Component",
    "Guarantee",
    "OutputFieldsDeclarer",
    "Spout",
    "StatefulBolt",
    "execute_shape",
]

S = TypeVar("S")


class Guarantee(enum.Enum):
    """What a spout promises when Spark replays a batch (seed 004's spout types)."""

    TRANSACTIONAL = "transactional"  # the same tuples for the same batch, always
    OPAQUE = "opaque"  # every tuple in exactly one committed batch, but a replay may differ
    NON_TRANSACTIONAL = "non-transactional"  # no guarantee


class OutputFieldsDeclarer:
    """Collects the streams a component declares in ``declare_output_fields``."""

    def __init__(self) -> None:
        self.streams: dict[str, Fields] = {}
        self.direct: set[str] = set()

    def declare(self, fields: Fields | list[str] | tuple[str, ...], direct: bool = False) -> None:
        """Declare the default stream."""
        self.declare_stream(DEFAULT_STREAM, fields, direct)

    def declare_stream(
        self, stream_id: str, fields: Fields | list[str] | tuple[str, ...], direct: bool = False
    ) -> None:
        """Declare stream ``stream_id`` with ``fields``."""
        if not isinstance(stream_id, str) or not stream_id or stream_id.startswith("$"):
            msg = f"invalid stream id {stream_id!r} (non-empty, not starting with '$')"
            raise ValueError(msg)
        if stream_id in self.streams:
            msg = f"stream {stream_id!r} is declared twice"
            raise ValueError(msg)
        self.streams[stream_id] = fields if isinstance(fields, Fields) else Fields(list(fields))
        if direct:
            self.direct.add(stream_id)


class Component(ABC):  # noqa: B024 - a marker base with optional hooks
    """Anything that can sit in a topology."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:  # noqa: B027
        """Declare output streams; the default declares none."""

    def get_component_configuration(self) -> Mapping[str, Any] | None:
        """Per-component configuration overrides (Storm's ``getComponentConfiguration``)."""
        return None

    def is_bolt(self) -> bool:
        """Whether ``set_bolt`` takes this component (it consumes streams); False by default."""
        return False

    def is_stateful(self) -> bool:
        """Whether this component's state is checkpointed with every batch; False by default."""
        return False


class Spout(Component):
    """A source of tuples: a Spark streaming source whose offsets Spark checkpoints.

    Subclasses implement :meth:`create_stream` and declare their output fields; see
    :mod:`weir.sources` for the built-ins (files, rate, any DataFrame, Redis Streams, NATS).
    """

    guarantee: Guarantee = Guarantee.TRANSACTIONAL

    @abstractmethod
    def create_stream(self, spark: SparkSession, context: TopologyContext) -> DataFrame:
        """A streaming DataFrame whose columns are the output fields, in order."""

    #: punctuation (IBM Streams): every spout task ends its part of each micro-batch with a window mark
    window_mark_each_batch: bool = False

    def to_values(self, row: Any) -> tuple[Any, ...]:
        """Turn one row of the stream into the tuple's values (override to parse records)."""
        return tuple(row)

    def is_window_mark(self, row: Any) -> bool:
        """Whether ``row`` is a window mark rather than a tuple (override to punctuate; called only then).

        A row for which this returns True becomes a window mark in its place in the stream; every
        task of every consumer receives it (see :mod:`weir.topology.punctuation`).
        """
        return False

    def validate(self) -> None:  # noqa: B027 - optional hook
        """Submit-time checks (brokers reachable, topics exist): raise to refuse the topology."""

    def source_lag(self, end_offset: Any) -> int | None:
        """Records in the source after ``end_offset``; None when unknown (the default).

        ``end_offset`` is the last batch's end offset as Spark reports it, parsed from JSON (None
        before the first batch). Called on the driver by the metrics endpoint
        (``weir_source_lag_records``); a spout that can ask its source cheaply overrides it.
        """
        return None


class Bolt(Component):
    """Storm's ``IRichBolt``: ``prepare``, ``execute``, ``cleanup``.

    The default ``prepare`` keeps the collector as ``self.collector``.
    """

    def is_bolt(self) -> bool:
        """A bolt: yes."""
        return True

    collector: OutputCollector

    def prepare(self, conf: Mapping[str, Any], context: TopologyContext, collector: OutputCollector) -> None:
        """Called at the start of every task of every batch."""
        self.collector = collector

    @abstractmethod
    def execute(self, tup: Tuple) -> None:
        """Process one input tuple."""

    def cleanup(self) -> None:  # noqa: B027 - optional hook
        """Called at the end of every task of every batch."""


class BasicBolt(Component):
    """Storm's ``IBasicBolt``: tuples are acked automatically; raise ``FailedTuple`` to fail one."""

    def is_bolt(self) -> bool:
        """A bolt: yes."""
        return True

    def prepare(self, conf: Mapping[str, Any], context: TopologyContext) -> None:  # noqa: B027
        """Called at the start of every task of every batch."""

    @abstractmethod
    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        """Process one input tuple; emit with ``collector``."""

    def cleanup(self) -> None:  # noqa: B027
        """Called at the end of every task of every batch."""


class StatefulBolt(Bolt, Generic[S]):
    """Storm's ``IStatefulBolt``: a bolt whose state is checkpointed once per micro-batch.

    ``init_state`` receives the task's state (namespace ``<topology>-<component>-<task>``) with what
    was last committed; the hooks run before the framework prepares, commits or rolls back.

    ``execute`` takes Storm's two shapes: ``execute(self, tup)`` (a rich bolt: ack or fail every
    input with ``self.collector``) or ``execute(self, tup, collector)`` (as ``BaseBasicBolt``: a
    :class:`~weir.topology.collector.BasicOutputCollector`, inputs acked automatically). The state
    type may be written as in Storm: ``class WordCount(BaseStatefulBolt[KeyValueState[str, int]])``.
    """

    def is_stateful(self) -> bool:
        """Its state is checkpointed: yes."""
        return True

    @abstractmethod
    def init_state(self, state: State) -> None:
        """Receive the task's state; called after ``prepare`` and before any ``execute``."""

    def pre_prepare(self, txid: int) -> None:  # noqa: B027
        """Hook: just before the framework prepares the state of transaction ``txid``."""

    def pre_commit(self, txid: int) -> None:  # noqa: B027
        """Hook: just before the framework commits transaction ``txid``."""

    def pre_rollback(self) -> None:  # noqa: B027
        """Hook: just before the framework rolls back the prepared state."""

    def rescale_state(self, key: Any, parallelism: int) -> int | None:
        """Hook: the task (``0..parallelism-1``) that state key ``key`` belongs to after a parallelism change.

        Called on the driver at submit, once per stored key, when the component's parallelism differs
        from the one its state was written with (see :mod:`weir.checkpoint.rescale`). The default,
        None, routes the key as the fields grouping routes its tuples: ``stable_hash(key) %
        parallelism``, the key being the grouping value (a list of the values for several fields). A
        bolt fed by another grouping must override it, or a parallelism change is refused.
        """
        return None


ExecuteShape = Literal["rich", "basic"]


def execute_shape(component: Any, cid: str = "?") -> ExecuteShape:
    """How weir calls ``component.execute``: ``"rich"`` = ``execute(tup)``, ``"basic"`` = ``execute(tup, collector)``.

    A :class:`BasicBolt` is always basic; a :class:`Bolt` is basic when its ``execute`` requires a
    second argument. Raises :class:`~weir.errors.TopologyError` (at submit time) when the signature
    cannot be called either way.
    """
    from weir.errors import TopologyError

    execute = getattr(component, "execute", None)
    if not callable(execute):
        msg = f"component {cid!r}: {type(component).__name__} has no execute method"
        raise TopologyError(msg, component=cid)
    try:
        sig = inspect.signature(execute)
    except (TypeError, ValueError):  # a builtin or C callable: trust the class
        return "basic" if isinstance(component, BasicBolt) else "rich"
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    var = any(p.kind is p.VAR_POSITIONAL for p in params)
    kw_required = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]

    def can_take(n: int) -> bool:
        return not kw_required and len(required) <= n and (var or len(positional) >= n)

    from weir.topology.windowing import WindowedBolt

    if isinstance(component, WindowedBolt):
        shapes = [("rich", 1)]
        wanted = "execute(self, window) (a TupleWindow)"
    elif isinstance(component, BasicBolt):
        shapes = [("basic", 2)]
        wanted = "execute(self, tup, collector) (a BasicBolt gets a BasicOutputCollector)"
    else:
        shapes = [("rich", 1), ("basic", 2)]
        wanted = (
            "execute(self, tup) (ack or fail each tuple with self.collector) or "
            "execute(self, tup, collector) (a BasicOutputCollector; tuples acked automatically)"
        )
    for shape, n in shapes:
        if can_take(n):
            return shape  # type: ignore[return-value]
    plain = sig.replace(parameters=[p.replace(annotation=p.empty) for p in params], return_annotation=sig.empty)
    msg = f"component {cid!r}: {type(component).__name__}.execute{plain} cannot be called by weir; write {wanted}"
    raise TopologyError(msg, component=cid)
