"""Kafka client plumbing shared by the spout (:mod:`.spout`) and the sinks (:mod:`.sink`) (confluent-kafka).

One place for the optional import, the client settings (``bootstrap.servers`` plus whatever the user
passes through: SASL, TLS, timeouts), cached clients per process and the error translation.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from weir._redact import collect_secrets, redact_text
from weir.errors import ConfigError, TransientSourceError

__all__ = [
    "admin",
    "check_settings",
    "client_module",
    "describe_servers",
    "error_callback",
    "explain",
    "is_retriable",
    "scrub",
    "serve_errors",
    "topic_partitions",
]

#: keys weir sets itself on the clients it makes (a user value would break the read or the protocol)
RESERVED = frozenset(
    {"group.id", "enable.auto.commit", "auto.offset.reset", "transactional.id", "enable.partition.eof"}
)

_ADMINS: dict[tuple[tuple[str, str], ...], Any] = {}
_ADMINS_PID = [os.getpid()]  # clients made before a fork are not used by the child
#: the last error a client of these settings reported (its error callback): why a request timed out
_LAST_ERROR: dict[tuple[tuple[str, str], ...], str] = {}
_LOCK = threading.Lock()

#: broker answers that mean "ask again in a moment": a partition's leader moving or being elected, a
#: broker restarting, a request or connection timing out (Kafka's RetriableException family)
RETRIABLE_CODES = frozenset(
    {
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_LEADER_EPOCH",
        "NOT_LEADER_FOR_PARTITION",
        "NOT_LEADER_OR_FOLLOWER",
        "LEADER_NOT_AVAILABLE",
        "ELIGIBLE_LEADERS_NOT_AVAILABLE",
        "PREFERRED_LEADER_NOT_AVAILABLE",
        "REPLICA_NOT_AVAILABLE",
        "OFFSET_NOT_AVAILABLE",
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "KAFKA_STORAGE_ERROR",
        "NETWORK_EXCEPTION",
        "REQUEST_TIMED_OUT",
        "NOT_COORDINATOR",
        "COORDINATOR_NOT_AVAILABLE",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "CONCURRENT_TRANSACTIONS",
        "_TIMED_OUT",
        "_TRANSPORT",
        "_ALL_BROKERS_DOWN",
        "_WAIT_COORD",
        "_RESOLVE",
        "_MSG_TIMED_OUT",
    }
)


def client_module() -> Any:
    """The ``confluent_kafka`` module, or a :class:`ConfigError` saying how to install it."""
    try:
        import confluent_kafka
        import confluent_kafka.admin  # noqa: F401 - the admin client lives in a submodule
    except ImportError as exc:  # pragma: no cover - packaging
        msg = "Kafka support needs confluent-kafka: pip install 'weir[kafka]'"
        raise ConfigError(msg) from exc
    return confluent_kafka


def check_settings(bootstrap_servers: Any, config: Mapping[str, Any] | None, where: str) -> dict[str, str]:
    """The client settings: ``bootstrap.servers`` plus the user's ``config`` (validated, as strings)."""
    if not isinstance(bootstrap_servers, str) or not bootstrap_servers.strip():
        msg = f"{where}: bootstrap_servers must be 'host:port[,host:port...]', got {bootstrap_servers!r}"
        raise ConfigError(msg)
    out = {"bootstrap.servers": bootstrap_servers.strip()}
    for k, v in dict(config or {}).items():
        if not isinstance(k, str) or not k:
            msg = f"{where}: client setting names must be strings, got {k!r}"
            raise ConfigError(msg)
        if k in RESERVED:
            msg = f"{where}: client setting {k!r} is set by weir (offsets live in Spark's checkpoint); remove it"
            raise ConfigError(msg)
        if k == "bootstrap.servers":
            msg = f"{where}: pass bootstrap.servers as bootstrap_servers, not in config"
            raise ConfigError(msg)
        out[k] = v if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)
    return out


