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
from weir.topology.spout_collector import SpoutOutputCollector
from weir.topology.tuple import DEFAULT_STREAM, Fields, Tuple, Values
from weir.topology.windowing import Count, Duration, StatefulWindowedBolt, TupleWindow, WindowedBolt

# Storm's class names, for ported code (same classes)
IRichBolt = Bolt
BaseRichBolt = Bolt
IBasicBolt = BasicBolt
BaseBasicBolt = BasicBolt
IStatefulBolt = StatefulBolt
BaseStatefulBolt = StatefulBolt
IRichSpout = Spout
BaseRichSpout = Spout
BaseWindowedBolt = WindowedBolt
IWindowedBolt = WindowedBolt
BaseStatefulWindowedBolt = StatefulWindowedBolt
IStatefulWindowedBolt = StatefulWindowedBolt
FailedException = FailedTuple

__all__ = [
    "DEFAULT_STREAM",
    "BaseBasicBolt",
    "BaseRichBolt",
    "BaseRichSpout",
    "BaseStatefulBolt",
    "BaseStatefulWindowedBolt",
    "BaseWindowedBolt",
    "BasicBolt",
    "BasicOutputCollector",
    "Bolt",
    "BoltDeclarer",
    "ComponentSpec",
    "Count",
    "Duration",
    "FailedException",
    "FailedTuple",
    "Fields",
    "Grouping",
    "GroupingKind",
    "Guarantee",
    "IBasicBolt",
    "IRichBolt",
    "IRichSpout",
    "IStatefulBolt",
    "IStatefulWindowedBolt",
    "IWindowedBolt",
    "OutputCollector",
    "OutputFieldsDeclarer",
    "Spout",
    "SpoutOutputCollector",
    "StatefulBolt",
    "StatefulWindowedBolt",
    "Subscription",
    "Topology",
    "TopologyBuilder",
    "TopologyContext",
    "Tuple",
    "TupleWindow",
    "Values",
    "WindowedBolt",
]
