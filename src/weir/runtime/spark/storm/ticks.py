"""Tick tuples mapped onto micro-batches (see :mod:`weir.topology.ticks` for what a user sees).

A tick is decided from the batch's txid alone — never the wall clock — so a retried or replayed
batch gets exactly the ticks of its first attempt, and a tick-driven state change commits once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from weir._util import positive_float
from weir.errors import ConfigError
from weir.topology.components import BasicBolt, Bolt, Component, StatefulBolt
from weir.topology.ticks import TOPOLOGY_TICK_TUPLE_FREQ_SECS

__all__ = ["tick_plan", "ticks_in"]


def _freq(value: Any, where: str) -> float:
    return positive_float(
        value, f"{where}: {TOPOLOGY_TICK_TUPLE_FREQ_SECS}", expected="a positive number of seconds (e.g. 10)"
    )


def tick_plan(
    topology: str, cid: str, component: Component, conf: Mapping[str, Any], own: Mapping[str, Any], interval_ms: int
) -> tuple[float, int] | None:
    """``(freq_secs, every_n_batches)`` of component ``cid``'s ticks, or None; raises at submit when misconfigured.

    ``own`` is the component's configuration (``get_component_configuration()`` and the declarer's
    ``add_configuration``), which wins over the topology's ``conf``. A tick comes with every batch
    whose txid is a multiple of ``max(1, round(freq * 1000 / interval_ms))`` (every batch when the
    trigger interval is 0). Plain Storm bolts receive ticks; a spout, a windowed bolt or a Streams
    operator that sets the key itself is refused (the topology-wide key does not reach them).
    """
    where = f"topology {topology!r}, component {cid!r}"
    if TOPOLOGY_TICK_TUPLE_FREQ_SECS in own:
        raw = own[TOPOLOGY_TICK_TUPLE_FREQ_SECS]
    elif TOPOLOGY_TICK_TUPLE_FREQ_SECS in conf:
        raw = conf[TOPOLOGY_TICK_TUPLE_FREQ_SECS]
        if not _receives_ticks(component):
            return None
    else:
        return None
    if raw is None:
        return None
    freq = _freq(raw, where)
    if not _receives_ticks(component):
        msg = (
            f"{where}: {TOPOLOGY_TICK_TUPLE_FREQ_SECS} is set on a {type(component).__name__}, which receives no "
            "tick tuples on weir (only bolts do: Bolt, BasicBolt, StatefulBolt); remove the key from its "
            "configuration"
        )
        raise ConfigError(msg)
    every = 1 if interval_ms <= 0 else max(1, round(freq * 1000 / interval_ms))
    return freq, every


def _receives_ticks(component: Component) -> bool:
    from weir.streams.operator import Operator
    from weir.topology.windowing import WindowedBolt

    if isinstance(component, (WindowedBolt, Operator)):
        return False
    return isinstance(component, (Bolt, BasicBolt, StatefulBolt))


def ticks_in(txid: int, plan: tuple[float, int] | None) -> bool:
    """Whether the batch ``txid`` carries a tick for a component with tick ``plan``."""
    return plan is not None and txid % plan[1] == 0
