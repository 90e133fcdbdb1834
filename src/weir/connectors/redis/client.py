"""Connections to Redis and Redis Cluster: settings parsed from Storm's configuration, and checks.

:class:`RedisSettings` is read once from ``topology.state.provider.config`` (``jedisPoolConfig``,
``jedisClusterConfig`` or a ``redis://`` / ``rediss://`` / ``redis+cluster://`` ``url``) and is what
travels to executors. :func:`redis_client` makes a client, PINGs it and checks the server's mode, and
turns every failure into one :class:`~weir.errors.ConfigError` that names ``host:port`` (never the
password) and says what to do. Used by the ``redis`` state provider and by Redis-based sources.

Retriable or permanent: a server that does not answer (refused, reset, a socket timeout, still
loading its data) is *unavailable* — :func:`unreachable` tells — and a client made while a
topology runs (``redis_client(..., at_submit=False)``) raises
:class:`~weir.errors.StoreUnavailableError` for it, which supervision retries; at submit time the
same failure is a :class:`~weir.errors.ConfigError` (start the server, fix the address). A refused
password, a wrong server mode or a TLS failure is permanent everywhere. Every call is bounded:
:func:`call_bound_s` is how long one call can wait (each attempt's socket timeout, the retries and
their back-off) before it fails.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from weir._redact import redact_text, redact_url
from weir.errors import ConfigError, StoreUnavailableError

try:
    import redis
    import redis.cluster
    import redis.exceptions as rexc
    from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
    from redis.retry import Retry
except ImportError as _exc:  # pragma: no cover - the redis extra is not installed
    _msg = (
        "weir's Redis store (the redis provider, RedisMapState, RedisStreamSpout) needs redis-py: "
        "pip install 'weir[redis]'"
    )
    raise ConfigError(_msg) from _exc
from weir.state.config import ProviderConfig

__all__ = [
    "REDIS_ERRORS",
    "RedisSettings",
    "call_bound_s",
    "close_client",
    "open_error",
    "redis_client",
    "unavailable_error",
    "unreachable",
]

_DEFAULT_TIMEOUT_MS = 2000
_RETRIES = 8
_BACKOFF_BASE_S = 0.01
_BACKOFF_CAP_S = 1.0
#: what a Redis call can raise (``RedisClusterException`` is not a ``RedisError``)
REDIS_ERRORS = (rexc.RedisError, rexc.RedisClusterException, OSError)


@dataclass(frozen=True)
class RedisSettings:
    """Where and how to connect (picklable; parsed once from the provider configuration).

    Attributes
    ----------
    nodes:
        ``(host, port)`` of the server, or the cluster's startup nodes.
    cluster:
        Redis Cluster (hash-tagged keys, ``RedisCluster`` client) instead of one server.
    database:
        Database number (standalone only).
    username, password:
        Credentials (ACL user optional).
    ssl:
        TLS (``rediss://``, or a ``tls`` object in the provider config).
    ssl_ca_file, ssl_cert_file, ssl_key_file, ssl_key_password:
        PEM files of the CA that signed the server's certificate, and of the client's certificate
        and key (mutual TLS); the key's password if it is encrypted. ``None``: the system CAs, no
        client certificate.
    ssl_verify:
        Check the server's certificate and (``ssl_check_hostname``) its host name; both default True.
    timeout_ms:
        Connect and socket timeout in milliseconds (Storm's ``timeout``, default 2000).
    max_redirections:
        Cluster redirections followed per command (Storm's ``maxRedirections``).
    """

    nodes: tuple[tuple[str, int], ...] = (("localhost", 6379),)
    cluster: bool = False
    database: int = 0
    username: str | None = None
    password: str | None = None
    ssl: bool = False
    timeout_ms: int = _DEFAULT_TIMEOUT_MS
    max_redirections: int | None = None
    ssl_ca_file: str | None = None
    ssl_cert_file: str | None = None
    ssl_key_file: str | None = None
    ssl_key_password: str | None = None
    ssl_verify: bool = True
    ssl_check_hostname: bool = True

    def __post_init__(self) -> None:
        if not self.nodes:
            msg = "redis provider: no server given; set jedisPoolConfig.host/port or a redis:// url"
            raise ConfigError(msg)
        for host, port in self.nodes:
            if not host or not 0 < port < 65536:
                msg = f"redis provider: bad server address {host}:{port}"
                raise ConfigError(msg)
        if self.database < 0 or (self.cluster and self.database != 0):
            msg = f"redis provider: database {self.database} is not allowed (a cluster has only database 0)"
            raise ConfigError(msg)
        if self.timeout_ms <= 0:
            msg = f"redis provider: timeout must be a positive number of milliseconds, got {self.timeout_ms}"
            raise ConfigError(msg)
        for what, path in (
            ("caFile", self.ssl_ca_file),
            ("certFile", self.ssl_cert_file),
            ("keyFile", self.ssl_key_file),
        ):
            if path is not None:
                if not self.ssl:
                    msg = f"redis provider: tls.{what} is set but TLS is off; use a rediss:// url"
                    raise ConfigError(msg)
                if not os.path.isfile(path):
                    msg = f"redis provider: tls.{what} {path!r} is not a readable file"
                    raise ConfigError(msg)
        if (self.ssl_key_file is None) != (self.ssl_cert_file is None) and self.ssl_key_file is not None:
            msg = "redis provider: tls.keyFile needs tls.certFile (the client certificate)"
            raise ConfigError(msg)

    def describe(self) -> str:
        """A URL of the store without credentials."""
        hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.nodes)
        if self.cluster:
            return f"{'rediss' if self.ssl else 'redis'}+cluster://{hosts}"
        return f"{'rediss' if self.ssl else 'redis'}://{hosts}/{self.database}"

    def scrub(self, text: str) -> str:
        """``text`` with the passwords (and any URL userinfo password) replaced by ``***``."""
        return redact_text(text, [p for p in (self.password, self.ssl_key_password) if p])

    def __repr__(self) -> str:
        password = "***" if self.password else None
        return f"RedisSettings({self.describe()!r}, user={self.username!r}, password={password})"

    @classmethod
    def from_config(cls, cfg: ProviderConfig | Mapping[str, Any]) -> RedisSettings:
        """Settings from a :class:`ProviderConfig` (or its options mapping)."""
        opts = cfg.options if isinstance(cfg, ProviderConfig) else cfg
        given = [k for k in ("url", "jedisPoolConfig", "jedisClusterConfig") if opts.get(k)]
        if len(given) > 1:
            msg = f"redis provider: give one of url, jedisPoolConfig or jedisClusterConfig, not {given}"
            raise ConfigError(msg)
        tls = _tls_options(opts.get("tls"))
        if opts.get("url"):
            settings = cls.from_url(str(opts["url"]))
            if tls:
                settings = dataclasses.replace(settings, **{**tls, "ssl": True})
            return settings
        if opts.get("jedisClusterConfig"):
            c = opts["jedisClusterConfig"]
            return cls(
                nodes=tuple(_host_port(str(n), what="jedisClusterConfig.nodes") for n in c["nodes"]),
                cluster=True,
                password=c.get("password") or None,
                timeout_ms=int(c.get("timeout", _DEFAULT_TIMEOUT_MS)),
                max_redirections=c.get("maxRedirections"),
                ssl=bool(tls),
                **tls,
            )
        p = opts.get("jedisPoolConfig") or {}
        return cls(
            nodes=((str(p.get("host", "localhost")), int(p.get("port", 6379))),),
            database=int(p.get("database", 0)),
            password=p.get("password") or None,
            timeout_ms=int(p.get("timeout", _DEFAULT_TIMEOUT_MS)),
            ssl=bool(tls),
            **tls,
        )

    @classmethod
    def from_url(cls, url: str) -> RedisSettings:
        """Parse ``redis://``, ``rediss://`` and ``redis+cluster://`` URLs."""
        scheme, sep, rest = url.partition("://")
        scheme = scheme.lower()
        if not sep or scheme not in ("redis", "rediss", "redis+cluster", "rediss+cluster"):
            msg = (
                f"redis provider: cannot read url {_redact_url(url)!r}; expected "
                "redis://[:password@]host:port/db, rediss://... or redis+cluster://h1:p1,h2:p2"
            )
            raise ConfigError(msg)
        parts = urlsplit("x://" + rest)
        netloc = parts.netloc
        username = password = None
        if "@" in netloc:
            userinfo, _, netloc = netloc.rpartition("@")
            user, has_pw, pw = userinfo.partition(":")
            username = unquote(user) or None
            password = unquote(pw) if has_pw else None
            if not has_pw:  # redis://password@host is accepted by most clients
                username, password = None, unquote(user) or None
        cluster = scheme.endswith("+cluster")
        nodes = tuple(_host_port(n, what="url", default_port=6379) for n in (netloc.split(",") if netloc else [""]))
        if not cluster and len(nodes) != 1:
            msg = f"redis provider: url {_redact_url(url)!r} names several hosts; use redis+cluster://"
            raise ConfigError(msg)
        path = parts.path.strip("/")
        try:
            database = int(path) if path else 0
        except ValueError as exc:
            msg = f"redis provider: url {_redact_url(url)!r}: database {path!r} is not a number"
            raise ConfigError(msg) from exc
        query = parse_qs(parts.query)
        timeout_ms = _DEFAULT_TIMEOUT_MS
        tls: dict[str, Any] = {}
        for key, values in query.items():
            if key in _URL_TLS_KEYS:
                tls[_URL_TLS_KEYS[key]] = values[-1]
                continue
            if key != "timeout" or not values[-1].isdigit():
                msg = (
                    f"redis provider: url {_redact_url(url)!r}: unknown or bad query parameter {key!r} "
                    f"(known: timeout, {', '.join(_URL_TLS_KEYS)})"
                )
                raise ConfigError(msg)
            timeout_ms = int(values[-1])
        if "ssl_verify" in tls:
            tls["ssl_verify"] = tls["ssl_verify"].lower() not in ("none", "false", "0", "no")
        if "ssl_check_hostname" in tls:
            tls["ssl_check_hostname"] = tls["ssl_check_hostname"].lower() in ("true", "1", "yes")
        return cls(
            nodes=nodes,
            cluster=cluster,
            database=database,
            username=username,
            password=password,
            ssl=scheme.startswith("rediss"),
            timeout_ms=timeout_ms,
            **tls,
        )


#: TLS options in a ``rediss://`` URL's query (redis-py's spelling) → RedisSettings fields
_URL_TLS_KEYS = {
    "ssl_ca_certs": "ssl_ca_file",
    "ssl_certfile": "ssl_cert_file",
    "ssl_keyfile": "ssl_key_file",
    "ssl_cert_reqs": "ssl_verify",
    "ssl_check_hostname": "ssl_check_hostname",
}
#: keys of the provider config's ``tls`` object → RedisSettings fields
_TLS_KEYS = {
    "caFile": ("ssl_ca_file", str),
    "certFile": ("ssl_cert_file", str),
    "keyFile": ("ssl_key_file", str),
    "keyPassword": ("ssl_key_password", str),
    "verify": ("ssl_verify", bool),
    "checkHostname": ("ssl_check_hostname", bool),
}


def _tls_options(raw: Any) -> dict[str, Any]:
    """RedisSettings fields from the provider config's ``tls`` object (``{}`` when absent)."""
    if raw is None or raw is False:
        return {}
    if raw is True:
        return {"ssl_verify": True}
    if not isinstance(raw, Mapping):
        msg = "redis provider: tls must be an object {caFile, certFile, keyFile, keyPassword, verify, checkHostname}"
        raise ConfigError(msg)
    out: dict[str, Any] = {"ssl_verify": True}
    for key, value in raw.items():
        if key not in _TLS_KEYS:
            msg = f"redis provider: unknown key tls.{key}; expected some of {', '.join(_TLS_KEYS)}"
            raise ConfigError(msg)
        name, want = _TLS_KEYS[key]
        if not isinstance(value, want):
            shown = "(value hidden)" if key == "keyPassword" else repr(value)
            msg = f"redis provider: tls.{key} must be {want.__name__}, got {type(value).__name__} {shown}"
            raise ConfigError(msg)
        out[name] = value
    return out


def _redact_url(url: str) -> str:
    return redact_url(url)


def _host_port(text: str, *, what: str, default_port: int | None = None) -> tuple[str, int]:
    text = text.strip()
    if text.startswith("["):  # [ipv6]:port
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif text.count(":") == 1 or default_port is None:
        host, _, port_text = text.rpartition(":")
    else:
        host, port_text = text, ""
    host = host or "localhost"
    if not port_text and default_port is not None:
        return host, default_port
    if not port_text.isdigit():
        msg = f"redis provider: {what}: {text!r} is not 'host:port'"
        raise ConfigError(msg)
    return host, int(port_text)


def _connect(settings: RedisSettings) -> Any:
    """A new (unchecked) client for ``settings``."""
    timeout = settings.timeout_ms / 1000.0
    common: dict[str, Any] = {
        "username": settings.username,
        "password": settings.password,
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "ssl": settings.ssl,
    }
    if settings.ssl:
        common.update(
            ssl_ca_certs=settings.ssl_ca_file,
            ssl_certfile=settings.ssl_cert_file,
            ssl_keyfile=settings.ssl_key_file,
            ssl_password=settings.ssl_key_password,
            ssl_cert_reqs="required" if settings.ssl_verify else "none",
            ssl_check_hostname=settings.ssl_verify and settings.ssl_check_hostname,
        )
    if not settings.cluster:
        host, port = settings.nodes[0]
        # no retries while checking at open: a refused password or port fails at once
        return redis.Redis(host=host, port=port, db=settings.database, retry=Retry(NoBackoff(), 0), **common)
    client = redis.cluster.RedisCluster(
        startup_nodes=[redis.cluster.ClusterNode(h, p) for h, p in settings.nodes],  # type: ignore[no-untyped-call]
        **common,
    )
    if settings.max_redirections is not None:
        client.RedisClusterRequestTTL = max(1, settings.max_redirections)
    return client


def _check(settings: RedisSettings, client: Any) -> None:
    """PING the server(s) and check the mode matches (raises redis errors)."""
    client.ping()
    if settings.cluster:
        for node in client.get_primaries():
            info = client.get_redis_connection(node).execute_command("CLUSTER INFO")
            if isinstance(info, dict):
                state = info.get("cluster_state")
            else:
                text = info.decode() if isinstance(info, bytes) else str(info)
                state = "ok" if "cluster_state:ok" in text else None
            if state not in ("ok", b"ok"):
                msg = f"node {node.host}:{node.port} reports cluster_state other than ok"
                raise rexc.ClusterDownError(msg)
        return
    try:
        enabled = int(client.info("cluster").get("cluster_enabled", 0))
    except rexc.ResponseError:  # INFO refused by an ACL or a managed service: skip the check
        return
    if enabled:
        msg = "cluster_enabled"
        raise rexc.RedisClusterException(msg)


_AUTH_MARKERS = (
    "WRONGPASS",
    "NOAUTH",
    "invalid password",
    "invalid username-password",
    "without any password",
    "Authentication required",
    "must be called with the client already authenticated",
)


def open_error(settings: RedisSettings, exc: BaseException) -> ConfigError:
    """A :class:`ConfigError` explaining why the store at ``settings`` cannot be used."""
    where = settings.describe()
    reason = settings.scrub(f"{type(exc).__name__}: {exc}")
    text = str(exc)
    if isinstance(exc, rexc.AuthenticationError) or any(s in text for s in _AUTH_MARKERS):
        hint = (
            "fix the password (jedisPoolConfig.password / jedisClusterConfig.password, or the URL's "
            "':password@' part), or remove it if the server has none"
        )
    elif text == "cluster_enabled":
        reason = "the server is a Redis Cluster node"
        hint = "use jedisClusterConfig or a redis+cluster://host:port,... url"
    elif "Cluster mode is not enabled" in text:
        hint = "the server is not a cluster: use jedisPoolConfig or a redis://host:port/db url"
    elif "SSL" in text or "certificate" in text.lower() or "TLS" in text:
        hint = (
            "check the TLS setup: a rediss:// url for a TLS port, tls.caFile naming the CA that signed "
            "the server's certificate, and tls.certFile/keyFile when the server asks for a client certificate"
        )
    elif isinstance(exc, (rexc.ClusterDownError, rexc.SlotNotCoveredError)) or "slots" in text:
        hint = (
            "the cluster is not ready: wait until 'redis-cli -p PORT cluster info' says cluster_state:ok "
            "and every slot is covered"
        )
    else:
        hint = "start the server, or fix the host, port and timeout in topology.state.provider.config"
    return ConfigError(f"cannot use Redis at {where} ({reason}): {hint}")


def redis_client(cfg: ProviderConfig | RedisSettings | str, *, at_submit: bool = True) -> Any:
    """A connected ``redis.Redis`` / ``RedisCluster`` client for a config, settings or URL.

    ``at_submit=False`` (a client made while a topology runs): a server that does not answer raises
    :class:`~weir.errors.StoreUnavailableError` (retriable) instead of a ConfigError.

    Raises
    ------
    ConfigError
        When the server refuses the password, the cluster is not ready, or (``at_submit``) the
        server is unreachable.
    StoreUnavailableError
        When the server does not answer and ``at_submit`` is False.
    """
    started = time.monotonic()
    if isinstance(cfg, str):
        settings = RedisSettings.from_url(cfg)
    elif isinstance(cfg, ProviderConfig):
        settings = RedisSettings.from_config(cfg)
    else:
        settings = cfg
    client = None
    try:
        client = _connect(settings)
        _check(settings, client)
        if not settings.cluster:  # from now on ride out a short outage (a server restart)
            client.set_retry(Retry(ExponentialWithJitterBackoff(base=_BACKOFF_BASE_S, cap=_BACKOFF_CAP_S), _RETRIES))
    except REDIS_ERRORS as exc:
        if client is not None:
            client.close()
        if not at_submit and unreachable(exc):
            raise unavailable_error(settings, exc, "connect", time.monotonic() - started) from exc
        raise open_error(settings, exc) from None
    return client


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the server did not answer (retriable), not that it refused us (permanent)."""
    if isinstance(exc, rexc.AuthenticationError) or any(s in str(exc) for s in _AUTH_MARKERS):
        return False
    if isinstance(exc, (rexc.ResponseError, rexc.DataError, rexc.RedisClusterException)) and not isinstance(
        exc, (rexc.BusyLoadingError, rexc.ClusterDownError, rexc.TryAgainError)
    ):
        return False
    text = str(exc)
    if "SSL" in text or "certificate" in text.lower():
        return False
    return isinstance(
        exc,
        (rexc.ConnectionError, rexc.TimeoutError, rexc.BusyLoadingError, rexc.ClusterDownError, rexc.TryAgainError,
         OSError),
    )  # fmt: skip


def call_bound_s(settings: RedisSettings) -> float:
    """The longest one call can wait on a server that does not answer: every attempt's timeout plus back-off."""
    attempts = _RETRIES + 1 if not settings.cluster else 4
    backoff: float = sum(min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2.0**i) for i in range(1, attempts))
    # an attempt may wait for the connect and then for the reply
    return attempts * 2 * settings.timeout_ms / 1000.0 + backoff


def unavailable_error(
    settings: RedisSettings, exc: BaseException, what: str, waited_s: float, namespace: str | None = None
) -> StoreUnavailableError:
    """The retriable error of a call on a server that did not answer (naming the store, the call and the wait)."""
    where = f"namespace {namespace!r}: " if namespace is not None else ""
    attempts = _RETRIES + 1 if not settings.cluster else "several"
    return StoreUnavailableError(
        f"{where}{what} on the redis store {settings.describe()} failed: the server did not answer after "
        f"{waited_s:.1f} s ({attempts} attempts, timeout={settings.timeout_ms} ms each; "
        f"{settings.scrub(f'{type(exc).__name__}: {exc}')}); the batch fails and is retried or recovered once "
        "the server answers (raise the url's ?timeout= or jedisPoolConfig.timeout for a slow server)"
    )


def close_client(client: Any) -> None:
    """Close ``client``'s connection pool (the closer of the per-process connection cache)."""
    client.close()
