"""The stream that paces a Storm spout's batches: one new offset per trigger, no rows.

A Storm spout (``next_tuple``) has no offsets Spark could replay; its tuples come from the spout log
the driver writes for each batch (see :mod:`weir.runtime.spark.spoutlog`). Spark still needs a
source to trigger batches: this one always has one more offset and reads nothing, so every trigger
interval is a batch.

Under ``Trigger.AvailableNow`` (``process_available()``) the run keeps making batches while the
spouts have more: after each batch the driver writes whether a spout task's poll was cut before its
source ran dry (``weir.spout.batch.max.tuples``, ``topology.max.spout.pending`` or the poll time) to a
small *more* file (JSON ``{"more": true}``), and the pacer offers one more tick only then. Without
that file (a Spark Connect server on another machine) ``AvailableNow`` runs exactly one batch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from weir.sources.replayable import Offset, ReadLimit, ReplayableSpout

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from weir.topology.context import TopologyContext

__all__ = ["BatchPacer", "pacing_stream", "read_more", "write_more"]


def write_more(path: str, more: bool) -> None:
    """The driver's side: whether the spouts have more for another batch (an atomic file replace)."""
    import os

    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"more": bool(more)}, f)
    os.replace(tmp, path)


def read_more(path: str | None) -> bool:
    """The pacer's side: what :func:`write_more` wrote last (``False`` when there is no such file)."""
    if not path:
        return False
    try:
        with open(path, encoding="utf-8") as f:
            return bool(json.load(f).get("more", False))
    except (OSError, ValueError, AttributeError):
        return False


class BatchPacer(ReplayableSpout):
    """Offsets ``{"tick": n}``, one more per batch, and never a row.

    Parameters
    ----------
    more_file : where the driver says whether the spouts have more (see :func:`write_more`); under
        ``Trigger.AvailableNow`` a batch after the run's first one is made only when it says so
    """

    schema = "tick BIGINT"

    def __init__(self, more_file: str | None = None) -> None:
        self.more_file = more_file

    def initial_offset(self) -> Offset:
        """Tick 0."""
        return {"tick": 0}

    def latest_offset(self, start: Offset, limit: ReadLimit) -> Offset:
        """Always one more tick: every trigger is a batch."""
        return {"tick": int(start["tick"]) + 1}

    def clamp_offset(self, start: Offset, end: Offset, target: Offset) -> Offset:
        """``Trigger.AvailableNow`` only: the run's first tick, then one more while the spouts have more."""
        tick = int(start["tick"])
        if tick < int(target["tick"]) or read_more(self.more_file):
            return {"tick": tick + 1}
        return {"tick": tick}

    def read(self, start: Offset, end: Offset) -> Iterable[Sequence[Any]]:
        """Nothing: the batch's tuples come from the spout log."""
        return ()

    def describe(self) -> str:
        """For messages."""
        return "the batch ticks of a Storm spout"


def pacing_stream(spark: SparkSession, context: TopologyContext, more_file: str | None = None) -> DataFrame:
    """The pacing stream of the Storm spout ``context.component_id`` (``more_file``: see :class:`BatchPacer`)."""
    return BatchPacer(more_file).create_stream(spark, context)
