"""Expiry of Trident map-state cells (``weir.state.ttl.ms``): the time log, cutoffs, and what readers hide.

The driver of a Trident topology with TTLs keeps a *time log* in its coordinator's namespace
(``$checkpointspout-<topology>``, row :data:`TIMES_KEY`), a JSON document::

    {"v": 1, "times": [[txid, batch_ms], ...],
     "states": {"<state id>": {"ttl_ms": 60000, "map": "trident:<table or key prefix>"}}}

A cell is expired at txid *n* exactly when the txid stored in it is at or below the *cutoff* of
*n*: the greatest logged txid ``t < n`` with ``batch_ms(t) + ttl <= batch_ms(n)``
(:func:`expire_upto`). ``states`` lets a reader that knows no topology code (``weir.state.read``,
``weir state get/dump``) find the TTL of a map state it reads and hide the cells expired at the
topology's last committed txid (:func:`reader_cutoff`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from weir.errors import StateError

__all__ = ["TIMES_KEY", "TimeLog", "cell_txid", "expire_upto", "load_time_log", "reader_cutoff"]

#: the time log of a Trident topology, in its coordinator's namespace
TIMES_KEY = b"trident-times"
_COORDINATOR = "$checkpointspout-"


@dataclass(frozen=True)
class TimeLog:
    """A parsed time log: ``txid → batch_ms`` and, per state id, its TTL and map name."""

    times: dict[int, int] = field(default_factory=dict)
    #: state id → (ttl ms, ``trident:<name>`` of its map state, or None when unknown)
    states: dict[str, tuple[int, str | None]] = field(default_factory=dict)

    def encode(self) -> bytes:
        """The stored JSON form."""
        doc = {
            "v": 1,
            "times": sorted([t, m] for t, m in self.times.items()),
            "states": {s: {"ttl_ms": ms, "map": m} for s, (ms, m) in sorted(self.states.items())},
        }
        return json.dumps(doc, separators=(",", ":")).encode()


def load_time_log(raw: bytes | None, namespace: str) -> TimeLog:
    """Parse the time log (an empty one when ``raw`` is None).

    Raises
    ------
    StateError
        If the row is not weir's time log (names the namespace and the key).
    """
    if raw is None:
        return TimeLog()
    try:
        doc = json.loads(raw)
        times = {int(t): int(m) for t, m in doc["times"]}
        states = {
            str(s): (int(v["ttl_ms"]), None if v.get("map") is None else str(v["map"]))
            for s, v in (doc.get("states") or {}).items()
        }
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        msg = (
            f"namespace {namespace!r}, key {TIMES_KEY.decode()!r}: not weir's Trident time log ({exc}); "
            "weir wrote it as JSON {'v': 1, 'times': [[txid, ms], ...], 'states': {...}}"
        )
        raise StateError(msg) from exc
    return TimeLog(times, states)


def expire_upto(times: Mapping[int, int], txid: int, ttl_ms: int) -> int | None:
    """The greatest logged txid before ``txid`` whose cells have expired at ``txid``'s time (None: none)."""
    now = times[txid]
    best: int | None = None
    for t, ms in times.items():
        if t < txid and ms + ttl_ms <= now and (best is None or t > best):
            best = t
    return best


def cell_txid(cell: Any) -> int | None:
    """The txid stored in an opaque or transactional cell (None for anything else)."""
    return getattr(cell, "curr_txid", getattr(cell, "txid", None))


def reader_cutoff(backend: Any, map_namespace: str) -> int | None:
    """The cutoff a reader outside a batch hides cells of ``trident:<name>`` at (None: nothing hidden).

    The topology whose time log names the map state is found among the coordinator namespaces of
    ``backend``; the cutoff is the one of its last committed txid (the batch time logged for it).
    """
    from weir.checkpoint.coordinator import CheckpointStore

    best: int | None = None
    for ns in backend.namespaces():
        if not ns.startswith(_COORDINATOR):
            continue
        raw = backend.get(ns, TIMES_KEY)
        if raw is None:
            continue
        log = load_time_log(raw, ns)
        ttls = [ms for ms, m in log.states.values() if m == map_namespace]
        if not ttls:
            continue
        rec = CheckpointStore(backend, ns[len(_COORDINATOR) :]).load()
        if rec is None:
            continue
        last = rec.last_committed
        if last not in log.times:
            continue
        for ms in ttls:
            cut = expire_upto(log.times, last, ms)
            if cut is not None and (best is None or cut > best):
                best = cut
    return best
