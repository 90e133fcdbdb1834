"""SQLite, weir's embedded default store: plumbing, Storm's backend and Trident's backing maps.

- :mod:`weir.connectors.sqlite.connection` — options, connections (WAL, ``busy_timeout``), the retrying
  ``BEGIN IMMEDIATE`` write transaction and its error translation; shared by both adapters.
- :mod:`weir.connectors.sqlite.kv` — :class:`SqliteBackend`, the ``sqlite`` provider of Storm's
  key-value state (``weir_kv`` / ``weir_prepare`` / ``weir_txid``).
- :mod:`weir.connectors.sqlite.maps` — ``SqliteMapState``, Trident map states in one table each
  (also offered as :mod:`weir.trident.backing`'s ``SqliteMapState``).

This ``__init__`` registers the store with :mod:`weir.state.registry` (:data:`CONNECTOR`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from weir.connectors.sqlite.connection import MERGE_ROWS, SqliteOptions, path_from_url
from weir.connectors.sqlite.kv import SqliteBackend, open_backend
from weir.state.config import default_state_dir
from weir.state.registry import Connector, lazy_attrs, register

__all__ = ["CONNECTOR", "MERGE_ROWS", "SqliteBackend", "SqliteOptions", "open_backend", "path_from_url"]

_MAPS = "weir.connectors.sqlite.maps"


def _check_options(options: dict[str, Any], conf: Mapping[str, Any], key: str) -> None:
    """No ``url`` nor ``path``: the default store ``<weir.state.dir>/state.db``."""
    if "url" not in options and "path" not in options:
        options["url"] = "sqlite:///" + os.path.abspath(os.path.join(default_state_dir(conf), "state.db"))


def _catalog(backend: Any) -> Any:
    from weir.connectors.sqlite.maps import catalog_for

    return catalog_for(backend)


CONNECTOR = register(
    Connector(
        name="sqlite",
        url_schemes=("sqlite",),
        url_example="sqlite:///PATH",
        option_keys=frozenset({"path", "timeout", "synchronous", "mergeRows"}),
        check_options=_check_options,
        open_backend=open_backend,
        map_state=lazy_attrs(_MAPS, "SqliteMapState")["SqliteMapState"],
        catalog=_catalog,
        exports={"weir.trident.backing": lazy_attrs(_MAPS, "SqliteBackingMap", "SqliteMapState", "SqliteMapStore")},
    )
)
