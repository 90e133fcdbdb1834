"""A user's own ``StateProvider`` (named by dotted path in the topology configuration): key-value
state in Redis hashes with a layout of its own, not weir's backend SPI.

Per namespace ``ns`` (a hash tag keeps the keys in one Redis Cluster slot):

* ``{ns}:data`` — committed values (JSON field → JSON value)
* ``{ns}:prep`` — the prepared change set (a value ``null`` deletes the field)
* ``{ns}:meta`` — ``prepared`` and ``committed`` txids

``commit(txid)`` applies the prepared set in one Lua script, so it is atomic and idempotent — what
Storm's protocol (and weir's coordinator recovery) needs from any provider.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from weir.state import KeyValueState, StateProvider

_COMMIT = """
local prepared = redis.call('HGET', KEYS[3], 'prepared')
if prepared ~= ARGV[1] then
  local committed = redis.call('HGET', KEYS[3], 'committed')
  if committed == ARGV[1] then return 0 end
  return redis.error_reply('txid ' .. ARGV[1] .. ' is not prepared (prepared=' .. tostring(prepared) .. ')')
end
local changes = redis.call('HGETALL', KEYS[2])
for i = 1, #changes, 2 do
  if changes[i + 1] == 'null' then
    redis.call('HDEL', KEYS[1], changes[i])
  else
    redis.call('HSET', KEYS[1], changes[i], changes[i + 1])
  end
end
redis.call('DEL', KEYS[2])
redis.call('HDEL', KEYS[3], 'prepared')
redis.call('HSET', KEYS[3], 'committed', ARGV[1])
return 1
"""


def _url(conf: Mapping[str, Any]) -> str:
    cfg = conf.get("topology.state.provider.config") or {}
    if isinstance(cfg, str):
        cfg = json.loads(cfg)
    return str(cfg["url"])


class RedisHashState(KeyValueState[Any, Any]):
    """Key-value state of one namespace in three Redis hashes."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        tag = "{" + namespace + "}"
        self.data, self.prep, self.meta = f"{tag}:data", f"{tag}:prep", f"{tag}:meta"
        self.pending: dict[str, str] = {}

    def get(self, key: Any, default: Any = None) -> Any:
        k = json.dumps(key)
        raw = self.pending[k] if k in self.pending else self.client.hget(self.data, k)
        if raw is None or raw in ("null", b"null"):
            return default
        return json.loads(raw)

    def put(self, key: Any, value: Any) -> None:
        self.pending[json.dumps(key)] = json.dumps(value)

    def delete(self, key: Any) -> Any:
        old = self.get(key)
        self.pending[json.dumps(key)] = "null"
        return old

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        merged = {k.decode(): v.decode() for k, v in self.client.hgetall(self.data).items()}
        merged.update(self.pending)
        for k, v in merged.items():
            if v != "null":
                yield json.loads(k), json.loads(v)

    def prepare_commit(self, txid: int) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(self.prep)
        if self.pending:
            pipe.hset(self.prep, mapping=self.pending)
        pipe.hset(self.meta, "prepared", str(txid))
        pipe.execute()
        self.pending = {}

    def commit(self, txid: int | None = None) -> None:
        if txid is None:
            pipe = self.client.pipeline(transaction=True)
            for k, v in self.pending.items():
                pipe.hdel(self.data, k) if v == "null" else pipe.hset(self.data, k, v)
            pipe.execute()
            self.pending = {}
            return
        self.client.eval(_COMMIT, 3, self.data, self.prep, self.meta, str(txid))

    def rollback(self) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(self.prep)
        pipe.hdel(self.meta, "prepared")
        pipe.execute()
        self.pending = {}


class RedisHashProvider(StateProvider):
    """``topology.state.provider = "tests.spark._custom_provider.RedisHashProvider"`` with
    ``topology.state.provider.config = {"url": "redis://…"}``."""

    _clients: dict[str, Any] = {}  # noqa: RUF012 - one connection pool per process and URL

    def new_state(self, namespace: str, conf: Mapping[str, Any], context: Any = None) -> RedisHashState:
        import redis

        url = _url(conf)
        client = self._clients.get(url)
        if client is None:
            client = self._clients[url] = redis.Redis.from_url(url)
        return RedisHashState(client, namespace)


def read_namespace(url: str, namespace: str) -> dict[Any, Any]:
    """The committed values of ``namespace`` (for assertions)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        raw = client.hgetall("{" + namespace + "}:data")
        return {json.loads(k): json.loads(v) for k, v in raw.items()}
    finally:
        client.close()
