"""Memcached: client plumbing (:mod:`.client`) and Trident's ``MemcachedMapState`` (:mod:`.maps`).

Storm has no memcached key-value state provider, so this store has no ``kv.py``: ``topology.state.provider``
cannot name it, and ``weir state --url memcached://HOST:PORT`` opens its map states only. The map
states are also offered as :mod:`weir.trident.backing`'s ``MemcachedMapState``.

This ``__init__`` registers the store with :mod:`weir.state.registry` (:data:`CONNECTOR`).
"""

from __future__ import annotations

from typing import Any

from weir.state.registry import Connector, lazy_attrs, register

__all__ = ["CONNECTOR"]

_MAPS = "weir.connectors.memcached.maps"


def _catalog_for_url(url: str) -> Any:
    from weir.connectors.memcached.maps import catalog_for_url

    return catalog_for_url(url)


CONNECTOR = register(
    Connector(
        name="memcached",
        url_schemes=("memcached",),
        url_example="memcached://HOST:PORT",
        map_state=lazy_attrs(_MAPS, "MemcachedMapState")["MemcachedMapState"],
        url_catalog=_catalog_for_url,
        exports={
            "weir.trident.backing": lazy_attrs(_MAPS, "MemcachedBackingMap", "MemcachedMapState", "MemcachedMapStore")
        },
    )
)
