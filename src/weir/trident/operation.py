"""Trident operations: functions, filters, aggregators, state queries and state updaters.

Subclass these as you would in Storm (Python spelling). ``prepare(conf, context)`` runs before an
operation's first tuple in each task of each batch and ``cleanup()`` after its last; an instance
lives for one task of one batch (it is unpickled in a Spark executor), so anything that must
survive a batch belongs in a state.

The built-in aggregators :class:`Count` and :class:`Sum` run as Spark SQL (a ``groupBy().agg``
over the batch) wherever their input allows; every other operation runs as Python over Arrow
record batches in the executors.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from weir.trident.tuple import TridentCollector, TridentTuple

__all__ = [
    "Aggregator",
    "CombinerAggregator",
    "Count",
    "Filter",
    "Function",
    "MapGet",
    "Operation",
    "OperationContext",
    "QueryFunction",
    "ReducerAggregator",
    "SnapshotGet",
    "StateUpdater",
    "Sum",
]

T = TypeVar("T")
S = TypeVar("S")
R = TypeVar("R")


@dataclass(frozen=True)
class OperationContext:
    """Where an operation runs (Storm's ``TridentOperationContext``).

    Attributes
    ----------
    topology : the topology name
    component : the operation's name in the topology (``each-3``, or the stream's ``name()``)
    partition_index : the Spark partition (task) this instance processes
    num_partitions : the number of partitions of the stage, where known (state stages), else ``None``
    txid : the batch's transaction id
    conf : the topology configuration
    """

    topology: str
    component: str
    partition_index: int
    num_partitions: int | None
    txid: int
    conf: Mapping[str, Any] = field(default_factory=dict)


class Operation:
    """Lifecycle hooks shared by every operation (no-ops by default)."""

    def prepare(self, conf: Mapping[str, Any], context: OperationContext) -> None:  # noqa: B027
        """Called before the first tuple of each task of each batch."""

    def cleanup(self) -> None:  # noqa: B027
        """Called after the last tuple of each task of each batch."""


class Function(Operation, ABC):
    """``each(input_fields, function, output_fields)``: emit zero or more tuples per input tuple.

    Each emitted tuple is appended to the input tuple: the output stream has the input stream's
    fields followed by the function's output fields.

    Examples
    --------
    >>> class Split(Function):
    ...     def execute(self, tup, collector):
    ...         for word in tup.get_string(0).split():
    ...             collector.emit([word])
    """

    @abstractmethod
    def execute(self, tup: TridentTuple, collector: TridentCollector) -> None:
        """Process one tuple; emit with ``collector.emit([values...])``."""


class Filter(Operation, ABC):
    """``each(input_fields, filter)``: keep the tuples for which :meth:`is_keep` is true."""

    @abstractmethod
    def is_keep(self, tup: TridentTuple) -> bool:
        """Whether to keep ``tup``."""


class CombinerAggregator(ABC, Generic[T]):
    """Aggregates by combining: ``init`` per tuple, ``combine`` pairs, ``zero`` for nothing.

    ``combine`` must be associative and commutative: weir pre-aggregates in every partition, then
    combines the partial results (and, in ``persistent_aggregate``, the stored value).
    """

    @abstractmethod
    def init(self, tup: TridentTuple) -> T:
        """The value of one tuple."""

    @abstractmethod
    def combine(self, val1: T, val2: T) -> T:
        """Combine two values."""

    @abstractmethod
    def zero(self) -> T:
        """The value of no tuples."""

    def spark_agg(self, columns: Sequence[Any], types: Sequence[Any]) -> Any:
        """A Spark SQL aggregate expression computing the same value, or ``None`` (Python then).

        Built-ins override this; ``columns`` are the input columns, ``types`` their Spark types
        (``None`` for an untyped field).
        """
        return None

    def value_type(self, types: Sequence[Any]) -> Any:
        """The Spark type of the aggregate for input types ``types``, or ``None`` if unknown."""
        return None


class ReducerAggregator(ABC, Generic[T]):
    """Aggregates by folding tuples one by one into a value that starts at :meth:`init`."""

    @abstractmethod
    def init(self) -> T:
        """The starting value."""

    @abstractmethod
    def reduce(self, curr: T, tup: TridentTuple) -> T:
        """Fold ``tup`` into ``curr`` and return the new value."""


class Aggregator(Operation, ABC, Generic[T]):
    """The general aggregator: ``init`` per batch (and group), ``aggregate`` per tuple, ``complete``.

    ``aggregate`` may change the value in place or return a new one (a non-``None`` return value
    replaces it); tuples are emitted with the collector, in ``aggregate`` or ``complete``.
    """

    @abstractmethod
    def init(self, batch_id: int, collector: TridentCollector) -> T:
        """A fresh value for batch ``batch_id`` (the txid)."""

    @abstractmethod
    def aggregate(self, val: T, tup: TridentTuple, collector: TridentCollector) -> T | None:
        """Fold one tuple into ``val``."""

    @abstractmethod
    def complete(self, val: T, collector: TridentCollector) -> None:
        """Emit the result for ``val``."""


class Count(CombinerAggregator[int]):
    """Counts tuples (Spark SQL ``count(*)``)."""

    def init(self, tup: TridentTuple) -> int:
        """1 per tuple."""
        return 1

    def combine(self, val1: int, val2: int) -> int:
        """Add."""
        return val1 + val2

    def zero(self) -> int:
        """0."""
        return 0

    def spark_agg(self, columns: Sequence[Any], types: Sequence[Any]) -> Any:
        """``count(1)``."""
        from pyspark.sql import functions as F  # noqa: N812

        return F.count(F.lit(1))

    def value_type(self, types: Sequence[Any]) -> Any:
        """``bigint``."""
        from pyspark.sql.types import LongType

        return LongType()

    def __repr__(self) -> str:
        return "Count()"


def _numeric_sum_type(dt: Any) -> Any:
    from pyspark.sql import types as T  # noqa: N812

    if isinstance(dt, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return T.LongType()
    if isinstance(dt, (T.FloatType, T.DoubleType)):
        return T.DoubleType()
    return None


class Sum(CombinerAggregator[Any]):
    """Sums the first input field (Spark SQL ``sum`` when the field is a typed number).

    Nulls count as nothing. On an untyped field (a value emitted by a function without a declared
    type) it adds the Python values.
    """

    def init(self, tup: TridentTuple) -> Any:
        """The tuple's first value (``None`` counts as 0)."""
        v = tup[0]
        return 0 if v is None else v

    def combine(self, val1: Any, val2: Any) -> Any:
        """Add."""
        if val1 is None:
            return val2
        if val2 is None:
            return val1
        return val1 + val2

    def zero(self) -> Any:
        """0."""
        return 0

    def spark_agg(self, columns: Sequence[Any], types: Sequence[Any]) -> Any:
        """``sum(field)`` for an integral or floating-point field, else ``None``."""
        if len(columns) != 1 or _numeric_sum_type(types[0]) is None:
            return None
        from pyspark.sql import functions as F  # noqa: N812

        return F.sum(columns[0])

    def value_type(self, types: Sequence[Any]) -> Any:
        """``bigint`` for integral input, ``double`` for floating point, else unknown."""
        return _numeric_sum_type(types[0]) if len(types) == 1 and types[0] is not None else None

    def __repr__(self) -> str:
        return "Sum()"


