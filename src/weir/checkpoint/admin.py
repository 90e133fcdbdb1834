"""Admin writes (``weir state put/delete``) that a running topology cannot silently overwrite.

A running batch may have read a key before an admin write lands and commit its own value over it.
So an admin write to a namespace of a **live** topology (its coordinator record is in the middle of
a transaction, or was stored less than :data:`LIVE_WINDOW_S` seconds ago) is refused, unless forced.

A forced write goes through the fencing protocol:

1. take a new epoch in the topology's coordinator namespace — the running driver is fenced: its
   next store of the record fails with :class:`~weir.errors.FencedError` and it stops, committing
   nothing more;
2. write the change to the committed rows with that epoch — the namespace now refuses every write
   of the old driver's tasks (a late prepare or commit fails, fenced);
3. if a change set is prepared in the namespace, write the change into it too (same txid, new
   epoch), so that recovery rolling that transaction forward re-applies the admin's value rather
   than the batch's.

When the topology is started again it takes a newer epoch, recovers, and continues from the
admin's value.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from weir.checkpoint.coordinator import CheckpointPhase, CheckPointState, CheckpointStore, checkpoint_namespace
from weir.errors import CheckpointError, StateError
from weir.state.backend import Backend, Changes

__all__ = ["LIVE_WINDOW_S", "LiveTopology", "admin_write", "live_topology"]

#: a topology whose coordinator stored its record this recently counts as running
LIVE_WINDOW_S = 60.0
_PREFIX = "$checkpointspout-"


@dataclass(frozen=True)
class LiveTopology:
    """The topology that owns a namespace, and why it counts as running."""

    topology: str
    record: CheckPointState
    reason: str


def _owner(backend: Backend, namespace: str) -> list[str]:
    """Topologies whose namespaces ``namespace`` may belong to (``<topology>-...``), longest first."""
    names = [ns[len(_PREFIX) :] for ns in backend.namespaces() if ns.startswith(_PREFIX)]
    own = [t for t in names if namespace == checkpoint_namespace(t) or namespace.startswith(t + "-")]
    return sorted(own, key=len, reverse=True)


def live_topology(backend: Backend, namespace: str, *, now: float | None = None) -> LiveTopology | None:
    """The running topology that owns ``namespace``, or None."""
    now = time.time() if now is None else now
    for topology in _owner(backend, namespace):
        try:
            rec = CheckpointStore(backend, topology).load()
        except CheckpointError:
            continue
        if rec is None:
            continue
        age = now - rec.updated_ms / 1000
        if rec.phase is not CheckpointPhase.COMMITTED:
            return LiveTopology(topology, rec, f"its txid {rec.txid} is {rec.phase.value}")
        if age < LIVE_WINDOW_S:
            return LiveTopology(topology, rec, f"its coordinator committed txid {rec.txid} {max(age, 0):.0f} s ago")
    return None


def admin_write(backend: Backend, namespace: str, changes: Changes, *, force: bool = False) -> LiveTopology | None:
    """Apply ``changes`` to ``namespace``'s committed rows; refuse or fence a live topology (module doc).

    Returns the live topology that was fenced (None when none was running).

    Raises
    ------
    StateError
        When the namespace belongs to a running topology and ``force`` is not set, or (unforced) when
        it holds a prepared transaction.
    """
    live = live_topology(backend, namespace)
    if not force:
        if live is not None:
            msg = (
                f"namespace {namespace!r} belongs to topology {live.topology!r}, which is running ({live.reason}): "
                "a batch in flight may have read the old value and would overwrite this write when it commits. "
                "Stop the topology first, or use --force: the running driver is then fenced (it stops with a "
                "FencedError, nothing of its batch is committed) and your write survives its restart"
            )
            raise StateError(msg)
        prepared = backend.txids(namespace).prepared
        if prepared is not None:
            msg = (
                f"namespace {namespace!r} has a prepared transaction (txid {prepared}) waiting for commit or "
                "rollback; admin writes are refused until it is resolved (restart the topology so recovery "
                "finishes it; `weir state inspect` shows it), or use --force to write into it as well"
            )
            raise StateError(msg)
        backend.write_direct(namespace, changes, None)
        return None
    owners = _owner(backend, namespace)
    epoch = None
    if owners:
        # 1. fence the driver: a newer epoch in its coordinator namespace
        epoch = backend.acquire_epoch(checkpoint_namespace(owners[0]))
    # 2. the committed rows, fenced: the old driver's tasks can no longer write this namespace
    backend.write_direct(namespace, changes, epoch)
    # 3. a prepared change set carries the admin's change too, so a roll-forward keeps it
    got = backend.load_prepared(namespace)
    if got is not None:
        prepared_txid, prepared_set = got
        backend.write_prepared(namespace, prepared_txid, {**prepared_set, **changes}, epoch)
    return live
