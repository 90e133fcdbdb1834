"""The Trident stream API: :class:`TridentTopology`, :class:`Stream`, :class:`GroupedStream`, :class:`TridentState`.

Build a topology with Storm's operations in Python spelling, then submit it like any topology::

    topology = TridentTopology()
    counts = (
        topology.new_stream("lines", FileSpout("in/"))
        .each(["line"], Split(), ["word"])
        .group_by(["word"])
        .persistent_aggregate(factory, Count(), "count")
    )
    run = weir.submit("wordcount", conf, topology)
    run.process_available()

Every micro-batch of the topology's one Spark query is one Trident batch; its txid comes from
weir's checkpoint coordinator (see :mod:`weir.runtime.spark.trident.runner`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from weir._util import positive_int
from weir.errors import TopologyError
from weir.topology.components import OutputFieldsDeclarer, Spout
from weir.topology.tuple import DEFAULT_STREAM
from weir.trident.fields import FieldSpec, field_names, parse_fields
from weir.trident.guarantee import check
from weir.trident.nodes import BOUNDARY_KINDS, DRPC_RID, Node, agg_kind
from weir.trident.operation import Filter, Function, QueryFunction, StateUpdater
from weir.trident.state.base import StateFactory, StateType

__all__ = ["GroupedStream", "Stream", "TridentState", "TridentTopology"]

_DRPC_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def _positive(n: Any, what: str) -> int:
    return positive_int(n, what, error=TopologyError)


def _check_factory(factory: Any, what: str) -> StateFactory:
    if not callable(getattr(factory, "make_state", None)):
        msg = (
            f"{what}: expected a state factory with make_state(conf, partition_index, num_partitions) "
            f"(a weir.trident.state.StateFactory), got {factory!r}"
        )
        raise TopologyError(msg)
    return factory  # type: ignore[no-any-return]


def _factory_state_type(factory: Any) -> StateType | None:
    st = getattr(factory, "state_type", None)
    if st is None:
        return None
    try:
        return StateType.parse(st)
    except Exception:
        return None


class TridentState:
    """A state a topology writes (``persistent_aggregate``, ``partition_persist``) or reads (``new_static_state``).

    Use it in ``state_query`` and, for a written state, read its updates with :meth:`new_values_stream`.
    """

    def __init__(
        self,
        topology: TridentTopology,
        factory: StateFactory,
        kind: str,
        *,
        node: Node | None = None,
        key_fields: tuple[str, ...] | None = None,
        value_type: Any = None,
    ) -> None:
        self.topology = topology
        self.factory = factory
        #: ``map`` (grouped persistent_aggregate), ``snapshot`` (global), ``partition`` or ``static``
        self.kind = kind
        self.node = node
        self.key_fields = key_fields
        self.value_type = value_type
        #: number of state partitions (``make_state(conf, i, parallelism)``); Storm's default is 1
        self.parallelism = 1
        self.state_id = f"state-{len(topology._states)}"
        topology._states.append(self)

    @property
    def state_type(self) -> StateType | None:
        """The factory's fault-tolerance level, if it declares one."""
        return _factory_state_type(self.factory)

    def parallelism_hint(self, n: int) -> TridentState:
        """Use ``n`` state partitions (keep it fixed for a store that partitions its data)."""
        self.parallelism = _positive(n, "TridentState.parallelism_hint")
        return self

    def name(self, name: str) -> TridentState:
        """Name the state (used in messages and stats)."""
        if not isinstance(name, str) or not name:
            msg = f"a state name must be a non-empty string, got {name!r}"
            raise TopologyError(msg)
        self.state_id = name
        if self.node is not None:
            self.node.name = name
        return self

    def new_values_stream(self) -> Stream:
        """The stream of what each batch changed: ``(key..., new value)`` or the updater's emits."""
        if self.node is None:
            msg = f"state {self.state_id!r} is a static state: it has no new values stream"
            raise TopologyError(msg)
        if not self.node.names:
            msg = (
                f"state {self.state_id!r}: partition_persist declared no output fields, so its new values "
                "stream has no fields; pass output_fields to partition_persist"
            )
            raise TopologyError(msg)
        return Stream(self.topology, self.node)

    def __repr__(self) -> str:
        return f"TridentState({self.state_id}, {self.kind}, {self.factory!r}, parallelism={self.parallelism})"


