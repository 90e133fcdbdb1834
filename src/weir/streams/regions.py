"""Consistent regions of a topology, and where each operator sits (computed at submit time).

A region is the whole topology by default, or the components named in each
``builder.consistent_region(...)`` call. Every region is cut at the micro-batch boundary. An
operator outside every region checkpoints only periodically (component configuration
``checkpoint.period.ms``) or when it calls ``context.create_checkpoint()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from weir._util import positive_float, positive_int
from weir.errors import ConfigError, TopologyError
from weir.topology.builder import Topology

__all__ = ["PERIOD_KEY", "Placement", "RegionOptions", "placements"]

#: component configuration: checkpoint period of an operator outside consistent regions
PERIOD_KEY = "checkpoint.period.ms"


#: IBM Streams' defaults for a consistent region
DEFAULT_DRAIN_TIMEOUT = 180.0
DEFAULT_RESET_TIMEOUT = 180.0
DEFAULT_MAX_RESETS = 5
REGION_OPTIONS = ("drain_timeout", "reset_timeout", "max_consecutive_reset_attempts")


@dataclass(frozen=True)
class RegionOptions:
    """A consistent region's limits (``builder.consistent_region(..., drain_timeout=...)``).

    Attributes
    ----------
    drain_timeout : seconds an operator may take from ``drain()`` until it may checkpoint: draining,
        its control ports and waiting for permits (default 180)
    reset_timeout : seconds the ``reset()`` / ``reset_to_initial_state()`` calls of a task may take
        (default 180)
    max_consecutive_reset_attempts : failed attempts in a row (each resets the region) before the
        topology stops (default 5)
    """

    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT
    reset_timeout: float = DEFAULT_RESET_TIMEOUT
    max_consecutive_reset_attempts: int = DEFAULT_MAX_RESETS

    @classmethod
    def parse(cls, topology: str, index: int, options: Mapping[str, Any]) -> RegionOptions:
        """Validate ``options`` of region ``index`` (unknown keys and bad values raise ConfigError)."""
        unknown = sorted(set(options) - set(REGION_OPTIONS))
        if unknown:
            msg = (
                f"topology {topology!r}: consistent_region() #{index} has unknown option(s) {unknown}; "
                f"expected some of {', '.join(REGION_OPTIONS)}"
            )
            raise ConfigError(msg)
        out = {}
        for key in ("drain_timeout", "reset_timeout"):
            v = options.get(key, getattr(cls, key))
            out[key] = positive_float(
                v, f"topology {topology!r}: consistent_region() #{index}: {key}", expected="seconds > 0"
            )
        v = options.get("max_consecutive_reset_attempts", DEFAULT_MAX_RESETS)
        positive_int(
            v,
            f"topology {topology!r}: consistent_region() #{index}: max_consecutive_reset_attempts",
            expected="an int ≥ 1",
        )
        return cls(out["drain_timeout"], out["reset_timeout"], v)


@dataclass(frozen=True)
class Placement:
    """An operator's place: region index (None outside), start/end of region, period, retention.

    ``control`` and ``autonomous`` are its input ports of those kinds, as ``(component, stream)``
    pairs (stream None: every stream of the component).
    """

    region: int | None = 0
    is_start: bool = False
    is_end: bool = False
    period_ms: int | None = None
    retain: int = 2
    options: RegionOptions = RegionOptions()
    control: frozenset[tuple[str, str | None]] = frozenset()
    autonomous: frozenset[tuple[str, str | None]] = frozenset()
    #: the topology has several regions and nothing outside this operator's region (and no
    #: dependent operator) consumes its output: when another region fails a batch, this operator
    #: keeps its prepared checkpoint and is not run again (see StreamsParticipants.rollback_all)
    independent: bool = False
    #: the form of the operator's checkpoints, ``weir.streams.checkpoint.serializer`` as the runtime parsed it
    serializer: str = "data"

    def port_kind(self, source: str, stream: str) -> str:
        """``control``, ``autonomous`` or ``data``: the kind of the input port a tuple came in on."""
        if self.control and ((source, stream) in self.control or (source, None) in self.control):
            return "control"
        if self.autonomous and ((source, stream) in self.autonomous or (source, None) in self.autonomous):
            return "autonomous"
        return "data"


def _ports(name: str, cid: str, comp: Any, attr: str) -> frozenset[tuple[str, str | None]]:
    """An operator's ``control_ports`` / ``autonomous_ports``: each a component id or (component, stream)."""
    raw = getattr(comp.obj, attr, ()) or ()
    if isinstance(raw, str):
        raw = (raw,)
    inputs = {(s.source, s.stream) for s in comp.inputs}
    out: set[tuple[str, str | None]] = set()
    for entry in raw:
        port: tuple[str, str | None]
        if isinstance(entry, str):
            port = (entry, None)
        elif isinstance(entry, (tuple, list)) and len(entry) == 2 and all(isinstance(x, str) for x in entry):
            port = (entry[0], entry[1])
        else:
            msg = (
                f"topology {name!r}, operator {cid!r}: {attr} entries are a component id or a "
                f"(component, stream) pair, got {entry!r}"
            )
            raise TopologyError(msg, topology=name, component=cid)
        if not any(src == port[0] and (port[1] is None or st == port[1]) for src, st in inputs):
            msg = (
                f"topology {name!r}, operator {cid!r}: {attr} names {entry!r}, which is not one of its inputs "
                f"{sorted(inputs)}"
            )
            raise TopologyError(msg, topology=name, component=cid)
        out.add(port)
    return frozenset(out)


