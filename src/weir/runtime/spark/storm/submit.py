"""The Storm dialect: a ``TopologyBuilder`` topology checked at submit time and run as one RDD job per batch."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from weir.checkpoint.coordinator import Participants
from weir.checkpoint.rescale import ComponentRoute, Rescaler, Route, hash_route
from weir.errors import ConfigError, TopologyError
from weir.runtime.spark.config import RuntimeConfig
from weir.runtime.spark.deadletter import make_sink
from weir.runtime.spark.dialect import BatchRunner, Dialect, Prepared, register_dialect
from weir.runtime.spark.executor import TaskSpec
from weir.runtime.spark.runner import master_for, picklable_or_raise, resolve_provider, ship_user_modules, spark_for
from weir.runtime.spark.session import is_connect
from weir.runtime.spark.spoutlog import SpoutDriver, SpoutOptions, check_storm_spouts
from weir.runtime.spark.storm.batch import BatchJob
from weir.runtime.spark.storm.connect import connect_refusal
from weir.runtime.spark.storm.participants import CompositeParticipants, StatefulParticipants
from weir.runtime.spark.storm.ticks import tick_plan
from weir.runtime.spark.streams.operators import StreamsParticipants
from weir.state.factory import KeyValueStateProvider
from weir.state.serializers import JsonSerializer, Serializer, serializer_for
from weir.topology.builder import Topology
from weir.topology.components import Bolt, Spout, StatefulBolt
from weir.topology.windowing import WindowedBolt

__all__ = ["StormDialect", "StormPlan", "submit_topology", "topology_shape"]

log = logging.getLogger("weir.runtime")


def topology_shape(topology: Topology, namespaces: list[str]) -> dict[str, Any]:
    """The graph of ``topology`` as JSON-ready data: components, groupings, parallelism, stateful ones.

    Stored beside the coordinator record (``__topology``) so ``weir ui`` can draw it from the store.
    """
    comps = []
    for cid in topology.order:
        c = topology.components[cid]
        comps.append(
            {
                "id": cid,
                "kind": "spout" if c.is_spout else "bolt",
                "class": type(c.obj).__name__,
                "parallelism": c.parallelism,
                "stateful": c.is_stateful,
                "inputs": [
                    {
                        "source": sub.source,
                        "stream": sub.stream,
                        "grouping": sub.grouping.kind.value,
                        "fields": list(sub.grouping.fields),
                    }
                    for sub in c.inputs
                ],
                "outputs": {stream: list(f) for stream, f in c.outputs.items()},
            }
        )
    return {"dialect": "storm", "components": comps, "namespaces": list(namespaces)}


def _check_stored_windows(name: str, cid: str, bolt: WindowedBolt[Any], parallelism: int, provider: Any) -> None:
    """Refuse, at submit, a windowed bolt whose stored windows were written with other window settings."""
    from weir.runtime.spark.storm.windowed import open_window_state
    from weir.topology.window_manager import check_layout, window_layout, window_namespace

    layout = window_layout(bolt.window_config)
    for task in range(parallelism):
        ns = window_namespace(f"{name}-{cid}-{task}")
        meta = open_window_state(provider, ns).get("meta")
        try:
            check_layout(meta if isinstance(meta, dict) else {}, layout, f"topology {name!r}, windowed bolt {cid!r}")
        except TopologyError as exc:
            raise TopologyError(str(exc), topology=name, component=cid) from None


def submit_topology(
    name: str, conf: Mapping[str, Any], topology: Topology, rc: RuntimeConfig, spark: Any = None
) -> StormPlan:
    """Validate ``topology`` with ``conf`` and prepare its batch job (the query is not started).

    Everything that can be checked before a worker runs is checked here: configuration keys, the
    state provider (connected once), local-only stores on a cluster master, picklability of every
    component, and a stateful parallelism that differs from what the store holds.
    """
    if rc.max_task_parallelism is not None:
        for c in topology.components.values():
            if c.parallelism > rc.max_task_parallelism:
                log.warning(
                    "component %s: parallelism %d capped to topology.max.task.parallelism=%d",
                    c.id,
                    c.parallelism,
                    rc.max_task_parallelism,
                )
                c.parallelism = rc.max_task_parallelism
    ship_user_modules([c.obj for c in topology.components.values()])
    for c in topology.components.values():
        picklable_or_raise(name, c.id, c.obj)
    stateful = topology.stateful
    storm_spouts = check_storm_spouts(name, topology)
    spout_options = SpoutOptions.from_conf(conf, rc.interval_ms, rc.message_timeout_secs)
    for spout in (s.obj for s in topology.spouts if isinstance(s.obj, Spout)):
        spout.validate()  # submit-time checks of the sources (brokers reachable, topics exist)
    for c in topology.components.values():
        if isinstance(c.obj, Bolt):
            c.obj.check_submit(conf)  # submit-time checks of the sinks (a broker's transaction limits)
    # the store is checked (and connected once) before Spark starts: a typo fails in about a second
    master = master_for(rc, spark)
    provider = None
    if stateful or (rc.deadletter in ("state",) or (rc.deadletter or "").startswith("namespace:")):
        provider = resolve_provider(name, conf, master, rc.provider)
    windowed = [c.id for c in stateful if isinstance(c.obj, WindowedBolt)]
    if windowed and not isinstance(provider, KeyValueStateProvider):
        msg = (
            f"topology {name!r}: windowed bolt(s) {', '.join(map(repr, windowed))} keep their windows in a weir "
            f"key-value store, but topology.state.provider is the custom {type(provider).__name__}; use "
            "sqlite, redis or postgres"
        )
        raise TopologyError(msg, topology=name, component=windowed[0])
    for c in stateful:
        if isinstance(c.obj, WindowedBolt):
            _check_stored_windows(name, c.id, c.obj, c.parallelism, provider)
    _check_ttl(name, conf, topology, provider)
    spark_session, master = spark_for(rc, spark)
    tasks = {c.id: c.parallelism for c in topology.components.values()}
    specs: dict[str, TaskSpec] = {}
    for cid in topology.order:
        c = topology.components[cid]
        input_fields = {(s.source, s.stream): topology.components[s.source].outputs[s.stream] for s in c.inputs}
        specs[cid] = TaskSpec(
            topology=name,
            component_id=cid,
            component=c.obj,
            parallelism=c.parallelism,
            outputs=dict(c.outputs),
            input_fields=input_fields,
            conf={**dict(conf), **c.conf},
            component_tasks=tasks,
            provider=provider if c.is_stateful else None,
            deadletter=rc.deadletter is not None,
            stateful=c.is_stateful,
            consumed_streams=frozenset(sub.stream for _, sub in topology.consumers(cid)),
            acking=rc.acking,
            claimed=c.is_stateful and isinstance(c.obj, StatefulBolt) and isinstance(provider, KeyValueStateProvider),
            ticks=tick_plan(
                name, cid, c.obj, conf, {**(c.obj.get_component_configuration() or {}), **c.conf}, rc.interval_ms
            ),
        )
    sink = make_sink(rc.deadletter, name, provider) if rc.deadletter else None
    driver = None
    if storm_spouts:
        if provider is not None and not isinstance(provider, KeyValueStateProvider):
            msg = (
                f"topology {name!r}: Storm spout(s) {', '.join(map(repr, storm_spouts))} keep their spout log in a "
                f"weir key-value store, but topology.state.provider is the custom {type(provider).__name__}; use "
                "sqlite, redis or postgres"
            )
            raise TopologyError(msg, topology=name, component=storm_spouts[0])
        backend = provider.backend if isinstance(provider, KeyValueStateProvider) else None
        driver = SpoutDriver(name, conf, topology, backend, spout_options)
    job = BatchJob(topology, specs, on_dead_letters=sink.write if sink else None, spout_driver=driver)
    job._connect = is_connect(spark_session)
    return StormPlan(name, conf, rc, spark_session, master, provider, topology=topology, specs=specs, job=job)


@dataclass
class StormPlan(Prepared):
    """A Storm topology checked at submit time: its task specs and batch job."""

    topology: Topology | None = None
    specs: dict[str, TaskSpec] = field(default_factory=dict)
    job: BatchJob | None = None


class StormDialect(Dialect):
    """Storm's ``TopologyBuilder`` topologies (Streams operators included) on the engine."""

    name = "storm"

    def accepts(self, topology: object) -> bool:
        """A topology from ``TopologyBuilder.create_topology()``."""
        return isinstance(topology, Topology)

    def prepare(self, name: str, conf: Mapping[str, Any], topology: Any, rc: RuntimeConfig, spark: Any) -> StormPlan:
        """Validate ``topology`` with ``conf`` and build its batch job (see :func:`submit_topology`)."""
        return submit_topology(name, conf, topology, rc, spark)

    def connect_refusal(self, name: str, topology: Any, rc: RuntimeConfig) -> str | None:
        """Storm runs over Spark Connect (DataFrame stages, see :mod:`.connect`) unless a component cannot.

        As for every dialect there, the coordinator stays in this process (the server's
        ``foreachBatch`` is relayed here: :mod:`weir.runtime.spark.connect`), so the server must be on
        this machine; ``weir.metrics.port`` serves from this process too (Spark's progress events reach
        it through a client-side listener).
        """
        from weir.runtime.spark.connect import check_reachable

        if rc.remote is not None:
            check_reachable(name, rc.remote)
        return connect_refusal(topology) if isinstance(topology, Topology) else None

    def spouts(self, plan: Prepared) -> list[tuple[str, Any]]:
        """The topology's spouts."""
        assert isinstance(plan, StormPlan) and plan.topology is not None
        return [(s.id, s.obj) for s in plan.topology.spouts]

    def batch_runner(self, plan: Prepared) -> BatchRunner:
        """The RDD job of a batch."""
        assert isinstance(plan, StormPlan) and plan.job is not None
        return plan.job

    def participants(self, plan: Prepared) -> Participants | None:
        """Stateful bolts, then Streams operators; None for a topology without state."""
        assert isinstance(plan, StormPlan) and plan.topology is not None
        stateful = plan.topology.stateful
        if not stateful:
            return None
        provider = plan.provider
        assert provider is not None
        parallel = isinstance(provider, KeyValueStateProvider) and provider.config.provider in (
            "redis",
            "postgres",
        )
        groups: list[Participants] = []
        bolts = [plan.specs[c.id] for c in stateful if isinstance(c.obj, StatefulBolt)]
        if bolts:
            groups.append(StatefulParticipants(bolts, provider, parallel=parallel))
        operators = [plan.specs[c.id] for c in stateful if not isinstance(c.obj, StatefulBolt)]
        if operators:
            groups.append(StreamsParticipants(operators, provider, plan.rc, plan.topology))
        return CompositeParticipants(groups)

    def parallelism(self, plan: Prepared) -> Mapping[str, int]:
        """The parallelism of every stateful component."""
        assert isinstance(plan, StormPlan) and plan.topology is not None
        return {c.id: c.parallelism for c in plan.topology.stateful}

    def shape(self, plan: Prepared, namespaces: list[str]) -> Mapping[str, Any] | None:
        """Components, groupings and stateful namespaces (see :func:`topology_shape`)."""
        assert isinstance(plan, StormPlan) and plan.topology is not None
        return topology_shape(plan.topology, namespaces)

    def rescaler(self, plan: Prepared) -> Rescaler | None:
        """Re-partitions stateful bolts by their fields grouping (or ``rescale_state``); see :func:`rescale_routes`."""
        assert isinstance(plan, StormPlan) and plan.topology is not None
        routes = rescale_routes(plan.topology, plan.provider)
        for comp, route in routes.items():
            spec = plan.specs.get(comp)
            if route.route is not None and spec is not None and isinstance(spec.component, StatefulBolt):
                routes[comp] = replace(route, resolve=_resolve_hook(spec, plan.provider))
        return Rescaler(plan.name, routes, enabled=plan.rc.rescale == "auto")


