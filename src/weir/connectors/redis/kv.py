"""The ``redis`` provider: Storm's Redis layout on Redis or Redis Cluster, with atomic commits.

Layout of a namespace ``ns`` (Storm's ``RedisKeyValueState``; in cluster mode every key carries the
hash tag ``{ns}`` so the three live in one slot):

=====================  ==========================  ==============================================
standalone             cluster                     content
=====================  ==========================  ==============================================
``ns``                 ``{ns}``                    committed rows: serialized key → serialized value
``ns$prepare``         ``{ns}$prepare``            the prepared change set: ``=`` + value, or ``-``
``ns$txid``            ``{ns}$txid``               fields ``commit``, ``prepare`` and ``epoch``
=====================  ==========================  ==============================================

So with the default JSON serializer ``HGET wordcount-count-0 '"hello"'`` returns a count to any Redis
client. Every write is **one Lua script** that first checks the writer's epoch (Storm's own commit
is a non-atomic sequence of commands; this one is atomic). A change set travels as one MessagePack
argument that the script decodes with Redis's built-in ``cmsgpack``. One larger than
:data:`INLINE_LIMIT` entries is first staged in chunks into a temporary hash of the same slot
(``ns$stage$<token>``, expiring after an hour); the visible step — swapping it in as the prepared
set — is still a single script. A commit of up to :data:`COMMIT_CHUNK` entries is one script; a
larger prepared set is applied in scripts of :data:`COMMIT_CHUNK` entries (a few tens of
milliseconds each), so no script outlives the client's socket timeout and other clients are never
blocked for long. The first of them is the commit point: it sets the field ``committing`` of the
txid record to the prepared txid, and each script moves its entries out of the prepared set into
the rows, so an entry is always either still prepared or already applied. While ``committing``
equals ``prepare``, weir's readers (``get``, ``get_many``, ``count``, ``scan``) overlay the prepared
entries over the rows in the same script that reads them, so they see the whole commit or none of
it, never half; a crash in the middle leaves the marker set and recovery's roll-forward finishes the
commit. (A plain ``HGET`` from another client reads the rows only, and may see such a commit half
applied.) A script the client re-sends after a lost reply is recognised as already applied.

Every failure is a :class:`~weir.errors.StateError` naming the store (without password), the
namespace and the operation.

Configuration (``topology.state.provider.config``): Storm's ``jedisPoolConfig`` ``{host, port,
timeout (ms), database, password}`` or ``jedisClusterConfig`` ``{nodes: ["h:p", ...], timeout,
maxRedirections, password}``, or ``url``: ``redis://[[user]:password@]host[:port][/db]``,
``rediss://...`` (TLS), ``redis+cluster://[[user]:password@]h1:p1,h2:p2[/]``; an optional query
``?timeout=MS``. The default server is ``localhost:6379``, database 0, timeout 2000 ms.

Example
-------
>>> import os
>>> from weir.state import StateFactory
>>> provider = StateFactory.from_url(os.environ.get("REDIS_URL", "redis://localhost:6379/0"))
>>> state = provider.new_state("wordcount-count-0")
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import struct
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import redis.exceptions as rexc

from weir._faults import crash_point
from weir.connectors.redis.changelog import LOG_FUNCTIONS, LOG_RECORD, changes_key, decode_entry, feed_keys
from weir.connectors.redis.client import REDIS_ERRORS as _ERRORS
from weir.connectors.redis.client import (
    RedisSettings,
    call_bound_s,
    close_client,
    open_error,
    redis_client,
    unavailable_error,
    unreachable,
)
from weir.errors import FencedError, StateError, StateLossError, StoreUnavailableError
from weir.state.backend import Backend, Changes, TxidRecord, fenced_message, lost_message
from weir.state.changelog import ChangelogBackend, ChangeRow, LogRange
from weir.state.config import ProviderConfig
from weir.state.connections import ProcessConnections
from weir.state.watchdog import WATCHDOG

__all__ = ["COMMIT_CHUNK", "INLINE_LIMIT", "RedisBackend", "RedisSettings", "open_backend", "redis_client"]

#: change sets up to this many entries go inline in one script; larger ones are staged in chunks
INLINE_LIMIT = 10_000
#: a prepared set up to this many entries commits in one script; a larger one in scripts of this many
COMMIT_CHUNK = 10_000
_STAGE_CHUNK = 10_000
_STAGE_TTL_S = 3600
_READ_CHUNK = 5_000
_SCAN_ALL_LIMIT = 10_000
_PUT = b"="
_TOMBSTONE = b"-"

# ---- Lua ---------------------------------------------------------------------------------------
# A change set travels as ONE argument: a MessagePack array [k1, v1, k2, v2, ...] of raw strings
# (decoded by Redis's built-in cmsgpack), where every value is tagged: b"=" + value, or b"-" for a
# tombstone. One bulk argument costs far less to send than 2n arguments.
# KEYS[1] rows, KEYS[2] prepare, KEYS[3] txid, KEYS[4] stage (when used); ARGV[1] epoch ('' = none,
# '=N' = exactly N: a lower or missing stored epoch is a loss, WEIR_LOST, see Backend.write_owned)
_FUNCTIONS = """
local function hset_all(key, arr)
  local n = #arr
  local i = 1
  while i <= n do
    local j = math.min(i + 3999, n)
    redis.call('HSET', key, unpack(arr, i, j))
    i = j + 1
  end
