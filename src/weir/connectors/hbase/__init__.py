"""HBase, through its Thrift gateway: the client plumbing, Storm's backend and Trident's backing maps.

- :mod:`weir.connectors.hbase.client` — :class:`HBaseSettings`, the optional ``happybase`` import, the
  per-process (fork-safe) gateway connections and the translation of Thrift errors.
- :mod:`weir.connectors.hbase.kv` — :class:`HBaseBackend`, the ``hbase`` provider of Storm's key-value
  state (seed 003's design: committed rows, a prepare row, a txid row; check-and-put commits; the
  keys bucketed as columns of a few hundred rows per namespace, or Storm's row per key).
- :mod:`weir.connectors.hbase.maps` — ``HBaseMapState``, Trident map states as rows under a key prefix
  (also offered as :mod:`weir.trident.backing`'s ``HBaseMapState``).

This ``__init__`` registers the store with :mod:`weir.state.registry` (:data:`CONNECTOR`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from weir.connectors.hbase.client import HBaseSettings, hbase_settings_from_storm, layout_options
from weir.connectors.hbase.kv import HBaseBackend, open_backend
from weir.errors import ConfigError
from weir.state.registry import Connector, lazy_attrs, register

__all__ = ["CONNECTOR", "HBaseBackend", "HBaseSettings", "open_backend"]

_MAPS = "weir.connectors.hbase.maps"
_STORM_KEYS = frozenset({"hbaseConfigKey", "tableName", "columnFamily"})


def _check_options(options: dict[str, Any], conf: Mapping[str, Any], key: str) -> None:
    """Resolve a url or Storm's keys into one validated url (the layout folded in)."""
    storm_keys = _STORM_KEYS & set(options)
    if "url" in options:
        if storm_keys:
            msg = (
                f"{key}: give the hbase provider either a url or Storm's "
                f"hbaseConfigKey/tableName/columnFamily, not both (got url and {', '.join(sorted(storm_keys))})"
            )
            raise ConfigError(msg)
        settings = HBaseSettings.from_url(options["url"])  # validate now
        layout, buckets = layout_options(options, key)
        if layout is not None or buckets is not None:
            settings = replace(
                settings,
                layout=settings.layout if layout is None else layout,
                buckets=settings.buckets if buckets is None else buckets,
            )
            options["url"] = settings.url
    else:
        # Storm's keys resolve (with the hbaseConfigKey map of ``conf``) into one url, so the
        # parsed config is self-contained when it travels to executors
        options["url"] = hbase_settings_from_storm(options, conf, key).url
        for k in storm_keys:
            del options[k]
    for k in ("layout", "buckets"):
        options.pop(k, None)


def _catalog(backend: Any) -> Any:
    from weir.connectors.hbase.maps import catalog_for

    return catalog_for(backend)


CONNECTOR = register(
    Connector(
        name="hbase",
        url_schemes=("hbase",),
        url_example="hbase://HOST:PORT/TABLE?family=CF",
        storm_providers=("org.apache.storm.hbase.state.HBaseKeyValueStateProvider",),
        option_keys=_STORM_KEYS | {"layout", "buckets"},
        infer_keys=frozenset({"tableName", "hbaseConfigKey"}),
        check_options=_check_options,
        open_backend=open_backend,
        map_state=lazy_attrs(_MAPS, "HBaseMapState")["HBaseMapState"],
        catalog=_catalog,
        exports={"weir.trident.backing": lazy_attrs(_MAPS, "HBaseBackingMap", "HBaseMapState", "HBaseMapStore")},
    )
)