class Stream:
    """A stream of tuples; every operation returns a new :class:`Stream` (or a state)."""

    def __init__(self, topology: TridentTopology, node: Node) -> None:
        self.topology = topology
        self.node = node

    # ---- introspection -------------------------------------------------------------------
    @property
    def fields(self) -> list[str]:
        """The stream's output field names."""
        return list(self.node.visible)

    def get_output_fields(self) -> list[str]:
        """Storm spelling of :attr:`fields`."""
        return self.fields

    def __repr__(self) -> str:
        return f"Stream({self.node.name}, fields={self.fields})"

    # ---- helpers -------------------------------------------------------------------------
    def _input(self, spec: Any, what: str) -> tuple[str, ...]:
        if spec is None:
            return self.node.visible
        names = field_names(spec, what=what, allow_empty=True)
        for n in names:
            if n not in self.node.visible:
                msg = f"{what}: unknown input field {n!r}; the stream's fields are {list(self.node.visible)}"
                raise TopologyError(msg)
        return tuple(names)

    def _new(self, kind: str, names: tuple[str, ...], **kw: Any) -> Stream:
        node = self.topology._add(kind, (self.node,), names, **kw)
        return Stream(self.topology, node)

    def _append(self, new: tuple[FieldSpec, ...], what: str) -> tuple[str, ...]:
        for f in new:
            if f.name in self.node.names:
                msg = (
                    f"{what}: output field {f.name!r} already exists in the stream {list(self.node.names)}; "
                    "choose another name (or project() it away first)"
                )
                raise TopologyError(msg)
        return self.node.names + tuple(f.name for f in new)

    # ---- naming and partitioning ---------------------------------------------------------
    def name(self, name: str) -> Stream:
        """Name the last operation (used in messages and stats)."""
        if not isinstance(name, str) or not name:
            msg = f"a stream name must be a non-empty string, got {name!r}"
            raise TopologyError(msg)
        self.node.name = name
        return self

    def parallelism_hint(self, n: int) -> Stream:
        """Run the operations since the last repartitioning with ``n`` partitions."""
        n = _positive(n, "parallelism_hint")
        node = self.node
        while node.kind not in BOUNDARY_KINDS and len(node.parents) == 1:
            node = node.parents[0]
        node.parallelism = n
        return self

    def partition_by(self, fields: Any) -> Stream:
        """Send tuples with equal ``fields`` to the same partition (a stable hash)."""
        keys = self._input(fields, "partition_by")
        if not keys:
            msg = "partition_by needs at least one field"
            raise TopologyError(msg)
        return self._new("partition", self.node.names, params={"how": "fields", "fields": keys})

    def shuffle(self) -> Stream:
        """Spread tuples evenly (round robin) over the partitions."""
        return self._new("partition", self.node.names, params={"how": "shuffle"})

    def global_(self) -> Stream:
        """Send every tuple to one partition."""
        return self._new("partition", self.node.names, params={"how": "global"})

    def broadcast(self) -> Stream:
        """Send every tuple to every partition."""
        return self._new("partition", self.node.names, params={"how": "broadcast"})

    # ---- per-tuple operations ------------------------------------------------------------
    def each(self, *args: Any) -> Stream:
        """Apply a function or a filter to every tuple.

        ``each(input_fields, function, output_fields)``, ``each(function, output_fields)``,
        ``each(input_fields, filter)`` or ``each(filter)``.

        A :class:`Function`'s output fields are appended to the input tuple's fields; a
        :class:`Filter` keeps or drops tuples.
        """
        if args and isinstance(args[0], (Function, Filter)):
            args = (None, *args)
        if len(args) == 2 and isinstance(args[1], Filter):
            inp = self._input(args[0], "each")
            return self._new("op", self.node.names, params={"op_kind": "filter", "op": args[1], "input": inp})
        if len(args) == 3 and isinstance(args[1], Function):
            inp = self._input(args[0], "each")
            new = parse_fields(args[2], what=f"each({type(args[1]).__name__}) output fields", allow_empty=True)
            names = self._append(new, f"each({type(args[1]).__name__})")
            return self._new("op", names, new_fields=new, params={"op_kind": "function", "op": args[1], "input": inp})
        msg = (
            "each() takes (input_fields, Function, output_fields), (Function, output_fields), "
            f"(input_fields, Filter) or (Filter); got {args!r:.200}"
        )
        raise TopologyError(msg)

    def filter(self, *args: Any) -> Stream:
        """Keep tuples: ``filter(Filter)``, ``filter(input_fields, Filter)`` or ``filter(callable)``.

        A callable gets the tuple and returns whether to keep it.
        """
        if len(args) == 1:
            inp, flt = None, args[0]
        elif len(args) == 2:
            inp, flt = args
        else:
            msg = f"filter() takes (Filter) or (input_fields, Filter), got {args!r:.200}"
            raise TopologyError(msg)
        if not isinstance(flt, Filter) and not callable(flt):
            msg = f"filter(): expected a Filter or a callable, got {flt!r}"
            raise TopologyError(msg)
        inp_t = self._input(inp, "filter")
        return self._new("op", self.node.names, params={"op_kind": "filter", "op": flt, "input": inp_t})

    def map(self, function: Any, output_fields: Any = None) -> Stream:
        """Replace every tuple by ``function(tuple)`` (Storm's ``map``).

        ``function`` is a callable (or has ``execute(tuple)``) returning the new values: a list or
        tuple, or a bare value for a one-field output. Without ``output_fields`` the stream keeps
        its field names and types.
        """
        return self._map_like("map", function, output_fields)

    def flat_map(self, function: Any, output_fields: Any = None) -> Stream:
        """Replace every tuple by the tuples in ``function(tuple)`` (an iterable of values)."""
        return self._map_like("flat_map", function, output_fields)

    def _map_like(self, kind: str, function: Any, output_fields: Any) -> Stream:
        if not callable(function) and not callable(getattr(function, "execute", None)):
            msg = f"{kind}(): expected a callable or an object with execute(tuple), got {function!r}"
            raise TopologyError(msg)
        if self.node.drpc is not None:
            msg = (
                f"{kind}() on DRPC stream {self.node.drpc!r}: it replaces whole tuples, which would lose the request "
                "each tuple answers; use each() with a Function (its output fields are appended)"
            )
            raise TopologyError(msg)
        new = parse_fields(output_fields, what=f"{kind} output fields") if output_fields is not None else ()
        names = tuple(f.name for f in new) if new else self.node.names
        return self._new(
            "op",
            names,
            new_fields=new,
            params={"op_kind": kind, "op": function, "input": self.node.names, "keep_types": not new},
        )

    def peek(self, action: Callable[[Any], Any]) -> Stream:
        """Call ``action(tuple)`` for every tuple and pass the tuples on unchanged."""
        if not callable(action) and not callable(getattr(action, "accept", None)):
            msg = f"peek(): expected a callable, got {action!r}"
            raise TopologyError(msg)
        return self._new("op", self.node.names, params={"op_kind": "peek", "op": action, "input": self.node.visible})

    def project(self, fields: Any) -> Stream:
        """Keep only ``fields`` (a Spark SQL projection)."""
        keep = self._input(fields, "project")
        if not keep:
            msg = "project() needs at least one field"
            raise TopologyError(msg)
        if self.node.drpc is not None:  # the request id travels on, hidden
            keep = (DRPC_RID, *keep)
        return self._new("project", keep, params={"fields": keep})

    # ---- aggregation ---------------------------------------------------------------------
    def _agg_args(self, args: tuple[Any, ...], what: str) -> tuple[tuple[str, ...], Any, tuple[FieldSpec, ...]]:
        if len(args) == 2:
            inp, agg, out = None, args[0], args[1]
        elif len(args) == 3:
            inp, agg, out = args
        else:
            msg = f"{what}() takes (aggregator, output_fields) or (input_fields, aggregator, output_fields)"
            raise TopologyError(msg)
        if agg_kind(agg) is None:
            msg = (
                f"{what}(): expected a CombinerAggregator, ReducerAggregator or Aggregator "
                f"(e.g. Count(), Sum()), got {agg!r}"
            )
            raise TopologyError(msg)
        return self._input(inp, what), agg, parse_fields(out, what=f"{what} output fields")

    def _agg(self, args: tuple[Any, ...], *, scope: str, group: tuple[str, ...] | None, what: str) -> Stream:
        inp, agg, out = self._agg_args(args, what)
        kind = agg_kind(agg)
        if kind != "aggregator" and len(out) != 1:
            msg = f"{what}({type(agg).__name__}): a combiner or reducer aggregator has one output field, got {len(out)}"
            raise TopologyError(msg)
        keys = group or ()
        for f in out:
            if f.name in keys:
                msg = f"{what}: output field {f.name!r} is also a group_by field"
                raise TopologyError(msg)
        drpc_global = False
        if self.node.drpc is not None:  # on a DRPC stream every request is its own group (as in Storm)
            drpc_global = not keys and scope == "batch"
            keys = group = (DRPC_RID, *keys)
        names = keys + tuple(f.name for f in out)
        return self._new(
            "agg",
            names,
            new_fields=out,
            params={
                "scope": scope,
                "agg": agg,
                "agg_kind": kind,
                "input": inp,
                "group": group,
                "drpc_global": drpc_global,
            },
        )

    def partition_aggregate(self, *args: Any) -> Stream:
        """Aggregate each partition of the batch; the output has only the aggregator's fields."""
        return self._agg(args, scope="partition", group=None, what="partition_aggregate")

    def aggregate(self, *args: Any) -> Stream:
        """Aggregate the whole batch; the output has only the aggregator's fields."""
        return self._agg(args, scope="batch", group=None, what="aggregate")

    def group_by(self, fields: Any) -> GroupedStream:
        """Group the stream by ``fields`` for ``aggregate`` / ``persistent_aggregate``."""
        keys = self._input(fields, "group_by")
        if not keys:
            msg = "group_by needs at least one field"
            raise TopologyError(msg)
        return GroupedStream(self, keys)

    def persistent_aggregate(self, factory: StateFactory, *args: Any, allow_inexact: bool = False) -> TridentState:
        """Aggregate the whole stream into one global value (a ``Snapshottable`` state).

        ``persistent_aggregate(factory, aggregator, output_field)`` or
        ``persistent_aggregate(factory, input_fields, aggregator, output_field)``.
        """
        return _persist_agg(self, None, factory, args, allow_inexact)

    # ---- combining streams ---------------------------------------------------------------
    def merge(self, *others: Stream, output_fields: Any = None) -> Stream:
        """The tuples of this stream and ``others`` (same number of fields; this stream's names)."""
        return self.topology.merge(self, *others, output_fields=output_fields)

    def join(self, other: Stream, fields: Any, other_fields: Any, output_fields: Any) -> Stream:
        """Inner join with ``other`` within each batch; see :meth:`TridentTopology.join`."""
        return self.topology.join(self, fields, other, other_fields, output_fields)

    # ---- state ---------------------------------------------------------------------------
    def state_query(
        self, state: TridentState, input_fields: Any, query_function: QueryFunction[Any, Any], output_fields: Any
    ) -> Stream:
        """Query ``state`` with each tuple's ``input_fields``; the results' fields are appended.

        The stream is partitioned like the state (a stable hash of ``input_fields``) and
        ``batch_retrieve`` runs once per partition.
        """
        if not isinstance(state, TridentState) or state.topology is not self.topology:
            msg = f"state_query(): expected a TridentState of this topology, got {state!r}"
            raise TopologyError(msg)
        if not isinstance(query_function, QueryFunction):
            msg = f"state_query(): expected a QueryFunction (e.g. MapGet()), got {query_function!r}"
            raise TopologyError(msg)
        inp = self._input(input_fields, "state_query")
        what = f"state_query({type(query_function).__name__})"
        out = parse_fields(output_fields, what=f"{what} output fields")
        from weir.trident.operation import MapGet, SnapshotGet

        if isinstance(query_function, (MapGet, SnapshotGet)) and len(out) == 1 and out[0].is_any:
            out = (FieldSpec(out[0].name, state.value_type),)
        names = self._append(out, what)
        return self._new(
            "state_query",
            names,
            new_fields=out,
            params={"state": state, "qf": query_function, "input": inp},
        )

    def partition_persist(
        self,
        factory: StateFactory,
        input_fields: Any,
        updater: StateUpdater[Any],
        output_fields: Any = None,
        *,
        allow_inexact: bool = False,
    ) -> TridentState:
        """Hand each partition's tuples to one ``updater.update_state`` call per batch.

        The stream is partitioned into the state's partitions by its last ``partition_by`` fields
        (a stable hash), or round robin; ``output_fields`` are the fields of what the updater
        emits (the new values stream).
        """
        factory = _check_factory(factory, "partition_persist")
        if not isinstance(updater, StateUpdater):
            msg = f"partition_persist(): expected a StateUpdater, got {updater!r}"
            raise TopologyError(msg)
        inp = self._input(input_fields, "partition_persist")
        out = parse_fields(output_fields, what="partition_persist output fields", allow_empty=True)
        state = TridentState(self.topology, factory, "partition")
        node = self.topology._add(
            "partition_persist",
            (self.node,),
            tuple(f.name for f in out),
            new_fields=out,
            params={"state": state, "updater": updater, "input": inp, "allow_inexact": allow_inexact},
        )
        state.node = node
        return state