class QueryFunction(Operation, ABC, Generic[S, R]):
    """``state_query(state, input_fields, query_function, output_fields)``: read a state in bulk.

    Per partition of the querying stream, :meth:`batch_retrieve` gets the partition's state and all
    its tuples and returns one result per tuple (in order); then :meth:`execute` runs per tuple
    with its result and emits the output fields (appended to the tuple).
    """

    @abstractmethod
    def batch_retrieve(self, state: S, tuples: list[TridentTuple]) -> Sequence[R]:
        """One result per tuple, in order (one bulk read of ``state`` where possible)."""

    @abstractmethod
    def execute(self, tup: TridentTuple, result: R, collector: TridentCollector) -> None:
        """Emit the output values for ``tup`` given its ``result``."""


class StateUpdater(Operation, ABC, Generic[S]):
    """``partition_persist(factory, input_fields, updater)``: write a partition's tuples to a state.

    Called once per state partition per batch, between the state's ``begin_commit(txid)`` and
    ``commit(txid)``; tuples emitted to ``collector`` form the state's ``new_values_stream()``.
    """

    @abstractmethod
    def update_state(self, state: S, tuples: list[TridentTuple], collector: TridentCollector) -> None:
        """Apply ``tuples`` to ``state``."""


class MapGet(QueryFunction[Any, Any]):
    """Look up each tuple's input fields as a key of a map state (one ``multi_get`` per partition)."""

    def batch_retrieve(self, state: Any, tuples: list[TridentTuple]) -> Sequence[Any]:
        """``state.multi_get(keys)``."""
        return list(state.multi_get([list(t) for t in tuples]))

    def execute(self, tup: TridentTuple, result: Any, collector: TridentCollector) -> None:
        """Emit the value (``None`` when the key has none)."""
        collector.emit([result])

    def __repr__(self) -> str:
        return "MapGet()"


class SnapshotGet(QueryFunction[Any, Any]):
    """Read the global value of a ``Snapshottable`` state (an ungrouped ``persistent_aggregate``)."""

    def batch_retrieve(self, state: Any, tuples: list[TridentTuple]) -> Sequence[Any]:
        """``state.get()`` once, for every tuple."""
        val = state.get()
        return [val] * len(tuples)

    def execute(self, tup: TridentTuple, result: Any, collector: TridentCollector) -> None:
        """Emit the value."""
        collector.emit([result])

    def __repr__(self) -> str:
        return "SnapshotGet()"
