"""Adaptive micro-batch sizing: a backlogged source's batches grow, a caught-up one's shrink back.

``weir.batch.grow.max`` (an integer ≥ 1, default 1 = off) lets a batch take up to that many times
a spout's configured size when more input is ready than one batch takes, so a backlog is read in
few batches while a trickle keeps small, low-latency ones. Each batch still costs its fixed
overhead (a Spark job, the coordinator's prepare and commit), which is what a backlog read in
fewer, larger batches saves.

Exactly once does not depend on the sizing: every batch's end offset is decided before the batch
runs and is in Spark's offset log by then, so a retry or a restart replays that same range whatever
size the next *new* batch would have. Per source:

=============================  ==================================================================
``FileSpout``                   Spark's file source takes every ready file up to
                                ``files_per_batch × weir.batch.grow.max`` per batch (its
                                ``maxFilesPerTrigger``); a trickle gives batches of the files that
                                arrived. The bound is fixed when the query starts (no slow start).
``ReplayableSpout`` with a      slow start: the limit (``max_records_per_batch`` or
limit (Redis Streams, NATS,     ``max_bytes_per_batch``) doubles after each batch that left input
Kafka, RabbitMQ, user spouts)   behind, up to ``weir.batch.grow.max`` times, and falls back to the
                                configured limit after a batch that took everything ready.
Storm spouts (spout log)        unchanged: ``weir.spout.batch.max.tuples`` bounds a spout task's
                                poll; raise it for throughput.
=============================  ==================================================================
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from weir._util import positive_int

__all__ = ["GROW_KEY", "BatchGrowth", "batch_growth"]

#: the configuration key of the growth bound
GROW_KEY = "weir.batch.grow.max"


def batch_growth(conf: Mapping[str, Any]) -> int:
    """``weir.batch.grow.max`` from a topology's configuration (default 1: batches never grow).

    Raises
    ------
    ConfigError
        When the value is not an integer ≥ 1 (a numeric string is accepted).
    """
    v = conf.get(GROW_KEY, 1)
    if isinstance(v, str):
        with contextlib.suppress(ValueError):  # not a number: refused below, naming the key
            v = int(v.strip())
    return positive_int(v, GROW_KEY, expected="an integer ≥ 1 (1: batches keep their configured size)")


class BatchGrowth:
    """The slow-start state of one source: by how much its next batch's limit is multiplied.

    Lives in Spark's source planner (one reader object per query run); a restart starts again at
    the configured size. Only sizes *new* batches: a replayed batch reads its logged range.

    >>> g = BatchGrowth(8)
    >>> for _ in range(4):
    ...     g.observe(backlogged=True)
    >>> g.scale
    8
    >>> g.observe(backlogged=False)
    >>> g.scale
    1
    """

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.scale = 1

    @property
    def enabled(self) -> bool:
        """Whether batches may grow at all."""
        return self.bound > 1

    def grown(self, limit: int | None) -> int | None:
        """``limit`` times the current scale (``None``, no limit, stays ``None``)."""
        return None if limit is None else limit * self.scale

    def observe(self, *, backlogged: bool) -> None:
        """After deciding a batch: double the scale (up to the bound) if input was left behind, else reset it."""
        self.scale = min(self.scale * 2, self.bound) if backlogged else 1
