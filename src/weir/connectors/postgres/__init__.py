"""PostgreSQL, a shared store other services query with SQL: plumbing, Storm's backend, Trident's maps.

- :mod:`weir.connectors.postgres.connection` — the optional ``psycopg`` import (with the install hint),
  password-free URLs and error texts, connection hints; shared by both adapters.
- :mod:`weir.connectors.postgres.kv` — :class:`PostgresBackend`, the ``postgres`` provider of Storm's
  key-value state (``weir_kv`` / ``weir_prepare`` / ``weir_txid``).
- :mod:`weir.connectors.postgres.maps` — ``PostgresMapState``, Trident map states in typed tables
  (imported from :mod:`weir.trident.backing`).
"""

from weir.connectors.postgres.connection import redact_url
from weir.connectors.postgres.kv import PostgresBackend, PostgresOptions, open_backend

__all__ = ["PostgresBackend", "PostgresOptions", "open_backend", "redact_url"]
