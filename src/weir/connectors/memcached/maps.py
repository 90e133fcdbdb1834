"""Memcached backing maps (seed 004's ``MemcachedState``), through pymemcache.

Layout: the cell of key ``("man",)`` of a map state with ``key_prefix="wc:"`` is the memcached item
``wc:["man"]``, whose value is the JSON of the cell (``[txid, curr, prev]`` for opaque, ``[txid,
val]`` for transactional, the value itself for non-transactional maps). Memcached keys are at most
250 bytes of printable ASCII without spaces; a key whose JSON form does not fit (spaces, non-ASCII
text, long keys) is stored as ``<key_prefix>#<sha1 of the JSON form>`` instead — a JSON form always
starts with ``[``, so the two never collide.

``multi_get`` is one ``get_many`` and ``multi_put`` one ``set_many`` (pymemcache sends every key
in one round trip per server). Memcached has no multi-key transactions: each item is written
atomically, the set of them is not. That is enough for the opaque and transactional maps, whose
cells carry their txid (a replayed batch repairs each key on its own), but remember what memcached
is: a **cache**. An item evicted under memory pressure, or lost when a server restarts, takes its
count with it (as in Storm). Give memcached enough memory, or use SQLite, Redis or PostgreSQL for
state that must last.

Several servers are spread over with pymemcache's ``HashClient`` (rendezvous hashing).

``weir state`` finds the map states in the item :data:`REGISTRY_KEY` (JSON: key prefix → state type),
which :meth:`MemcachedMapStore.validate` updates at submit time (a ``gets`` / ``cas`` loop). It can
read a key (``weir state get``) but never list keys: memcached has no way to enumerate its items,
and keeping a list of every key written would cost a second write per batch and one ever-growing
item that an eviction would empty anyway. So a memcached map state shows no key count, and ``weir
state dump`` / ``inspect`` / ``migrate`` refuse it. The registry is an item like any other: an
eviction or a restart of its server forgets it until the next submit re-records each map state.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from weir._util import positive_float, positive_int
from weir.connectors.memcached.client import (
    _MAX_PREFIX,
    _import_pymemcache,
    _safe,
    _servers,
    call_bound_s,
    close_client,
    memcached_key,
    open_client,
    unreachable,
)
from weir.errors import ConfigError, StateError, StoreUnavailableError
from weir.state.connections import ProcessConnections, shared_connections
from weir.state.watchdog import WATCHDOG
from weir.trident.backing.catalog import MapCatalog, MapInfo
from weir.trident.backing.codec import decode_cell, encode_cell, encode_key
from weir.trident.backing.factory import MapStateFamily, MapStore
from weir.trident.state import BackingMap, Key, StateType, as_keys
from weir.trident.state.map_state import check_same_length

__all__ = [
    "REGISTRY_KEY",
    "MemcachedBackingMap",
    "MemcachedMapCatalog",
    "MemcachedMapState",
    "MemcachedMapStore",
    "memcached_key",
]

#: the item listing every map state's key prefix and state type (JSON), for ``weir state``
REGISTRY_KEY = "weir:trident:maps"
_CAS_TRIES = 20


@dataclass(frozen=True)
class MemcachedMapStore(MapStore):
    """The items ``<key_prefix><JSON key>`` of one or more memcached servers, holding one map state.

    Attributes
    ----------
    servers : tuple of (host, port)
        The memcached servers (several are spread over by rendezvous hashing).
    key_prefix : str
        Prefix of every item of this map state (printable ASCII, no spaces, at most 200 chars).
    expire : int
        Seconds an item lives (0, the default: until evicted).
    timeout : float
        Connect and socket timeout in seconds.
    """

    kind: ClassVar[str] = "memcached"

    servers: tuple[tuple[str, int], ...]
    key_prefix: str = "trident:"
    expire: int = 0
    timeout: float = 5.0

    def __post_init__(self) -> None:
        p = self.key_prefix
        if not isinstance(p, str) or not p or len(p) > _MAX_PREFIX or not _safe(p):
            msg = (
                f"MemcachedMapState key_prefix {p!r} must be 1-{_MAX_PREFIX} printable ASCII characters without spaces"
            )
            raise ConfigError(msg)
        positive_int(self.expire, "MemcachedMapState expire", minimum=0, expected="a non-negative int of seconds")
        positive_float(self.timeout, "MemcachedMapState timeout", expected="a positive number of seconds")

    def catalog_name(self) -> str:
        """The key prefix: the name ``weir state`` lists the map state by."""
        return self.key_prefix

    def describe(self) -> str:
        """``memcached://h:p[,h:p] key prefix '…'``."""
        hosts = ",".join(f"{h}:{p}" for h, p in self.servers)
        return f"memcached://{hosts} key prefix {self.key_prefix!r}"

    def _open(self) -> Any:
        return open_client(self.servers, self.timeout)

    def client(self) -> Any:
        """The pymemcache client of this process and thread, opened on first use."""
        return self._connections().get()

    def _connections(self) -> ProcessConnections[Any]:
        return shared_connections(("memcached", self.servers, self.timeout), self._open, close_client, per_thread=True)

    def discard(self, client: Any) -> None:
        """Close and forget a client whose connection failed (the next call reconnects)."""
        self._connections().discard(client)

    @contextlib.contextmanager
    def calling(self, what: str, client: Any) -> Iterator[None]:
        """Run the block's calls on ``client``: logged while they wait, their failure named.

        A server that does not answer within :func:`~weir.connectors.memcached.client.call_bound_s`
        ends in :class:`~weir.errors.StoreUnavailableError` (retriable), any other failure in a
        permanent :class:`~weir.errors.StateError`; either way the client is discarded.
        """
        pymemcache = _import_pymemcache()
        bound = call_bound_s(self.timeout)
        label = f"MemcachedMapState {self.describe()}: {what} (gives up after about {bound:.0f} s)"
        started = time.monotonic()
        with WATCHDOG.waiting(label, bound):
            try:
                yield
            except (OSError, pymemcache.exceptions.MemcacheError) as exc:
                self.discard(client)
                raise self.failure(what, exc, time.monotonic() - started) from exc

    def failure(self, what: str, exc: BaseException, waited: float) -> StateError:
        """The named error of a failed call: unavailable (retriable) or refused (permanent)."""
        reason = f"{type(exc).__name__}: {exc}"
        if unreachable(exc):
            return StoreUnavailableError(
                f"MemcachedMapState {self.describe()}: {what} failed: the server did not answer after "
                f"{waited:.1f} s (timeout={self.timeout:g} s; {reason}); the batch fails and is retried or "
                "recovered once the server answers (raise the timeout for a slow server)"
            )
        return StateError(
            f"MemcachedMapState {self.describe()}: {what} failed ({reason}); the server refused the call, "
            "which is not retried: check the item size limit (memcached -I) and the server's log"
        )

    def validate(self, state_type: StateType) -> None:
        """Ask every server for its version now.

        Raises
        ------
        ConfigError
            Naming the first server that does not answer.
        """
        pymemcache = _import_pymemcache()
        from pymemcache.client.base import Client

        for host, port in self.servers:
            probe = Client((host, port), connect_timeout=self.timeout, timeout=self.timeout)
            try:
                probe.version()
            except (OSError, pymemcache.exceptions.MemcacheError) as exc:
                msg = (
                    f"cannot use memcached at {host}:{port} for MemcachedMapState "
                    f"(key prefix {self.key_prefix!r}): {type(exc).__name__}: {exc}; start the server "
                    "or fix the host and port"
                )
                raise ConfigError(msg) from exc
            finally:
                probe.close()
        self.register(state_type)

    def registry(self) -> dict[str, str]:
        """The map states recorded in :data:`REGISTRY_KEY` (key prefix → state type); ``{}`` when absent."""
        client = self.client()
        with self.calling(f"reading {REGISTRY_KEY!r}", client):
            raw = client.get(REGISTRY_KEY)
        return _registry(raw, self.describe())

    def register(self, state_type: StateType) -> None:
        """Record this key prefix's state type in :data:`REGISTRY_KEY` (``gets`` + ``cas``, retried on a race)."""
        pymemcache = _import_pymemcache()
        client = self.client()
        try:
            for _ in range(_CAS_TRIES):
                raw, token = client.gets(REGISTRY_KEY)
                known = _registry(raw, self.describe())
                if known.get(self.key_prefix) == state_type.value:
                    return
                known[self.key_prefix] = state_type.value
                data = json.dumps(known, sort_keys=True).encode()
                if raw is None and client.add(REGISTRY_KEY, data, noreply=False):
                    return
                if raw is not None and client.cas(REGISTRY_KEY, data, token, noreply=False):
                    return
        except (OSError, pymemcache.exceptions.MemcacheError) as exc:
            self.discard(client)
            msg = (
                f"MemcachedMapState {self.describe()}: recording the map state in {REGISTRY_KEY!r} failed "
                f"({type(exc).__name__}: {exc})"
            )
            raise ConfigError(msg) from exc
        msg = f"MemcachedMapState {self.describe()}: {REGISTRY_KEY!r} kept changing; submit again"
        raise ConfigError(msg)

    def backing_map(self, state_type: StateType) -> MemcachedBackingMap:
        """A :class:`MemcachedBackingMap` of ``state_type`` cells under this prefix."""
        return MemcachedBackingMap(self, state_type)


