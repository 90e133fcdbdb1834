"""What ``weir ui`` shows, read from a store: only reads, never writes.

Everything comes from the coordinator's namespace ``$checkpointspout-<topology>``: the record
(``__state``), the checkpoint history (``__history/<seq>``) and the topology's shape
(``__topology``), plus a key count per state namespace. The same reads serve a running topology
(the page refreshes as the coordinator stores new entries) and a store after the fact.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from weir.checkpoint.coordinator import RECORD_KEY, checkpoint_namespace
from weir.checkpoint.history import HistoryEntry, load_history, load_topology_shape
from weir.state.backend import Backend

__all__ = ["COORDINATOR_PREFIX", "ComponentRate", "Snapshot", "StoreReader"]

COORDINATOR_PREFIX = "$checkpointspout-"


@dataclass
class ComponentRate:
    """Tuples of one component over the history window."""

    component: str
    tuples_in: int = 0
    tuples_out: int = 0
    failed: int = 0
    in_per_s: float | None = None
    out_per_s: float | None = None
    last_in: int = 0
    last_out: int = 0


@dataclass
class Snapshot:
    """Everything the page of one topology shows."""

    topology: str
    where: str
    record: dict[str, Any] | None
    shape: dict[str, Any] | None
    entries: list[HistoryEntry]
    rates: list[ComponentRate]
    namespaces: list[tuple[str, int, int | None]]
    errors: list[tuple[HistoryEntry, dict[str, Any]]]
    taken_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (``/api/topologies/<name>``)."""
        from dataclasses import asdict

        return {
            "topology": self.topology,
            "store": self.where,
            "record": self.record,
            "shape": self.shape,
            "history": [asdict(e) for e in self.entries],
            "rates": [asdict(r) for r in self.rates],
            "namespaces": [{"namespace": n, "keys": k, "committed_txid": c} for n, k, c in self.namespaces],
            "taken_ms": self.taken_ms,
        }


class StoreReader:
    """Reads snapshots from one open backend (one read at a time: backends are not all thread-safe)."""

    def __init__(self, backend: Backend, *, window: int = 60) -> None:
        self.backend = backend
        self.window = window
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        """The store, for the page."""
        return self.backend.describe()

    def topologies(self) -> list[str]:
        """Topologies with a coordinator record in the store."""
        with self._lock:
            names = self.backend.namespaces()
        return sorted(ns[len(COORDINATOR_PREFIX) :] for ns in names if ns.startswith(COORDINATOR_PREFIX))

    def snapshot(self, topology: str) -> Snapshot | None:
        """The page data of ``topology`` (None when the store has no coordinator for it)."""
        ns = checkpoint_namespace(topology)
        with self._lock:
            b = self.backend
            raw = b.get(ns, RECORD_KEY)
            entries = load_history(b, ns)
            if raw is None and not entries:
                return None
            shape = load_topology_shape(b, ns)
            names = [str(n) for n in (shape or {}).get("namespaces", [])] or _task_namespaces(b, topology, shape)
            namespaces = [(n, b.count(n), b.txids(n).committed) for n in names]
        record: dict[str, Any] | None
        try:
            record = json.loads(raw) if raw is not None else None
        except ValueError:
            record = {"unreadable": repr(raw[:80])} if raw is not None else None
        if record is not None and not isinstance(record, dict):
            record = {"record": record}
        errors = [(e, f) for e in reversed(entries) for f in e.failures][:10]
        return Snapshot(
            topology=topology,
            where=self.where,
            record=record,
            shape=shape,
            entries=entries,
            rates=rates(entries[-self.window :], shape),
            namespaces=namespaces,
            errors=errors,
        )


def _task_namespaces(backend: Backend, topology: str, shape: dict[str, Any] | None) -> list[str]:
    """State namespaces ``<topology>-<component>-<task>`` when no shape lists them."""
    prefix = f"{topology}-"
    return sorted(n for n in backend.namespaces() if n.startswith(prefix))


def rates(entries: list[HistoryEntry], shape: dict[str, Any] | None) -> list[ComponentRate]:
    """Per component: tuples over the committed batches of ``entries``, and per second of wall time."""
    done = [e for e in entries if e.kind == "batch" and e.status == "committed"]
    order = [str(c.get("id")) for c in (shape or {}).get("components", [])]
    out: dict[str, ComponentRate] = {c: ComponentRate(c) for c in order}
    for e in done:
        for comp, c in e.components.items():
            r = out.setdefault(comp, ComponentRate(comp))
            r.tuples_in += int(c.get("in", 0))
            r.tuples_out += int(c.get("out", 0))
            r.failed += int(c.get("failed", 0))
    if done:
        first, last = done[0].started_ms, done[-1].ended_ms
        span = (last - first) / 1000 if first is not None and last is not None and last > first else None
        for comp, c in done[-1].components.items():
            out[comp].last_in = int(c.get("in", 0))
            out[comp].last_out = int(c.get("out", 0))
        if span:
            for r in out.values():
                r.in_per_s = r.tuples_in / span
                r.out_per_s = r.tuples_out / span
    return list(out.values())