end
local function apply(arr, dst)
  local puts, np, dels, nd = {}, 0, {}, 0
  for i = 1, #arr, 2 do
    local v = arr[i + 1]
    if string.byte(v, 1) == 61 then
      puts[np + 1] = arr[i]
      puts[np + 2] = string.sub(v, 2)
      np = np + 2
      if np >= 4000 then redis.call('HSET', dst, unpack(puts, 1, np)) np = 0 end
    else
      nd = nd + 1
      dels[nd] = arr[i]
      if nd >= 4000 then redis.call('HDEL', dst, unpack(dels, 1, nd)) nd = 0 end
    end
  end
  if np > 0 then redis.call('HSET', dst, unpack(puts, 1, np)) end
  if nd > 0 then redis.call('HDEL', dst, unpack(dels, 1, nd)) end
end
local function staged(n)
  local got = redis.call('HLEN', KEYS[4])
  if got ~= tonumber(n) then
    redis.call('DEL', KEYS[4])
    return redis.error_reply('WEIR_STAGE_LOST ' .. got .. ' ' .. n)
  end
  return nil
end
"""
_FENCE = """
local function fence(e)
  local t = redis.call('HMGET', KEYS[3], 'epoch', 'commit', 'prepare')
  local stored = tonumber(t[1] or '0')
  if stored == nil or (t[2] and not tonumber(t[2])) or (t[3] and not tonumber(t[3])) then return 'txid' end
  if redis.call('HEXISTS', KEYS[3], 'prepare') == 0 and redis.call('EXISTS', KEYS[2]) == 1 then
    return 'prepare'
  end
  if e ~= '' then
    local exact = string.sub(e, 1, 1) == '='
    if exact then e = string.sub(e, 2) end
    local n = tonumber(e)
    if n < stored then return stored end
    if n > stored and exact then return 'lost ' .. stored end
    if n > stored then redis.call('HSET', KEYS[3], 'epoch', e) return nil end
  end
  redis.call('HSETNX', KEYS[3], 'epoch', '0')
  return nil
end
local f = fence(ARGV[1])
if f then
  if KEYS[4] and string.find(KEYS[4], '$stage$', 1, true) then redis.call('DEL', KEYS[4]) end
  if type(f) == 'string' and string.sub(f, 1, 5) == 'lost ' then
    return redis.error_reply('WEIR_LOST ' .. string.sub(f, 6))
  end
  if type(f) == 'string' then return redis.error_reply('WEIR_FOREIGN ' .. f) end
  return redis.error_reply('WEIR_FENCED ' .. f)
end
"""
# ARGV: epoch, txid, packed change set
_PREPARE_INLINE = """
redis.call('HDEL', KEYS[3], 'committing', 'ccursor')
redis.call('DEL', KEYS[2])
hset_all(KEYS[2], cmsgpack.unpack(ARGV[3]))
redis.call('HSET', KEYS[3], 'prepare', ARGV[2])
return 1
"""
# ARGV: epoch, txid, staged entry count (0 returned: a re-sent script found its work done)
_PREPARE_STAGED = """
if redis.call('EXISTS', KEYS[4]) == 0 and redis.call('HGET', KEYS[3], 'prepare') == ARGV[2]
   and redis.call('HLEN', KEYS[2]) == tonumber(ARGV[3]) then
  return 0
end
local err = staged(ARGV[3])
if err then return err end
redis.call('HDEL', KEYS[3], 'committing', 'ccursor')
redis.call('RENAME', KEYS[4], KEYS[2])
redis.call('PERSIST', KEYS[2])
redis.call('HSET', KEYS[3], 'prepare', ARGV[2])
return 1
"""
# ARGV: epoch, txid, chunk size (the logged variant: KEYS[4..] and ARGV[4], see changelog.py).
# Returns 1 when the commit is done, 2 when a chunk was applied and
# more remain (the caller calls again), 0 when this txid was already committed (a re-sent script).
_COMMIT = """
local p = redis.call('HGET', KEYS[3], 'prepare')
if p ~= ARGV[2] then
  if redis.call('HGET', KEYS[3], 'commit') == ARGV[2] then return 0 end
  return redis.error_reply('WEIR_NOT_PREPARED ' .. (p or 'none'))
