"""``TopologyBuilder``: wire spouts and bolts with groupings; validated when the topology is created."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from weir._util import positive_int
from weir.errors import TopologyError
from weir.topology._emits import literal_emit_streams
from weir.topology.components import (
    BasicBolt,
    Bolt,
    Component,
    OutputFieldsDeclarer,
    Spout,
)
from weir.topology.shape import execute_shape
from weir.topology.tuple import DEFAULT_STREAM, Fields

__all__ = [
    "BoltDeclarer",
    "ComponentSpec",
    "Grouping",
    "GroupingKind",
    "Subscription",
    "Topology",
    "TopologyBuilder",
]


class GroupingKind(enum.Enum):
    """How tuples of a stream are spread over the tasks of the consumer."""

    SHUFFLE = "shuffle"
    FIELDS = "fields"
    GLOBAL = "global"
    ALL = "all"
    NONE = "none"
    LOCAL_OR_SHUFFLE = "local_or_shuffle"
    DIRECT = "direct"


@dataclass(frozen=True)
class Grouping:
    """A grouping, with its fields for ``FIELDS``."""

    kind: GroupingKind
    fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class Subscription:
    """A bolt's input: ``stream`` of ``source`` with ``grouping``."""

    source: str
    stream: str
    grouping: Grouping


@dataclass
class ComponentSpec:
    """A component as placed in the topology."""

    id: str
    obj: Component
    parallelism: int
    inputs: list[Subscription] = field(default_factory=list)
    outputs: dict[str, Fields] = field(default_factory=dict)
    direct_streams: set[str] = field(default_factory=set)
    conf: dict[str, Any] = field(default_factory=dict)

    @property
    def is_spout(self) -> bool:
        """Whether this is a spout."""
        return isinstance(self.obj, Spout)

    @property
    def is_stateful(self) -> bool:
        """Whether this component has checkpointed state."""
        return isinstance(self.obj, Component) and self.obj.is_stateful()


