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

__all__ = ["submit", "submit_topology"]

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
    # the store is checked (and connected once) before Spark starts: a typo fails in about a second
    master = master_for(rc, spark)
    provider = None
    if stateful or (rc.deadletter in ("state",) or (rc.deadletter or "").startswith("namespace:")):
        provider = resolve_provider(name, conf, master)
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
            name, conf, provider, participants, {c.id: c.parallelism for c in stateful}, rc, master
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
