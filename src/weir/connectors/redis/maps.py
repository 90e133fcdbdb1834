"""Redis and Redis Cluster backing maps: one string key per Trident key, values in JSON.

Layout: the cell of key ``("man",)`` of a map state with ``key_prefix="wc:"`` is the Redis string
``wc:["man"]`` whose value is the JSON of the cell (``[txid, curr, prev]`` for opaque,
``[txid, val]`` for transactional, the value itself for non-transactional maps), so any Redis
client can read it (``GET 'wc:["man"]'``).

What is atomic
--------------
- **Standalone Redis**: ``multi_get`` is one ``MGET`` and ``multi_put`` one ``MSET``, which Redis
  runs atomically: a partition's update of a batch is applied entirely or not at all.
- **Redis Cluster**: the keys of one map state spread over all hash slots (and so all masters).
  ``multi_get`` / ``multi_put`` group the keys by slot and send one ``MGET`` / ``MSET`` per slot, all
  in one cluster pipeline (redis-py's ``mget_nonatomic`` / ``mset_nonatomic``). Each slot's ``MSET``
  is atomic, the whole ``multi_put`` is not: if a master fails mid-way, some slots may hold the new
  cells and others the old. That is safe for opaque and transactional maps, whose cells carry their
  txid: the batch is replayed with the same txid and every key is repaired on its own (a written
  opaque cell is recomputed from ``prev``, a written transactional cell is skipped). To make
  ``multi_put`` atomic in a cluster anyway, put a hash tag in the prefix (``key_prefix="{wc}:"``):
  every key of the map then lives in one slot — on one master — and ``multi_put`` is one atomic
  ``MSET`` (at the price of one master holding, and serving, the whole map).

Connections are made per process with :func:`weir.connectors.redis.client.redis_client` (which PINGs,
checks the server's mode and turns failures into :class:`~weir.errors.ConfigError`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from weir._redact import redact_config, redact_url
from weir.connectors.redis.client import (
    REDIS_ERRORS,
    RedisSettings,
    call_bound_s,
    close_client,
    open_error,
    redis_client,
    unavailable_error,
    unreachable,
)
from weir.errors import ConfigError, StateError, StoreUnavailableError
from weir.state.connections import shared_connections
from weir.state.watchdog import WATCHDOG
from weir.trident.backing.catalog import MapCatalog, MapInfo
from weir.trident.backing.codec import decode_cell, encode_cell, encode_key
from weir.trident.backing.expiry import cell_txid
from weir.trident.backing.factory import MapStateFamily, MapStore
from weir.trident.state import BackingMap, Key, StateType, as_keys
from weir.trident.state.map_state import check_same_length

__all__ = ["REGISTRY_KEY", "RedisBackingMap", "RedisMapCatalog", "RedisMapState", "RedisMapStore"]

#: hash of every map state's key prefix → its state type, so ``weir state`` finds them
REGISTRY_KEY = "weir:trident:maps"
_REGISTERED: set[tuple[RedisSettings, str, str, int]] = set()
#: the TTL sweep's keys of a map state: ``<this><key prefix>``
_INDEX_PREFIX = "weir:trident:ttl-index:"
_MARK_PREFIX = "weir:trident:ttl-swept:"
_SCAN_COUNT = 1000
_MGET_CHUNK = 1000


@dataclass(frozen=True)
class RedisMapStore(MapStore):
    """The keys ``<key_prefix><JSON key>`` of a Redis server or cluster, holding one map state.

    Attributes
    ----------
    settings : RedisSettings
        Server or cluster address, credentials and timeout (parsed from a URL or Storm's
        ``jedisPoolConfig`` / ``jedisClusterConfig``).
    key_prefix : str
        Prefix of every key of this map state; give every map state its own. In a cluster, a hash
        tag in it (``"{wc}:"``) keeps the whole map in one slot.
    """

    kind: ClassVar[str] = "redis"

    settings: RedisSettings
    key_prefix: str = "trident:"
    #: also keep the TTL sweep's index (a sorted set, :attr:`index_key`: Redis key → txid of its cell)
    txid_index: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.settings, RedisSettings):
            msg = f"RedisMapStore needs RedisSettings, got {self.settings!r}"
            raise ConfigError(msg)
        if not isinstance(self.key_prefix, str) or not self.key_prefix:
            msg = f"RedisMapState key_prefix must be a non-empty string, got {self.key_prefix!r}"
            raise ConfigError(msg)

    @property
    def single_slot(self) -> bool:
        """Whether every key of the map hashes to one slot (a hash tag in ``key_prefix``)."""
        start = self.key_prefix.find("{")
        end = self.key_prefix.find("}", start + 1) if start >= 0 else -1
        return end > start + 1

    def catalog_name(self) -> str:
        """The key prefix: the name ``weir state`` lists the map state by."""
        return self.key_prefix

    def describe(self) -> str:
        """``redis://host:port/db prefix '…'`` (no credentials)."""
        return f"{self.settings.describe()} key prefix {self.key_prefix!r}"

    def client(self) -> Any:
        """The client of this process (thread-safe, pooled), connected and checked on first use.

        Raises
        ------
        ConfigError
            If the server is unreachable, refuses the credentials, or is of the wrong mode.
        """
        settings = self.settings

        def open_client() -> Any:
            try:
                return redis_client(settings, at_submit=False)
            except ConfigError as exc:
                msg = f"RedisMapState (key prefix {self.key_prefix!r}): {exc}"
                raise ConfigError(msg) from exc

        return shared_connections(("redis", settings), open_client, close_client, per_thread=False).get()

    def validate(self, state_type: StateType) -> None:
        """Connect now (PING and a mode check) and record the map state in :data:`REGISTRY_KEY`.

        At submit time a server that does not answer is a :class:`~weir.errors.ConfigError`.
        """
        try:
            self.register(state_type)
        except StoreUnavailableError as exc:
            cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
            msg = f"RedisMapState (key prefix {self.key_prefix!r}): {open_error(self.settings, cause)}"
            raise ConfigError(msg) from exc

    def register(self, state_type: StateType) -> None:
        """Record this prefix's state type in :data:`REGISTRY_KEY` (once per process)."""
        mark = (self.settings, self.key_prefix, state_type.value, os.getpid())
        if mark in _REGISTERED:
            return
        try:
            self.client().hset(REGISTRY_KEY, self.key_prefix, state_type.value)
        except REDIS_ERRORS as exc:
            if unreachable(exc):
                raise unavailable_error(
                    self.settings, exc, f"record the map state in {REGISTRY_KEY!r}", call_bound_s(self.settings),
                    f"RedisMapState key prefix {self.key_prefix!r}",
                ) from exc  # fmt: skip
            reason = self.settings.scrub(f"{type(exc).__name__}: {exc}")
            msg = f"RedisMapState {self.describe()}: recording the map state in {REGISTRY_KEY!r} failed ({reason})"
            raise StateError(msg) from exc
        _REGISTERED.add(mark)

    def backing_map(self, state_type: StateType) -> RedisBackingMap:
        """A :class:`RedisBackingMap` of ``state_type`` cells under this prefix."""
        return RedisBackingMap(self, state_type)

    # ---- the TTL sweep (weir.state.ttl.ms) ---------------------------------------------------------
    sweeps_expired: ClassVar[bool] = True

    @property
    def index_key(self) -> str:
        """The sorted set of the TTL sweep: each cell's Redis key scored by the txid that wrote it.

        Outside the key prefix (a ``SCAN`` of ``<prefix>*`` finds cells only); a hash tag in the prefix
        is kept, so in a cluster the index lives in the map's slot.
        """
        return _INDEX_PREFIX + self.key_prefix

    @property
    def mark_key(self) -> str:
        """The last txid whose commit swept this map (the index is complete from then on)."""
        return _MARK_PREFIX + self.key_prefix

    def with_expiry_index(self) -> RedisMapStore:
        """The same store, writing the index with every ``multi_put`` (see :attr:`index_key`)."""
        return self if self.txid_index else dataclasses.replace(self, txid_index=True)

    def _reindex(self, state_type: StateType) -> None:
        """Build the index by one scan of the map (cells written while it was not kept)."""
        catalog = RedisMapCatalog(self.settings)
        client = self.client()
        scores: dict[str, float] = {}
        for jkey, raw in catalog.scan(self.key_prefix):
            t = _stored_txid(raw)
            if t is not None:
                scores[self.key_prefix + jkey] = t
            if len(scores) >= _MGET_CHUNK:
                client.zadd(self.index_key, scores)
                scores = {}
        if scores:
            client.zadd(self.index_key, scores)

    def delete_expired(self, state_type: StateType, upto: int, limit: int, *, txid: int) -> tuple[int, bool]:
        """Delete up to ``limit`` cells the index lists at or below ``upto`` whose stored txid still is.

        A script checks each cell's stored txid and deletes it only if that is still at or below
        ``upto`` (so a cell rewritten since stays); the index entry of a deleted or vanished cell is
        removed, a stale score corrected. Standalone (or a prefix with a hash tag in a cluster): one
        script per 1,000 cells, atomic with its index entries; else one script per cell.
        """
        client = self.client()
        what = f"RedisMapState {self.describe()}: TTL sweep of txid {txid}"
        try:
            mark = client.get(self.mark_key)
            if mark is None or int(mark) < txid - 1:
                self._reindex(state_type)
            members = [] if upto < 0 else client.zrangebyscore(self.index_key, "-inf", upto, start=0, num=limit)
            deleted = 0
            script = client.register_script(_SWEEP_LUA)
            many = client.register_script(_SWEEP_MANY_LUA)
            for i in range(0, len(members), _MGET_CHUNK):
                chunk = [_text(m) for m in members[i : i + _MGET_CHUNK]]
                if not self.settings.cluster or self.single_slot:  # the index in the cells' slot: one script
                    deleted += int(many(keys=[*chunk, self.index_key], args=[upto]))
                    continue
                found = [script(keys=[m], args=[upto]) for m in chunk]  # cells in every slot: one by one
                gone = [m for m, r in zip(chunk, found, strict=True) if int(r) < 0]
                deleted += sum(1 for r in found if int(r) == -1)
                kept = {m: int(r) for m, r in zip(chunk, found, strict=True) if int(r) >= 0}
                if gone:
                    client.zrem(self.index_key, *gone)
                if kept:
                    client.zadd(self.index_key, kept)
            client.set(self.mark_key, str(txid))
        except REDIS_ERRORS as exc:
            reason = self.settings.scrub(f"{type(exc).__name__}: {exc}")
            msg = f"{what} failed ({reason}); check that the server is up (the commit is retried)"
            raise StateError(msg) from exc
        return deleted, len(members) >= limit


