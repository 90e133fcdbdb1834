"""Crash points for the SIGKILL tests (``WEIR_CRASH_AT=point@txid``).

A production run never sets the variable; the crash tests set it for the first run of a driver
and check that a restarted driver reaches the exact expected state. The named points are the
steps of the protocol (see :mod:`weir.checkpoint.coordinator`).

Crash barrier (``WEIR_CRASH_BARRIER=DIR:N``, tests only): a driver process that runs ``N``
topologies side by side, each armed at the same point, dies once *every* one of them has reached
it, so each topology is killed exactly at the named step while the test pays one driver start for
all of them. A topology that reaches the point records its arrival as the file ``DIR/<topology>``
(a task retry or a second task of the same topology finds it there and does not count twice) and
waits; the one whose arrival makes ``N`` kills the process group. The barrier counts topologies, so
it holds only at points whose call site passes ``topology=``; a point without one writes
``DIR/!unnamed@<point>`` and kills at once, and a barrier still short after
``WEIR_CRASH_BARRIER_TIMEOUT`` seconds (default 300) writes ``DIR/!timeout`` and kills: the test's
harness (``tests/crash/_harness.py``) turns either into a failure that names the missing topologies.

Per-topology points (``WEIR_CRASH_AT=TOPOLOGY=point@txid[@task],TOPOLOGY=...``, with the barrier):
each topology of the driver is armed at its own point, so chains with different kill points still
share their driver starts; the barrier then counts one arrival per entry, each at its own point.
"""

from __future__ import annotations

import os
import signal
import time

__all__ = ["BARRIER_ENV", "POINTS", "armed", "crash_point"]

#: the test-only knob of the crash barrier (``DIR:N``), see the module's docstring
BARRIER_ENV = "WEIR_CRASH_BARRIER"

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


def crash_point(point: str, txid: int, *, task: int | None = None, topology: str | None = None) -> None:
    """SIGKILL the whole driver process group when ``WEIR_CRASH_AT`` names this point and txid.

    ``WEIR_CRASH_AT`` is ``point@txid`` or ``point@txid@task``. The process group is killed so the
    JVM and the Python workers die with the driver, as when a machine fails. With
    ``WEIR_CRASH_BARRIER`` set, the kill waits for every topology of the barrier (``topology`` names
    the one arriving here).
    """
    spec = os.environ.get("WEIR_CRASH_AT")
    if not spec or not _armed(spec, point, txid, task, topology):
        return
    barrier = os.environ.get(BARRIER_ENV)
    if barrier:
        _await_barrier(barrier, point, txid, topology)
    pgid = int(os.environ.get("WEIR_CRASH_PGID", "0")) or os.getpgid(0)
    os.killpg(pgid, signal.SIGKILL)


def armed(point: str, topology: str | None = None) -> bool:
    """Whether ``WEIR_CRASH_AT`` arms ``point`` at some txid for ``topology``'s calls.

    A cheap check for a point inside a per-tuple loop (``during_processing``), made once per task.
    """
    spec = os.environ.get("WEIR_CRASH_AT")
    if not spec:
        return False
    for entry in spec.split(","):
        name, named, at = entry.strip().rpartition("=")
        if at.split("@")[0] == point and not (named and topology is not None and name != topology):
            return True
    return False


def _armed(spec: str, point: str, txid: int, task: int | None, topology: str | None) -> bool:
    """Whether ``spec`` arms this call.

    ``spec`` is ``point@txid[@task]``, or ``TOPOLOGY=point@txid[@task]`` entries separated by commas.
    An entry for a named topology arms only that topology's calls, and call sites that name no
    topology (the barrier reports those as unnamed).
    """
    for entry in spec.split(","):
        name, named, at = entry.strip().rpartition("=")
        if named and topology is not None and name != topology:
            continue
        parts = at.split("@")
        if parts[0] != point or len(parts) < 2 or int(parts[1]) != txid:
            continue
        if len(parts) > 2 and task is not None and int(parts[2]) != task:
            continue
        return True
    return False


def _mark(path: str, text: str) -> None:
    """Create ``path`` holding ``text`` unless it exists (an arrival counts once)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def _await_barrier(spec: str, point: str, txid: int, topology: str | None) -> None:
    """Record this topology's arrival in the barrier's directory; return once all ``N`` have arrived."""
    directory, _, count = spec.rpartition(":")
    expected = int(count)
    here = f"{point}@{txid}"
    if topology is None:  # nothing to count by: stop at once, the harness reports it
        _mark(os.path.join(directory, f"!unnamed@{point}"), here)
        return
    _mark(os.path.join(directory, topology.replace(os.sep, "_")), here)
    deadline = time.monotonic() + float(os.environ.get(f"{BARRIER_ENV}_TIMEOUT", "300"))
    while True:
        names = os.listdir(directory)
        arrived = [n for n in names if not n.startswith("!")]
        if len(arrived) >= expected or len(arrived) < len(names):  # all here, or a marker: kill now
            return
        if time.monotonic() > deadline:
            _mark(os.path.join(directory, "!timeout"), f"{here}: arrived {sorted(arrived)}")
            return
        time.sleep(0.05)