class GroupedStream:
    """A stream grouped by key fields (``Stream.group_by``)."""

    def __init__(self, stream: Stream, keys: tuple[str, ...]) -> None:
        self.stream = stream
        self.keys = keys

    @property
    def fields(self) -> list[str]:
        """The underlying stream's fields."""
        return self.stream.fields

    def __repr__(self) -> str:
        return f"GroupedStream({self.stream.node.name}, by={list(self.keys)})"

    def name(self, name: str) -> GroupedStream:
        """Name the last operation."""
        self.stream.name(name)
        return self

    def aggregate(self, *args: Any) -> Stream:
        """Aggregate each group of the batch: output = group fields + the aggregator's fields."""
        return self.stream._agg(args, scope="batch", group=self.keys, what="aggregate")

    def partition_aggregate(self, *args: Any) -> Stream:
        """Aggregate each group within each partition."""
        return self.stream._agg(args, scope="partition", group=self.keys, what="partition_aggregate")

    def persistent_aggregate(self, factory: StateFactory, *args: Any, allow_inexact: bool = False) -> TridentState:
        """Aggregate each group into a map state keyed by the group fields.

        ``persistent_aggregate(factory, aggregator, output_field)`` or
        ``persistent_aggregate(factory, input_fields, aggregator, output_field)``; the aggregator
        is a :class:`CombinerAggregator` (pre-aggregated in Spark) or a :class:`ReducerAggregator`.
        """
        return _persist_agg(self.stream, self.keys, factory, args, allow_inexact)

    def state_query(
        self, state: TridentState, input_fields: Any, query_function: QueryFunction[Any, Any], output_fields: Any
    ) -> Stream:
        """See :meth:`Stream.state_query`."""
        return self.stream.state_query(state, input_fields, query_function, output_fields)

    def to_stream(self) -> Stream:
        """The ungrouped stream."""
        return self.stream


