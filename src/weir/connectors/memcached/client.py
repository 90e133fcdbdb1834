"""Memcached plumbing for the Trident backing maps (:mod:`.maps`): servers, keys, clients.

- :func:`_servers` reads ``memcached://h:p[,h:p]``, ``"h:p"`` or a list of them;
  :func:`memcached_key` maps a key's JSON form onto a memcached-safe key (hashed when it is not).
- :func:`_import_pymemcache`: the optional client library, with an install hint when it is missing.
- :func:`open_client` / :func:`close_client`: a pymemcache client (a ``HashClient`` over several
  servers), cached per process and thread by :mod:`weir.state.connections`.
- :func:`unreachable` / :func:`call_bound_s`: retriable or permanent, and how long one call can
  wait. A server that does not answer (refused, reset, closed, a socket timeout) is retriable — the
  maps raise :class:`~weir.errors.StoreUnavailableError` for it; an error reply (a refused key or
  value, an unknown command) is permanent. pymemcache's own timeouts bound every call: the connect
  and then the reply each wait at most ``timeout`` seconds.

Storm has no memcached key-value state provider, so there is no ``kv.py`` here.
"""

from __future__ import annotations

import hashlib
from typing import Any

from weir.errors import ConfigError

__all__ = ["call_bound_s", "close_client", "memcached_key", "open_client", "unreachable"]

_MAX_KEY = 250
_MAX_PREFIX = 200


def _safe(text: str) -> bool:
    return all("!" <= ch <= "~" for ch in text)


def memcached_key(prefix: str, json_key: str) -> str:
    """The memcached key of a map key's JSON form: ``prefix + json_key`` or ``prefix + '#' + sha1``."""
    full = prefix + json_key
    if len(full) <= _MAX_KEY and _safe(json_key):
        return full
    return prefix + "#" + hashlib.sha1(json_key.encode("utf-8", "surrogatepass")).hexdigest()  # noqa: S324


def _import_pymemcache() -> Any:
    """The ``pymemcache`` module, or a ConfigError saying how to install it."""
    try:
        import pymemcache
    except ImportError as exc:
        msg = "weir's memcached store (MemcachedMapState) needs pymemcache: pip install 'weir[memcached]'"
        raise ConfigError(msg) from exc
    return pymemcache


def _parse_server(text: str) -> tuple[str, int]:
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif ":" in text:
        host, _, port_text = text.rpartition(":")
    else:
        host, port_text = text, "11211"
    if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        msg = f"MemcachedMapState: server {text!r} is not 'host:port'"
        raise ConfigError(msg)
    return host, int(port_text)


def _servers(spec: Any) -> tuple[tuple[str, int], ...]:
    if isinstance(spec, str):
        scheme, sep, rest = spec.partition("://")
        if sep:
            if scheme.lower() != "memcached":
                msg = f"MemcachedMapState: url {spec!r} must look like memcached://host:port[,host:port...]"
                raise ConfigError(msg)
            spec = rest.rstrip("/")
        parts: list[Any] = [p for p in spec.split(",") if p.strip()]
    elif isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], int):
        parts = [spec]
    elif isinstance(spec, (list, tuple)):
        parts = list(spec)
    else:
        parts = []
    out: list[tuple[str, int]] = []
    for part in parts:
        if isinstance(part, str):
            out.append(_parse_server(part))
        elif (
            isinstance(part, (list, tuple))
            and len(part) == 2
            and isinstance(part[0], str)
            and isinstance(part[1], int)
            and not isinstance(part[1], bool)
        ):
            out.append(_parse_server(f"{part[0]}:{part[1]}"))
        else:
            parts = []
            break
    if not out or not parts:
        msg = (
            "MemcachedMapState: give the servers as 'memcached://host:port[,host:port]', 'host:port', "
            f"or a list of 'host:port' / (host, port); got {spec!r}"
        )
        raise ConfigError(msg)
    return tuple(out)


def open_client(servers: tuple[tuple[str, int], ...], timeout: float) -> Any:
    """A pymemcache client of ``servers`` (a ``HashClient`` over several), waiting ``timeout`` seconds."""
    _import_pymemcache()
    from pymemcache.client.base import Client
    from pymemcache.client.hash import HashClient

    if len(servers) == 1:
        return Client(
            servers[0], connect_timeout=timeout, timeout=timeout, no_delay=True,
            default_noreply=False,
        )  # fmt: skip
    return HashClient(
        list(servers), connect_timeout=timeout, timeout=timeout, no_delay=True,
        default_noreply=False, retry_attempts=1, dead_timeout=timeout,
    )  # fmt: skip


def close_client(client: Any) -> None:
    """Close ``client`` (the closer of the per-process connection cache)."""
    client.close()


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the server did not answer (retriable), not that it refused the call (permanent)."""
    pymemcache = _import_pymemcache()
    errors = pymemcache.exceptions
    if isinstance(exc, (OSError, errors.MemcacheUnexpectedCloseError)):
        return True
    # a HashClient with every server marked dead raises a bare MemcacheError
    return type(exc) is errors.MemcacheError and "down" in str(exc)


def call_bound_s(timeout: float) -> float:
    """The longest one call waits on a server that does not answer: the connect, then the reply."""
    return 2 * timeout
