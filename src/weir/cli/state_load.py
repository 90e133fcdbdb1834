"""``weir state load``: seed a stateful bolt of a topology that has not committed yet, from JSON lines.

The same step as ``weir.submit(..., initial_state=...)`` (:mod:`weir.checkpoint.bootstrap`): every
``{"key": ..., "value": ...}`` line (the form ``weir state dump`` writes; other fields are ignored) goes
to the task namespace the fields grouping's hash gives, as one fenced and crash-safe step. Refused
when the topology has committed state or runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from weir.errors import ConfigError, StateError

__all__ = ["register"]


def _rows(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    fh = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    try:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                row["key"], row["value"]  # noqa: B018 - both must be there
            except (ValueError, KeyError, TypeError) as exc:
                msg = f'{path}, line {n}: expected a JSON object with "key" and "value" ({exc})'
                raise ConfigError(msg) from exc
            yield n, row
    finally:
        if fh is not sys.stdin:
            fh.close()


def _lines(path: str) -> Iterator[tuple[Any, Any]]:
    for _, row in _rows(path):
        yield row["key"], row["value"]


def _map_lines(path: str, info: Any, cells: bool) -> Iterator[tuple[Any, Any]]:
    """The ``(key, value)`` rows for map state ``info``: values, or (``cells``) dumped cells' values.

    A line of ``weir state dump`` without ``--values`` (its ``ns`` a Trident map state, ``trident:...``,
    and its value a dumped cell of this state's type) is refused unless ``cells``: loading the cell as
    a value would nest it in a new cell.
    """
    from weir.cli.state_cells import dumped_cell_value, looks_dumped
    from weir.trident.backing.catalog import PREFIX

    for n, row in _rows(path):
        where = f"{path}, line {n}"
        value = row["value"]
        if cells:
            value = dumped_cell_value(value, info.state_type, where)
        elif str(row.get("ns", "")).startswith(PREFIX) and looks_dumped(value, info.state_type):
            msg = (
                f"{where}: the value is a dumped {info.state_type.value} cell of {row['ns']} (txid and "
                "values), not a value; load these lines with --cells, or dump with `weir state dump --values`. "
                'If the object really is the value, remove the line\'s "ns" field'
            )
            raise StateError(msg)
        yield row["key"], value


def _cmd_load(args: argparse.Namespace, open_store: Any) -> int:
    from weir.checkpoint.admin import live_topology
    from weir.checkpoint.bootstrap import load_initial_state
    from weir.checkpoint.coordinator import CheckpointStore
    from weir.checkpoint.rescale import hash_route

    topo, comp = args.topology, args.component
    if comp.startswith("trident:"):
        return _load_trident(args, open_store)
    if args.cells:
        msg = f"topology {topo!r}, component {comp!r}: --cells is for Trident map states (--component trident:<name>)"
        raise ConfigError(msg)
    with open_store(args, must_exist=False) as store:
        backend = store.backend
        cstore = CheckpointStore(backend, topo)
        rec = cstore.load()
        n = args.parallelism or (None if rec is None else rec.parallelism.get(comp))
        if n is None or n < 1:
            msg = f"topology {topo!r}, component {comp!r}: give --parallelism N (the bolt's number of tasks)"
            raise ConfigError(msg)
        live = live_topology(backend, cstore.namespace)
        if live is not None:
            msg = f"topology {topo!r} is running ({live.reason}); initial state is loaded before its first batch"
            raise StateError(msg)
        kser, vser = store.key_serializer, store.value_serializer
        rows = ((kser.serialize(k), vser.serialize(v)) for k, v in _lines(args.file))
        epoch = cstore.acquire_epoch()  # fences a driver that would start meanwhile
        res = load_initial_state(backend, topo, comp, n, rows, hash_route(kser)(n), epoch)
        if res.already_loaded:
            print(f"topology {topo!r}, component {comp!r}: these {res.rows} keys were loaded before; nothing to do")
        else:
            per = ", ".join(f"task {t}: {c}" for t, c in enumerate(res.rows_per_task))
            print(f"topology {topo!r}, component {comp!r}: loaded {res.rows} keys ({per})")
    return 0


def _load_trident(args: argparse.Namespace, open_store: Any) -> int:
    """``--component trident:<name>``: seed a Trident map state (:mod:`weir.runtime.spark.trident.bootstrap`).

    ``<name>`` is the map state as ``weir state ls`` lists it (its table or key prefix); its rows are
    written as committed cells of the state's type. An interrupted load of the same map state is
    finished first.
    """
    from weir.checkpoint.admin import live_topology
    from weir.checkpoint.coordinator import CheckpointStore
    from weir.runtime.spark.trident.bootstrap import finish_trident_bootstrap, load_trident_state
    from weir.trident.backing.catalog import catalog_for
    from weir.trident.backing.factory import MapStateFactory

    topo, comp = args.topology, args.component
    name = comp[len("trident:") :]
    with open_store(args, must_exist=False) as store:
        backend = store.backend
        catalog = catalog_for(backend)
        info = None if catalog is None else catalog.find(comp)
        if catalog is None or info is None:
            msg = (
                f"topology {topo!r}: no Trident map state {comp!r} in {backend.describe()} (see `weir state ls`); "
                "a map state is registered when its factory is made, so build the topology once first"
            )
            raise StateError(msg)
        cstore = CheckpointStore(backend, topo)
        live = live_topology(backend, cstore.namespace)
        if live is not None:
            msg = f"topology {topo!r} is running ({live.reason}); initial state is loaded before its first batch"
            raise StateError(msg)
        factory = MapStateFactory(catalog.store(info.name), info.state_type)
        epoch = cstore.acquire_epoch()  # fences a driver that would start meanwhile
        finish_trident_bootstrap(backend, topo, epoch, {name: factory})
        res = load_trident_state(backend, topo, name, factory, _map_lines(args.file, info, args.cells), epoch)
        if res.already_loaded:
            print(f"topology {topo!r}, {comp}: these {res.rows} keys were loaded before; nothing to do")
        else:
            print(f"topology {topo!r}, {comp}: loaded {res.rows} keys as committed {info.state_type.value} cells")
    return 0


def register(sub: Any, common: argparse.ArgumentParser, open_store: Any) -> None:
    """Add ``weir state load``; ``common``: ``weir state``'s store options, ``open_store(args)`` opens it."""
    p = sub.add_parser(
        "load",
        parents=[common],
        help="seed a stateful bolt of a topology that has not committed yet (JSON lines)",
        description=(
            "Write initial keys into a stateful bolt's task namespaces (<topology>-<component>-<task>), each key "
            "into the task its fields grouping sends it to, as one fenced and crash-safe step (all rows or none). "
            'FILE holds one {"key": ..., "value": ...} object per line (- reads stdin). Refused when the topology '
            "has committed state or runs; loading the identical rows again does nothing."
        ),
    )
    p.add_argument("--topology", required=True, metavar="T", help="the topology's name")
    p.add_argument(
        "--component", required=True, metavar="C", help="the stateful bolt's id, or trident:<name> for a map state"
    )
    p.add_argument("--parallelism", type=int, metavar="N", help="the bolt's number of tasks")
    p.add_argument(
        "--cells",
        action="store_true",
        help="trident:<name>: each line's value is a cell as weir state dump prints it; load its current value",
    )
    p.add_argument("file", metavar="FILE", help="JSON lines of key and value (- for stdin)")
    p.set_defaults(func=lambda args: _cmd_load(args, open_store))