def _persist_agg(
    stream: Stream, group: tuple[str, ...] | None, factory: Any, args: tuple[Any, ...], allow_inexact: bool
) -> TridentState:
    what = "persistent_aggregate"
    factory = _check_factory(factory, what)
    inp, agg, out = stream._agg_args(args, what)
    kind = agg_kind(agg)
    if kind not in ("combiner", "reducer"):
        msg = (
            f"{what}(): needs a CombinerAggregator (Count, Sum, ...) or a ReducerAggregator, got "
            f"{type(agg).__name__}; use aggregate() for a general Aggregator"
        )
        raise TopologyError(msg)
    if len(out) != 1:
        msg = f"{what}(): one output field (the stored value), got {[f.name for f in out]}"
        raise TopologyError(msg)
    keys = group or ()
    if out[0].name in keys:
        msg = f"{what}: output field {out[0].name!r} is also a group_by field"
        raise TopologyError(msg)
    value_type = out[0].dtype
    if value_type is None and kind == "combiner":
        value_type = agg.value_type([None] * len(inp))  # known without the input's types: Count
    state = TridentState(
        stream.topology, factory, "map" if group else "snapshot", key_fields=group, value_type=value_type
    )
    node = stream.topology._add(
        "persist_agg",
        (stream.node,),
        keys + (out[0].name,),
        new_fields=out,
        params={
            "state": state,
            "agg": agg,
            "agg_kind": kind,
            "input": inp,
            "group": group,
            "allow_inexact": allow_inexact,
        },
    )
    state.node = node
    return state


