"""The logical plan of a Trident topology: one :class:`Node` per stream operation.

The builder API (:mod:`weir.trident.topology`) appends nodes; the batch planner
(:mod:`weir.trident.planner`) turns them into Spark DataFrame operations once per micro-batch.
A node knows its output field *names* at build time; the Spark types of pass-through fields are
only known per batch (from the spout's DataFrame), the types of new fields come from their
declarations (:mod:`weir.trident.fields`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from weir.trident.fields import FieldSpec

__all__ = ["AggKind", "Node", "agg_kind"]

#: node kinds that start a new partitioning (a parallelism hint stops walking up at them)
BOUNDARY_KINDS = frozenset(
    {"spout", "partition", "agg", "merge", "join", "state_query", "persist_agg", "partition_persist"}
)
#: node kinds that write a state
STATE_KINDS = frozenset({"persist_agg", "partition_persist"})

AggKind = str  # "combiner" | "reducer" | "aggregator"


def agg_kind(agg: Any) -> AggKind | None:
    """``combiner``, ``reducer`` or ``aggregator`` for an aggregator object, else ``None``."""
    from weir.trident.operation import Aggregator, CombinerAggregator, ReducerAggregator

    if isinstance(agg, CombinerAggregator):
        return "combiner"
    if isinstance(agg, ReducerAggregator):
        return "reducer"
    if isinstance(agg, Aggregator):
        return "aggregator"
    return None


@dataclass(eq=False)
class Node:
    """One operation of the plan.

    Attributes
    ----------
    id : position in the topology (creation order)
    kind : ``spout``, ``op`` (function / filter / map / flat_map / peek), ``project``,
        ``partition``, ``agg``, ``merge``, ``join``, ``state_query``, ``persist_agg`` or
        ``partition_persist``
    parents : the input nodes
    names : output field names
    new_fields : the fields this node adds (with declared types)
    params : kind-specific settings
    name : the component name used in messages and stats
    parallelism : number of partitions of this node's output (``None``: as Spark chooses)
    """

    id: int
    kind: str
    parents: tuple[Node, ...]
    names: tuple[str, ...]
    new_fields: tuple[FieldSpec, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    parallelism: int | None = None

    def __post_init__(self) -> None:
        if not self.name:
            self.name = f"{self.kind}-{self.id}"

    def __repr__(self) -> str:
        return f"Node({self.name}, fields={list(self.names)})"

    def spouts(self) -> list[Node]:
        """Every spout node this node reads from (directly or not), without duplicates."""
        seen: dict[int, Node] = {}
        stack: list[Node] = [self]
        visited: set[int] = set()
        while stack:
            n = stack.pop()
            if n.id in visited:
                continue
            visited.add(n.id)
            if n.kind == "spout":
                seen[n.id] = n
            stack.extend(n.parents)
        return [seen[k] for k in sorted(seen)]
