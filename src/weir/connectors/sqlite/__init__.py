"""SQLite, weir's embedded default store: plumbing, Storm's backend and Trident's backing maps.

- :mod:`weir.connectors.sqlite.connection` — options, connections (WAL, ``busy_timeout``), the retrying
  ``BEGIN IMMEDIATE`` write transaction and its error translation; shared by both adapters.
- :mod:`weir.connectors.sqlite.kv` — :class:`SqliteBackend`, the ``sqlite`` provider of Storm's
  key-value state (``weir_kv`` / ``weir_prepare`` / ``weir_txid``).
- :mod:`weir.connectors.sqlite.maps` — ``SqliteMapState``, Trident map states in one table each
  (imported from :mod:`weir.trident.backing`).
"""

from weir.connectors.sqlite.connection import MERGE_ROWS, SqliteOptions, path_from_url
from weir.connectors.sqlite.kv import SqliteBackend, open_backend

__all__ = ["MERGE_ROWS", "SqliteBackend", "SqliteOptions", "open_backend", "path_from_url"]
