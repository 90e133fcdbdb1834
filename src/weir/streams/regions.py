"""Consistent regions of a topology, and where each operator sits (computed at submit time).

A region is the whole topology by default, or the components named in each
``builder.consistent_region(...)`` call. Every region is cut at the micro-batch boundary. An
operator outside every region checkpoints only periodically (component configuration
``checkpoint.period.ms``) or when it calls ``context.create_checkpoint()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from weir.errors import ConfigError, TopologyError
from weir.topology.builder import Topology

__all__ = ["PERIOD_KEY", "Placement", "placements"]

#: component configuration: checkpoint period of an operator outside consistent regions
PERIOD_KEY = "checkpoint.period.ms"
#: attribute of a TaskSpec carrying its operator's Placement to the executors
SPEC_ATTR = "streams_placement"


@dataclass(frozen=True)
class Placement:
    """An operator's place: region index (None outside), start/end of region, period, retention."""

    region: int | None = 0
    is_start: bool = False
    is_end: bool = False
    period_ms: int | None = None
    retain: int = 2


def _period(topology_name: str, cid: str, conf: Mapping[str, Any]) -> int | None:
    v = conf.get(PERIOD_KEY)
    if v is None:
        return None
    if isinstance(v, str):
        try:
            v = int(v.strip())
        except ValueError:
            pass
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        msg = (
            f"topology {topology_name!r}, operator {cid!r}: {PERIOD_KEY} must be an integer ≥ 0 (ms), "
            f"got {v!r}"
        )
        raise ConfigError(msg)
    return v


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
    out: dict[str, Placement] = {}
    for cid, c in comps.items():
        if not isinstance(c.obj, Operator):
            continue
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
        out[cid] = Placement(region, is_start, is_end, period, retain)
    return out