class RedisBackingMap(BackingMap[Any]):
    """Bulk get/put of JSON cells in Redis or Redis Cluster (see the module docstring).

    Parameters
    ----------
    store : RedisMapStore
        Server and key prefix.
    state_type : StateType
        Which cells are stored (they are read back as ``OpaqueValue`` / ``TransactionalValue``).
    """

    def __init__(self, store: RedisMapStore, state_type: StateType | str) -> None:
        self.store = store
        self.state_type = StateType.parse(state_type)
        self._prefix = store.key_prefix

    def redis_keys(self, keys: Sequence[Key]) -> list[str]:
        """The Redis key of each map key."""
        where = self.store.describe()
        prefix = self._prefix
        return [prefix + encode_key(k, where=where) for k in as_keys(keys)]

    @contextlib.contextmanager
    def _call(self, op: str, n: int) -> Iterator[None]:
        """Run the block's calls, logging while they wait and naming their failure (:meth:`_fail`)."""
        store = self.store
        bound = call_bound_s(store.settings)
        label = f"RedisMapState {store.describe()}: {op} of {n} keys (gives up after about {bound:.0f} s)"
        started = time.monotonic()
        with WATCHDOG.waiting(label, bound):
            try:
                yield
            except REDIS_ERRORS as exc:
                raise self._fail(op, n, exc, time.monotonic() - started) from exc

    def _fail(self, op: str, n: int, exc: BaseException, waited: float) -> StateError:
        store = self.store
        if unreachable(exc):
            return unavailable_error(
                store.settings, exc, f"{op} of {n} keys", waited, f"RedisMapState key prefix {store.key_prefix!r}"
            )
        partial = ""
        if op == "multi_put" and store.settings.cluster and not store.single_slot:
            partial = (
                "; in a cluster the keys of other slots may already hold the new cells — replaying the "
                "batch (same txid) repairs them"
            )
        reason = store.settings.scrub(f"{type(exc).__name__}: {exc}")
        msg = (
            f"RedisMapState {store.describe()}: {op} of {n} keys failed ({reason}){partial}; "
            "check that the server is up (the batch will be retried)"
        )
        return StateError(msg)

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        """Cells of ``keys`` (``None`` where absent): one ``MGET``, or one per slot in a cluster."""
        ks = as_keys(keys)
        if not ks:
            return []
        rkeys = self.redis_keys(ks)
        client = self.store.client()
        with self._call("multi_get", len(rkeys)):
            if self.store.settings.cluster and not self.store.single_slot:
                raw = list(client.mget_nonatomic(rkeys))
            else:
                raw = list(client.mget(rkeys))
        where = self.store.describe()
        st = self.state_type
        return [decode_cell(data, st, k, where=where) for data, k in zip(raw, ks, strict=True)]

    def multi_put(self, keys: Sequence[Key], vals: Sequence[Any]) -> None:
        """Store every cell: one ``MSET`` (standalone or one-slot prefix), else one ``MSET`` per slot."""
        ks = as_keys(keys)
        check_same_length(ks, vals, what="values", op="RedisBackingMap.multi_put")
        if not ks:
            return
        where = self.store.describe()
        st = self.state_type
        rkeys = self.redis_keys(ks)
        mapping = {rk: encode_cell(v, st, k, where=where) for rk, k, v in zip(rkeys, ks, vals, strict=True)}
        client = self.store.client()
        if self.store.txid_index:  # the TTL sweep's index first: a cell is never stored unindexed
            scores = {rk: t for rk, v in zip(rkeys, vals, strict=True) if (t := _cell_txid(v)) is not None}
            with self._call("multi_put", len(mapping)):
                if self.store.settings.cluster:
                    client.zadd(self.store.index_key, scores)
                    self.store.register(st)
                    client.mset(mapping) if self.store.single_slot else client.mset_nonatomic(mapping)
                else:
                    pipe = client.pipeline(transaction=True)
                    pipe.hset(REGISTRY_KEY, self.store.key_prefix, st.value)
                    if scores:
                        pipe.zadd(self.store.index_key, scores)
                    pipe.mset(mapping)
                    pipe.execute()
            return
        with self._call("multi_put", len(mapping)):
            if self.store.settings.cluster:
                self.store.register(st)  # the registry lives in another slot: once per process
                if self.store.single_slot:
                    client.mset(mapping)
                else:
                    client.mset_nonatomic(mapping)
            else:  # the registry entry rides along in the same round trip
                pipe = client.pipeline(transaction=False)
                pipe.hset(REGISTRY_KEY, self.store.key_prefix, st.value)
                pipe.mset(mapping)
                pipe.execute()

    def __getstate__(self) -> dict[str, Any]:
        return {"store": self.store, "state_type": self.state_type}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["store"], state["state_type"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"RedisBackingMap({self.store.describe()}, {self.state_type.name})"


def _settings(url: str | Mapping[str, Any] | RedisSettings) -> RedisSettings:
    if isinstance(url, RedisSettings):
        return url
    try:
        if isinstance(url, str):
            return RedisSettings.from_url(url)
        if isinstance(url, Mapping):
            return RedisSettings.from_config(url)
    except ConfigError as exc:
        msg = f"RedisMapState: {exc}"
        raise ConfigError(msg) from exc
    except (KeyError, TypeError, ValueError) as exc:
        shown = redact_config(dict(url)) if isinstance(url, Mapping) else redact_url(str(url))
        msg = f"RedisMapState: bad Redis configuration {shown!r}: {type(exc).__name__}"
        raise ConfigError(msg) from None
    msg = (
        f"RedisMapState: give a redis://host:port/db or redis+cluster://h1:p1,h2:p2 url, a mapping with "
        f"jedisPoolConfig / jedisClusterConfig / url, or RedisSettings; got {type(url).__name__}"
    )
    raise ConfigError(msg)


class RedisMapState(MapStateFamily):
    """Trident map states in Redis or Redis Cluster: ``RedisMapState.opaque(url, key_prefix=...)``.

    ``opaque`` / ``transactional`` / ``non_transactional`` take the arguments of :meth:`store`
    plus ``cache_size``, ``global_key`` and ``check`` (see :class:`MapStateFamily`) and return a
    picklable :class:`~weir.trident.backing.MapStateFactory`.

    Examples
    --------
    >>> import os
    >>> factory = RedisMapState.opaque(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), key_prefix="wc:")
    >>> factory = RedisMapState.opaque(
    ...     os.environ.get("REDIS_CLUSTER_URL", "redis+cluster://10.0.0.1:7000,10.0.0.2:7000"), key_prefix="{wc}:")
    """

    @classmethod
    def store(cls, url: str | Mapping[str, Any] | RedisSettings, key_prefix: str = "trident:") -> RedisMapStore:
        """The keys ``<key_prefix><JSON key>`` of the Redis server or cluster at ``url``.

        Parameters
        ----------
        url : str, mapping or RedisSettings
            ``redis://[:password@]host:port/db``, ``rediss://…``, ``redis+cluster://h1:p1,h2:p2``, or
            a mapping in the form of ``topology.state.provider.config`` (``url``, ``jedisPoolConfig``
            or ``jedisClusterConfig``).
        key_prefix : str
            Prefix of this map state's keys; give every map state its own.
        """
        return RedisMapStore(_settings(url), key_prefix)


#: KEYS[1] a cell, ARGV[1] the cutoff: -1 deleted, -2 not a txid cell, -3 absent, else the cell's txid (kept)
_SWEEP_LUA = """
local v = redis.call('GET', KEYS[1])
if not v then return -3 end
local ok, cell = pcall(cjson.decode, v)
if not ok or type(cell) ~= 'table' or type(cell[1]) ~= 'number' then return -2 end
if cell[1] <= tonumber(ARGV[1]) then
  redis.call('DEL', KEYS[1])
  return -1
end
return cell[1]
"""


#: KEYS the cells then the index, ARGV[1] the cutoff: each cell at or below it deleted with its index
#: entry, an absent or txid-less cell's entry removed, a stale score corrected; returns the cells deleted
_SWEEP_MANY_LUA = """
local upto = tonumber(ARGV[1])
local idx = KEYS[#KEYS]
local n = 0
for i = 1, #KEYS - 1 do
  local k = KEYS[i]
  local v = redis.call('GET', k)
  local t = v and tonumber(string.match(v, '^%[%s*(%-?%d+)%s*,'))
  if not t then
    redis.call('ZREM', idx, k)
  elseif t <= upto then
    redis.call('DEL', k)
    redis.call('ZREM', idx, k)
    n = n + 1
  else
    redis.call('ZADD', idx, t, k)
  end
end
return n
"""


def _cell_txid(cell: Any) -> int | None:
    """The txid of a cell given to ``multi_put``: a cell object or its plain ``[txid, ...]`` form."""
    if isinstance(cell, (list, tuple)):
        return int(cell[0]) if cell and type(cell[0]) is int else None
    return cell_txid(cell)


def _stored_txid(raw: bytes | str) -> int | None:
    """The txid at the head of a stored JSON cell (``[txid, ...]``), or None."""
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if isinstance(doc, list) and doc and type(doc[0]) is int:
        return int(doc[0])
    return None


def _glob_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


class RedisMapCatalog(MapCatalog):
    """The Trident map states of one Redis server or cluster (the prefixes :data:`REGISTRY_KEY` lists)."""

    def __init__(self, settings: RedisSettings) -> None:
        self.settings = settings

    def describe(self) -> str:
        """The server's URL, without password."""
        return self.settings.describe()

    def _client(self) -> Any:
        return RedisMapStore(self.settings).client()

    def _fail(self, what: str, exc: BaseException) -> StateError:
        reason = self.settings.scrub(f"{type(exc).__name__}: {exc}")
        return StateError(f"{what} on {self.describe()} failed ({reason}); check that the server is up")

    def maps(self) -> list[MapInfo]:
        """Every prefix recorded in :data:`REGISTRY_KEY`, with its state type."""
        try:
            found = self._client().hgetall(REGISTRY_KEY)
        except REDIS_ERRORS as exc:
            msg = "reading the Trident map states"
            raise self._fail(msg, exc) from exc
        return sorted((MapInfo(_text(k), StateType.parse(_text(v))) for k, v in found.items()), key=lambda m: m.name)

    def store(self, name: str) -> RedisMapStore:
        """The :class:`RedisMapStore` of the key prefix ``name``."""
        return RedisMapStore(self.settings, name)

    def _keys(self, name: str) -> list[str]:
        """Every Redis key of the map (``<prefix>[...``), sorted; SCAN on every primary of a cluster."""
        client = self._client()
        match = _glob_escape(name) + "\\["
        try:
            if self.settings.cluster:
                conns = [client.get_redis_connection(n) for n in client.get_primaries()]
            else:
                conns = [client]
            keys = {_text(k) for c in conns for k in c.scan_iter(match=match + "*", count=_SCAN_COUNT)}
        except REDIS_ERRORS as exc:
            msg = f"listing the keys of map state {name!r}"
            raise self._fail(msg, exc) from exc
        return sorted(keys)

    def scan(self, name: str) -> Iterator[tuple[str, bytes | str]]:
        """``(JSON key, JSON cell)`` of every key, sorted by key (``MGET`` in chunks of 1,000)."""
        client = self._client()
        keys = self._keys(name)
        for i in range(0, len(keys), _MGET_CHUNK):
            chunk = keys[i : i + _MGET_CHUNK]
            try:
                values = client.mget_nonatomic(chunk) if self.settings.cluster else client.mget(chunk)
            except REDIS_ERRORS as exc:
                msg = f"reading map state {name!r}"
                raise self._fail(msg, exc) from exc
            for key, value in zip(chunk, values, strict=True):
                if value is not None:  # deleted since the SCAN
                    yield key[len(name) :], value

    def count(self, name: str) -> int:
        """Keys of the map (a SCAN)."""
        return len(self._keys(name))

    def delete(self, name: str, keys: list[Key]) -> None:
        """Delete the Redis keys of ``keys`` (one ``DEL`` per key)."""
        rkeys = RedisBackingMap(self.store(name), StateType.NON_TRANSACTIONAL).redis_keys(keys)
        self._delete(name, rkeys)

    def _delete(self, name: str, rkeys: list[str]) -> None:
        client = self._client()
        try:
            for rk in rkeys:
                client.delete(rk)
        except REDIS_ERRORS as exc:
            msg = f"deleting keys of map state {name!r}"
            raise self._fail(msg, exc) from exc

    def drop(self, name: str) -> None:
        """Delete every key of the map, its TTL sweep's keys and its :data:`REGISTRY_KEY` entry."""
        self._delete(name, self._keys(name))
        store = self.store(name)
        self._delete(name, [store.index_key, store.mark_key])
        try:
            self._client().hdel(REGISTRY_KEY, name)
        except REDIS_ERRORS as exc:
            msg = f"forgetting map state {name!r}"
            raise self._fail(msg, exc) from exc
        _REGISTERED.difference_update({m for m in _REGISTERED if m[:2] == (self.settings, name)})

    def register(self, name: str, state_type: StateType) -> None:
        """Record ``name`` as a map state of ``state_type``."""
        self.store(name).register(state_type)


def catalog_for(backend: Any) -> RedisMapCatalog:
    """The catalog of the server of a :class:`~weir.connectors.redis.kv.RedisBackend`."""
    return RedisMapCatalog(backend.settings)
