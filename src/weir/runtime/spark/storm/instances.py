"""Bolt instances kept by a Python worker between batches (Storm's executor lifetime, where Spark allows).

A Spark task may run in any Python worker; a worker that ran task *i* of a bolt for the batch that
committed keeps that instance, ``prepare``-d once, with its fields, and hands it to the task of the
next batch if that task runs in the same worker. The hand-off never yields a stale instance: the
driver names, in its Spark job's local property :data:`LINEAGE_PROPERTY`, its run (a random token
per :class:`~weir.runtime.spark.storm.batch.BatchJob`, so a restarted driver or another run of a
topology of the same name never matches), the attempt of this batch, and the txid and attempt of
the last batch whose job succeeded. A kept instance is used only when it finished exactly that
(txid *n-1*, that attempt, this run): an instance of a failed, retried, recomputed or rolled-back
attempt is dropped (``cleanup()``) and a new one is prepared. An instance is taken out of the cache
while its task runs, so two tasks never share one.

What a user can rely on is stated in ``docs/storm-on-spark.md`` ("Instance lifetime").
"""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass
from typing import Any

__all__ = ["LINEAGE_PROPERTY", "Lineage", "clear_kept", "given_lineage", "keep", "lineage_of_job", "take"]

log = logging.getLogger("weir.runtime")

#: the Spark local property with ``"<run>:<attempt>:<prev txid>:<prev attempt>"`` (prev empty: none)
LINEAGE_PROPERTY = "weir.lineage"


@dataclass(frozen=True)
class Lineage:
    """Where a batch attempt sits in its run: which kept instances may continue into it."""

    run: str
    attempt: int
    prev_txid: int | None = None
    prev_attempt: int | None = None

    def to_property(self) -> str:
        """The value of :data:`LINEAGE_PROPERTY`."""
        prev = "" if self.prev_txid is None else f"{self.prev_txid}:{self.prev_attempt}"
        return f"{self.run}:{self.attempt}:{prev or ':'}"

    @classmethod
    def parse(cls, raw: str | None) -> Lineage | None:
        """The lineage in ``raw`` (None when absent or malformed)."""
        if not raw:
            return None
        parts = raw.split(":")
        if len(parts) != 4:
            return None
        try:
            prev_txid = int(parts[2]) if parts[2] else None
            prev_attempt = int(parts[3]) if parts[3] else None
            return cls(parts[0], int(parts[1]), prev_txid, prev_attempt)
        except ValueError:
            return None


class LineageTracker:
    """Driver side: one per run; numbers attempts and remembers the last attempt whose job succeeded."""

    def __init__(self) -> None:
        self.run = uuid.uuid4().hex
        self.attempts = 0
        self.last_ok: tuple[int, int] | None = None

    def next(self) -> Lineage:
        """The lineage of the next batch attempt."""
        self.attempts += 1
        prev = self.last_ok
        return Lineage(self.run, self.attempts, prev[0] if prev else None, prev[1] if prev else None)

    def finished(self, txid: int, lineage: Lineage, ok: bool) -> None:
        """Record how the attempt ``lineage`` of ``txid`` ended (its job, before the commit).

        A failed attempt changes nothing: the instances that finished the last successful attempt
        (and were not taken by the failed one) still continue into the retry.
        """
        if ok:
            self.last_ok = (txid, lineage.attempt)


#: the lineage a Spark Connect stage gives its task (Connect has no job-local properties)
_GIVEN: Lineage | None = None


def given_lineage(lineage: Lineage | None) -> None:
    """Set (None: clear) the lineage of the task this Python worker runs now (a Spark Connect stage)."""
    global _GIVEN
    _GIVEN = lineage


def lineage_of_job() -> Lineage | None:
    """The lineage of the running Spark task's job (None outside a batch job)."""
    if _GIVEN is not None:
        return _GIVEN
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return Lineage.parse(ctx.getLocalProperty(LINEAGE_PROPERTY) if ctx is not None else None)


@dataclass
class _Kept:
    component: Any
    collector: Any
    run: str
    txid: int
    attempt: int


_KEPT: dict[tuple[str, str, int], _Kept] = {}
_LOCK = threading.Lock()


def take(topology: str, component: str, task: int, txid: int, lineage: Lineage | None) -> tuple[Any, Any] | None:
    """The kept ``(instance, collector)`` that finished the batch before ``txid`` in this lineage, if any.

    Whatever this worker kept for the task is removed; a stale instance gets ``cleanup()``.
    """
    with _LOCK:
        kept = _KEPT.pop((topology, component, task), None)
    if kept is None:
        return None
    if (
        lineage is not None
        and kept.run == lineage.run
        and lineage.prev_txid == txid - 1
        and (kept.txid, kept.attempt) == (lineage.prev_txid, lineage.prev_attempt)
    ):
        return kept.component, kept.collector
    discard(kept.component, f"topology {topology!r}, component {component!r}, task {task}")
    return None


def keep(topology: str, component: str, task: int, txid: int, lineage: Lineage, instance: Any, collector: Any) -> None:
    """Keep ``instance`` (which finished ``txid`` in attempt ``lineage.attempt``) for the task's next batch."""
    with _LOCK:
        old = _KEPT.pop((topology, component, task), None)
        _KEPT[(topology, component, task)] = _Kept(instance, collector, lineage.run, txid, lineage.attempt)
    if old is not None and old.component is not instance:
        discard(old.component, f"topology {topology!r}, component {component!r}, task {task}")


def discard(instance: Any, where: str) -> None:
    """``cleanup()`` an instance that is no longer used; an error is logged, never raised."""
    try:
        instance.cleanup()
    except Exception:
        log.exception("%s: cleanup() of a dropped bolt instance failed", where)


def clear_kept(topology: str | None = None) -> int:
    """Drop (with ``cleanup()``) the instances this worker keeps for ``topology`` (all when None)."""
    with _LOCK:
        keys = [k for k in _KEPT if topology is None or k[0] == topology]
        dropped = [_KEPT.pop(k) for k in keys]
    for k, kept in zip(keys, dropped, strict=True):
        discard(kept.component, f"topology {k[0]!r}, component {k[1]!r}, task {k[2]}")
    return len(dropped)
