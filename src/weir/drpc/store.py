"""Where DRPC requests and answers live in a topology's store, and their records (JSON, never pickle).

Namespaces of the topology's key-value store (SQLite, Redis, PostgreSQL, ...):

* ``$drpc`` — the registry: key ``fn/<function>`` → ``{"topology", "single", "fields", "at_ms"}``,
  written by the topology that serves the function (``at_ms``: when it last took requests);
* ``$drpc-<function>`` — the request queue: key = request id → :class:`Request`; a client appends,
  the topology removes a request once it is answered (or expired);
* ``$drpcresult-<function>`` — the answers: key = request id → :class:`Answer`; the topology writes
  one after the batch that ran the request is ``COMMITTED``, the client reads and deletes it;
* ``$drpclog-<topology>`` — the request log: key = txid → the requests that txid takes (written
  before any stage sees them, so a retried or restarted txid takes exactly the same requests).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from weir.errors import StateError

__all__ = [
    "REGISTRY_NAMESPACE",
    "Answer",
    "Request",
    "jsonable",
    "log_namespace",
    "queue_namespace",
    "registry_key",
    "results_namespace",
]

#: the namespace of the registry of served functions
REGISTRY_NAMESPACE = "$drpc"


def registry_key(function: str) -> bytes:
    """The registry key of ``function``."""
    return f"fn/{function}".encode()


def queue_namespace(function: str) -> str:
    """The request queue of ``function``."""
    return f"$drpc-{function}"


def results_namespace(function: str) -> str:
    """The answers of ``function``'s requests."""
    return f"$drpcresult-{function}"


def log_namespace(topology: str) -> str:
    """The request log of ``topology`` (one key per txid)."""
    return f"$drpclog-{topology}"


def _load(data: bytes, where: str) -> dict[str, Any]:
    try:
        rec = json.loads(data)
    except ValueError as exc:
        msg = f"{where}: not a weir DRPC record ({exc}); the store was changed by hand"
        raise StateError(msg) from exc
    if not isinstance(rec, dict):
        msg = f"{where}: not a weir DRPC record (a JSON object expected); the store was changed by hand"
        raise StateError(msg)
    return rec


@dataclass(frozen=True)
class Request:
    """One DRPC request: its function, id, arguments and deadline (epoch milliseconds)."""

    function: str
    rid: str
    args: str
    deadline_ms: int
    at_ms: int = field(default=0, compare=False)  # when the client sent it (the queue's order; not logged)

    def to_bytes(self) -> bytes:
        """The queue record (JSON)."""
        rec = {"f": self.function, "args": self.args, "deadline_ms": self.deadline_ms, "at_ms": self.at_ms}
        return json.dumps(rec, separators=(",", ":")).encode()

    def to_json(self) -> list[Any]:
        """The request as a request-log item."""
        return [self.function, self.rid, self.args, self.deadline_ms]

    @classmethod
    def from_json(cls, item: Any, where: str) -> Request:
        """A request-log item back."""
        try:
            f, rid, args, deadline = item
            return cls(str(f), str(rid), str(args), int(deadline))
        except (TypeError, ValueError) as exc:
            msg = f"{where}: unreadable DRPC request-log item {item!r:.200}; the store was changed by hand"
            raise StateError(msg) from exc

    @classmethod
    def from_bytes(cls, function: str, rid: bytes, data: bytes) -> Request:
        """A queue record back."""
        where = f"DRPC queue {queue_namespace(function)!r}, request {rid.decode(errors='replace')!r}"
        rec = _load(data, where)
        try:
            return cls(function, rid.decode(), str(rec["args"]), int(rec["deadline_ms"]), int(rec.get("at_ms", 0)))
        except (KeyError, TypeError, ValueError) as exc:
            msg = f"{where}: unreadable DRPC request ({exc}); the store was changed by hand"
            raise StateError(msg) from exc


@dataclass(frozen=True)
class Answer:
    """The answer to one request: the stream's final tuples, or why it failed.

    ``status`` is ``ok``, ``failed`` (a user function raised: ``error`` says where and why) or
    ``expired`` (its deadline passed before a batch could run it).
    """

    status: str
    tuples: list[list[Any]] = field(default_factory=list)
    error: str = ""
    txid: int | None = None
    deadline_ms: int = 0

    def to_bytes(self) -> bytes:
        """The answer record (JSON)."""
        rec = {"status": self.status, "tuples": self.tuples, "error": self.error, "txid": self.txid,
               "deadline_ms": self.deadline_ms}  # fmt: skip
        return json.dumps(rec, separators=(",", ":"), default=str).encode()

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> Answer:
        """An answer record back."""
        rec = _load(data, where)
        try:
            txid = rec.get("txid")
            return cls(str(rec["status"]), list(rec.get("tuples") or []), str(rec.get("error") or ""),
                       None if txid is None else int(txid), int(rec.get("deadline_ms") or 0))  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            msg = f"{where}: unreadable DRPC answer ({exc}); the store was changed by hand"
            raise StateError(msg) from exc


def jsonable(value: Any) -> Any:
    """``value`` as JSON can carry it: tuples become lists, bytes hex, dates ISO text, other objects ``str``."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    iso = getattr(value, "isoformat", None)
    if callable(iso):
        return iso()
    from decimal import Decimal

    if isinstance(value, Decimal):
        return float(value)
    return str(value)
