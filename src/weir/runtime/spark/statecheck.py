"""At every start, compare the store's coordinator record with Spark's checkpoint: the store is the truth.

Spark's checkpoint directory (``weir.spark.checkpoint.location``) holds the query id (``metadata``),
the planned batches (``offsets/<batch>``) and the finished ones (``commits/<batch>``). Spark writes
``commits/<b>`` only after ``foreachBatch`` returned, which is after the coordinator stored
``COMMITTED(txid_base + b)``; it writes ``offsets/<b>`` before the batch runs. So a store that
kept its data holds a record of the same Spark query with
``txid_base + b ≤ last committed txid ≤ txid_base + last planned batch``.

:func:`check_store_against_spark` runs at submit and on every supervised restart:

- the checkpoint is **missing or new** (or another query's that never finished a batch) while the
  store committed txid *n*: when every spout is a ReplayableSpout whose end offset for *n* is in
  the record (the runner stores them with ``COMMITTING``/``COMMITTED``), the spouts resume from
  those offsets and txids continue at *n* + 1 — a lost checkpoint costs nothing; otherwise the
  start is refused (the sources would be read again from their start: a silent re-count);
- the record is **missing**, **another query's**, or **behind** Spark's commit log (a Redis
  without persistence restarted, a truncated SQLite file, a dropped table, an old backup): refused;
- the record is **ahead** of Spark's offset log (the checkpoint is older than the store): refused.

A refusal is a :class:`~weir.errors.StateLossError` naming the topology, the store, both txids
and the ways on; ``weir.accept.state.loss`` (``weir run --accept-state-loss``) goes on anyway and
logs what was lost.

Only checkpoint directories on a local file system are read (a plain path or ``file:`` URI); for
other file systems the check is skipped with a warning.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from weir.checkpoint.coordinator import Coordinator
from weir.errors import StateLossError

__all__ = ["SparkLog", "check_store_against_spark", "read_batch_offsets", "read_spark_log"]

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


def read_batch_offsets(location: str, batch_id: int) -> list[Any] | None:
    """The end offsets Spark planned for ``batch_id`` (``offsets/<batch_id>``), one per source, in order.

    Spark writes the file before the batch runs: its first line is the format version, its second
    the batch's metadata, then one line per source (its offset JSON). None when the file cannot be
    read (not on a local file system, or not written).
    """
    path = _local_dir(location)
    if path is None:
        return None
    try:
        with open(os.path.join(path, "offsets", str(batch_id)), encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    if len(lines) < 3 or not lines[0].startswith("v"):
        return None
    out: list[Any] = []
    for line in lines[2:]:
        try:
            out.append(json.loads(line))
        except ValueError:
            out.append(None)
    return out


def _pinned_initial(location: str, component: str) -> Any:
    """The initial offset a :class:`ReplayableSpout` pinned in this checkpoint, or None."""
    path = _local_dir(location)
    if path is None:
        return None
    try:
        with open(os.path.join(path, "weir", "initial-offset", f"{component}.json"), encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _resumable(spouts: Sequence[tuple[str, Any]] | None, offsets: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The store's offsets when every spout can start from them (all :class:`ReplayableSpout`), else None."""
    if not spouts or offsets is None:
        return None
    from weir.sources.replayable import ReplayableSpout

    out: dict[str, Any] = {}
    for cid, spout in spouts:
        if not isinstance(spout, ReplayableSpout) or not isinstance(offsets.get(cid), dict):
            return None
        out[cid] = offsets[cid]
    return out


def _not_resumable(spouts: Sequence[tuple[str, Any]] | None) -> str:
    from weir.sources.replayable import ReplayableSpout

    names = [f"{cid} ({type(sp).__name__})" for cid, sp in spouts or () if not isinstance(sp, ReplayableSpout)]
    if names:
        return (
            f"spout(s) {', '.join(names)} cannot start from offsets kept in the store (only ReplayableSpout-based "
            "spouts can: RedisStreamSpout, NatsSpout, KafkaSpout, your own)"
        )
    return "the store keeps no end offsets for the spouts (written by an older weir, or the spouts changed)"


