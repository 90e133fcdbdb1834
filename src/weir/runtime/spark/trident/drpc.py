"""Trident DRPC on the engine: the request log, the answers, and the registry of served functions.

Per batch with txid *n* (inside the coordinator's attempt, see :mod:`weir.checkpoint.coordinator`):

1. :meth:`DrpcDriver.take`: if the request log holds an entry for *n* (an earlier attempt, or a
   driver that died), the batch takes exactly those requests again. Otherwise it takes the requests
   still in the log under older txids (their batch committed but the driver died before writing
   the answers: they are run again, against the newer committed state — except those already
   answered, which only leave the queue, and those no longer queued, which nobody waits for) and the pending requests of
   every served function's queue (at most ``weir.drpc.batch.max.requests`` per function), and
   writes them as the entry for *n* — one atomic write, fenced by the driver's epoch — *before* any
   stage sees them (crash point ``drpc_after_request_log``). A request whose deadline has passed is
   answered ``expired`` instead and leaves the queue.
2. The batch runs: states are updated first, then each DRPC stream is evaluated for its requests
   (one Spark job per function with requests; a function raising fails only the requests it
   raised for, found by re-running a failed job's requests one at a time).
3. :meth:`DrpcDriver.answered`, once ``COMMITTED(n)`` is stored: the answers are written (a request
   already answered keeps its answer), the requests leave the queue, and the log entry is pruned.
   A crash before this step leaves the entry in the log: the next batch takes its requests again
   (step 1), so a request is answered once or failed at its deadline, never dropped.

Everything is JSON in the topology's own store (:mod:`weir.drpc.store`); nothing is unpickled.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from weir._faults import crash_point
from weir._util import positive_int
from weir.drpc.store import (
    REGISTRY_NAMESPACE,
    Answer,
    Request,
    log_namespace,
    queue_namespace,
    registry_key,
    results_namespace,
)
from weir.errors import ConfigError, TopologyError
from weir.state.backend import Backend

__all__ = ["DrpcDriver", "DrpcFunction", "DrpcOptions"]

log = logging.getLogger("weir.trident")

#: how often the driver refreshes its registration (``at_ms``) and prunes unread answers
HOUSEKEEPING_S = 5.0
#: an answer nobody read is removed this long after its request's deadline
UNREAD_KEEP_MS = 60_000


@dataclass(frozen=True)
class DrpcOptions:
    """DRPC settings of a topology (parsed once at submit).

    Attributes
    ----------
    batch_max : ``weir.drpc.batch.max.requests`` (default 1000): requests per function per batch
    """

    batch_max: int = 1000

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> DrpcOptions:
        """Parse weir's keys; a bad value raises :class:`ConfigError` at submit."""
        try:
            n = positive_int(conf.get("weir.drpc.batch.max.requests", 1000), "weir.drpc.batch.max.requests")
        except (TypeError, ValueError) as exc:
            raise ConfigError(str(exc)) from exc
        return cls(int(n))


@dataclass(frozen=True)
class DrpcFunction:
    """A served function: its name, its answer's visible fields, and whether the answer is one value."""

    name: str
    fields: tuple[str, ...]
    single: bool


def _log_key(txid: int) -> bytes:
    return f"{txid:020d}".encode()


