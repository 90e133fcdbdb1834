"""Redis and Redis Cluster: the client plumbing, Storm's backend and Trident's backing maps.

- :mod:`weir.connectors.redis.client` — :class:`RedisSettings` (URL, Storm's ``jedisPoolConfig`` /
  ``jedisClusterConfig``, TLS), the optional ``redis`` import, a connected and checked client
  (:func:`redis_client`) and the translation of connection failures into
  :class:`~weir.errors.ConfigError`; also used by :class:`~weir.sources.RedisStreamSpout`.
- :mod:`weir.connectors.redis.kv` — :class:`RedisBackend`, the ``redis`` provider of Storm's key-value
  state: every write one epoch-fenced Lua script.
- :mod:`weir.connectors.redis.maps` — ``RedisMapState``, Trident map states as JSON strings under a key
  prefix (imported from :mod:`weir.trident.backing`).
"""

from weir.connectors.redis.client import RedisSettings, redis_client
from weir.connectors.redis.kv import COMMIT_CHUNK, INLINE_LIMIT, RedisBackend, open_backend

__all__ = ["COMMIT_CHUNK", "INLINE_LIMIT", "RedisBackend", "RedisSettings", "open_backend", "redis_client"]
