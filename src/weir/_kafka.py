"""Kafka client plumbing shared by :mod:`weir.sources.kafka` and :mod:`weir.sinks.kafka` (confluent-kafka).

One place for the optional import, the client settings (``bootstrap.servers`` plus whatever the user
passes through: SASL, TLS, timeouts), cached clients per process and the error translation.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from weir.errors import ConfigError, SourceError

__all__ = ["admin", "check_settings", "client_module", "describe_servers", "topic_partitions"]

#: keys weir sets itself on the clients it makes (a user value would break the read or the protocol)
RESERVED = frozenset(
    {"group.id", "enable.auto.commit", "auto.offset.reset", "transactional.id", "enable.partition.eof"}
)

_ADMINS: dict[tuple[tuple[str, str], ...], Any] = {}
_LOCK = threading.Lock()


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


def admin(settings: Mapping[str, str]) -> Any:
    """A cached ``AdminClient`` for ``settings`` (one per process)."""
    key = tuple(sorted(settings.items()))
    with _LOCK:
        client = _ADMINS.get(key)
        if client is None:
            client = client_module().admin.AdminClient(dict(settings))
            _ADMINS[key] = client
    return client


def topic_partitions(settings: Mapping[str, str], timeout: float, where: str) -> dict[str, int]:
    """Every topic (not internal ones) with its number of partitions; :class:`SourceError` when unreachable."""
    try:
        md = admin(settings).list_topics(timeout=timeout)
    except Exception as exc:
        with _LOCK:  # a client for unreachable brokers would go on retrying (and logging) forever
            _ADMINS.pop(tuple(sorted(settings.items())), None)
        msg = (
            f"{where}: cannot reach the Kafka brokers at {describe_servers(settings)} within {timeout:.0f}s "
            f"({exc}); check bootstrap_servers and the security settings"
        )
        raise SourceError(msg) from exc
    out: dict[str, int] = {}
    for name, t in md.topics.items():
        if name.startswith("__") or t.error is not None:
            continue
        out[name] = len(t.partitions)
    return out
