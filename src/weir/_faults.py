"""Crash points for the SIGKILL tests (``WEIR_CRASH_AT=point@txid``).

A production run never sets the variable; the crash tests set it for the first run of a driver
and check that a restarted driver reaches the exact expected state. The named points are the
steps of the protocol (see :mod:`weir.checkpoint.coordinator`).
"""

from __future__ import annotations

import os
import signal

__all__ = ["POINTS", "crash_point"]

POINTS = (
    "during_processing",  # inside a task, after half of its tuples (executor side)
    "after_preparing",  # PREPARING(n) stored, before the job
    "between_prepares",  # task 0 prepared, others maybe not (executor side)
    "after_prepared",  # every task prepared, before COMMITTING(n) is stored
    "after_committing",  # COMMITTING(n) stored, before the first namespace commit
    "between_commits",  # the first namespace committed, the others not
    "after_committed",  # COMMITTED(n) stored, before Spark commits its offsets
    "during_recovery",  # recovery committed/rolled back its first namespace
    "during_checkpoint",  # Streams: an operator task is writing its checkpoint (executor side)
    "trident_after_multi_update",  # Trident: a state partition updated, not committed (executor side)
    "trident_after_partition_commit",  # Trident: a state partition committed, the job not done (executor)
    "sqlite_before_merge",  # SQLite: a commit moved its rows into the delta, its merge not begun
    "sqlite_during_merge",  # SQLite: inside the merge transaction, the delta half moved
    "redis_between_commit_chunks",  # Redis: a chunked commit applied (and logged) a chunk, more remain
    "rescale_staging",  # rescale: old prepares resolved, marker "staging" stored, nothing staged yet
    "rescale_staged",  # rescale: every staging namespace written, marker still "staging"
    "rescale_switching",  # rescale: marker "switching", the first new namespace copied, the others not
    "rescale_switched",  # rescale: the record names the new layout, staging namespaces not dropped yet
    "during_poll_ahead",  # Storm spout: batch n-1 logged, batch n's first tuples polled ahead, not logged
    "drpc_after_request_log",  # DRPC: a batch's requests are in the request log, no stage has run
    "drpc_after_answers",  # DRPC: COMMITTED(n), the answers written, the requests still queued and logged
    "drpc_after_dequeue",  # DRPC: the answered requests left the queue, the log entry of n not deleted
)


def crash_point(point: str, txid: int, *, task: int | None = None) -> None:
    """SIGKILL the whole driver process group when ``WEIR_CRASH_AT`` names this point and txid.

    ``WEIR_CRASH_AT`` is ``point@txid`` or ``point@txid@task``. The process group is killed so the
    JVM and the Python workers die with the driver, as when a machine fails.
    """
    spec = os.environ.get("WEIR_CRASH_AT")
    if not spec:
        return
    parts = spec.split("@")
    if parts[0] != point or len(parts) < 2 or int(parts[1]) != txid:
        return
    if len(parts) > 2 and task is not None and int(parts[2]) != task:
        return
    pgid = int(os.environ.get("WEIR_CRASH_PGID", "0")) or os.getpgid(0)
    os.killpg(pgid, signal.SIGKILL)
