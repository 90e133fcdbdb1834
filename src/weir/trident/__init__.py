"""Trident on Spark: micro-batch streams with exactly-once state (seed 004).

Build a :class:`TridentTopology` — streams from spouts, per-tuple operations, aggregations, joins and
states — and submit it with ``weir.submit`` like a Storm topology. Each micro-batch is one Trident
batch with a txid from weir's checkpoint coordinator; built-in aggregations and projections run as
Spark SQL, user operations as Python over Arrow batches, and states are updated once per state
partition per batch with ``begin_commit(txid)`` … ``commit(txid)``.

Examples
--------
>>> from weir.trident import Count, Function, TridentTopology
>>> class Split(Function):
...     def execute(self, tup, collector):
...         for word in tup.get_string(0).split():
...             collector.emit([word])

See ``docs/trident.md`` and ``examples/trident_wordcount.py``.
"""

from weir.trident.builtin import Debug, FilterNull
from weir.trident.operation import (
    Aggregator,
    CombinerAggregator,
    Count,
    Filter,
    Function,
    MapGet,
    Operation,
    OperationContext,
    QueryFunction,
    ReducerAggregator,
    SnapshotGet,
    StateUpdater,
    Sum,
)
from weir.trident.state import (
    BackingMap,
    CachedMap,
    MapState,
    MemoryMapState,
    NonTransactionalMap,
    OpaqueMap,
    OpaqueValue,
    Snapshottable,
    SnapshottableMap,
    State,
    StateFactory,
    StateType,
    TransactionalMap,
    TransactionalValue,
)
from weir.trident.topology import GroupedStream, Stream, TridentState, TridentTopology
from weir.trident.tuple import TridentCollector, TridentTuple

# Storm's class names, for ported code (same classes)
BaseFunction = Function
BaseFilter = Filter
BaseAggregator = Aggregator
BaseQueryFunction = QueryFunction
BaseStateUpdater = StateUpdater
IBackingMap = BackingMap

__all__ = [
    "Aggregator",
    "BackingMap",
    "BaseAggregator",
    "BaseFilter",
    "BaseFunction",
    "BaseQueryFunction",
    "BaseStateUpdater",
    "CachedMap",
    "CombinerAggregator",
    "Count",
    "Debug",
    "Filter",
    "FilterNull",
    "Function",
    "GroupedStream",
    "IBackingMap",
    "MapGet",
    "MapState",
    "MemoryMapState",
    "NonTransactionalMap",
    "OpaqueMap",
    "OpaqueValue",
    "Operation",
    "OperationContext",
    "QueryFunction",
    "ReducerAggregator",
    "SnapshotGet",
    "Snapshottable",
    "SnapshottableMap",
    "State",
    "StateFactory",
    "StateType",
    "StateUpdater",
    "Stream",
    "Sum",
    "TransactionalMap",
    "TransactionalValue",
    "TridentCollector",
    "TridentState",
    "TridentTopology",
    "TridentTuple",
]