def _resolve_hook(spec: TaskSpec, provider: Any) -> Callable[[int, int, int, bool], None]:
    """A rescale's step 1 for one old task: the bolt's ``pre_commit(txid)`` or ``pre_rollback()``.

    It runs on a fresh instance prepared with the task's context in the *old* layout, as recovery's
    commit would.
    """

    def resolve(task: int, old: int, txid: int, commit: bool) -> None:
        before = replace(spec, parallelism=old, component_tasks={**spec.component_tasks, spec.component_id: old})
        parts = StatefulParticipants([before], provider, parallel=False)
        if commit:
            inherited = type(before.component).pre_commit is StatefulBolt.pre_commit
            parts.run_hook(before, task, inherited, lambda bolt: bolt.pre_commit(txid))
        else:
            inherited = type(before.component).pre_rollback is StatefulBolt.pre_rollback
            parts.run_hook(before, task, inherited, lambda bolt: bolt.pre_rollback())

    return resolve


def rescale_routes(topology: Topology, provider: Any) -> dict[str, ComponentRoute]:
    """How each stateful component's keys move when its parallelism changes, or why they cannot.

    A :class:`StatefulBolt` whose every input is a fields grouping routes a key by the grouping's
    hash; one that overrides ``rescale_state`` routes by that hook. An event-time windowed bolt fed
    by fields groupings moves its stored window tuples with their keys too (:func:`_window_route`);
    count and processing-time windows and Streams operators are refused.
    """
    routes: dict[str, ComponentRoute] = {}
    for c in topology.stateful:
        bolt = c.obj
        if isinstance(bolt, WindowedBolt):
            routes[c.id] = _window_route(topology, c, _key_serializer(provider))
            continue
        if not isinstance(bolt, StatefulBolt):
            why = (
                "it is a Streams operator, whose checkpoints are opaque byte streams written by its state "
                "handlers; weir cannot split them by key"
            )
            routes[c.id] = ComponentRoute(c.id, refusal=why)
            continue
        key_ser = _key_serializer(provider)
        if type(bolt).rescale_state is not StatefulBolt.rescale_state:
            routes[c.id] = ComponentRoute(c.id, route=_hook_route(bolt, key_ser))
            continue
        groupings = {sub.grouping.kind.value for sub in c.inputs}
        if groupings != {"fields"}:
            why = (
                f"its input grouping(s) {', '.join(sorted(groupings))} do not say which task a key belongs to; "
                "override StatefulBolt.rescale_state(key, parallelism) to say it"
            )
            routes[c.id] = ComponentRoute(c.id, refusal=why)
            continue
        routes[c.id] = ComponentRoute(c.id, route=hash_route(key_ser))
    return routes


