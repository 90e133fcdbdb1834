"""``weir state rescale``: re-partition a stopped topology's stateful bolt from N to M tasks, offline.

The same step as a submit with a changed parallelism (:mod:`weir.checkpoint.rescale`): the old
task namespaces' rows move to the new ones by the fields grouping's hash, fenced by a new epoch of
the topology's coordinator record, crash-safe (a killed run is finished by the next run or the next
submit). Refused while the topology runs (its coordinator record is in a transaction, or was stored
less than a minute ago); ``--dry-run`` prints the key counts per new task and writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from weir.cli._table import print_table
from weir.errors import ConfigError, StateError

__all__ = ["register"]


def _cmd_rescale(args: argparse.Namespace, open_store: Any) -> int:
    from weir.checkpoint.admin import live_topology
    from weir.checkpoint.coordinator import CheckpointStore
    from weir.checkpoint.history import load_topology_shape
    from weir.checkpoint.rescale import (
        ComponentRoute,
        Rescaler,
        hash_route,
        load_marker,
        plan_counts,
        task_namespace,
    )

    topo, comp, new = args.topology, args.component, args.to
    if new < 1:
        msg = f"--to must be a parallelism of at least 1, got {new}"
        raise ConfigError(msg)
    with open_store(args) as store:
        backend = store.backend
        cstore = CheckpointStore(backend, topo)
        rec = cstore.load()
        if rec is None:
            msg = (
                f"topology {topo!r} has no coordinator record ({cstore.namespace!r}) in {backend.describe()}; "
                "`weir state ls` lists the namespaces of the store"
            )
            raise StateError(msg)
        old = rec.parallelism.get(comp)
        if old is None:
            known = ", ".join(sorted(rec.parallelism)) or "none"
            msg = f"topology {topo!r} has no stateful component {comp!r} (its stateful components: {known})"
            raise ConfigError(msg)
        live = live_topology(backend, cstore.namespace)
        if live is not None:
            msg = (
                f"topology {topo!r} is running ({live.reason}): its tasks write namespaces {topo}-{comp}-* "
                "while they would move. Stop it first (a rescale is refused, not forced, while it runs); "
                "or submit it with the new parallelism, which re-partitions the state at start"
            )
            raise StateError(msg)
        _refuse_unsplittable(backend, topo, comp, old, load_topology_shape(backend, cstore.namespace))
        marker = load_marker(backend, cstore.namespace)
        counts = plan_counts(backend, topo, comp, old, new, hash_route(store.key_serializer)(new))
        rows = [[t, task_namespace(topo, comp, t), counts[t]] for t in range(new)]
        rows.append(["total", "", sum(counts.values())])
        print(f"topology {topo!r}, component {comp!r}: {old} -> {new} tasks")
        print_table(["task", "namespace", "keys"], rows)
        if args.dry_run:
            print("dry run: nothing was written")
            return 0
        if old == new and marker is None:
            print(f"component {comp!r} already has {new} tasks: nothing to do")
            return 0
        epoch = cstore.acquire_epoch()  # fences a driver that would start meanwhile
        routes = {comp: ComponentRoute(comp, route=hash_route(store.key_serializer))}
        Rescaler(topo, routes).run(cstore, epoch, {comp: new})
        print(f"re-partitioned: submit {topo!r} with parallelism {new} for {comp!r}", file=sys.stderr)
    return 0


def _refuse_unsplittable(backend: Any, topo: str, comp: str, old: int, shape: dict[str, Any] | None) -> None:
    """Refuse a windowed bolt, a Streams operator, or a bolt fed by another grouping than fields."""
    from weir.checkpoint.rescale import task_namespace

    for t in range(old):
        ns = task_namespace(topo, comp, t)
        if backend.count(f"{ns}-window"):
            msg = (
                f"topology {topo!r}: {comp!r} is a windowed bolt (namespace {ns}-window holds its stored windows); "
                "the grouping fields its window tuples move by are in the topology, not the store. Submit the "
                "topology with the new parallelism (an event-time windowed bolt fed by fields groupings is "
                "re-partitioned then), keep its parallelism, or use a new topology name"
            )
            raise ConfigError(msg)
        if backend.get(ns, b"head") is not None and backend.get(ns, b"started") is not None:
            msg = (
                f"topology {topo!r}: {comp!r} is a Streams operator (namespace {ns} holds checkpoints); its "
                "checkpoints are opaque and are not split by key. Keep its parallelism, or use a new topology name"
            )
            raise ConfigError(msg)
    for c in (shape or {}).get("components", []):
        if isinstance(c, dict) and c.get("id") == comp:
            kinds = sorted({str(i.get("grouping")) for i in c.get("inputs", []) if isinstance(i, dict)})
            if kinds and kinds != ["fields"]:
                msg = (
                    f"topology {topo!r}: {comp!r} is fed by grouping(s) {', '.join(kinds)}, which do not say which "
                    "task a key belongs to; only a submit can use the bolt's rescale_state hook (override it, then "
                    "submit with the new parallelism)"
                )
                raise ConfigError(msg)


def register(sub: Any, common: argparse.ArgumentParser, open_store: Any) -> None:
    """Add ``weir state rescale``; ``common``: ``weir state``'s store options, ``open_store(args)`` opens it."""
    p = sub.add_parser(
        "rescale",
        parents=[common],
        help="re-partition a stopped topology's stateful bolt to a new parallelism",
        description=(
            "Move the committed state of a stateful bolt's N task namespaces (<topology>-<component>-<task>) "
            "into M, by the hash its fields grouping uses, as one fenced and crash-safe step; prints the key "
            "count of every new task. Refused while the topology runs. Submitting the topology with the new "
            "parallelism does the same (weir.rescale=auto)."
        ),
    )
    p.add_argument("--topology", required=True, metavar="T", help="the topology's name")
    p.add_argument("--component", required=True, metavar="C", help="the stateful bolt's id")
    p.add_argument("--to", required=True, type=int, metavar="M", help="the new parallelism")
    p.add_argument("--dry-run", action="store_true", help="print the key counts per new task; write nothing")
    p.set_defaults(func=lambda args: _cmd_rescale(args, open_store))