def _refuse_drpc(what: str, streams: Any) -> None:
    for s in streams:
        drpc = getattr(getattr(s, "node", None), "drpc", None)
        if drpc is not None:
            msg = (
                f"{what}(): DRPC stream {drpc!r} cannot be merged or joined (its requests are answered apart); "
                "query a state from it instead"
            )
            raise TopologyError(msg)


class TridentTopology:
    """A Trident topology: streams from spouts, operations, states. Submit with ``weir.submit``."""

    def __init__(self) -> None:
        self._nodes: list[Node] = []
        self._states: list[TridentState] = []
        self._spouts: dict[str, Node] = {}

    def _add(self, kind: str, parents: tuple[Node, ...], names: tuple[str, ...], **kw: Any) -> Node:
        for p in parents:
            if p not in self._nodes:
                msg = f"{kind}: a stream of another TridentTopology was given ({p.name})"
                raise TopologyError(msg)
        if parents:
            drpcs = {p.drpc for p in parents}
            if len(drpcs) > 1:
                named = ", ".join(sorted(repr(d) if d else "a spout's stream" for d in drpcs))
                msg = (
                    f"{kind}: cannot combine the streams of {named}; a DRPC stream answers its own requests, "
                    "so it is never merged or joined with another stream (query a state instead)"
                )
                raise TopologyError(msg)
            kw["drpc"] = drpcs.pop()
            if kw["drpc"] is not None and kind in ("merge", "join"):
                msg = f"{kind}: DRPC stream {kw['drpc']!r} cannot be merged or joined (its requests are answered apart)"
                raise TopologyError(msg)
            if kw["drpc"] is not None and kind in ("persist_agg", "partition_persist"):
                msg = (
                    f"{kind}: DRPC stream {kw['drpc']!r} only reads states (state_query); weir's DRPC does "
                    "not write state from requests"
                )
                raise TopologyError(msg)
        node = Node(id=len(self._nodes), kind=kind, parents=parents, names=names, **kw)
        self._nodes.append(node)
        return node

    @property
    def nodes(self) -> list[Node]:
        """Every operation, in creation order."""
        return list(self._nodes)

    @property
    def states(self) -> list[TridentState]:
        """Every state, in creation order."""
        return list(self._states)

    def spout_nodes(self) -> list[Node]:
        """The ``new_stream`` operations (one per spout), in creation order."""
        return list(self._spouts.values())

    def new_stream(self, name: str, spout: Spout) -> Stream:
        """A stream of ``spout``'s tuples.

        ``spout`` is a weir :class:`~weir.topology.Spout`; its ``guarantee`` says whether it is
        transactional, opaque or non-transactional. A Storm spout (``next_tuple``/``ack``/``fail``)
        must be the topology's only spout: its batches come from weir's spout log, so it is
        transactional (see docs/storm-on-spark.md, "Trident over a Storm spout").
        """
        if not isinstance(name, str) or not name or name.startswith("$"):
            msg = f"new_stream: the stream name must be a non-empty string not starting with '$', got {name!r}"
            raise TopologyError(msg)
        if name in self._spouts:
            msg = f"new_stream: a stream called {name!r} already exists"
            raise TopologyError(msg)
        if not isinstance(spout, Spout):
            msg = f"new_stream({name!r}): expected a weir Spout (weir.sources.FileSpout, ...), got {spout!r}"
            raise TopologyError(msg)
        declarer = OutputFieldsDeclarer()
        spout.declare_output_fields(declarer)
        fields = declarer.streams.get(DEFAULT_STREAM)
        if fields is None or not len(fields):
            msg = f"new_stream({name!r}): spout {type(spout).__name__} declares no fields on its default stream"
            raise TopologyError(msg)
        names = tuple(parse_fields(list(fields), what=f"spout {name!r} fields")[i].name for i in range(len(fields)))
        node = self._add("spout", (), names, params={"spout": spout, "index": len(self._spouts)}, name=name)
        self._spouts[name] = node
        return Stream(self, node)

    def new_drpc_stream(self, name: str) -> Stream:
        """A stream of the requests of DRPC function ``name``: one field, ``args`` (a string).

        ``weir.drpc.Client(url).execute(name, args)`` appends a request to the topology's store;
        each micro-batch takes the pending requests, runs them through this stream (usually a
        ``state_query`` against committed state) and stores the stream's final tuples as the answer.
        As in Storm, every request is its own group: ``aggregate`` and ``partition_aggregate``
        aggregate per request. A DRPC stream is never merged or joined with a spout's stream, and
        writes no state. See docs/trident.md, "DRPC".
        """
        if not isinstance(name, str) or not _DRPC_NAME.fullmatch(name):
            msg = (
                "new_drpc_stream: the function name must be 1-100 letters, digits, '_', '-' or '.' "
                f"(it names the request queue in the store), got {name!r}"
            )
            raise TopologyError(msg)
        if any(n.kind == "drpc" and n.drpc == name for n in self._nodes):
            msg = f"new_drpc_stream: this topology already has a DRPC stream for function {name!r}"
            raise TopologyError(msg)
        node = self._add("drpc", (), (DRPC_RID, "args"), name=f"drpc:{name}", drpc=name)
        return Stream(self, node)

    def drpc_functions(self) -> list[str]:
        """The DRPC functions the topology serves (``new_drpc_stream``), in creation order."""
        return [n.drpc for n in self._nodes if n.kind == "drpc" and n.drpc is not None]

    def new_static_state(self, factory: StateFactory) -> TridentState:
        """A state the topology only queries (``state_query``), e.g. a database of locations."""
        factory = _check_factory(factory, "new_static_state")
        return TridentState(self, factory, "static")

    def merge(self, *streams: Stream, output_fields: Any = None) -> Stream:
        """One stream with the tuples of every stream (same number of fields; the first's names)."""
        if len(streams) < 2:
            msg = "merge() needs at least two streams"
            raise TopologyError(msg)
        _refuse_drpc("merge", streams)
        n = len(streams[0].node.names)
        for s in streams:
            if not isinstance(s, Stream) or s.topology is not self:
                msg = f"merge(): expected streams of this topology, got {s!r}"
                raise TopologyError(msg)
            if len(s.node.names) != n:
                msg = (
                    f"merge(): every stream needs the same number of fields; {streams[0].fields} and "
                    f"{s.fields} differ (project() them first)"
                )
                raise TopologyError(msg)
        names = tuple(field_names(output_fields, what="merge")) if output_fields is not None else streams[0].node.names
        if len(names) != n:
            msg = f"merge(): {len(names)} output fields for streams of {n} fields"
            raise TopologyError(msg)
        node = self._add("merge", tuple(s.node for s in streams), names)
        return Stream(self, node)

    def join(self, stream1: Stream, fields1: Any, stream2: Stream, fields2: Any, output_fields: Any) -> Stream:
        """Inner join of two streams within each batch, on ``fields1`` = ``fields2``.

        The output has the join fields, then ``stream1``'s other fields, then ``stream2``'s other
        fields, renamed to ``output_fields`` (one name each).
        """
        for s in (stream1, stream2):
            if not isinstance(s, Stream) or s.topology is not self:
                msg = f"join(): expected streams of this topology, got {s!r}"
                raise TopologyError(msg)
        _refuse_drpc("join", (stream1, stream2))
        k1 = stream1._input(fields1, "join")
        k2 = stream2._input(fields2, "join")
        if not k1 or len(k1) != len(k2):
            msg = f"join(): the join fields {list(k1)} and {list(k2)} must be non-empty and of equal length"
            raise TopologyError(msg)
        rest1 = [f for f in stream1.node.names if f not in k1]
        rest2 = [f for f in stream2.node.names if f not in k2]
        out = tuple(field_names(output_fields, what="join output fields"))
        want = len(k1) + len(rest1) + len(rest2)
        if len(out) != want:
            msg = (
                f"join(): {len(out)} output fields {list(out)}, but the join yields {want}: the join fields "
                f"{list(k1)}, then {rest1} from the first stream and {rest2} from the second"
            )
            raise TopologyError(msg)
        node = self._add(
            "join",
            (stream1.node, stream2.node),
            out,
            params={"keys1": k1, "keys2": k2, "rest1": tuple(rest1), "rest2": tuple(rest2)},
        )
        return Stream(self, node)

    # ---- checks and submission ------------------------------------------------------------
    def check_guarantees(
        self, conf: Mapping[str, Any] | None = None, *, inexact_allowed: bool | None = None
    ) -> list[str]:
        """Apply seed 004's spout type × state type table; see :func:`weir.trident.guarantee.check`."""
        return check(self, conf or {}, inexact_allowed=inexact_allowed)

    def describe(self) -> str:
        """A readable listing of the plan, one operation per line."""
        lines = []
        for n in self._nodes:
            src = ", ".join(p.name for p in n.parents)
            extra = f" <- {src}" if src else ""
            par = f" x{n.parallelism}" if n.parallelism else ""
            lines.append(f"{n.name}{par}: {list(n.names)}{extra}")
        return "\n".join(lines)
