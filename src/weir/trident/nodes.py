"""The logical plan of a Trident topology: one :class:`Node` per stream operation.

The builder API (:mod:`weir.trident.topology`) appends nodes; the batch planner
(:mod:`weir.runtime.spark.trident.planner`) turns them into Spark DataFrame operations once per micro-batch.
A node knows its output field *names* at build time; the Spark types of pass-through fields are
only known per batch (from the spout's DataFrame), the types of new fields come from their
declarations (:mod:`weir.trident.fields`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from weir.trident.fields import FieldSpec

__all__ = ["DRPC_RID", "AggKind", "Node", "agg_kind"]

#: the hidden field every tuple of a DRPC stream carries: the id of the request it answers
DRPC_RID = "_weir_rid"

#: node kinds that start a new partitioning (a parallelism hint stops walking up at them)
BOUNDARY_KINDS = frozenset(
    {"spout", "drpc", "partition", "agg", "merge", "join", "state_query", "persist_agg", "partition_persist"}
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
    drpc : the DRPC function whose stream this node belongs to (``None``: a spout's stream); such a
        node's first field is the hidden request id :data:`DRPC_RID`
    """

    id: int
    kind: str
    parents: tuple[Node, ...]
    names: tuple[str, ...]
    new_fields: tuple[FieldSpec, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    parallelism: int | None = None
    drpc: str | None = None

    @property
    def visible(self) -> tuple[str, ...]:
        """The output fields a user sees (a DRPC stream's request id is hidden)."""
        return tuple(n for n in self.names if n != DRPC_RID)

    def __post_init__(self) -> None:
        if not self.name:
            self.name = f"{self._label()}-{self.id}"

    def _label(self) -> str:
        p = self.params
        if self.kind == "op":
            kind = p.get("op_kind", "op")
            label = "each" if kind == "function" else kind
            op = p.get("op")
            return f"{label}:{type(op).__name__}" if op is not None and not callable_plain(op) else label
        if self.kind == "partition":
            return {"fields": "partition_by", "global": "global"}.get(p.get("how", ""), str(p.get("how")))
        if self.kind == "agg":
            label = "partition_aggregate" if p.get("scope") == "partition" else "aggregate"
            return f"{label}:{type(p.get('agg')).__name__}"
        if self.kind == "persist_agg":
            return f"persistent_aggregate:{type(p.get('agg')).__name__}"
        return self.kind

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


def callable_plain(obj: Any) -> bool:
    """Whether ``obj`` is a plain function or lambda (named by the operation, not its class)."""
    import types

    return isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.MethodType))
