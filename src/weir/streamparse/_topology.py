"""A ``streamparse.Topology`` subclass as a weir :class:`~weir.topology.Topology`.

streamparse's DSL has already checked the wiring when the class was defined (its metaclass turns
every ``Bolt.spec`` / ``Spout.spec`` into a ``ComponentSpec`` with ``inputs`` keyed by stream and
``outputs`` per stream); this module reads those specs and builds the same topology with weir's
builder, so weir's own submit-time checks run too.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any, TypeGuard

from weir.errors import ConfigError, TopologyError
from weir.streamparse._components import StreamparseBolt, StreamparseSpout, StreamparseStatefulBolt
from weir.topology.builder import BoltDeclarer, Topology, TopologyBuilder

__all__ = ["ENVIRONMENT_KEY", "is_streamparse_topology", "to_topology", "topology_conf"]

#: the configuration key that picks a ``par`` given per environment (``par={"prod": 4, "beta": 1}``)
ENVIRONMENT_KEY = "streamparse.environment"


def is_streamparse_topology(obj: object) -> TypeGuard[type[Any]]:
    """Whether ``obj`` is a subclass of ``streamparse.Topology`` (False when streamparse is not imported)."""
    sp = sys.modules.get("streamparse")
    if sp is None or not isinstance(obj, type):
        return False
    base = getattr(sp, "Topology", None)
    return isinstance(base, type) and issubclass(obj, base) and obj is not base


def _where(name: str, cid: str) -> str:
    return f"streamparse topology {name!r}, component {cid!r}"


def _par(name: str, spec: Any, conf: Mapping[str, Any]) -> int:
    par = spec.par
    if isinstance(par, dict):
        env = conf.get(ENVIRONMENT_KEY)
        if env not in par:
            msg = (
                f"{_where(name, spec.name)}: par is given per environment ({sorted(par)}); set {ENVIRONMENT_KEY} "
                f"to one of them (got {env!r}), e.g. --conf {ENVIRONMENT_KEY}={sorted(par)[0]}"
            )
            raise ConfigError(msg)
        return int(par[env])
    return int(par)


def _outputs(spec: Any) -> dict[str, tuple[list[str], bool]]:
    return {s: (list(info.output_fields), bool(info.direct)) for s, info in (spec.outputs or {}).items()}


def _config(name: str, spec: Any) -> dict[str, Any]:
    raw = spec.config
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            msg = f"{_where(name, spec.name)}: config is not a JSON object: {exc}"
            raise ConfigError(msg) from exc
    if not isinstance(raw, dict):
        msg = f"{_where(name, spec.name)}: config must be a dict, got {type(raw).__name__}"
        raise ConfigError(msg)
    return raw


def _python_class(name: str, spec: Any, kind: type) -> type:
    cls = spec.component_cls
    shell = getattr(getattr(spec, "component_object", None), "shell", None)
    if shell is None or not isinstance(cls, type) or not issubclass(cls, kind):
        what = (
            "a Java component (JavaBolt/JavaSpout)" if shell is None else "a ShellBolt/ShellSpout of another language"
        )
        msg = (
            f"{_where(name, spec.name)}: {getattr(cls, '__qualname__', cls)} is {what}; weir runs Python components "
            "in-process only. Rewrite it as a Python Bolt/Spout (see docs/moving-from-storm.md, 'Java topologies')"
        )
        raise TopologyError(msg, topology=name, component=str(spec.name))
    return cls


def _subscribe(name: str, decl: BoltDeclarer, target: str, source: str, stream: str, grouping: Any) -> None:
    if grouping.shuffle is not None:
        decl.shuffle_grouping(source, stream)
    elif grouping.fields is not None:
        if grouping.fields:
            decl.fields_grouping(source, stream, list(grouping.fields))
        else:  # streamparse spells GLOBAL as an empty fields grouping, as Storm's thrift does
            decl.global_grouping(source, stream)
    elif grouping.all is not None:
        decl.all_grouping(source, stream)
    elif grouping.none is not None:
        decl.none_grouping(source, stream)
    elif grouping.local_or_shuffle is not None:
        decl.local_or_shuffle_grouping(source, stream)
    elif grouping.direct is not None:
        decl.direct_grouping(source, stream)
    else:
        msg = (
            f"{_where(name, target)}: input {source}:{stream} uses a custom (Java) grouping {grouping!r}, which weir "
            "cannot run; use SHUFFLE, fields(...), GLOBAL, ALL, NONE, LOCAL_OR_SHUFFLE or DIRECT"
        )
        raise TopologyError(msg, topology=name, component=target)


def to_topology(topology_cls: type, conf: Mapping[str, Any] | None = None, name: str = "") -> Topology:
    """The weir topology of a ``streamparse.Topology`` subclass (its class-level ``config`` is not merged here).

    ``conf`` picks a per-environment ``par`` (:data:`ENVIRONMENT_KEY`). Raises a
    :class:`~weir.errors.TopologyError` naming the component for what weir cannot run (Java or
    non-Python shell components, custom groupings).
    """
    import pystorm

    if not is_streamparse_topology(topology_cls):
        msg = f"{topology_cls!r} is not a subclass of streamparse.Topology"
        raise TopologyError(msg, topology=name)
    name = name or topology_cls.__name__
    conf = dict(conf or {})
    specs = list(getattr(topology_cls, "specs", []) or [])
    inputs_fields: dict[str, dict[str, list[str]]] = {
        spec.name: {s: f for s, (f, _) in _outputs(spec).items()} for spec in specs
    }
    b = TopologyBuilder()
    for spec in specs:
        if (
            spec.component_cls is not None
            and isinstance(spec.component_cls, type)
            and issubclass(spec.component_cls, pystorm.spout.Spout)
        ):
            cls = _python_class(name, spec, pystorm.spout.Spout)
            b.set_spout(spec.name, StreamparseSpout(cls, spec.name, _outputs(spec), _config(name, spec)),
                        _par(name, spec, conf))  # fmt: skip
            continue
        cls = _python_class(name, spec, pystorm.bolt.Bolt)
        sources: dict[str, dict[str, list[str]]] = {}
        for gsid in spec.inputs or {}:
            src = str(gsid.componentId)
            sources.setdefault(src, {})[gsid.streamId] = inputs_fields.get(src, {}).get(gsid.streamId, [])
        kind = StreamparseStatefulBolt if callable(getattr(cls, "init_state", None)) else StreamparseBolt
        bolt = kind(cls, spec.name, _outputs(spec), _config(name, spec), sources)
        decl = b.set_bolt(spec.name, bolt, _par(name, spec, conf))
        for gsid, grouping in (spec.inputs or {}).items():
            _subscribe(name, decl, spec.name, str(gsid.componentId), gsid.streamId, grouping)
    return b.create_topology()


def topology_conf(topology_cls: type) -> dict[str, Any]:
    """The class-level ``config`` of a streamparse topology (the run's configuration goes over it)."""
    raw = getattr(topology_cls, "config", None) or {}
    return dict(raw) if isinstance(raw, Mapping) else {}