class DrpcDriver:
    """The driver side of a topology's DRPC streams (one per run)."""

    def __init__(
        self, topology: str, functions: list[DrpcFunction], backend: Backend, options: DrpcOptions | None = None
    ) -> None:
        self.topology = topology
        self.functions = {f.name: f for f in functions}
        self.backend = backend
        self.options = options or DrpcOptions()
        self.namespace = log_namespace(topology)
        self.epoch: int | None = None
        self._housekept = 0.0

    # ---- submit ---------------------------------------------------------------------------------
    def register(self) -> None:
        """Register the functions in the store (at submit); refuse one another topology serves."""
        for name in self.functions:
            data = self.backend.get(REGISTRY_NAMESPACE, registry_key(name))
            if data is not None:
                try:
                    owner = json.loads(data).get("topology")
                except (ValueError, AttributeError):
                    owner = None
                if owner != self.topology:
                    msg = (
                        f"topology {self.topology!r}: DRPC function {name!r} is already served by topology {owner!r} "
                        f"in {self.backend.describe()}; rename the function, or, if {owner!r} is gone for good, "
                        f"remove its registration: weir state delete '{REGISTRY_NAMESPACE}' fn/{name} --key-class str "
                        "--url URL"
                    )
                    raise TopologyError(msg, topology=self.topology, component=f"drpc:{name}")
        self._write_registry()

    def _write_registry(self) -> None:
        now = int(time.time() * 1000)
        rows: dict[bytes, bytes | None] = {}
        for name, fn in self.functions.items():
            rec = {"topology": self.topology, "single": fn.single, "fields": list(fn.fields), "at_ms": now}
            rows[registry_key(name)] = json.dumps(rec, separators=(",", ":")).encode()
        self.backend.write_direct(REGISTRY_NAMESPACE, rows, None)

    # ---- the batch --------------------------------------------------------------------------------
    def _log(self) -> dict[int, list[Request]]:
        if self.epoch is None:
            self.epoch = self.backend.acquire_epoch(self.namespace)
        out: dict[int, list[Request]] = {}
        for key, data in self.backend.scan(self.namespace):
            where = f"topology {self.topology!r}, DRPC request log {self.namespace!r} key {key!r}"
            try:
                rec = json.loads(data)
                txid = int(rec["txid"])
                items = list(rec["requests"])
            except (ValueError, KeyError, TypeError) as exc:
                msg = f"{where}: unreadable entry ({exc}); the store was changed by hand"
                raise TopologyError(msg, topology=self.topology) from exc
            out[txid] = [Request.from_json(i, where) for i in items]
        return out

    def take(self, txid: int) -> dict[str, list[Request]]:
        """The requests batch ``txid`` runs, per function (logged before they are returned)."""
        entries = self._log()
        logged = entries.get(txid)
        if logged is not None:  # a retry or a replay: exactly the same requests
            return self._by_function(logged)
        now = int(time.time() * 1000)
        queued = {name: list(self.backend.scan(queue_namespace(name))) for name in self.functions}
        expired: dict[str, dict[bytes, bytes | None]] = {}
        taken: list[Request] = []
        seen = self._leftovers(entries, txid, queued)
        for r in (r for old in sorted(t for t in entries if t < txid) for r in entries[old]):
            if r.rid not in seen:  # committed, not answered, still asked: run again
                seen.add(r.rid)
                if r.deadline_ms <= now:
                    expired.setdefault(r.function, {})[r.rid.encode()] = self._expired(r, txid)
                else:
                    taken.append(r)
        for name in self.functions:
            n = sum(1 for r in taken if r.function == name)
            pending = []
            for key, data in queued[name]:
                if key.decode(errors="replace") in seen:
                    continue
                pending.append(Request.from_bytes(name, key, data))
            pending.sort(key=lambda r: (r.at_ms, r.rid))
            for r in pending:
                seen.add(r.rid)
                if r.deadline_ms <= now:
                    expired.setdefault(name, {})[r.rid.encode()] = self._expired(r, txid)
                elif n < self.options.batch_max:
                    taken.append(r)
                    n += 1
        changes: dict[bytes, bytes | None] = {_log_key(t): None for t in entries if t < txid}
        if taken:
            rec = {"txid": txid, "requests": [r.to_json() for r in taken]}
            changes[_log_key(txid)] = json.dumps(rec, separators=(",", ":")).encode()
        if changes:
            self.backend.write_direct(self.namespace, changes, self.epoch)
        if taken:
            crash_point("drpc_after_request_log", txid, topology=self.topology)
        for name, answers in expired.items():
            self._write_answers(name, answers)
        self._housekeeping()
        return self._by_function(taken)

    def _leftovers(
        self, entries: Mapping[int, list[Request]], txid: int, queued: Mapping[str, list[tuple[bytes, bytes]]]
    ) -> set[str]:
        """The ids of requests logged under txids before ``txid`` that must not run again.

        A driver that died inside :meth:`answered` left its entry in the log: a request whose answer
        is already written only leaves the queue (it keeps its one answer); one no longer in its queue
        (the client read its answer and removed both, or withdrew it) has nobody waiting for it, and
        running it again would leave an answer nobody reads.
        """
        old = [r for t in sorted(entries) if t < txid for r in entries[t]]
        done: set[str] = set()
        for name in self.functions:
            mine = [r.rid.encode() for r in old if r.function == name]
            if not mine:
                continue
            asked = {k for k, _ in queued[name]}
            present = self.backend.get_many(results_namespace(name), mine)
            answered = [k for k, a in zip(mine, present, strict=True) if a is not None]
            done.update(k.decode() for k in mine if k not in asked or k in answered)
            if answered:
                self.backend.write_direct(queue_namespace(name), dict.fromkeys(answered), None)
        done.update(r.rid for r in old if r.function not in self.functions)
        return done

    def _expired(self, r: Request, txid: int) -> bytes:
        err = (
            f"the request expired (deadline passed) before batch {txid} of topology {self.topology!r} could run "
            "it; the topology is behind or was down: raise the timeout"
        )
        return Answer("expired", error=err, txid=txid, deadline_ms=r.deadline_ms).to_bytes()

    def _by_function(self, requests: list[Request]) -> dict[str, list[Request]]:
        out: dict[str, list[Request]] = {}
        for r in requests:
            if r.function in self.functions:
                out.setdefault(r.function, []).append(r)
        return out

    def _write_answers(self, function: str, answers: dict[bytes, bytes | None], *, dequeue: bool = True) -> None:
        """Write answers not yet there (a request already answered keeps its answer); dequeue the requests."""
        if not answers:
            return
        ns = results_namespace(function)
        keys = list(answers)
        present = self.backend.get_many(ns, keys)
        new = {k: v for k, v, old in zip(keys, answers.values(), present, strict=True) if old is None}
        if new:
            self.backend.write_direct(ns, new, None)
        if dequeue:
            self.backend.write_direct(queue_namespace(function), dict.fromkeys(keys), None)

    def answered(self, txid: int, answers: Mapping[str, Mapping[str, Answer]]) -> None:
        """``COMMITTED(txid)`` is stored: publish the answers of its requests.

        1. write every function's answers (an id already answered keeps its answer);
        2. remove the requests from their queues;
        3. delete the log entry of ``txid``.

        A crash between two steps leaves the entry in the log; the next batch's :meth:`take` removes
        answered requests from the queue without running them again (:meth:`_leftovers`).
        """
        for name, per_rid in answers.items():
            self._write_answers(name, {rid.encode(): a.to_bytes() for rid, a in per_rid.items()}, dequeue=False)
        if not answers:
            return
        crash_point("drpc_after_answers", txid, topology=self.topology)
        for name, per_rid in answers.items():
            self.backend.write_direct(queue_namespace(name), {rid.encode(): None for rid in per_rid}, None)
        crash_point("drpc_after_dequeue", txid, topology=self.topology)
        self.backend.write_direct(self.namespace, {_log_key(txid): None}, self.epoch)

    def _housekeeping(self) -> None:
        """Every few seconds: refresh the registration and remove answers nobody read."""
        mono = time.monotonic()
        if mono - self._housekept < HOUSEKEEPING_S:
            return
        self._housekept = mono
        self._write_registry()
        limit = int(time.time() * 1000) - UNREAD_KEEP_MS
        for name in self.functions:
            ns = results_namespace(name)
            stale: dict[bytes, bytes | None] = {}
            for key, data in self.backend.scan(ns):
                try:
                    deadline = int(json.loads(data).get("deadline_ms") or 0)
                except (ValueError, AttributeError, TypeError):
                    continue  # not ours to judge: left alone
                if deadline and deadline < limit:
                    stale[key] = None
            if stale:
                self.backend.write_direct(ns, stale, None)
