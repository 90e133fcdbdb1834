"""At start, compare the store's coordinator record with Spark's commit log: lost state is never silent.

Spark's checkpoint directory (``weir.spark.checkpoint.location``) holds the query id (``metadata``),
the planned batches (``offsets/<batch>``) and the finished ones (``commits/<batch>``). Spark writes
``commits/<b>`` only after ``foreachBatch`` returned, which is after the coordinator stored
``COMMITTED(txid_base + b)``. So, for the last batch *b* of ``commits/``, a store that kept its data
holds a record of the same Spark query with ``last committed txid ≥ txid_base + b``.

When it does not — the record is missing (a Redis without persistence restarted, a SQLite file
truncated, a PostgreSQL table dropped), belongs to another Spark query, or is behind (a Redis
restored from a snapshot older than its last writes) — the sources would resume after batch *b*
and the updates of the lost transactions would be gone for good. :func:`check_store_against_spark`
stops the topology instead, with a :class:`~weir.errors.StateLossError` that says what was lost
and the ways out; ``weir.accept.state.loss`` (``weir run --accept-state-loss``) continues anyway
and logs what was lost.

Only checkpoint directories on a local file system are read (a plain path or ``file:`` URI); for
other file systems the check is skipped with a warning.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from urllib.parse import urlparse

from weir.checkpoint.coordinator import Coordinator
from weir.errors import StateLossError

__all__ = ["SparkLog", "check_store_against_spark", "read_spark_log"]

log = logging.getLogger("weir.runtime")


@dataclass(frozen=True)
class SparkLog:
    """What a Spark checkpoint directory says: its query id and last planned / committed batches."""

    location: str
    query_id: str | None
    last_offset: int | None
    last_commit: int | None


def _local_dir(location: str) -> str | None:
    u = urlparse(location)
    if u.scheme in ("", "file") or (len(u.scheme) == 1 and os.name == "nt"):
        return u.path if u.scheme == "file" else location
    return None


def _last_batch(directory: str) -> int | None:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return None
    ids = [int(n) for n in names if n.isdigit()]
    return max(ids) if ids else None


def read_spark_log(location: str) -> SparkLog | None:
    """Read Spark's checkpoint directory; None when it is not on a local file system."""
    path = _local_dir(location)
    if path is None:
        return None
    qid = None
    try:
        with open(os.path.join(path, "metadata"), encoding="utf-8") as fh:
            qid = json.loads(fh.readline()).get("id")
    except (OSError, ValueError, AttributeError):
        qid = None
    return SparkLog(
        location,
        qid,
        _last_batch(os.path.join(path, "offsets")),
        _last_batch(os.path.join(path, "commits")),
    )


def _highest_txid(coordinator: Coordinator) -> int:
    """The highest committed or prepared txid any namespace of the topology still holds."""
    backend = coordinator.store.backend
    prefix = coordinator.topology + "-"
    top = 0
    for ns in backend.namespaces():
        if ns.startswith(prefix):
            rec = backend.txids(ns)
            top = max(top, rec.committed or 0, rec.prepared or 0)
    return top


def check_store_against_spark(coordinator: Coordinator, location: str, *, accept: bool = False) -> None:
    """Raise :class:`StateLossError` when the store is behind Spark's commit log (see the module doc).

    Call after :meth:`Coordinator.start`. With ``accept``, log the loss, re-base the record on
    Spark's log (:meth:`Coordinator.accept_loss`) and return.
    """
    spark = read_spark_log(location)
    topology = coordinator.topology
    if spark is None:
        log.warning(
            "topology %s: Spark checkpoint %s is not on a local file system; the store is not cross-checked "
            "against Spark's commit log",
            topology,
            location,
        )
        return
    if spark.last_commit is None or spark.query_id is None:
        return  # Spark never finished a batch here: nothing the store must already hold
    b = spark.last_commit
    store = coordinator.store
    rec = store.load()
    where = f"the store ({store.backend.describe()}, namespace {store.namespace!r})"
    if rec is None:
        lost = (
            f"{where} has no coordinator record, but Spark's checkpoint {location!r} (query {spark.query_id}) "
            f"committed batches up to {b}: the state of every committed transaction is gone (the store was "
            "emptied, restarted without persistence, truncated, or its table dropped)"
        )
    elif rec.query_id != spark.query_id or rec.txid_base is None:
        lost = (
            f"{where} was last written by Spark query {rec.query_id} (last committed txid "
            f"{rec.last_committed}), but Spark's checkpoint {location!r} belongs to query {spark.query_id} and "
            f"committed batches up to {b}: the store lost the transactions of that query, or it was restored "
            "from an older backup (or the checkpoint directory belongs to another run)"
        )
    else:
        need = rec.txid_base + b
        if rec.last_committed >= need:
            return
        first = rec.last_committed + 1
        lost = (
            f"{where} holds committed txid {rec.last_committed}, but Spark's checkpoint {location!r} committed "
            f"batch {b} = txid {need}: txids {first}..{need} (Spark batches {first - rec.txid_base}..{b}) are "
            "missing from the store (restored from an older snapshot, or writes lost in a crash)"
        )
    if accept:
        log.warning(
            "topology %s: STATE LOSS ACCEPTED (weir.accept.state.loss): %s. Continuing after Spark batch %d; "
            "the updates of the lost transactions are not in the state.",
            topology,
            lost,
            b,
        )
        coordinator.accept_loss(spark.query_id, b, _highest_txid(coordinator))
        return
    msg = (
        f"topology {topology!r}: committed state was lost: {lost}. The topology was not started. Ways out: "
        "(1) restore the store from a backup taken after that point and start again; "
        f"(2) rebuild the state from the source: move Spark's checkpoint directory {location!r} aside, empty "
        "what is left of the topology's state in the store (or run under a new topology name), and start "
        "again, so the sources are read again from their start; (3) accept the loss and continue after the "
        "last Spark batch: start with `weir run --accept-state-loss` (configuration key "
        "weir.accept.state.loss = true)"
    )
    raise StateLossError(msg)
