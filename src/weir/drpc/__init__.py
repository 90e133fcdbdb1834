"""Trident DRPC: ask a running topology a question and get the answer computed from its committed state.

A topology serves a function with :meth:`weir.trident.TridentTopology.new_drpc_stream`; a client asks
it through the topology's own store::

    from weir.drpc import Client

    total = Client("sqlite:///weir-state/state.db").execute("words", "cat dog the man", timeout=30)

See docs/trident.md, "DRPC", for the protocol (request queue, request log keyed by txid, answers
written after the batch's commit) and its guarantees.
"""

from __future__ import annotations

from weir.drpc.client import Client
from weir.drpc.errors import DRPCError, DRPCExecutionError, DRPCTimeoutError, DRPCUnknownFunctionError

__all__ = ["Client", "DRPCError", "DRPCExecutionError", "DRPCTimeoutError", "DRPCUnknownFunctionError"]
