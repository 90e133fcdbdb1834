"""The errors of DRPC (``weir.drpc``): each names the function, the request and what to do.

::

    WeirError
    └── DRPCError (RuntimeError)          a DRPC request was not answered
        ├── DRPCUnknownFunctionError (LookupError)   no topology serves the function in this store
        ├── DRPCTimeoutError (TimeoutError)          no answer before the request's deadline
        └── DRPCExecutionError                       the request failed inside the topology
"""

from __future__ import annotations

from weir.errors import WeirError

__all__ = ["DRPCError", "DRPCExecutionError", "DRPCTimeoutError", "DRPCUnknownFunctionError"]


class DRPCError(WeirError, RuntimeError):
    """A DRPC request was not answered (see the subclasses)."""

    def __init__(self, msg: str, *, function: str = "", request_id: str = "") -> None:
        super().__init__(msg)
        self.function = function
        self.request_id = request_id


class DRPCUnknownFunctionError(DRPCError, LookupError):
    """No topology has registered the DRPC function in this store (``new_drpc_stream(name)``)."""


class DRPCTimeoutError(DRPCError, TimeoutError):
    """The request had no answer within its timeout (``waited`` seconds)."""

    def __init__(self, msg: str, *, function: str = "", request_id: str = "", waited: float = 0.0) -> None:
        super().__init__(msg, function=function, request_id=request_id)
        self.waited = waited


class DRPCExecutionError(DRPCError):
    """The request failed inside the topology (a user function raised); ``txid`` is the batch that ran it."""

    def __init__(self, msg: str, *, function: str = "", request_id: str = "", txid: int | None = None) -> None:
        super().__init__(msg, function=function, request_id=request_id)
        self.txid = txid
