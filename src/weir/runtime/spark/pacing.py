"""The stream that paces a Storm spout's batches: one new offset per trigger, no rows.

A Storm spout (``next_tuple``) has no offsets Spark could replay; its tuples come from the spout log
the driver writes for each batch (see :mod:`weir.runtime.spark.spoutlog`). Spark still needs a
source to trigger batches: this one always has one more offset and reads nothing, so every trigger
interval is a batch, and ``Trigger.AvailableNow`` runs exactly one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from weir.sources.replayable import Offset, ReadLimit, ReplayableSpout

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from weir.topology.context import TopologyContext

__all__ = ["BatchPacer", "pacing_stream"]


class BatchPacer(ReplayableSpout):
    """Offsets ``{"tick": n}``, one more per batch, and never a row."""

    schema = "tick BIGINT"

    def initial_offset(self) -> Offset:
        """Tick 0."""
        return {"tick": 0}

    def latest_offset(self, start: Offset, limit: ReadLimit) -> Offset:
        """Always one more tick: every trigger is a batch."""
        return {"tick": int(start["tick"]) + 1}

    def read(self, start: Offset, end: Offset) -> Iterable[Sequence[Any]]:
        """Nothing: the batch's tuples come from the spout log."""
        return ()

    def describe(self) -> str:
        """For messages."""
        return "the batch ticks of a Storm spout"


def pacing_stream(spark: SparkSession, context: TopologyContext) -> DataFrame:
    """The pacing stream of the Storm spout ``context.component_id``."""
    return BatchPacer().create_stream(spark, context)
