"""``submit``: validate a Storm topology at submit time and return its :class:`TopologyRun`."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from weir.errors import TopologyError
from weir.runtime.spark.batch import BatchJob
from weir.runtime.spark.config import RuntimeConfig
from weir.runtime.spark.deadletter import make_sink
from weir.runtime.spark.participants import CompositeParticipants, StatefulParticipants
from weir.runtime.spark.runner import (
    TopologyRun,
    make_coordinator,
    master_for,
    picklable_or_raise,
    resolve_provider,
    ship_user_modules,
    spark_for,
)
from weir.runtime.spark.task import TaskSpec
from weir.state.factory import KeyValueStateProvider
from weir.topology.builder import Topology
from weir.topology.components import StatefulBolt
from weir.topology.windowing import WindowedBolt

__all__ = ["submit", "submit_topology", "topology_shape"]

log = logging.getLogger("weir.runtime")


def submit(name: str, conf: Mapping[str, Any], topology: Any, spark: Any = None) -> TopologyRun:
    """Submit a Storm topology or a Trident topology; see :func:`submit_topology`."""
    if isinstance(topology, Topology):
        return submit_topology(name, conf, topology, spark)
    build = getattr(topology, "_weir_submit", None)
    if build is not None:
        run: TopologyRun = build(name, conf, spark)
        return run
    msg = (
        f"submit({name!r}): expected a topology from TopologyBuilder.create_topology() or a TridentTopology, "
        f"got {type(topology).__name__}"
    )
    raise TopologyError(msg, topology=name)


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
    from weir.runtime.spark.windowed import open_window_state
    from weir.topology.window_manager import check_layout, window_layout, window_namespace

    layout = window_layout(bolt.window_config)
    for task in range(parallelism):
        ns = window_namespace(f"{name}-{cid}-{task}")
        meta = open_window_state(provider, ns).get("meta")
        try:
            check_layout(meta if isinstance(meta, dict) else {}, layout, f"topology {name!r}, windowed bolt {cid!r}")
        except TopologyError as exc:
            raise TopologyError(str(exc), topology=name, component=cid) from None


def submit_topology(name: str, conf: Mapping[str, Any], topology: Topology, spark: Any = None) -> TopologyRun:
    """Validate ``topology`` with ``conf`` and prepare its streaming query (not started yet).

    Everything that can be checked before a worker runs is checked here: configuration keys, the
    state provider (connected once), local-only stores on a cluster master, picklability of every
    component, and a stateful parallelism that differs from what the store holds.
    """
    rc = RuntimeConfig.from_conf(name, conf)
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
    for spout in (s.obj for s in topology.spouts):
        spout.validate()  # submit-time checks of the sources (brokers reachable, topics exist)
    # the store is checked (and connected once) before Spark starts: a typo fails in about a second
    master = master_for(rc, spark)
    provider = None
    if stateful or (rc.deadletter in ("state",) or (rc.deadletter or "").startswith("namespace:")):
        provider = resolve_provider(name, conf, master)
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
    spark_session, master = spark_for(rc, spark)
    tasks = {c.id: c.parallelism for c in topology.components.values()}
    specs: dict[str, TaskSpec] = {}
    for cid in topology.order:
        c = topology.components[cid]
        input_fields = {
            (s.source, s.stream): topology.components[s.source].outputs[s.stream] for s in c.inputs
        }
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
        )
    sink = make_sink(rc.deadletter, name, provider) if rc.deadletter else None
    job = BatchJob(topology, specs, on_dead_letters=sink.write if sink else None)
    coordinator = None
    namespaces: list[str] = []
    if stateful:
        assert provider is not None
        parallel = isinstance(provider, KeyValueStateProvider) and provider.config.provider in (
            "redis",
            "postgres",
        )
        groups: list[Any] = []
        bolts = [specs[c.id] for c in stateful if isinstance(c.obj, StatefulBolt)]
        if bolts:
            groups.append(StatefulParticipants(bolts, provider, parallel=parallel))
        operators = [specs[c.id] for c in stateful if not isinstance(c.obj, StatefulBolt)]
        if operators:
            from weir.streams.runtime import StreamsParticipants

            groups.append(StreamsParticipants(operators, provider, rc, topology))
        participants = CompositeParticipants(groups)
        namespaces = participants.namespaces()
        coordinator = make_coordinator(
            name,
            conf,
            provider,
            participants,
            {c.id: c.parallelism for c in stateful},
            rc,
            master,
            shape=topology_shape(topology, namespaces),
        )
    spouts = [(s.id, s.obj) for s in topology.spouts]
    return TopologyRun(
        name,
        conf,
        rc,
        spark_session,
        spouts,
        job,
        coordinator,
        provider=provider,
        state_namespaces=namespaces,
    )
