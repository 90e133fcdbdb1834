"""Redis and Redis Cluster: the client plumbing, Storm's backend, Trident's backing maps and a spout.

- :mod:`weir.connectors.redis.client` — :class:`RedisSettings` (URL, Storm's ``jedisPoolConfig`` /
  ``jedisClusterConfig``, TLS), the optional ``redis`` import, a connected and checked client
  (:func:`redis_client`) and the translation of connection failures into
  :class:`~weir.errors.ConfigError`; shared by everything below.
- :mod:`weir.connectors.redis.kv` — :class:`RedisBackend`, the ``redis`` provider of Storm's key-value
  state: every write one epoch-fenced Lua script.
- :mod:`weir.connectors.redis.maps` — ``RedisMapState``, Trident map states as JSON strings under a key
  prefix (also offered as :mod:`weir.trident.backing`'s ``RedisMapState``).
- :mod:`weir.connectors.redis.spout` — :class:`RedisStreamSpout`, a replayable spout over Redis Streams
  (also offered as ``weir.sources.RedisStreamSpout``).
- :mod:`weir.connectors.redis.queue_spout` — :class:`RedisQueueSpout`, a Storm spout (``next_tuple``/
  ``ack``/``fail``) over a Redis list used as a reliable queue (also ``weir.sources.RedisQueueSpout``).

This ``__init__`` registers the store with :mod:`weir.state.registry` (:data:`CONNECTOR`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from weir.connectors.redis.client import RedisSettings, redis_client
from weir.connectors.redis.kv import COMMIT_CHUNK, INLINE_LIMIT, RedisBackend, open_backend
from weir.errors import ConfigError
from weir.state.config import check_option_types
from weir.state.registry import Connector, lazy_attrs, register

__all__ = [
    "CONNECTOR",
    "COMMIT_CHUNK",
    "INLINE_LIMIT",
    "RedisBackend",
    "RedisSettings",
    "open_backend",
    "redis_client",
]

_MAPS = "weir.connectors.redis.maps"
_POOL_KEYS = {"host": str, "port": int, "timeout": int, "database": int, "password": (str, type(None))}
_CLUSTER_KEYS = {"nodes": list, "timeout": int, "maxRedirections": int, "password": (str, type(None))}


def _check_options(options: dict[str, Any], conf: Mapping[str, Any], key: str) -> None:
    """Storm's ``jedisPoolConfig`` / ``jedisClusterConfig``: their keys and value types."""
    if "jedisPoolConfig" in options:
        if not isinstance(options["jedisPoolConfig"], dict):
            msg = f"{key}: jedisPoolConfig must be an object"
            raise ConfigError(msg)
        check_option_types("jedisPoolConfig", options["jedisPoolConfig"], _POOL_KEYS)
    if "jedisClusterConfig" in options:
        if not isinstance(options["jedisClusterConfig"], dict):
            msg = f"{key}: jedisClusterConfig must be an object"
            raise ConfigError(msg)
        check_option_types("jedisClusterConfig", options["jedisClusterConfig"], _CLUSTER_KEYS)
        nodes = options["jedisClusterConfig"].get("nodes", [])
        if not nodes or not all(isinstance(n, str) and ":" in n for n in nodes):
            msg = f"{key}: jedisClusterConfig.nodes must be a non-empty list of 'host:port'"
            raise ConfigError(msg)


def _catalog(backend: Any) -> Any:
    from weir.connectors.redis.maps import catalog_for

    return catalog_for(backend)


CONNECTOR = register(
    Connector(
        name="redis",
        url_schemes=("redis", "rediss", "redis+cluster"),
        url_example="redis://HOST:PORT/DB, redis+cluster://H1:P1,H2:P2",
        aliases=("redis-cluster",),
        storm_providers=(
            "org.apache.storm.redis.state.RedisKeyValueStateProvider",
            "org.apache.storm.redis.state.RedisClusterKeyValueStateProvider",
        ),
        option_keys=frozenset({"jedisPoolConfig", "jedisClusterConfig", "tls"}),
        infer_keys=frozenset({"jedisPoolConfig", "jedisClusterConfig"}),
        check_options=_check_options,
        open_backend=open_backend,
        map_state=lazy_attrs(_MAPS, "RedisMapState")["RedisMapState"],
        catalog=_catalog,
        exports={
            "weir.trident.backing": lazy_attrs(_MAPS, "RedisBackingMap", "RedisMapState", "RedisMapStore"),
            "weir.sources": {
                **lazy_attrs("weir.connectors.redis.spout", "RedisStreamSpout"),
                **lazy_attrs("weir.connectors.redis.queue_spout", "RedisQueueSpout"),
            },
        },
    )
)