def _period(topology_name: str, cid: str, conf: Mapping[str, Any]) -> int | None:
    v = conf.get(PERIOD_KEY)
    if v is None:
        return None
    if isinstance(v, str):
        try:
            v = int(v.strip())
        except ValueError:
            pass
    return positive_int(
        v, f"topology {topology_name!r}, operator {cid!r}: {PERIOD_KEY}", minimum=0, expected="an integer ≥ 0 (ms)"
    )


def placements(name: str, topology: Topology, conf: Mapping[str, Any], retain: int) -> dict[str, Placement]:
    """The :class:`Placement` of every Streams operator of ``topology``; bad regions raise at submit."""
    from weir.streams.operator import Operator

    comps = topology.components
    if topology.regions:
        regions = [tuple(r) for r in topology.regions]
    else:
        regions = [tuple(comps)]
    region_of: dict[str, int] = {}
    for i, members in enumerate(regions):
        if not members:
            msg = f"topology {name!r}: consistent_region() #{i} names no component"
            raise TopologyError(msg, topology=name)
        for cid in members:
            if cid in region_of and region_of[cid] != i:
                msg = (
                    f"topology {name!r}: component {cid!r} is in consistent regions {region_of[cid]} "
                    f"and {i}; a component belongs to at most one region"
                )
                raise TopologyError(msg, topology=name, component=cid)
            region_of[cid] = i
    raw_options = list(topology.region_options)
    options = [
        RegionOptions.parse(name, i, raw_options[i] if i < len(raw_options) else {}) for i in range(len(regions))
    ]
    out: dict[str, Placement] = {}
    for cid, c in comps.items():
        if not isinstance(c.obj, Operator):
            continue
        control = _ports(name, cid, c, "control_ports")
        autonomous = _ports(name, cid, c, "autonomous_ports")
        both = control & autonomous
        if both:
            msg = (
                f"topology {name!r}, operator {cid!r}: input {sorted(both)[0]} is both a control and an autonomous port"
            )
            raise TopologyError(msg, topology=name, component=cid)
        own = {**(c.obj.get_component_configuration() or {}), **c.conf}
        region = region_of.get(cid)
        if region is not None and PERIOD_KEY in own:
            msg = (
                f"topology {name!r}: operator {cid!r} is in consistent region {region}, which checkpoints at "
                f"every micro-batch; {PERIOD_KEY} applies only to operators outside consistent regions "
                "(remove it, or leave the operator out of builder.consistent_region(...))"
            )
            raise ConfigError(msg)
        is_start = False
        if region is not None:
            is_start = any(comps[s.source].is_spout or region_of.get(s.source) != region for s in c.inputs)
        is_end = region is not None and not any(
            region_of.get(consumer.id) == region for consumer, _ in topology.consumers(cid)
        )
        period = None if region is not None else _period(name, cid, {**dict(conf), **own})
        opts = options[region] if region is not None else RegionOptions()
        out[cid] = Placement(region, is_start, is_end, period, retain, opts, control, autonomous)
    if len(regions) > 1:
        for cid in _independent(topology, out):
            out[cid] = replace(out[cid], independent=True)
    return out


def _independent(topology: Topology, places: Mapping[str, Placement]) -> set[str]:
    """Operators in a region whose every consumer is an independent operator of the same region."""
    indep = {cid for cid, p in places.items() if p.region is not None}
    changed = True
    while changed:
        changed = False
        for cid in sorted(indep):
            region = places[cid].region
            for consumer, _ in topology.consumers(cid):
                if consumer.id not in indep or places[consumer.id].region != region:
                    indep.discard(cid)
                    changed = True
                    break
    return indep