class MemcachedBackingMap(BackingMap[Any]):
    """Bulk get/put of JSON cells in memcached (see the module docstring).

    Parameters
    ----------
    store : MemcachedMapStore
        Servers, key prefix and expiry.
    state_type : StateType
        Which cells are stored (they are read back as ``OpaqueValue`` / ``TransactionalValue``).
    """

    def __init__(self, store: MemcachedMapStore, state_type: StateType | str) -> None:
        self.store = store
        self.state_type = StateType.parse(state_type)

    def memcached_keys(self, keys: Sequence[Key]) -> list[str]:
        """The memcached key of each map key."""
        where = self.store.describe()
        prefix = self.store.key_prefix
        return [memcached_key(prefix, encode_key(k, where=where)) for k in as_keys(keys)]

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        """Cells of ``keys`` (``None`` where absent or evicted), with one ``get_many``."""
        ks = as_keys(keys)
        if not ks:
            return []
        mkeys = self.memcached_keys(ks)
        client = self.store.client()
        with self.store.calling(f"multi_get of {len(mkeys)} keys", client):
            found = client.get_many(list(dict.fromkeys(mkeys)))
        where = self.store.describe()
        st = self.state_type
        return [decode_cell(found.get(mk), st, k, where=where) for mk, k in zip(mkeys, ks, strict=True)]

    def multi_put(self, keys: Sequence[Key], vals: Sequence[Any]) -> None:
        """Store every cell with one ``set_many`` (each item atomic, the set of them not)."""
        ks = as_keys(keys)
        check_same_length(ks, vals, what="values", op="MemcachedBackingMap.multi_put")
        if not ks:
            return
        where = self.store.describe()
        st = self.state_type
        mkeys = self.memcached_keys(ks)
        items = {mk: encode_cell(v, st, k, where=where) for mk, k, v in zip(mkeys, ks, vals, strict=True)}
        client = self.store.client()
        with self.store.calling(f"multi_put of {len(items)} keys", client):
            failed = client.set_many(items, expire=self.store.expire, noreply=False)
        if failed:
            msg = (
                f"MemcachedMapState {self.store.describe()}: the server refused to store {len(failed)} of "
                f"{len(items)} items (e.g. {failed[0]!r}); a value may exceed the item size limit "
                "(memcached -I) or the server is out of memory"
            )
            raise StateError(msg)

    def __getstate__(self) -> dict[str, Any]:
        return {"store": self.store, "state_type": self.state_type}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["store"], state["state_type"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"MemcachedBackingMap({self.store.describe()}, {self.state_type.name})"


class MemcachedMapState(MapStateFamily):
    """Trident map states in memcached (Storm's ``MemcachedState``): ``MemcachedMapState.opaque(servers)``.

    ``opaque`` / ``transactional`` / ``non_transactional`` take the arguments of :meth:`store`
    plus ``cache_size``, ``global_key`` and ``check`` (see :class:`MapStateFamily`) and return a
    picklable :class:`~weir.trident.backing.MapStateFactory`.

    Examples
    --------
    >>> import os
    >>> factory = MemcachedMapState.opaque(
    ...     os.environ.get("MEMCACHED_URL", "memcached://127.0.0.1:11211"), key_prefix="wc:")
    """

    @classmethod
    def store(
        cls,
        servers: str | Sequence[str | tuple[str, int]] | tuple[str, int],
        key_prefix: str = "trident:",
        *,
        expire: int = 0,
        timeout: float = 5.0,
    ) -> MemcachedMapStore:
        """The items ``<key_prefix><JSON key>`` of the memcached ``servers``.

        Parameters
        ----------
        servers : str or list
            ``memcached://host:port[,host:port…]``, ``host:port``, or a list of ``host:port`` /
            ``(host, port)``.
        key_prefix : str
            Prefix of this map state's items; give every map state its own.
        expire : int
            Seconds an item lives; 0 (default) keeps it until evicted.
        timeout : float
            Connect and socket timeout in seconds.
        """
        return MemcachedMapStore(_servers(servers), key_prefix, expire, float(timeout))


def _registry(raw: bytes | None, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    try:
        found = json.loads(raw)
    except ValueError:
        found = None
    if not isinstance(found, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in found.items()):
        msg = f"{where}: the item {REGISTRY_KEY!r} is not weir's registry of map states (a JSON object); delete it"
        raise StateError(msg)
    return found


class MemcachedMapCatalog(MapCatalog):
    """The Trident map states of memcached servers: listed from :data:`REGISTRY_KEY`, read key by key.

    Memcached cannot enumerate items, so :meth:`scan` and :meth:`count` raise (see the module
    docstring); ``weir state ls`` shows the map states without a key count and ``get`` reads a key.
    """

    can_scan = False

    def __init__(self, servers: tuple[tuple[str, int], ...], timeout: float = 5.0) -> None:
        self.servers = servers
        self.timeout = timeout

    def describe(self) -> str:
        """``memcached://host:port[,host:port]``."""
        return "memcached://" + ",".join(f"{h}:{p}" for h, p in self.servers)

    def maps(self) -> list[MapInfo]:
        """Every key prefix recorded in :data:`REGISTRY_KEY`, with its state type."""
        found = MemcachedMapStore(self.servers, timeout=self.timeout).registry()
        return sorted((MapInfo(k, StateType.parse(v)) for k, v in found.items()), key=lambda m: m.name)

    def store(self, name: str) -> MemcachedMapStore:
        """The :class:`MemcachedMapStore` of the key prefix ``name``."""
        return MemcachedMapStore(self.servers, name, timeout=self.timeout)

    def _unlistable(self, name: str) -> StateError:
        return StateError(
            f"{self.describe()}: memcached cannot list the keys of map state trident:{name} (it has no way to "
            "enumerate items); read a key with weir state get"
        )

    def scan(self, name: str) -> Iterator[tuple[str, bytes | str]]:
        """Impossible in memcached: raises :class:`~weir.errors.StateError`."""
        raise self._unlistable(name)

    def count(self, name: str) -> int:
        """Impossible in memcached: raises :class:`~weir.errors.StateError`."""
        raise self._unlistable(name)

    def delete(self, name: str, keys: list[Key]) -> None:
        """Delete the items of ``keys``."""
        store = self.store(name)
        client = store.client()
        with store.calling(f"deleting {len(keys)} keys of map state {name!r}", client):
            client.delete_many(MemcachedBackingMap(store, StateType.NON_TRANSACTIONAL).memcached_keys(keys))

    def drop(self, name: str) -> None:
        """Impossible in memcached (its items cannot be listed): raises :class:`~weir.errors.StateError`."""
        raise self._unlistable(name)

    def register(self, name: str, state_type: StateType) -> None:
        """Record ``name`` as a map state of ``state_type``."""
        self.store(name).register(state_type)


def catalog_for_url(url: str) -> MemcachedMapCatalog:
    """The catalog of the servers of ``memcached://host:port[,host:port]``."""
    return MemcachedMapCatalog(_servers(url))
