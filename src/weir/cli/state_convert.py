"""``weir state convert``: rewrite every stored value of a stopped topology's stateful bolt with a function.

The step of :func:`weir.checkpoint.encoding.convert_values`: each value is decoded, passed to the
user's function (``module:function``), encoded, checked (it decodes to what the function returned and
conforms to ``--value-type``), staged, then written over the task namespaces as one fenced,
crash-safe step; the component's recorded encoding becomes the new value type, so the next submit
with ``weir.state.value.type`` set to it passes the schema-evolution check. Refused while the
topology runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from weir.errors import ConfigError, StateError

__all__ = ["register"]


def _cmd_convert(args: argparse.Namespace, open_store: Any) -> int:
    from weir._util import import_object
    from weir.checkpoint.admin import live_topology
    from weir.checkpoint.coordinator import CheckpointStore
    from weir.checkpoint.encoding import convert_values, load_encodings
    from weir.state.evolution import Encoding, parse_type

    topo, comp = args.topology, args.component
    fn = import_object(args.function)
    if not callable(fn):
        msg = f"--function {args.function!r} is not callable"
        raise ConfigError(msg)
    new_type = parse_type(args.value_type, "--value-type")
    if comp.startswith("trident:"):
        return _convert_trident(args, open_store, fn, new_type)
    with open_store(args) as store:
        backend = store.backend
        cstore = CheckpointStore(backend, topo)
        rec = cstore.load()
        tasks = None if rec is None else rec.parallelism.get(comp)
        if tasks is None:
            msg = f"topology {topo!r} has no stateful component {comp!r} in {backend.describe()} (see `weir state ls`)"
            raise StateError(msg)
        live = live_topology(backend, cstore.namespace)
        if live is not None:
            msg = f"topology {topo!r} is running ({live.reason}); stop it before converting its state"
            raise StateError(msg)
        old = load_encodings(backend, topo).get(comp)
        base = old or Encoding(
            str(store.config.options.get("keySerializerClass") or store.config.key_class or "json"),
            str(store.config.options.get("valueSerializerClass") or store.config.value_class or "json"),
        )
        new = Encoding(base.key_serializer, base.value_serializer, base.key_type, new_type)
        epoch = cstore.acquire_epoch()  # fences a driver that would start meanwhile
        n = convert_values(backend, topo, comp, tasks, fn, store.value_serializer, new, epoch)
        print(f"topology {topo!r}, component {comp!r}: converted {n} values to value type {args.value_type}")
    return 0


def _convert_trident(args: argparse.Namespace, open_store: Any, fn: Any, new_type: Any) -> int:
    """``--component trident:<name>``: convert a Trident map state (:mod:`weir.runtime.spark.trident.convert`).

    ``--url`` is the store of the topology's coordinator record; ``--map-url`` the map state's store
    when it is another one.
    """
    from weir.checkpoint.admin import live_topology
    from weir.checkpoint.coordinator import CheckpointStore
    from weir.checkpoint.encoding import load_encodings
    from weir.runtime.spark.trident.convert import convert_map_values
    from weir.runtime.spark.trident.encoding import map_state_encoding
    from weir.state.evolution import Encoding
    from weir.trident.backing.catalog import catalog_for
    from weir.trident.backing.factory import MapStateFactory

    topo, comp = args.topology, args.component
    map_args = argparse.Namespace(**{**vars(args), "url": args.map_url}) if args.map_url else args
    with open_store(args) as store, open_store(map_args) as map_store:
        backend = store.backend
        catalog = map_store.catalog or catalog_for(map_store.backend)
        info = None if catalog is None else catalog.find(comp)
        if catalog is None or info is None:
            where = map_store.backend.describe() if catalog is None else catalog.describe()
            msg = f"topology {topo!r}: no Trident map state {comp!r} in {where} (see `weir state ls`)"
            raise StateError(msg)
        if not catalog.can_scan:
            msg = f"topology {topo!r}: {comp} is in {catalog.describe()}, which cannot list its keys to convert them"
            raise StateError(msg)
        cstore = CheckpointStore(backend, topo)
        if cstore.load() is None:
            msg = (
                f"topology {topo!r} has no coordinator record in {backend.describe()}; --url is the store of its "
                "topology.state.provider (and --map-url the map state's store, when another)"
            )
            raise StateError(msg)
        live = live_topology(backend, cstore.namespace)
        if live is not None:
            msg = f"topology {topo!r} is running ({live.reason}); stop it before converting its state"
            raise StateError(msg)
        old = load_encodings(backend, topo).get(comp) or map_state_encoding(info.state_type)
        new = Encoding(old.key_serializer, old.value_serializer, old.key_type, new_type)
        factory = MapStateFactory(catalog.store(info.name), info.state_type)
        epoch = cstore.acquire_epoch()  # fences a driver that would start meanwhile
        n = convert_map_values(backend, topo, info.name, factory, catalog.cells(info), fn, new, epoch)
        print(f"topology {topo!r}, {comp}: converted {n} cells to value type {args.value_type}")
    return 0


def register(sub: Any, common: argparse.ArgumentParser, open_store: Any) -> None:
    """Add ``weir state convert``; ``common``: ``weir state``'s store options, ``open_store(args)`` opens it."""
    p = sub.add_parser(
        "convert",
        parents=[common],
        help="rewrite a stopped topology's stored values with a function (schema evolution)",
        description=(
            "Decode every stored value of a stateful bolt, pass it to FUNCTION (module:function), check that the "
            "result conforms to --value-type, and write the results over the task namespaces as one fenced and "
            "crash-safe step; the component's recorded value type becomes --value-type. Refused while it runs."
        ),
    )
    p.add_argument("--topology", required=True, metavar="T", help="the topology's name")
    p.add_argument(
        "--component", required=True, metavar="C", help="the stateful bolt's id, or trident:<name> for a map state"
    )
    p.add_argument("--map-url", metavar="URL", help="a Trident map state's store, when it is not --url's")
    p.add_argument("--function", required=True, metavar="FUNCTION", help="module:function, value -> new value")
    p.add_argument(
        "--value-type",
        default="any",
        metavar="TYPE",
        help='the new value type: int, float, str, ... or JSON {"record": ...}',
    )
    p.set_defaults(func=lambda args: _cmd_convert(args, open_store))
