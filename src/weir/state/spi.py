"""The storage SPI and the admin names: what a store implements and what weir's own tools use.

A user writes bolts against :class:`~weir.state.KeyValueState` and picks a store with
:class:`~weir.state.StateFactory`; everything below that line lives here:

* :class:`Backend` and :class:`TxidRecord` — what a store implements (rows per namespace, the
  prepared change set, the committed txid and the fencing epoch);
* :class:`TransactionalKeyValueState` and its :class:`StatePhase` — Storm's prepare/commit/rollback
  over a backend;
* :class:`KeyValueStateProvider`, :class:`ProviderConfig`, :func:`parse_provider_config` and
  :func:`open_backend` — the built-in providers, configured from Storm's keys (``weir state``,
  ``weir ui`` and the runtime open stores through them).
"""

from weir.state.backend import Backend, TxidRecord
from weir.state.config import ProviderConfig, parse_provider_config
from weir.state.factory import KeyValueStateProvider, open_backend
from weir.state.kv import StatePhase, TransactionalKeyValueState

__all__ = [
    "Backend",
    "KeyValueStateProvider",
    "ProviderConfig",
    "StatePhase",
    "TransactionalKeyValueState",
    "TxidRecord",
    "open_backend",
    "parse_provider_config",
]
