"""Checkpoint history: what happened to the last N transactions, kept beside the coordinator record.

Each entry is one JSON row under key ``__history/<seq>`` (``seq`` zero-padded, so keys sort in
order) in the coordinator's namespace ``$checkpointspout-<topology>``. The coordinator writes an
entry *in the same store write* as the record it describes, so after a crash the history and the
record agree: a transaction killed while PREPARING shows as ``preparing`` and the next driver adds
a ``recovery`` entry saying what it rolled back or forward.

An entry (:class:`HistoryEntry`) holds the txid, the Spark batch id, every phase change with its
wall-clock time in milliseconds, the attempts, the job and commit times, tuples in and out per
component, state keys written per namespace and the failures (component, task, error, traceback).
Only the last ``weir.history.size`` entries (default :data:`DEFAULT_SIZE`) are kept; older rows are
deleted in the write that adds a new one. The topology's shape (components, groupings,
parallelism) is stored once per start under ``__topology`` for ``weir ui``.

Everything here is data: rows are parsed as JSON, never unpickled, and a row that does not parse
is reported as unreadable instead of failing the reader.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from weir.state.backend import Backend

__all__ = [
    "DEFAULT_SIZE",
    "HISTORY_PREFIX",
    "TOPOLOGY_KEY",
    "CheckpointHistory",
    "HistoryEntry",
    "load_history",
    "load_topology_shape",
]

HISTORY_PREFIX = b"__history/"
TOPOLOGY_KEY = b"__topology"
DEFAULT_SIZE = 100
#: tracebacks are cut to this many characters (the end of a traceback says the most)
TRACEBACK_CHARS = 6000
#: failures kept per entry (the first ones; the count of all is kept too)
FAILURES_KEPT = 8


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch."""
    return int(time.time() * 1000)


def history_key(seq: int) -> bytes:
    """The key of entry ``seq``."""
    return HISTORY_PREFIX + f"{seq:012d}".encode()