def _window_route(topology: Topology, c: Any, key_ser: Serializer) -> ComponentRoute:
    """An event-time windowed bolt fed by fields groupings moves its stored tuples with their keys.

    Count windows hold a task's last N tuples whatever their keys, and processing-time windows
    depend on when a tuple reached its task's batch (the task's clock is not stored): neither has a
    per-key meaning that a re-partition could keep, so both are refused.
    """
    cfg = c.obj.window_config
    if cfg.by_count:
        why = (
            "it is a count-windowed bolt: a count window holds the last N tuples its task received, whatever "
            "their keys, so moving keys to other tasks changes what every window holds; weir does not "
            "re-partition count windows"
        )
        return ComponentRoute(c.id, refusal=why)
    if not cfg.event_time:
        why = (
            "it is a processing-time windowed bolt: which windows a key's tuples already fired in depends on "
            "its task's clock, which is not stored; only event-time windows (with_timestamp_field) are "
            "re-partitioned"
        )
        return ComponentRoute(c.id, refusal=why)
    groupings = {sub.grouping.kind.value for sub in c.inputs}
    if groupings != {"fields"}:
        why = (
            f"its input grouping(s) {', '.join(sorted(groupings))} do not say which task a window tuple belongs "
            "to; only a windowed bolt fed by fields groupings is re-partitioned"
        )
        return ComponentRoute(c.id, refusal=why)
    index: dict[tuple[str, str], list[int]] = {}
    for sub in c.inputs:
        src_fields = topology.components[sub.source].outputs[sub.stream]
        index[(sub.source, sub.stream)] = [src_fields.field_index(f) for f in sub.grouping.fields]

    def window_key(ev: list[Any]) -> Any:
        idx, vals = index[(ev[1], ev[2])], ev[5]
        return vals[idx[0]] if len(idx) == 1 else tuple(vals[i] for i in idx)

    return ComponentRoute(c.id, route=hash_route(key_ser), window_key=window_key)


