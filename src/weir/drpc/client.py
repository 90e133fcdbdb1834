"""The DRPC client: ``Client(url).execute(function, args, timeout=...)``.

The client talks to the store of the topology that serves the function, never to the topology
itself: it appends a request to the function's queue, polls for the answer, and deletes both
(they are its own) once it has the answer or gives up.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

from weir.drpc.errors import DRPCExecutionError, DRPCTimeoutError, DRPCUnknownFunctionError
from weir.drpc.store import (
    REGISTRY_NAMESPACE,
    Answer,
    Request,
    queue_namespace,
    registry_key,
    results_namespace,
)
from weir.errors import ConfigError

__all__ = ["Client"]

#: the longest pause between two polls of the answer (the first ones are shorter)
MAX_POLL_S = 0.2


class Client:
    """Runs DRPC requests against the topologies whose store is ``url``.

    Parameters
    ----------
    url : str
        The store of the serving topology (its ``topology.state.provider``): ``sqlite:///PATH``,
        ``redis://HOST:PORT/DB``, ``postgresql://…``.

    Notes
    -----
    ``Client("sqlite:///weir-state/state.db").execute("words", "cat dog the man", timeout=30)``
    returns seed 004's sum (an ``int``) once a topology serving ``words`` runs on that store; the
    runnable example is in docs/trident.md, "DRPC".
    """

    def __init__(self, url: str) -> None:
        from weir.state.factory import StateFactory

        if not isinstance(url, str) or "://" not in url:
            msg = f"weir.drpc.Client: expected a store URL such as sqlite:///PATH or redis://HOST:PORT, got {url!r}"
            raise ConfigError(msg)
        self.url = url
        self.backend = StateFactory.from_url(url).backend
        self._local = threading.local()

    @property
    def last_txid(self) -> int | None:
        """The txid of the batch that answered this thread's last request (``None`` before one)."""
        txid: int | None = getattr(self._local, "txid", None)
        return txid

    def functions(self) -> dict[str, str]:
        """The DRPC functions registered in the store, with the topology that serves each."""
        out = {}
        for key, data in self.backend.scan(REGISTRY_NAMESPACE):
            name = key.decode(errors="replace")
            if name.startswith("fn/"):
                try:
                    out[name[3:]] = str(json.loads(data).get("topology", "?"))
                except (ValueError, AttributeError):
                    out[name[3:]] = "?"
        return out

    def _registration(self, function: str) -> dict[str, Any]:
        data = self.backend.get(REGISTRY_NAMESPACE, registry_key(function))
        if data is None:
            known = self.functions()
            served = ", ".join(f"{f!r} ({t})" for f, t in sorted(known.items())) or "none"
            msg = (
                f"no topology serves DRPC function {function!r} in {self.backend.describe()} ({self.url}); "
                f"functions served there: {served}. Submit a topology with new_drpc_stream({function!r}) "
                "whose topology.state.provider is this store"
            )
            raise DRPCUnknownFunctionError(msg, function=function)
        try:
            reg = json.loads(data)
        except ValueError:
            reg = {}
        return reg if isinstance(reg, dict) else {}

    def execute(self, function: str, args: str, timeout: float = 30.0) -> Any:
        """Run ``function`` on ``args`` and return its answer.

        The answer is the list of the DRPC stream's final tuples (each a list of its visible
        fields, sorted), or — when the stream ends in an ungrouped ``aggregate`` with one output
        field — that single value (e.g. the ``int`` of a ``Sum``).

        Raises
        ------
        DRPCUnknownFunctionError
            No topology registered ``function`` in this store.
        DRPCTimeoutError
            No answer within ``timeout`` seconds (the request is withdrawn).
        DRPCExecutionError
            The request failed inside the topology (a user function raised; the message says where).
        """
        reg = self._registration(function)
        tuples = self._run(function, args, timeout, reg)
        if reg.get("single"):
            return tuples[0][0] if tuples else None
        return tuples

    def execute_tuples(self, function: str, args: str, timeout: float = 30.0) -> list[list[Any]]:
        """Like :meth:`execute`, always as the list of result tuples."""
        return self._run(function, args, timeout, self._registration(function))

    def _run(self, function: str, args: str, timeout: float, reg: dict[str, Any]) -> list[list[Any]]:
        if not isinstance(args, str):
            msg = f"DRPC function {function!r}: args must be a str (Storm's DRPC arguments are text), got {args!r:.100}"
            raise ConfigError(msg)
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            msg = f"DRPC function {function!r}: timeout must be a positive number of seconds, got {timeout!r}"
            raise ConfigError(msg)
        rid = uuid.uuid4().hex
        start = time.monotonic()
        now_ms = int(time.time() * 1000)
        req = Request(function, rid, args, now_ms + int(timeout * 1000), now_ms)
        queue, results, key = queue_namespace(function), results_namespace(function), rid.encode()
        self.backend.write_direct(queue, {key: req.to_bytes()}, None)
        pause = 0.01
        try:
            while True:
                data = self.backend.get(results, key)
                if data is not None:
                    answer = Answer.from_bytes(data, f"DRPC answer {results!r}/{rid}")
                    break
                waited = time.monotonic() - start
                if waited >= timeout:
                    raise DRPCTimeoutError(
                        self._timeout_message(function, rid, waited, reg), function=function, request_id=rid,
                        waited=waited,
                    )  # fmt: skip
                time.sleep(min(pause, max(0.0, timeout - waited)))
                pause = min(pause * 1.5, MAX_POLL_S)
        finally:  # the request and its answer are the client's own: withdrawn / consumed either way
            self.backend.write_direct(queue, {key: None}, None)
            self.backend.write_direct(results, {key: None}, None)
        self._local.txid = answer.txid
        if answer.status == "ok":
            return answer.tuples
        if answer.status == "expired":
            msg = f"DRPC function {function!r}, request {rid}: {answer.error}"
            raise DRPCTimeoutError(msg, function=function, request_id=rid, waited=time.monotonic() - start)
        msg = (
            f"DRPC function {function!r}, request {rid} failed in topology {reg.get('topology', '?')!r} "
            f"(txid {answer.txid}): {answer.error}"
        )
        raise DRPCExecutionError(msg, function=function, request_id=rid, txid=answer.txid)

    def _timeout_message(self, function: str, rid: str, waited: float, reg: dict[str, Any]) -> str:
        topology = reg.get("topology", "?")
        msg = f"DRPC function {function!r}, request {rid}: no answer after {waited:.1f} s (the request is withdrawn)"
        fresh = self._registration(function)
        at_ms = int(fresh.get("at_ms") or 0)
        if at_ms:
            ago = time.time() - at_ms / 1000
            msg += f"; topology {topology!r} last took requests {ago:.1f} s ago"
            if ago > max(10.0, waited):
                msg += " — is it running?"
        return msg + "; raise the timeout, or check the topology's progress (weir run's display, run.status())"
