"""PostgreSQL, a shared store other services query with SQL: plumbing, Storm's backend, Trident's maps.

- :mod:`weir.connectors.postgres.connection` — the optional ``psycopg`` import (with the install hint),
  password-free URLs and error texts, connection hints; shared by both adapters.
- :mod:`weir.connectors.postgres.kv` — :class:`PostgresBackend`, the ``postgres`` provider of Storm's
  key-value state (``weir_kv`` / ``weir_prepare`` / ``weir_txid``).
- :mod:`weir.connectors.postgres.maps` — ``PostgresMapState``, Trident map states in typed tables
  (also offered as :mod:`weir.trident.backing`'s ``PostgresMapState``).

This ``__init__`` registers the store with :mod:`weir.state.registry` (:data:`CONNECTOR`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from weir.connectors.postgres.connection import redact_url
from weir.connectors.postgres.kv import PostgresBackend, PostgresOptions, open_backend
from weir.errors import ConfigError
from weir.state.registry import Connector, lazy_attrs, register

__all__ = ["CONNECTOR", "PostgresBackend", "PostgresOptions", "open_backend", "redact_url"]

_MAPS = "weir.connectors.postgres.maps"


def _check_options(options: dict[str, Any], conf: Mapping[str, Any], key: str) -> None:
    if "url" not in options:
        msg = f"{key}: the postgres provider needs a 'url' (postgresql://user@host:port/db)"
        raise ConfigError(msg)


def _catalog(backend: Any) -> Any:
    from weir.connectors.postgres.maps import catalog_for

    return catalog_for(backend)


CONNECTOR = register(
    Connector(
        name="postgres",
        url_schemes=("postgres", "postgresql"),
        url_example="postgresql://...",
        aliases=("postgresql", "pg"),
        option_keys=frozenset({"schema", "tablePrefix", "connectTimeout", "statementTimeout", "socketTimeout"}),
        check_options=_check_options,
        open_backend=open_backend,
        map_state=lazy_attrs(_MAPS, "PostgresMapState")["PostgresMapState"],
        catalog=_catalog,
        exports={
            "weir.trident.backing": lazy_attrs(_MAPS, "PostgresBackingMap", "PostgresMapState", "PostgresMapStore")
        },
    )
)