@dataclass
class HistoryEntry:
    """One transaction (``kind="batch"``) or one recovery (``kind="recovery"``).

    Attributes
    ----------
    seq : position in the history (grows by one per entry, never reused)
    kind : ``batch`` or ``recovery``
    txid : the transaction's id
    status : ``preparing``, ``committing``, ``committed``, ``retrying``, ``failed`` (a batch) or
        ``rolled back`` / ``rolled forward`` (a recovery)
    batch_id : the Spark micro-batch id (None for a recovery)
    epoch : the driver's fencing epoch
    phases : ``[phase, ms]`` pairs in order (``PREPARING``, ``COMMITTING``, ``COMMITTED``,
        ``ROLLED_BACK``)
    attempts : how many times the batch's job ran
    job_ms, commit_ms : time of the last attempt's job and of the commit
    tuples_in : tuples the spouts read in the batch
    components : ``{component: {"in": n, "out": n, "failed": n}}``
    keys_written : ``{namespace: keys}`` written by the transaction
    failures : ``{"component", "task", "error", "traceback", "attempt"}`` of failed tasks
    failure_count : every failed task of every attempt (``failures`` keeps the first few)
    note : free text (a recovery says what it found)
    """

    seq: int
    kind: str
    txid: int
    status: str
    batch_id: int | None = None
    epoch: int | None = None
    phases: list[list[Any]] = field(default_factory=list)
    attempts: int = 0
    job_ms: float | None = None
    commit_ms: float | None = None
    tuples_in: int = 0
    components: dict[str, dict[str, int]] = field(default_factory=dict)
    keys_written: dict[str, int] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    failure_count: int = 0
    note: str = ""

    @property
    def started_ms(self) -> int | None:
        """When the first phase was stored."""
        return int(self.phases[0][1]) if self.phases else None

    @property
    def ended_ms(self) -> int | None:
        """When the last phase was stored."""
        return int(self.phases[-1][1]) if self.phases else None

    def mark(self, phase: str, status: str) -> None:
        """Record a phase change now."""
        self.phases.append([phase, now_ms()])
        self.status = status

    def add_failures(self, failures: Iterable[Any], attempt: int) -> None:
        """Record failed tasks (objects with ``component``, ``task``, ``error``, ``traceback``)."""
        for f in failures:
            self.failure_count += 1
            if len(self.failures) >= FAILURES_KEPT:
                continue
            tb = str(getattr(f, "traceback", "") or "")
            self.failures.append(
                {
                    "component": str(f.component),
                    "task": int(f.task),
                    "error": str(f.error)[:2000],
                    "traceback": tb[-TRACEBACK_CHARS:],
                    "attempt": attempt,
                }
            )

    def add_stats(self, stats: Mapping[str, Any]) -> None:
        """Take the per-component counts and keys written from a job's stats."""
        self.tuples_in = int(stats.get("tuples_in", 0) or 0)
        comps = stats.get("components") or {}
        self.components = {str(c): {k: int(v.get(k, 0)) for k in ("in", "out", "failed")} for c, v in comps.items()}
        self.keys_written = {str(ns): int(n) for ns, n in (stats.get("keys_written") or {}).items()}

    def to_json(self) -> bytes:
        """The stored form."""
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> HistoryEntry:
        """Parse a stored entry (ValueError when it is not one)."""
        d = json.loads(data)
        if not isinstance(d, dict):
            msg = "not a JSON object"
            raise ValueError(msg)  # noqa: TRY004 - a malformed row is a value error
        try:
            return cls(
                seq=int(d["seq"]),
                kind=str(d["kind"]),
                txid=int(d["txid"]),
                status=str(d["status"]),
                batch_id=None if d.get("batch_id") is None else int(d["batch_id"]),
                epoch=None if d.get("epoch") is None else int(d["epoch"]),
                phases=[[str(p), int(t)] for p, t in d.get("phases", [])],
                attempts=int(d.get("attempts", 0)),
                job_ms=None if d.get("job_ms") is None else float(d["job_ms"]),
                commit_ms=None if d.get("commit_ms") is None else float(d["commit_ms"]),
                tuples_in=int(d.get("tuples_in", 0)),
                components={str(c): {str(k): int(n) for k, n in v.items()} for c, v in d.get("components", {}).items()},
                keys_written={str(k): int(v) for k, v in d.get("keys_written", {}).items()},
                failures=[dict(f) for f in d.get("failures", []) if isinstance(f, dict)],
                failure_count=int(d.get("failure_count", 0)),
                note=str(d.get("note", "")),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            msg = f"not a history entry: {exc}"
            raise ValueError(msg) from exc


class CheckpointHistory:
    """The coordinator's writer of history rows (rows go out with the record's own store write).

    Parameters
    ----------
    backend : the coordinator's store
    namespace : the coordinator's namespace
    size : entries kept (``weir.history.size``); 0 keeps none
    """

    def __init__(self, backend: Backend, namespace: str, size: int = DEFAULT_SIZE) -> None:
        self.backend = backend
        self.namespace = namespace
        self.size = size
        self._seqs: list[int] = []
        self._loaded = False

    def _load_seqs(self) -> None:
        if self._loaded:
            return
        self._seqs = sorted(
            int(k[len(HISTORY_PREFIX) :])
            for k, _ in self.backend.scan(self.namespace)
            if k.startswith(HISTORY_PREFIX) and k[len(HISTORY_PREFIX) :].isdigit()
        )
        self._loaded = True

    def begin(self, kind: str, txid: int, status: str, **kw: Any) -> HistoryEntry:
        """A new entry with the next sequence number (not stored until :meth:`rows`)."""
        self._load_seqs()
        seq = (self._seqs[-1] + 1) if self._seqs else 1
        self._seqs.append(seq)
        return HistoryEntry(seq=seq, kind=kind, txid=txid, status=status, **kw)

    def rows(self, entry: HistoryEntry | None) -> dict[bytes, bytes | None]:
        """The rows to store with the record: ``entry`` and deletions of entries beyond the bound."""
        if entry is None or self.size <= 0:
            return {}
        out: dict[bytes, bytes | None] = {history_key(entry.seq): entry.to_json()}
        while len(self._seqs) > self.size:
            out[history_key(self._seqs.pop(0))] = None
        return out

    def shape_row(self, shape: Mapping[str, Any]) -> dict[bytes, bytes | None]:
        """The ``__topology`` row (the topology's components and groupings, for ``weir ui``)."""
        return {TOPOLOGY_KEY: json.dumps(shape, sort_keys=True).encode()}


def load_history(backend: Backend, namespace: str, last: int | None = None) -> list[HistoryEntry]:
    """The stored entries of ``namespace``, oldest first (at most the ``last`` ones).

    A row that is not a history entry is skipped (it is shown by ``weir state dump``).
    """
    out: list[HistoryEntry] = []
    for k, v in backend.scan(namespace):
        if not k.startswith(HISTORY_PREFIX):
            continue
        try:
            out.append(HistoryEntry.from_json(v))
        except ValueError:
            continue
    out.sort(key=lambda e: e.seq)
    return out[-last:] if last else out


def load_topology_shape(backend: Backend, namespace: str) -> dict[str, Any] | None:
    """The stored topology shape (None when absent or unreadable)."""
    data = backend.get(namespace, TOPOLOGY_KEY)
    if data is None:
        return None
    try:
        shape = json.loads(data)
    except ValueError:
        return None
    return shape if isinstance(shape, dict) else None
