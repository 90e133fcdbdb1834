"""Components of a topology: spouts, bolts, basic bolts and stateful bolts (Storm's lifecycle).

Instance lifetime: a Python worker keeps a bolt task's instance after a successful batch, and the
task's next batch continues with it when Spark runs it in the same worker (``prepare`` once per
instance, fields kept); otherwise, or after a failed attempt, a new instance is prepared — never a
stale one (see ``docs/storm-on-spark.md``, "Instance lifetime"). ``cleanup`` runs when an instance
is dropped; ``pre_commit``/``pre_rollback`` run on the driver on a fresh instance prepared with the
same task context. Fields are a cache: anything that must survive belongs in state.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from weir.topology.tuple import DEFAULT_STREAM, Fields, Tuple

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from weir.state.base import State
    from weir.topology.collector import BasicOutputCollector, OutputCollector
    from weir.topology.context import TopologyContext
    from weir.topology.spout_collector import SpoutOutputCollector

__all__ = [
    "BasicBolt",
    "Bolt",
    "Component",
    "Guarantee",
    "OutputFieldsDeclarer",
    "Spout",
    "StatefulBolt",
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
    """A source of tuples: a Spark streaming source, or Storm's ``next_tuple`` / ``ack`` / ``fail`` spout.

    Two kinds, told apart by what the subclass implements:

    * **Spark-source spouts** implement :meth:`create_stream` (a streaming DataFrame whose offsets
      Spark checkpoints); see :mod:`weir.sources` for the built-ins (files, rate, any DataFrame,
      Redis Streams, NATS, Kafka) and :class:`~weir.sources.ReplayableSpout`.
    * **Storm spouts** (``BaseRichSpout``/``IRichSpout``) implement :meth:`next_tuple` and usually
      :meth:`open`, :meth:`ack` and :meth:`fail`, as in Storm. Their tasks run on the driver; every
      batch's tuples are written to a spout log in the topology's store before any bolt sees them,
      so a retried or restarted batch replays exactly those tuples, and ``ack(msg_id)`` is called
      once the batch's state is COMMITTED (see docs/storm-on-spark.md, "Storm spouts").
    """

    guarantee: Guarantee = Guarantee.TRANSACTIONAL
    collector: SpoutOutputCollector

    def create_stream(self, spark: SparkSession, context: TopologyContext) -> DataFrame:
        """A streaming DataFrame whose columns are the output fields, in order.

        A Storm spout (one that implements :meth:`next_tuple`) does not override this: the runtime
        paces its batches with a stream of its own, and its tuples come from the spout log.
        """
        msg = (
            f"{type(self).__name__} implements neither create_stream (a Spark-source spout) nor next_tuple "
            "(a Storm spout); implement one of them"
        )
        raise NotImplementedError(msg)

    def is_storm_spout(self) -> bool:
        """Whether this is a Storm spout (it implements ``next_tuple``, not ``create_stream``)."""
        cls = type(self)
        return cls.next_tuple is not Spout.next_tuple and cls.create_stream is Spout.create_stream

    # ---- Storm's ISpout (the driver calls these for a Storm spout; see the class docstring) ----
    def open(self, conf: Mapping[str, Any], context: TopologyContext, collector: SpoutOutputCollector) -> None:
        """Called once per spout task before any ``next_tuple``; keeps the collector as ``self.collector``."""
        self.collector = collector

    def next_tuple(self) -> None:
        """Emit zero or more tuples with ``self.collector.emit``; emitting none says "nothing now"."""
        msg = f"{type(self).__name__} does not implement next_tuple"
        raise NotImplementedError(msg)

    def ack(self, msg_id: Any) -> bool | None:
        """The tuple emitted with ``msg_id`` is in a COMMITTED batch: acknowledge it at the source.

        weir's addition to Storm's contract: return ``False`` when this instance does not hold the
        message (it was delivered to an earlier instance, before a restart); weir then calls
        ``ack`` again when the source redelivers it (the redelivered tuple is not emitted again).
        ``None`` (Storm's ``void``) or ``True`` means acknowledged.
        """
        return None

    def flush_acks(self) -> None:  # noqa: B027 - optional hook
        """Send the acknowledgements that ``ack`` buffered (weir's addition; default: nothing to send).

        weir calls it after each round of ``ack`` calls (one committed batch of one spout task)
        and before its spout log forgets those message ids, so a spout may buffer its acks and
        send them in one round trip here (RabbitMQ's ``basic.ack`` with ``multiple``, a Redis
        pipeline). Raising means none of the round's acks is known to have reached the source:
        weir keeps their ids and acks them again when the source redelivers them.
        """

    def fail(self, msg_id: Any) -> None:  # noqa: B027 - optional hook
        """Let the source redeliver the tuple: its batch was abandoned, or timed out in retries (see docs)."""

    def activate(self) -> None:  # noqa: B027 - optional hook
        """The spout is about to be polled (after ``open`` and whenever the topology starts again)."""

    def deactivate(self) -> None:  # noqa: B027 - optional hook
        """The topology stops polling this spout (before ``close`` on a stop)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """The spout task ends (the topology stopped, or the task failed and is opened again)."""

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
        """Called once per instance, before its first tuple (an instance may serve several batches)."""
        self.collector = collector

    @abstractmethod
    def execute(self, tup: Tuple) -> None:
        """Process one input tuple."""

    def check_submit(self, conf: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook
        """Submit-time checks against the bolt's external system (a broker's limits): raise to refuse."""

    def cleanup(self) -> None:  # noqa: B027 - optional hook
        """Called when the instance is dropped (not after every batch; not guaranteed when a worker dies)."""


class BasicBolt(Component):
    """Storm's ``IBasicBolt``: tuples are acked automatically; raise ``FailedTuple`` to fail one."""

    def is_bolt(self) -> bool:
        """A bolt: yes."""
        return True

    def prepare(self, conf: Mapping[str, Any], context: TopologyContext) -> None:  # noqa: B027
        """Called once per instance, before its first tuple (an instance may serve several batches)."""

    @abstractmethod
    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        """Process one input tuple; emit with ``collector``."""

    def cleanup(self) -> None:  # noqa: B027
        """Called when the instance is dropped (not after every batch; not guaranteed when a worker dies)."""


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