def check_store_against_spark(
    coordinator: Coordinator,
    location: str,
    *,
    accept: bool = False,
    spouts: Sequence[tuple[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """Compare the store's coordinator record with Spark's checkpoint; the store is the source of truth.

    Call after :meth:`Coordinator.start` (a first start, a supervised restart, a resubmission).
    Returns the offsets each spout must start from when Spark's checkpoint is missing or new and
    the store can resume them (every spout a ReplayableSpout with its end offset in the record);
    None when Spark's checkpoint agrees with the store (or nothing was committed yet).

    Raises
    ------
    StateLossError
        When they disagree (see the module doc) — unless ``accept``: then the mismatch is logged,
        the record re-based on Spark's log where it has one (:meth:`Coordinator.accept_loss`), and
        the run goes on.
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
        return None
    store = coordinator.store
    rec = store.load()
    where = f"the store ({store.backend.describe()}, namespace {store.namespace!r})"
    held = 0 if rec is None or rec.query_id is None else rec.last_committed
    if spark.last_commit is None and (rec is None or spark.query_id != rec.query_id):
        # Spark's checkpoint is missing, new, or another query's that never finished a batch
        if held <= 0:
            return None  # nothing committed yet: a first start
        assert rec is not None
        resume = _resumable(spouts, rec.offsets)
        if resume is not None:
            pinned = {cid: _pinned_initial(location, cid) for cid in resume}
            if spark.query_id is None or all(pinned[cid] == resume[cid] for cid in resume):
                if spark.query_id is None:
                    log.warning(
                        "topology %s: Spark's checkpoint %s is missing or new; the store (%s) committed txid %d, "
                        "so the spouts resume from the end offsets kept with it and the txids continue at %d",
                        topology,
                        location,
                        store.backend.describe(),
                        held,
                        held + 1,
                    )
                    return resume
                return None  # a resumed query that had not finished its first batch yet
        state = "missing or new" if spark.query_id is None else f"new (query {spark.query_id}, no batch committed)"
        why = (
            _not_resumable(spouts)
            if resume is None
            else "it already holds the start offsets of another run, not the store's"
        )
        lost = (
            f"{where} holds committed txid {held} (Spark query {rec.query_id}), but Spark's checkpoint "
            f"{location!r} is {state}, and {why}: started like this, the sources would be read again from their "
            "start and everything counted twice"
        )
        ways = (
            f"(1) put Spark's checkpoint of that run back at {location!r} (a different working directory, "
            "weir.state.dir or weir.spark.checkpoint.location than the run that wrote the store points elsewhere); "
            "(2) reset explicitly: start under a new topology name, or empty the topology's namespaces in the "
            "store, and move the checkpoint directory aside, to count from the sources' start; (3) start with "
            "`weir run --accept-state-loss` (weir.accept.state.loss = true) to keep the state and read the "
            "sources again from their start anyway"
        )
        _refuse_or_accept(coordinator, topology, lost, ways, accept, None)
        return None
    if spark.last_commit is None:
        return None  # the same query, which never finished a batch in Spark: the store may be one ahead
    b = spark.last_commit
    assert spark.query_id is not None
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
        planned = rec.txid_base + max(b, spark.last_offset if spark.last_offset is not None else b)
        if need <= rec.last_committed <= planned:
            return None
        if rec.last_committed > planned:
            lost = (
                f"{where} holds committed txid {rec.last_committed}, but Spark's checkpoint {location!r} planned "
                f"batches only up to {planned - rec.txid_base} = txid {planned}: the checkpoint is older than the "
                "store (restored from an older copy, or another run's), so Spark would plan the next batches "
                "afresh and they would not line up with the committed txids"
            )
            ways = (
                f"(1) put back the checkpoint that belongs with the store, or move {location!r} aside: then "
                "ReplayableSpout-based spouts resume from the offsets kept in the store; (2) reset explicitly: "
                "start under a new topology name, or empty the topology's namespaces in the store, and move the "
                "checkpoint aside; (3) start with `weir run --accept-state-loss` (weir.accept.state.loss = true) "
                "to go on from Spark's checkpoint anyway"
            )
            _refuse_or_accept(coordinator, topology, lost, ways, accept, None)
            return None
        first = rec.last_committed + 1
        lost = (
            f"{where} holds committed txid {rec.last_committed}, but Spark's checkpoint {location!r} committed "
            f"batch {b} = txid {need}: txids {first}..{need} (Spark batches {first - rec.txid_base}..{b}) are "
            "missing from the store (restored from an older snapshot, or writes lost in a crash)"
        )
    ways = (
        "(1) restore the store from a backup taken after that point and start again; "
        f"(2) rebuild the state from the source: move Spark's checkpoint directory {location!r} aside, empty "
        "what is left of the topology's state in the store (or run under a new topology name), and start "
        "again, so the sources are read again from their start; (3) accept the loss and continue after the "
        "last Spark batch: start with `weir run --accept-state-loss` (configuration key "
        "weir.accept.state.loss = true)"
    )
    _refuse_or_accept(coordinator, topology, lost, ways, accept, (spark.query_id, b))
    return None


def _refuse_or_accept(
    coordinator: Coordinator, topology: str, lost: str, ways: str, accept: bool, rebase: tuple[str, int] | None
) -> None:
    if accept:
        log.warning(
            "topology %s: STATE LOSS ACCEPTED (weir.accept.state.loss): %s. Continuing; the updates of the lost "
            "transactions are not in the state, or the sources are read again.",
            topology,
            lost,
        )
        if rebase is not None:
            coordinator.accept_loss(rebase[0], rebase[1], _highest_txid(coordinator))
        return
    msg = f"topology {topology!r}: committed state was lost: {lost}. The topology was not started. Ways out: {ways}"
    raise StateLossError(msg)
