"""Storm's tick tuples: ``topology.tick.tuple.freq.secs``, ``SYSTEM_COMPONENT_ID``, ``TupleUtils.is_tick``.

A bolt whose configuration sets ``topology.tick.tuple.freq.secs`` (the topology conf, or the
bolt's ``get_component_configuration()`` / ``set_bolt(...).add_configuration(...)``, which wins)
receives tick tuples on stream :data:`SYSTEM_TICK_STREAM_ID` from component
:data:`SYSTEM_COMPONENT_ID`, each carrying one value: the frequency in seconds.

On weir a tick is a property of a micro-batch, not of the wall clock, so a replayed batch sees
exactly the ticks its first attempt saw. With a trigger interval of ``I`` ms
(``topology.state.checkpoint.interval.ms``) and a frequency of ``F`` seconds, every task of the
bolt gets one tick in each batch whose txid is a multiple of ``max(1, round(F * 1000 / I))``,
**after the last tuple of the batch's input** and before the task's state is prepared: whatever
a bolt does on a tick is part of that batch's transaction, committed once with it. Ticks are not
anchored and need no ack (acking one is a no-op).
"""

from __future__ import annotations

from typing import Any

from weir.topology.tuple import Fields, Tuple

__all__ = [
    "SYSTEM_COMPONENT_ID",
    "SYSTEM_TICK_STREAM_ID",
    "TICK_FIELDS",
    "TOPOLOGY_TICK_TUPLE_FREQ_SECS",
    "TupleUtils",
    "is_tick",
    "tick_tuple",
]

#: Storm's ``Constants.SYSTEM_COMPONENT_ID``: the source component of tick tuples
SYSTEM_COMPONENT_ID = "__system"
#: Storm's ``Constants.SYSTEM_TICK_STREAM_ID``: the stream of tick tuples
SYSTEM_TICK_STREAM_ID = "__tick"
#: Storm's ``Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS``
TOPOLOGY_TICK_TUPLE_FREQ_SECS = "topology.tick.tuple.freq.secs"

#: the fields of a tick tuple (one value: the frequency in seconds)
TICK_FIELDS = Fields("rate_secs")


def is_tick(tup: Any) -> bool:
    """Whether ``tup`` is a tick tuple (Storm's ``TupleUtils.isTick``)."""
    return (
        isinstance(tup, Tuple)
        and tup.source_component == SYSTEM_COMPONENT_ID
        and tup.source_stream_id == SYSTEM_TICK_STREAM_ID
    )


def tick_tuple(freq_secs: float, txid: int | None = None) -> Tuple:
    """The tick tuple a task receives (values: ``(freq_secs,)``); for tests of a bolt without Spark."""
    return Tuple((freq_secs,), TICK_FIELDS, SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, -1, txid)


class TupleUtils:
    """Storm's ``org.apache.storm.utils.TupleUtils`` (its tick check)."""

    @staticmethod
    def is_tick(tup: Any) -> bool:
        """Whether ``tup`` is a tick tuple."""
        return is_tick(tup)

    isTick = is_tick  # noqa: N815 - Storm's spelling