def _key_serializer(provider: Any) -> Serializer:
    """The key serializer of the topology's state (JSON unless configured otherwise)."""
    if isinstance(provider, KeyValueStateProvider):
        return serializer_for(
            provider.config.options.get("keySerializerClass") or provider.config.key_class,
            what="keySerializerClass",
        )
    return JsonSerializer()


def _hook_route(bolt: StatefulBolt[Any], key_ser: Serializer) -> Callable[[int], Route]:
    """Routing by the bolt's own ``rescale_state(key, parallelism)``."""

    def for_parallelism(m: int) -> Route:
        def route(skey: bytes) -> int:
            task = bolt.rescale_state(key_ser.deserialize(skey), m)
            if not isinstance(task, int) or not 0 <= task < m:
                msg = f"{type(bolt).__name__}.rescale_state returned {task!r} for a key; expected a task 0..{m - 1}"
                raise ConfigError(msg)
            return task

        return route

    return for_parallelism


register_dialect(StormDialect())


def _check_ttl(name: str, conf: Mapping[str, Any], topology: Topology, provider: Any) -> None:
    """``weir.state.ttl.ms`` (topology-wide or per component), checked at submit."""
    from weir.state.ttl import TTL_CONF_KEY, ttl_ms_of

    for cid in topology.order:
        c = topology.components[cid]
        merged = {**dict(conf), **c.conf}
        if merged.get(TTL_CONF_KEY) is None or (TTL_CONF_KEY not in c.conf and not c.is_stateful):
            continue
        where = f"topology {name!r}, component {cid!r}: {TTL_CONF_KEY}"
        ttl_ms_of(merged[TTL_CONF_KEY], where)
        if not c.is_stateful:
            msg = f"{where} is set but the component keeps no state; set it on a stateful bolt"
            raise TopologyError(msg, topology=name, component=cid)
        if not isinstance(c.obj, (StatefulBolt, WindowedBolt)):
            msg = (
                f"{where} is set, but {cid!r} is a Streams operator, whose checkpoints are byte streams, not keys; "
                "expire entries in its state handler instead"
            )
            raise TopologyError(msg, topology=name, component=cid)
        if not isinstance(provider, KeyValueStateProvider):
            msg = (
                f"{where} needs a weir key-value store (sqlite, redis, postgres, hbase, memory), but "
                f"topology.state.provider is the custom {type(provider).__name__}, which cannot expire keys"
            )
            raise TopologyError(msg, topology=name, component=cid)
