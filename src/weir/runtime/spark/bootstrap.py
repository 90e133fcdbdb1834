"""``weir.submit(..., initial_state={component: rows})``: seed Storm stateful bolts before the first batch.

The rows of each component (a Spark DataFrame with columns ``key`` and ``value``, or any iterable of
``(key, value)`` pairs, or a dict) are serialized with the topology's serializers and loaded by
:func:`weir.checkpoint.bootstrap.load_initial_state` into the task namespaces the fields grouping's
hash gives, as one fenced step after the coordinator started and before any batch runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from weir.checkpoint.bootstrap import BootstrapResult, finish_bootstrap, load_initial_state
from weir.checkpoint.coordinator import Coordinator
from weir.checkpoint.encoding import finish_convert
from weir.errors import ConfigError
from weir.state.base import StateProvider
from weir.state.evolution import VALUE_TYPE_KEY, Encoding, parse_type
from weir.state.factory import KeyValueStateProvider

__all__ = ["check_initial_state", "component_encodings", "rows_of", "seed_initial_state"]


def rows_of(data: Any, where: str) -> Iterator[tuple[Any, Any]]:
    """``(key, value)`` pairs of a DataFrame (columns ``key``, ``value``), a dict or an iterable of pairs."""
    if isinstance(data, Mapping):
        yield from data.items()
        return
    if hasattr(data, "toLocalIterator") and hasattr(data, "columns"):  # a Spark DataFrame
        missing = {"key", "value"} - set(data.columns)
        if missing:
            msg = (
                f"{where}: the DataFrame needs columns 'key' and 'value' "
                f"(missing {sorted(missing)}; it has {data.columns})"
            )
            raise ConfigError(msg)
        for row in data.select("key", "value").toLocalIterator():
            yield _plain(row["key"]), _plain(row["value"])
        return
    for pair in data:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            msg = f"{where}: expected (key, value) pairs, got {pair!r:.80}"
            raise ConfigError(msg)
        yield pair[0], pair[1]


def _plain(v: Any) -> Any:
    """A Spark Row as a dict (nested rows too), a list's items likewise."""
    if hasattr(v, "asDict"):
        return v.asDict(recursive=True)
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def check_initial_state(name: str, topology: Any, provider: StateProvider | None, initial: Mapping[str, Any]) -> None:
    """Refuse, at submit and before anything is written, what cannot be loaded."""
    from weir.topology import Topology

    if not isinstance(topology, Topology):
        msg = (
            f"topology {name!r}: initial_state seeds Storm stateful bolts; a {type(topology).__name__} is not one "
            "(Trident map states cannot be seeded yet)"
        )
        raise ConfigError(msg)
    stateful = sorted(c.id for c in topology.stateful)
    for comp in initial:
        c = topology.components.get(comp)
        if c is None or not c.is_stateful:
            msg = (
                f"topology {name!r}: initial_state names {comp!r}, which is not a stateful component "
                f"(these are: {stateful})"
            )
            raise ConfigError(msg)
    if not isinstance(provider, KeyValueStateProvider):
        msg = (
            f"topology {name!r}: initial_state needs a weir key-value store (sqlite, redis, postgres, hbase), but "
            f"topology.state.provider is the custom {type(provider).__name__}"
        )
        raise ConfigError(msg)


def seed_initial_state(
    name: str, topology: Any, provider: StateProvider, coordinator: Coordinator, initial: Mapping[str, Any] | None
) -> list[BootstrapResult]:
    """Finish a load a crash interrupted, then load ``initial`` (component → rows); one result per component."""
    if not isinstance(provider, KeyValueStateProvider) or coordinator.epoch is None:
        return []
    backend = coordinator.store.backend
    finish_bootstrap(backend, name, coordinator.epoch)
    finish_convert(backend, name, coordinator.epoch)
    if not initial:
        return []
    check_initial_state(name, topology, provider, initial)
    out = []
    for comp, data in initial.items():
        n = topology.components[comp].parallelism
        route = coordinator.rescaler.routes.get(comp) if coordinator.rescaler is not None else None
        if route is None or route.route is None:
            why = route.refusal if route is not None and route.refusal else "its keys cannot be routed to tasks"
            msg = f"topology {name!r}, component {comp!r}: initial_state cannot be loaded: {why}"
            raise ConfigError(msg)
        state = provider.new_state(f"{name}-{comp}-0")
        kser, vser = state.key_serializer, state.value_serializer
        where = f"topology {name!r}, component {comp!r}: initial_state"
        rows = ((kser.serialize(k), vser.serialize(v)) for k, v in rows_of(data, where))
        out.append(load_initial_state(backend, name, comp, n, rows, route.route(n), coordinator.epoch))
    coordinator.record = coordinator.store.load() or coordinator.record
    return out


def component_encodings(name: str, conf: Mapping[str, Any], topology: Any, provider: Any) -> dict[str, Encoding]:
    """The encoding each stateful Storm bolt's namespaces are written with (see :mod:`weir.state.evolution`)."""
    from weir.topology import Topology

    if not isinstance(topology, Topology) or not isinstance(provider, KeyValueStateProvider):
        return {}
    opts = provider.config.options
    kser = str(opts.get("keySerializerClass") or opts.get("keyClass") or "json")
    vser = str(opts.get("valueSerializerClass") or opts.get("valueClass") or "json")
    out = {}
    for c in topology.stateful:
        spec = {**dict(conf), **c.conf}.get(VALUE_TYPE_KEY)
        vtype = parse_type(spec, f"topology {name!r}, component {c.id!r}: {VALUE_TYPE_KEY}")
        out[c.id] = Encoding(kser, vser, "any", vtype)
    return out