end
local limit = tonumber(ARGV[3])
if redis.call('HLEN', KEYS[2]) > limit then
  -- one scan over the prepared set, its cursor kept between scripts ('txid:cursor'): entries
  -- already moved are deleted, so a chunk never pays again for the buckets scanned before it
  local arr, cursor = {}, '0'
  local saved = redis.call('HGET', KEYS[3], 'ccursor')
  if saved and string.sub(saved, 1, #ARGV[2] + 1) == ARGV[2] .. ':' then
    cursor = string.sub(saved, #ARGV[2] + 2)
  end
  repeat
    local r = redis.call('HSCAN', KEYS[2], cursor, 'COUNT', limit)
    cursor = r[1]
    for _, x in ipairs(r[2]) do arr[#arr + 1] = x end
  until cursor == '0' or #arr >= 2 * limit
  redis.call('HSET', KEYS[3], 'ccursor', ARGV[2] .. ':' .. cursor)
  --LOG(arr)--
  apply(arr, KEYS[1])
  local ks, nk = {}, 0
  for i = 1, #arr, 2 do
    nk = nk + 1
    ks[nk] = arr[i]
    if nk >= 4000 then redis.call('HDEL', KEYS[2], unpack(ks, 1, nk)) nk = 0 end
  end
  if nk > 0 then redis.call('HDEL', KEYS[2], unpack(ks, 1, nk)) end
  redis.call('HSET', KEYS[3], 'committing', ARGV[2])
  return 2
end
local all = redis.call('HGETALL', KEYS[2])
--LOG(all)--
apply(all, KEYS[1])
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[3], 'commit', ARGV[2])
redis.call('HDEL', KEYS[3], 'prepare', 'committing', 'ccursor')
--RECORD--
return 1
"""
# ARGV: epoch
_DISCARD = """
redis.call('DEL', KEYS[2])
redis.call('HDEL', KEYS[3], 'prepare', 'committing', 'ccursor')
return 1
"""
# ARGV: epoch, packed change set
_DIRECT_INLINE = """
apply(cmsgpack.unpack(ARGV[2]), KEYS[1])
return 1
"""
# ARGV: epoch, staged entry count
_DIRECT_STAGED = """
local err = staged(ARGV[2])
if err then return err end
apply(redis.call('HGETALL', KEYS[4]), KEYS[1])
redis.call('DEL', KEYS[4])
return 1
"""
# not fenced: one chunk into a staging hash (KEYS[1]; ARGV packed chunk, ttl), the read-only
# snapshot of the prepared set, and the admin drop
_STAGE = """
hset_all(KEYS[1], cmsgpack.unpack(ARGV[1]))
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""
# reads through the commit point: while a chunked commit runs ('committing' = 'prepare'), the
# entries still prepared overlay the rows (an entry is either still prepared or already applied)
_OVERLAY = """
local function overlay_on()
  local t = redis.call('HMGET', KEYS[3], 'committing', 'prepare')
  return t[1] and t[1] == t[2]
end
local function untag(p)
  if string.byte(p, 1) == 61 then return string.sub(p, 2) end
  return false
end
"""
# ARGV: key
_READ_ONE = (
    _OVERLAY
    + """
if overlay_on() then
  local p = redis.call('HGET', KEYS[2], ARGV[1])
  if p then return untag(p) end
end
return redis.call('HGET', KEYS[1], ARGV[1])
"""
)
# ARGV: keys (at most _READ_CHUNK)
_READ_MANY = (
    _OVERLAY
    + """
local vals = redis.call('HMGET', KEYS[1], unpack(ARGV))
if overlay_on() then
  local ps = redis.call('HMGET', KEYS[2], unpack(ARGV))
  for i = 1, #ARGV do
    if ps[i] then vals[i] = untag(ps[i]) end
  end
end
return vals
"""
)
# the committed row count, counting the entries still prepared by a chunked commit
_READ_COUNT = (
    _OVERLAY
    + """
local n = redis.call('HLEN', KEYS[1])
if overlay_on() then
  local cursor = '0'
  repeat
    local r = redis.call('HSCAN', KEYS[2], cursor, 'COUNT', 1000)
    cursor = r[1]
    local arr = r[2]
    for i = 1, #arr, 2 do
      local there = redis.call('HEXISTS', KEYS[1], arr[i]) == 1
      if string.byte(arr[i + 1], 1) == 61 then
        if not there then n = n + 1 end
      elseif there then
        n = n - 1
      end
    end
  until cursor == '0'
end
return n
"""
)
# a small namespace whole: {rows, prepared entries to overlay (empty unless a commit is running)}
_READ_ALL = (
    _OVERLAY
    + """
local ps = {}
if overlay_on() then ps = redis.call('HGETALL', KEYS[2]) end
return {redis.call('HGETALL', KEYS[1]), ps}
"""
)
_LOAD_PREPARED = "return {redis.call('HGET', KEYS[3], 'prepare'), redis.call('HGETALL', KEYS[2])}"
_DROP = "return redis.call('DEL', unpack(KEYS))"

_U32 = struct.Struct(">I").pack
_PACKED_TOMBSTONE = b"\xdb" + _U32(1) + _TOMBSTONE


def pack_changes(items: Iterable[tuple[bytes, bytes | None]], n: int) -> bytes:
    """A MessagePack array of ``n`` ``(key, tagged value)`` pairs, as raw 32-bit strings."""
    parts = [b"\xdd" + _U32(2 * n)]
    add = parts.append
    for k, v in items:
        if v is None:
            add(b"\xdb" + _U32(len(k)) + k + _PACKED_TOMBSTONE)
        else:
            add(b"\xdb" + _U32(len(k)) + k + b"\xdb" + _U32(len(v) + 1) + _PUT + v)
    return b"".join(parts)


class _Script:
    """A Lua script called by EVALSHA, falling back to EVAL (which caches it) on NOSCRIPT."""

    def __init__(self, body: str, *, fenced: bool = True) -> None:
        self.source = _FUNCTIONS + (_FENCE if fenced else "") + body
        self.sha = hashlib.sha1(self.source.encode(), usedforsecurity=False).hexdigest()

    def __call__(self, client: Any, keys: Sequence[bytes], args: Sequence[Any]) -> Any:
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except rexc.NoScriptError:
            return client.eval(self.source, len(keys), *keys, *args)


_S_PREPARE_INLINE = _Script(_PREPARE_INLINE)
_S_PREPARE_STAGED = _Script(_PREPARE_STAGED)
_S_COMMIT = _Script(_COMMIT.replace("--LOG(arr)--", "").replace("--LOG(all)--", "").replace("--RECORD--", ""))
# the commit with the change feed: each script logs the entries it moves (weir.connectors.redis.changelog)
_S_COMMIT_LOGGED = _Script(
    LOG_FUNCTIONS
    + _COMMIT.replace("--LOG(arr)--", "log_images(arr)")
    .replace("--LOG(all)--", "log_images(all)")
    .replace("--RECORD--", LOG_RECORD)
)
_S_DISCARD = _Script(_DISCARD)
_S_DIRECT_INLINE = _Script(_DIRECT_INLINE)
_S_DIRECT_STAGED = _Script(_DIRECT_STAGED)
_S_LOAD_PREPARED = _Script(_LOAD_PREPARED, fenced=False)
_S_DROP = _Script(_DROP, fenced=False)
_S_READ_ONE = _Script(_READ_ONE, fenced=False)
_S_READ_MANY = _Script(_READ_MANY, fenced=False)
_S_READ_COUNT = _Script(_READ_COUNT, fenced=False)
_S_READ_ALL = _Script(_READ_ALL, fenced=False)
_S_STAGE = _Script(_STAGE, fenced=False)


# ---- the backend -------------------------------------------------------------------------------
class RedisBackend(Backend, ChangelogBackend):
    """Storm's Redis layout with atomic, epoch-fenced Lua writes (standalone or cluster).

    The client is made lazily and again after a fork (the process id is checked), so the backend
    can be pickled to Spark executors; only the :class:`RedisSettings` travel.
    """

    kind = "redis"
    durable = True
    distributed = True

    def __init__(self, settings: RedisSettings) -> None:
        self.settings = settings
        self._conns: ProcessConnections[Any] = ProcessConnections(
            lambda: redis_client(self.settings, at_submit=False), close_client, per_thread=False
        )
        self._keys: dict[str, tuple[bytes, bytes, bytes]] = {}
        self.commit_chunk = COMMIT_CHUNK

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["settings"])  # type: ignore[misc]

    def describe(self) -> str:
        """The store's URL, without password."""
        return self.settings.describe()

    @property
    def client(self) -> Any:
        """The client of this process (made on first use, and anew in a forked child)."""
        return self._conns.get()

    def close(self) -> None:
        """Close this process's connections."""
        self._conns.close()

    def keys(self, namespace: str) -> tuple[bytes, bytes, bytes]:
        """Redis keys ``(rows, prepare, txid)`` of ``namespace``."""
        got = self._keys.get(namespace)
        if got is None:
            if (
                not namespace
                or namespace.endswith(("$prepare", "$txid", "$changes", "$changelog"))
                or "$stage$" in namespace
                or "$changes$" in namespace
            ):
                msg = (
                    f"namespace {namespace!r} cannot be stored in Redis: it is empty, ends in $prepare, $txid, "
                    "$changes or $changelog, or contains $stage$ or $changes$ (those name its companion keys); "
                    "rename the component"
                )
                raise StateError(msg)
            if self.settings.cluster and namespace.startswith("}"):
                msg = f"namespace {namespace!r} cannot start with '}}' in Redis Cluster (hash tag)"
                raise StateError(msg)
            base = f"{{{namespace}}}" if self.settings.cluster else namespace
            got = (base.encode(), f"{base}$prepare".encode(), f"{base}$txid".encode())
            self._keys[namespace] = got
        return got

    def _stage_key(self, namespace: str) -> bytes:
        return self.keys(namespace)[0] + b"$stage$" + uuid.uuid4().hex.encode()

    def _foreign(self, namespace: str, which: int, what: str, found: str) -> StateError:
        key = self.keys(namespace)[which].decode("utf-8", "replace")
        role = ("committed rows", "prepared change set", "txid record")[which]
        return StateError(
            f"namespace {namespace!r}: cannot {what}: Redis key {key!r} (weir's {role}) holds {found}, which "
            f"weir did not write; weir leaves it untouched. Inspect it (redis-cli TYPE/HGETALL {key!r}); if "
            "it belongs to another application, give the topology or component another name, else repair or "
            "delete it"
        )

    @contextlib.contextmanager
    def _call(self, namespace: str, what: str, epoch: int | None = None) -> Iterator[None]:
        """Run the block's Redis calls: logged while they wait, their failures named (see :meth:`_error`).

        Each call is bounded by the client (every attempt's socket timeout, its retries and back-off:
        :func:`~weir.connectors.redis.client.call_bound_s`); while it waits, the watchdog logs
        "still waiting after N s" naming the store, namespace and operation.
        """
        bound = call_bound_s(self.settings)
        label = (
            f"namespace {namespace!r}: {what} on the redis store {self.describe()} (gives up after about {bound:.0f} s)"
        )
        started = time.monotonic()
        with WATCHDOG.waiting(label, bound):
            try:
                yield
            except _ERRORS as exc:
                raise self._error(exc, namespace, what, epoch, time.monotonic() - started) from exc

    def _error(
        self, exc: Exception, namespace: str, what: str, epoch: int | None = None, waited: float | None = None
    ) -> StateError:
        """The named error of a failed call: unavailable (retriable), refused credentials, or a refusal of weir's."""
        if unreachable(exc):
            return unavailable_error(
                self.settings, exc, what, call_bound_s(self.settings) if waited is None else waited, namespace
            )
        text = str(exc)
        if isinstance(exc, rexc.AuthenticationError) or "WRONGPASS" in text or "NOAUTH" in text:
            return StateError(
                f"namespace {namespace!r}: cannot {what}: the redis store {self.describe()} refused the "
                f"credentials ({self.settings.scrub(f'{type(exc).__name__}: {exc}')}); this is not retried: fix the "
                "password (the url's ':password@' part or jedisPoolConfig.password) and submit again"
            )
        if text.startswith("WEIR_FOREIGN"):
            if text.split()[1] == "prepare":
                return self._foreign(namespace, 1, what, "a prepared change set without a prepared txid")
            return self._foreign(namespace, 2, what, "an epoch, commit or prepare field that is not a number")
        if "WRONGTYPE" in text:
            return StateError(
                f"namespace {namespace!r}: cannot {what}: one of its Redis keys "
                f"({', '.join(repr(k.decode('utf-8', 'replace')) for k in self.keys(namespace))}) is not a hash, "
                "so weir did not write it; weir leaves it untouched. Give the topology or component another "
                "name, or repair or delete the key"
            )
        if text.startswith("WEIR_LOST"):
            return StateLossError(lost_message(namespace, epoch or 0, int(float(text.split()[1]))))
        if text.startswith("WEIR_FENCED"):
            return FencedError(fenced_message(namespace, epoch or 0, int(float(text.split()[1]))))
        if text.startswith("WEIR_NOT_PREPARED"):
            prepared = text.split()[1]
            return StateError(
                f"namespace {namespace!r}: cannot {what}: it is not prepared (the prepared txid is "
                f"{prepared}); commit only what was prepared"
            )
        if text.startswith("WEIR_STAGE_LOST"):
            got, want = text.split()[1:3]
            return StateError(
                f"namespace {namespace!r}: cannot {what}: only {got} of {want} staged entries arrived "
                "(the staging hash expired or the server restarted); nothing was changed, retry the batch"
            )
        return StateError(
            f"namespace {namespace!r}: Redis at {self.describe()} failed to {what} "
            f"({self.settings.scrub(f'{type(exc).__name__}: {exc}')}); check the server, then the "
            "batch is retried or recovered"
        )

    # ---- reads -----------------------------------------------------------------------------
    def get(self, namespace: str, key: bytes) -> bytes | None:
        """Committed value of ``key`` (HGET, through a running chunked commit's prepared entries)."""
        with self._call(namespace, "read a key"):
            got: bytes | None = _S_READ_ONE(self.client, self.keys(namespace), (key,))
        return got

    def get_many(self, namespace: str, keys: list[bytes]) -> list[bytes | None]:
        """Committed values of ``keys`` (HMGET in scripts of 5,000 keys, one pipelined round trip).

        Each script reads through a running chunked commit (see the module docstring), so the keys
        of one script see a commit whole or not at all.
        """
        if not keys:
            return []
        names = self.keys(namespace)
        with self._call(namespace, f"read {len(keys)} keys"):
            if len(keys) <= _READ_CHUNK:
                return list(_S_READ_MANY(self.client, names, keys))
            pipe = self.client.pipeline(transaction=False)
            for i in range(0, len(keys), _READ_CHUNK):
                chunk = keys[i : i + _READ_CHUNK]
                pipe.execute_command("EVAL", _S_READ_MANY.source, len(names), *names, *chunk)
            return [v for part in pipe.execute() for v in part]

    def scan(self, namespace: str) -> Iterator[tuple[bytes, bytes]]:
        """Every committed row, once (one script for small hashes, else HSCAN de-duplicated).

        A small namespace (up to 10,000 rows) is read whole in one script, through a running
        chunked commit. A larger one is paged with HSCAN, which is not a snapshot: each page's
        values are read through a running commit, but rows a concurrent commit adds or deletes may
        or may not be seen.
        """
        names = self.keys(namespace)
        rows = names[0]
        try:
            if self.client.hlen(rows) <= _SCAN_ALL_LIMIT:
                flat, staged = _S_READ_ALL(self.client, names, ())
                it = iter(flat)
                found = dict(zip(it, it, strict=True))
                it = iter(staged)
                for k, p in zip(it, it, strict=True):
                    if p[:1] == _PUT:
                        found[k] = p[1:]
                    else:
                        found.pop(k, None)
                yield from found.items()
                return
            seen: set[bytes] = set()
            page: list[bytes] = []
            for k, _ in self.client.hscan_iter(rows, count=1000):
                if k not in seen:
                    seen.add(k)
                    page.append(k)
                    if len(page) >= 1000:
                        yield from self._overlaid(names, page)
                        page = []
            yield from self._overlaid(names, page)
        except _ERRORS as exc:
            raise self._error(exc, namespace, "scan the committed rows") from exc

    def _overlaid(self, names: Sequence[bytes], page: list[bytes]) -> Iterator[tuple[bytes, bytes]]:
        if page:
            for k, v in zip(page, _S_READ_MANY(self.client, names, page), strict=True):
                if v is not None:
                    yield k, v

    def count(self, namespace: str) -> int:
        """Number of committed rows (HLEN; through a running chunked commit's prepared entries)."""
        with self._call(namespace, "count the committed rows"):
            return int(_S_READ_COUNT(self.client, self.keys(namespace), ()))

    def txids(self, namespace: str) -> TxidRecord:
        """The txid record (HMGET commit prepare epoch)."""
        with self._call(namespace, "read the txid record"):
            c, p, e = self.client.hmget(self.keys(namespace)[2], [b"commit", b"prepare", b"epoch"])
        try:
            return TxidRecord(None if c is None else int(c), None if p is None else int(p), 0 if e is None else int(e))
        except ValueError:
            found = f"commit={c!r:.40}, prepare={p!r:.40}, epoch={e!r:.40}"
            raise self._foreign(namespace, 2, "read the txid record", found) from None

    def load_prepared(self, namespace: str) -> tuple[int, dict[bytes, bytes | None]] | None:
        """The prepared change set and its txid, read atomically."""
        with self._call(namespace, "read the prepared change set"):
            txid, flat = _S_LOAD_PREPARED(self.client, self.keys(namespace), ())
        if txid is None:
            if flat:
                raise self._foreign(namespace, 1, "read the prepared change set", "rows without a prepared txid")
            return None
        if not txid.isdigit():
            raise self._foreign(namespace, 2, "read the prepared change set", f"a prepared txid {txid!r:.40}")
        it = iter(flat)
        changes: dict[bytes, bytes | None] = {}
        for k, v in zip(it, it, strict=True):
            if v == _TOMBSTONE:
                changes[k] = None
            elif v[:1] == _PUT:
                changes[k] = v[1:]
            else:
                found = f"a value {v[:20]!r} at field {k[:40]!r} that is neither '=value' nor '-'"
                raise self._foreign(namespace, 1, "read the prepared change set", found)
        return int(txid), changes

    def namespaces(self) -> list[str]:
        """Every namespace with a txid record (SCAN for ``*$txid`` on every primary)."""
        found: set[str] = set()
        with self._call("*", "list namespaces"):
            if self.settings.cluster:
                conns = [self.client.get_redis_connection(n) for n in self.client.get_primaries()]
            else:
                conns = [self.client]
            for conn in conns:
                for key in conn.scan_iter(match=b"*$txid", count=1000):
                    name = key[:-5]
                    if self.settings.cluster:
                        if not (name.startswith(b"{") and name.endswith(b"}")):
                            continue
                        name = name[1:-1]
                    found.add(name.decode("utf-8", "replace"))
        return sorted(found)

    # ---- atomic writes ---------------------------------------------------------------------
    def _stage(self, namespace: str, changes: Changes) -> bytes:
        """Write ``changes`` in chunks into a fresh staging hash of the namespace's slot (pipelined)."""
        stage = self._stage_key(namespace)
        items = iter(changes.items())
        pipe = self.client.pipeline(transaction=False)
        for start in range(0, len(changes), _STAGE_CHUNK):
            n = min(_STAGE_CHUNK, len(changes) - start)
            blob = pack_changes(itertools.islice(items, n), n)
            pipe.execute_command("EVAL", _S_STAGE.source, 1, stage, blob, _STAGE_TTL_S)
        pipe.execute()
        return stage

    @staticmethod
    def _epoch(epoch: int | None) -> str:
        return "" if epoch is None else str(int(epoch))

    def write_prepared(self, namespace: str, txid: int, changes: Changes, epoch: int | None) -> None:
        """Replace the prepared change set with ``changes`` as ``txid`` (one script)."""
        self._prepare(namespace, txid, changes, epoch, self._epoch(epoch))

    def write_prepared_owned(self, namespace: str, txid: int, changes: Changes, epoch: int) -> None:
        """:meth:`write_prepared` while the stored epoch is exactly ``epoch`` (checked by the same script)."""
        self._prepare(namespace, txid, changes, epoch, "=" + self._epoch(epoch))

    def _prepare(self, namespace: str, txid: int, changes: Changes, epoch: int | None, fence: str) -> None:
        keys = self.keys(namespace)
        what = f"prepare txid {txid} ({len(changes)} changes)"
        with self._call(namespace, what, epoch):
            if len(changes) <= INLINE_LIMIT:
                blob = pack_changes(changes.items(), len(changes))
                _S_PREPARE_INLINE(self.client, keys, [fence, str(txid), blob])
            else:
                stage = self._stage(namespace, changes)
                _S_PREPARE_STAGED(self.client, (*keys, stage), [fence, str(txid), len(changes)])

    def commit_prepared(self, namespace: str, txid: int, epoch: int | None) -> None:
        """Apply the prepared set of ``txid`` to the committed rows and record it.

        A prepared set of up to :data:`COMMIT_CHUNK` entries commits in one script. A larger one is
        applied by a sequence of scripts of :data:`COMMIT_CHUNK` entries each (so no script outlives
        the socket timeout); each moves its entries out of the prepared set, and the last records
        the txid. A crash between them leaves the txid prepared with what is left, and recovery's
        roll-forward (a ``COMMITTING`` transaction is always committed) finishes it. A script the
        client re-sends after it already ran finds the txid committed and returns quietly.
        """
        keys = self.keys(namespace)
        args = [self._epoch(epoch), str(txid), self.commit_chunk]
        with self._call(namespace, f"commit txid {txid}", epoch):
            while _S_COMMIT(self.client, keys, args) == 2:
                crash_point("redis_between_commit_chunks", txid)

    # ---- change feed (weir.state.changelog; layout in weir.connectors.redis.changelog) -------
    def commit_logged(self, namespace: str, txid: int, epoch: int | None, retain: int) -> None:
        """:meth:`commit_prepared`, each chunk's script logging the entries it moves (see ChangelogBackend).

        The script that records the commit also indexes the txid, records the feed's range and
        deletes the change sets of txids up to ``txid - retain`` (listed here, deleted there).
        """
        rows, prepare, txkey = self.keys(namespace)
        index, meta = feed_keys(rows)
        with self._call(namespace, f"commit txid {txid} with its change set logged", epoch):
            old = self.client.zrangebyscore(index, "-inf", txid - retain)
            keys = (
                rows,
                prepare,
                txkey,
                changes_key(rows, txid),
                index,
                meta,
                *(changes_key(rows, int(t)) for t in old),
            )
            args = [self._epoch(epoch), str(txid), self.commit_chunk, str(int(retain))]
            while _S_COMMIT_LOGGED(self.client, keys, args) == 2:
                crash_point("redis_between_commit_chunks", txid)

    def log_range(self, namespace: str) -> LogRange | None:
        """What the namespace's feed holds (HMGET since retain; None when it never logged)."""
        meta = feed_keys(self.keys(namespace)[0])[1]
        with self._call(namespace, "read the change feed's range"):
            since, retain = self.client.hmget(meta, [b"since", b"retain"])
        if since is None or retain is None:
            return None
        try:
            return LogRange(int(since), int(retain))
        except ValueError:
            raise self._foreign(namespace, 2, "read the change feed's range", f"since={since!r:.40}") from None

    def log_changes(self, namespace: str, after_txid: int, upto_txid: int) -> list[ChangeRow]:
        """Logged changes of txids in (``after_txid``, ``upto_txid``], by txid then key."""
        rows = self.keys(namespace)[0]
        index = feed_keys(rows)[0]
        out: list[ChangeRow] = []
        with self._call(namespace, f"read the change feed of txids {after_txid + 1}..{upto_txid}"):
            txids = [int(t) for t in self.client.zrangebyscore(index, f"({int(after_txid)}", int(upto_txid))]
            pipe = self.client.pipeline(transaction=False)
            for t in txids:
                pipe.hgetall(changes_key(rows, t))
            sets = pipe.execute() if txids else []
        for t, entries in zip(txids, sets, strict=True):
            for k in sorted(entries):
                try:
                    out.append(decode_entry(t, k, entries[k]))
                except ValueError as exc:
                    key = changes_key(rows, t).decode("utf-8", "replace")
                    msg = (
                        f"namespace {namespace!r}: cannot read the change feed: Redis key {key!r} holds {exc}, which "
                        "weir did not write; weir leaves it untouched. Inspect it, then repair or delete it"
                    )
                    raise StateError(msg) from None
        return out

    def discard_prepared(self, namespace: str, epoch: int | None) -> None:
        """Delete the prepared change set (one script)."""
        with self._call(namespace, "roll back the prepared change set", epoch):
            _S_DISCARD(self.client, self.keys(namespace), [self._epoch(epoch)])

    def write_direct(self, namespace: str, changes: Changes, epoch: int | None) -> None:
        """Apply ``changes`` to the committed rows without touching txids (one script)."""
        self._direct(namespace, changes, epoch, self._epoch(epoch))

    def write_owned(self, namespace: str, changes: Changes, epoch: int) -> None:
        """:meth:`write_direct` while the stored epoch is exactly ``epoch`` (checked by the same script)."""
        self._direct(namespace, changes, epoch, "=" + self._epoch(epoch))

    def _direct(self, namespace: str, changes: Changes, epoch: int | None, fence: str) -> None:
        keys = self.keys(namespace)
        with self._call(namespace, f"write {len(changes)} changes", epoch):
            if len(changes) <= INLINE_LIMIT:
                blob = pack_changes(changes.items(), len(changes))
                _S_DIRECT_INLINE(self.client, keys, [fence, blob])
            else:
                stage = self._stage(namespace, changes)
                _S_DIRECT_STAGED(self.client, (*keys, stage), [fence, len(changes)])

    def put_many(self, namespace: str, rows: Iterable[tuple[bytes, bytes]]) -> None:
        """Admin bulk load of committed rows (``weir state migrate``), in scripts of 10,000 rows.

        No script blocks Redis for long or outlives the socket timeout. Each chunk is applied
        atomically; the load as a whole is not (a failure leaves a prefix of ``rows`` written;
        loading again is idempotent).
        """
        it = iter(rows)
        keys = self.keys(namespace)
        while chunk := list(itertools.islice(it, INLINE_LIMIT)):
            blob = pack_changes(chunk, len(chunk))
            with self._call(namespace, f"bulk load {len(chunk)} rows"):
                _S_DIRECT_INLINE(self.client, keys, ["", blob])

    def acquire_epoch(self, namespace: str) -> int:
        """Increment and return the namespace's epoch (HINCRBY)."""
        with self._call(namespace, "take a new epoch"):
            return int(self.client.hincrby(self.keys(namespace)[2], "epoch", 1))

    def drop(self, namespace: str) -> None:
        """Delete the keys of ``namespace``: rows, prepared set, txid record and its change feed."""
        rows = self.keys(namespace)[0]
        index, meta = feed_keys(rows)
        with self._call(namespace, "drop the namespace"):
            logged = [changes_key(rows, int(t)) for t in self.client.zrange(index, 0, -1)]
            _S_DROP(self.client, (*self.keys(namespace), index, meta, *logged), ())


def open_backend(cfg: ProviderConfig) -> RedisBackend:
    """Open (and PING) the Redis store of ``cfg``.

    Raises
    ------
    ConfigError
        When the configuration is wrong, the server is unreachable, refuses the password, or the
        cluster is not ready — naming ``host:port`` (never the password) and what to do.
    """
    backend = RedisBackend(RedisSettings.from_config(cfg))
    try:
        _ = backend.client  # connect and check now, at submit time
    except StoreUnavailableError as exc:  # at submit, a server that does not answer is a configuration to fix
        cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
        raise open_error(backend.settings, cause) from None
    return backend