def describe_servers(settings: Mapping[str, str]) -> str:
    """The bootstrap servers (never credentials), for messages."""
    return settings["bootstrap.servers"]


def scrub(settings: Mapping[str, str], text: object) -> str:
    """``text`` without any secret of ``settings`` (``sasl.password``, ``ssl.key.password``, ...)."""
    return redact_text(str(text), collect_secrets(dict(settings)))


def error_callback(settings: Mapping[str, str]) -> Any:
    """An ``error_cb`` for a client of ``settings``: keeps its last error for :func:`explain`."""
    key = tuple(sorted(settings.items()))

    def on_error(err: Any) -> None:
        _LAST_ERROR[key] = f"{err.name()}: {err.str()}"

    return on_error


def serve_errors(client: Any) -> None:
    """Let ``client`` call its error callback now (confluent-kafka calls it only from ``poll``)."""
    if client is not None:
        try:
            client.poll(0)
        except Exception:  # noqa: S110 - only for a better message
            pass


def explain(settings: Mapping[str, str], exc: object) -> str:
    """A failed request's error, with the client's last reported error (why it failed), secrets redacted."""
    key = tuple(sorted(settings.items()))
    text = str(exc)
    last = _LAST_ERROR.get(key)
    if last and last not in text:
        text = f"{text}; the client reported {last}"
    if last and "AUTHENTICATION" in last.upper():
        text += " (check sasl.mechanism, sasl.username and sasl.password)"
    elif last and "SSL" in last.upper():
        text += " (check security.protocol and the ssl.* settings)"
    return scrub(settings, text)


def is_retriable(exc: object) -> bool:
    """Whether a client error is one to retry (see :data:`RETRIABLE_CODES`), not a permanent refusal."""
    err = exc.args[0] if isinstance(exc, Exception) and exc.args and hasattr(exc.args[0], "code") else exc
    name = getattr(err, "name", None)
    if callable(name):
        try:
            if str(name()) in RETRIABLE_CODES:
                return True
            flag = getattr(err, "retriable", None)
            return bool(flag()) if callable(flag) else False
        except Exception:  # noqa: BLE001 - not a KafkaError after all
            return False
    return isinstance(exc, (TimeoutError, ConnectionError))


def admin(settings: Mapping[str, str]) -> Any:
    """A cached ``AdminClient`` for ``settings`` (one per process)."""
    key = tuple(sorted(settings.items()))
    with _LOCK:
        if _ADMINS_PID[0] != os.getpid():
            _ADMINS.clear()
            _ADMINS_PID[0] = os.getpid()
        client = _ADMINS.get(key)
        if client is None:
            client = client_module().admin.AdminClient({**settings, "error_cb": error_callback(settings)})
            _ADMINS[key] = client
    return client


def topic_partitions(settings: Mapping[str, str], timeout: float, where: str) -> dict[str, int]:
    """Every topic (not internal ones) with its number of partitions.

    Raises
    ------
    TransientSourceError
        The brokers do not answer within ``timeout`` (at submit time this is reported as is; while a
        topology runs, supervision restarts the query with back-off).
    """
    try:
        md = admin(settings).list_topics(timeout=timeout)
    except Exception as exc:
        serve_errors(_ADMINS.get(tuple(sorted(settings.items()))))
        with _LOCK:  # a client for unreachable brokers would go on retrying (and logging) forever
            _ADMINS.pop(tuple(sorted(settings.items())), None)
        msg = (
            f"{where}: cannot reach the Kafka brokers at {describe_servers(settings)} within {timeout:.0f}s "
            f"({explain(settings, exc)}); check bootstrap_servers and the security settings"
        )
        raise TransientSourceError(msg) from exc
    out: dict[str, int] = {}
    for name, t in md.topics.items():
        if name.startswith("__") or t.error is not None:
            continue
        out[name] = len(t.partitions)
    return out
