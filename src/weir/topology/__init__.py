"""Storm's topology API: builder, components, tuples, collectors and the task context."""

from weir.topology.builder import (
    BoltDeclarer,
    ComponentSpec,
    Grouping,
    GroupingKind,
    Subscription,
    Topology,
    TopologyBuilder,
)
from weir.topology.collector import BasicOutputCollector, FailedTuple, OutputCollector
from weir.topology.components import (
    BasicBolt,
    Bolt,
    Guarantee,
    OutputFieldsDeclarer,
    Spout,
    StatefulBolt,
)
from weir.topology.context import TopologyContext
from weir.topology.tuple import DEFAULT_STREAM, Fields, Tuple, Values

__all__ = [
    "DEFAULT_STREAM",
    "BasicBolt",
    "BasicOutputCollector",
    "Bolt",
    "BoltDeclarer",
    "ComponentSpec",
    "FailedTuple",
    "Fields",
    "Grouping",
    "GroupingKind",
    "Guarantee",
    "OutputCollector",
    "OutputFieldsDeclarer",
    "Spout",
    "StatefulBolt",
    "Subscription",
    "Topology",
    "TopologyBuilder",
    "TopologyContext",
    "Tuple",
    "Values",
]
