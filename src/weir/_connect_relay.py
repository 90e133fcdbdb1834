"""The pieces of weir's Spark Connect relay that travel to the server (stdlib only).

:class:`BatchRelayFunction` is the ``foreachBatch`` function of a query started from a Spark
Connect client, and :class:`RelayReports` the task-report sink of its stages; both only send JSON
to the client's :class:`weir.runtime.spark.connect.ConnectRelay`. This module imports nothing but
the standard library: the server's ``foreachBatch`` worker must connect back to Spark within a
fixed 10 s of starting, which a worker importing weir's runtime can miss on a loaded machine.
"""

from __future__ import annotations

import json
import socket
from typing import Any

__all__ = ["BatchRelayFunction", "RelayReports"]


def _send(addr: tuple[str, int], msg: dict[str, Any], timeout: float | None) -> dict[str, Any]:
    with socket.create_connection(addr, timeout=30) as sock:
        sock.settimeout(timeout)
        sock.sendall(json.dumps(msg).encode() + b"\n")
        with sock.makefile("rb") as fh:
            line = fh.readline()
    if not line:
        msg_ = f"the weir client at {addr[0]}:{addr[1]} closed the connection without an answer (did it exit?)"
        raise ConnectionError(msg_)
    answer: dict[str, Any] = json.loads(line)
    return answer


class RelayReports:
    """The run's task-report sink over Connect: ``add()`` on an executor sends, ``value`` on the client.

    Pickled (into a stage's function), only the relay's address and token travel.
    """

    def __init__(self, relay: Any, addr: tuple[str, int], token: str) -> None:
        self._relay = relay
        self.addr = addr
        self.token = token

    def __getstate__(self) -> dict[str, Any]:
        return {"_relay": None, "addr": self.addr, "token": self.token}

    @property
    def value(self) -> list[Any]:
        """The reports received since the last reset (client side)."""
        assert self._relay is not None, "RelayReports.value is read on the client only"
        return list(self._relay.reports)

    @value.setter
    def value(self, reports: list[Any]) -> None:
        assert self._relay is not None, "RelayReports.value is set on the client only"
        with self._relay.lock:
            self._relay.reports = list(reports)

    def add(self, reports: list[Any]) -> None:
        """Send ``reports`` (TaskReports) to the client; returns once the client has them."""
        if not reports:
            return
        answer = _send(self.addr, {"t": self.token, "k": "reports", "r": [r.to_text() for r in reports]}, 120)
        if not answer.get("ok"):
            msg = f"the weir client refused the task reports: {answer.get('error')}"
            raise RuntimeError(msg)


class BatchRelayFunction:
    """The ``foreachBatch`` function sent to the server: hands each micro-batch to the client."""

    def __init__(self, addr: tuple[str, int], token: str, topology: str) -> None:
        self.addr = addr
        self.token = token
        self.topology = topology

    def __call__(self, df: Any, batch_id: int) -> None:
        """Hand batch ``batch_id`` to the client and wait for it; raise the client's error if it failed."""
        relation = df._plan._relation_id  # the server's cache id of the batch's DataFrame
        session = df.sparkSession.session_id
        msg = {"t": self.token, "k": "batch", "b": int(batch_id), "df": relation, "s": session}
        try:
            answer = _send(self.addr, msg, None)
        except OSError as exc:
            err = (
                f"topology {self.topology!r}, batch {batch_id}: the weir client that runs this query cannot be "
                f"reached at {self.addr[0]}:{self.addr[1]} ({exc}); it has exited: start the topology again"
            )
            raise RuntimeError(err) from exc
        if not answer.get("ok"):
            raise RuntimeError(str(answer.get("error")))