class BoltDeclarer:
    """Returned by ``set_bolt``: declares the bolt's inputs (groupings) and configuration."""

    def __init__(self, spec: ComponentSpec) -> None:
        self._spec = spec

    def _add(self, source: str, stream: str, grouping: Grouping) -> BoltDeclarer:
        if not isinstance(source, str) or not source:
            msg = f"bolt {self._spec.id!r}: grouping source must be a component id, got {source!r}"
            raise TopologyError(msg, component=self._spec.id)
        self._spec.inputs.append(Subscription(source, stream, grouping))
        return self

    def shuffle_grouping(self, component_id: str, stream_id: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Tuples go round-robin over the tasks."""
        return self._add(component_id, stream_id, Grouping(GroupingKind.SHUFFLE))

    def fields_grouping(self, component_id: str, *args: Any) -> BoltDeclarer:
        """Tuples with equal values of ``fields`` go to the same task (stable hash, every process alike).

        Call as ``fields_grouping("split", Fields("word"))`` or ``fields_grouping("split", "stream", Fields("word"))``.
        """
        if len(args) == 1:
            stream, flds = DEFAULT_STREAM, args[0]
        elif len(args) == 2:
            stream, flds = args
        else:
            msg = f"bolt {self._spec.id!r}: fields_grouping(component, [stream,] fields)"
            raise TopologyError(msg, component=self._spec.id)
        names = tuple(flds) if not isinstance(flds, str) else (flds,)
        if not names:
            msg = f"bolt {self._spec.id!r}: fields_grouping on {component_id!r} needs at least one field"
            raise TopologyError(msg, component=self._spec.id)
        return self._add(component_id, stream, Grouping(GroupingKind.FIELDS, names))

    def global_grouping(self, component_id: str, stream_id: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Every tuple goes to the task with the lowest index (task 0)."""
        return self._add(component_id, stream_id, Grouping(GroupingKind.GLOBAL))

    def all_grouping(self, component_id: str, stream_id: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Every tuple goes to every task."""
        return self._add(component_id, stream_id, Grouping(GroupingKind.ALL))

    def none_grouping(self, component_id: str, stream_id: str = DEFAULT_STREAM) -> BoltDeclarer:
        """No preference: same as shuffle."""
        return self._add(component_id, stream_id, Grouping(GroupingKind.NONE))

    def local_or_shuffle_grouping(self, component_id: str, stream_id: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Keep tuples in the producing partition when the parallelisms allow, else shuffle."""
        return self._add(component_id, stream_id, Grouping(GroupingKind.LOCAL_OR_SHUFFLE))

    def direct_grouping(self, component_id: str, stream_id: str = DEFAULT_STREAM) -> BoltDeclarer:
        """The producer picks the task with ``emit_direct``."""
        return self._add(component_id, stream_id, Grouping(GroupingKind.DIRECT))

    def add_configuration(self, key: str, value: Any) -> BoltDeclarer:
        """Per-component configuration."""
        self._spec.conf[key] = value
        return self

    def set_num_tasks(self, n: int) -> BoltDeclarer:
        """Tasks = parallelism in weir (one Spark partition per task)."""
        self._spec.parallelism = _check_parallelism(self._spec.id, n)
        return self


def _check_parallelism(cid: str, n: Any) -> int:
    return positive_int(n, f"component {cid!r}: parallelism", error=lambda msg: TopologyError(msg, component=cid))


@dataclass
class Topology:
    """A validated topology (Storm's ``StormTopology``): components in topological order."""

    components: dict[str, ComponentSpec]
    order: list[str]
    regions: list[tuple[str, ...]] = field(default_factory=list)
    #: options of each region in ``regions`` (drain_timeout, reset_timeout, ...), checked at submit
    region_options: list[dict[str, Any]] = field(default_factory=list)

    @property
    def spouts(self) -> list[ComponentSpec]:
        """The spouts."""
        return [c for c in self.components.values() if c.is_spout]

    @property
    def bolts(self) -> list[ComponentSpec]:
        """The bolts, in topological order."""
        return [self.components[c] for c in self.order if not self.components[c].is_spout]

    @property
    def stateful(self) -> list[ComponentSpec]:
        """Components with checkpointed state."""
        return [self.components[c] for c in self.order if self.components[c].is_stateful]

    def consumers(self, cid: str) -> list[tuple[ComponentSpec, Subscription]]:
        """Components subscribed to ``cid`` with their subscription."""
        out = []
        for c in self.components.values():
            for sub in c.inputs:
                if sub.source == cid:
                    out.append((c, sub))
        return out


class TopologyBuilder:
    """Build a topology: ``set_spout``, ``set_bolt`` (+ groupings), ``create_topology``."""

    def __init__(self) -> None:
        self._components: dict[str, ComponentSpec] = {}
        self._regions: list[tuple[str, ...]] = []
        self._region_options: list[dict[str, Any]] = []

    def _add(self, cid: str, obj: Component, parallelism: int) -> ComponentSpec:
        if not isinstance(cid, str) or not cid or cid.startswith("$") or "/" in cid:
            msg = f"component id {cid!r} must be a non-empty string, not starting with '$' and without '/'"
            raise TopologyError(msg, component=str(cid))
        if cid in self._components:
            msg = f"component id {cid!r} is used twice"
            raise TopologyError(msg, component=cid)
        spec = ComponentSpec(cid, obj, _check_parallelism(cid, parallelism))
        self._components[cid] = spec
        return spec

    def set_spout(self, cid: str, spout: Spout, parallelism_hint: int = 1) -> ComponentSpec:
        """Add a spout (a streaming source)."""
        if not isinstance(spout, Spout):
            msg = f"set_spout({cid!r}): {type(spout).__name__} is not a weir Spout (see weir.sources)"
            raise TopologyError(msg, component=cid)
        return self._add(cid, spout, parallelism_hint)

    def set_bolt(self, cid: str, bolt: Component, parallelism_hint: int = 1) -> BoltDeclarer:
        """Add a bolt (``Bolt``, ``BasicBolt``, ``StatefulBolt`` or a Streams ``Operator``)."""
        if not isinstance(bolt, Component) or not bolt.is_bolt():
            msg = f"set_bolt({cid!r}): {type(bolt).__name__} is not a Bolt, BasicBolt, StatefulBolt or Operator"
            raise TopologyError(msg, component=cid)
        return BoltDeclarer(self._add(cid, bolt, parallelism_hint))

    def consistent_region(self, *component_ids: str, **options: Any) -> TopologyBuilder:
        """Place components in one consistent region (IBM Streams); the default is the whole topology.

        ``options`` are the region's ``drain_timeout`` and ``reset_timeout`` (seconds, default 180)
        and ``max_consecutive_reset_attempts`` (default 5); see ``docs/streams-handlers.md``.
        """
        self._regions.append(tuple(component_ids))
        self._region_options.append(dict(options))
        return self

    def create_topology(self) -> Topology:
        """Validate the wiring and return the topology."""
        comps = self._components
        if not any(c.is_spout for c in comps.values()):
            msg = "a topology needs at least one spout"
            raise TopologyError(msg)
        for spec in comps.values():
            decl = OutputFieldsDeclarer()
            try:
                spec.obj.declare_output_fields(decl)
            except Exception as exc:
                msg = f"component {spec.id!r}: declare_output_fields failed: {exc}"
                raise TopologyError(msg, component=spec.id) from exc
            spec.outputs = dict(decl.streams)
            spec.direct_streams = set(decl.direct)
            _add_late_stream(spec)
            if spec.is_spout and not spec.outputs:
                msg = f"spout {spec.id!r} declares no output fields"
                raise TopologyError(msg, component=spec.id)
        for spec in comps.values():
            if spec.is_spout:
                continue
            if not spec.inputs:
                msg = f"bolt {spec.id!r} has no inputs; subscribe it with a grouping, e.g. .shuffle_grouping('spout')"
                raise TopologyError(msg, component=spec.id)
            for sub in spec.inputs:
                self._check_subscription(spec, sub)
            _check_bolt(spec, {(s.source, s.stream): comps[s.source].outputs[s.stream] for s in spec.inputs})
        for region in self._regions:
            for cid in region:
                if cid not in comps:
                    msg = f"consistent_region names unknown component {cid!r}; known: {sorted(comps)}"
                    raise TopologyError(msg, component=cid)
        return Topology(dict(comps), self._toposort(), list(self._regions), list(self._region_options))

    def _check_subscription(self, spec: ComponentSpec, sub: Subscription) -> None:
        comps = self._components
        if sub.source not in comps:
            msg = (
                f"bolt {spec.id!r} subscribes to unknown component {sub.source!r}; "
                f"known components: {', '.join(sorted(comps))}"
            )
            raise TopologyError(msg, component=spec.id)
        src = comps[sub.source]
        if sub.stream not in src.outputs:
            msg = (
                f"bolt {spec.id!r} subscribes to stream {sub.stream!r} of {sub.source!r}, which declares "
                f"only {sorted(src.outputs) or 'no streams'}"
            )
            raise TopologyError(msg, component=spec.id)
        fields = src.outputs[sub.stream]
        if sub.grouping.kind is GroupingKind.FIELDS:
            missing = [f for f in sub.grouping.fields if f not in fields]
            if missing:
                msg = (
                    f"bolt {spec.id!r}: fields grouping on {missing} of {sub.source!r} stream "
                    f"{sub.stream!r}, whose fields are {fields.to_list()}"
                )
                raise TopologyError(msg, component=spec.id)
        if sub.grouping.kind is GroupingKind.DIRECT and sub.stream not in src.direct_streams:
            msg = (
                f"bolt {spec.id!r}: direct grouping on stream {sub.stream!r} of {sub.source!r}, which is not "
                "declared direct (declare_stream(..., direct=True))"
            )
            raise TopologyError(msg, component=spec.id)

    def _toposort(self) -> list[str]:
        comps = self._components
        deps = {cid: {s.source for s in spec.inputs} for cid, spec in comps.items()}
        order: list[str] = []
        state: dict[str, int] = {}

        def visit(cid: str, path: list[str]) -> None:
            if state.get(cid) == 2:
                return
            if state.get(cid) == 1:
                cycle = " -> ".join([*path[path.index(cid) :], cid])
                msg = (
                    f"the topology has a cycle ({cycle}); weir runs each micro-batch as a DAG, so "
                    "break the cycle (e.g. feed back through an external store or a source)"
                )
                raise TopologyError(msg, component=cid)
            state[cid] = 1
            for d in sorted(deps[cid]):
                visit(d, [*path, cid])
            state[cid] = 2
            order.append(cid)

        for cid in comps:
            visit(cid, [])
        return order

    def get_components(self) -> Mapping[str, ComponentSpec]:
        """Components added so far."""
        return dict(self._components)


def _add_late_stream(spec: ComponentSpec) -> None:
    """A windowed bolt's late-tuple stream, declared by the framework as in Storm (field ``late_tuple``)."""
    from weir.topology.windowing import LATE_TUPLE_FIELD, WindowedBolt

    if not isinstance(spec.obj, WindowedBolt):
        return
    late = spec.obj.window_config.late_stream
    if late is None:
        return
    declared = spec.outputs.get(late)
    if declared is None:
        spec.outputs[late] = Fields(LATE_TUPLE_FIELD)
    elif len(declared) != 1:
        msg = (
            f"windowed bolt {spec.id!r}: late-tuple stream {late!r} is declared with fields "
            f"{declared.to_list()}; it carries one value, the late Tuple (leave it undeclared)"
        )
        raise TopologyError(msg, component=spec.id)


def _check_bolt(spec: ComponentSpec, inputs: dict[tuple[str, str], Fields]) -> None:
    """Submit-time checks of a bolt: an ``execute`` weir can call, a window weir can run."""
    from weir.topology.windowing import WindowedBolt

    if not isinstance(spec.obj, (Bolt, BasicBolt)):
        return  # a Streams operator (process(), run by its own task loop)
    execute_shape(spec.obj, spec.id)
    for stream, method, line in literal_emit_streams(type(spec.obj)):
        if stream not in spec.outputs:
            declared = ", ".join(sorted(spec.outputs)) or "none"
            msg = (
                f"bolt {spec.id!r}: {type(spec.obj).__qualname__}.{method} (line {line}) emits on stream {stream!r}, "
                f"which its declare_output_fields does not declare (declared: {declared}); declare it with "
                f"declarer.declare_stream({stream!r}, Fields(...)) or fix the stream id"
            )
            raise TopologyError(msg, component=spec.id)
    if isinstance(spec.obj, WindowedBolt):
        spec.obj.window_config.validate(spec.id, inputs)


def field_indices(fields: Fields, names: Sequence[str]) -> list[int]:
    """Positions of ``names`` in ``fields``."""
    return [fields.field_index(n) for n in names]
