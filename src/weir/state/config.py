"""Parsing of Storm's state configuration keys into a frozen, validated :class:`ProviderConfig`.

Keys (Storm's spelling): ``topology.state.provider`` — a short name (``memory``, ``sqlite``,
``redis``, ``postgres``, ``hbase``), a Storm class name (``org.apache.storm.redis.state.RedisKeyValueStateProvider``)
or a dotted Python path to a :class:`~weir.state.base.StateProvider`; ``topology.state.provider.config``
— a JSON string or a dict with ``keyClass``, ``valueClass``, ``keySerializerClass``,
``valueSerializerClass``, ``jedisPoolConfig`` / ``jedisClusterConfig`` (Redis), ``hbaseConfigKey`` /
``tableName`` / ``columnFamily`` (HBase), ``url`` and a few
provider options. Everything is checked here, at submit time.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from weir._redact import is_secret_key, redact_config, redact_url
from weir._util import java_class_name
from weir.errors import ConfigError
from weir.state import registry

__all__ = [
    "PROVIDER_CONFIG_KEY",
    "PROVIDER_KEY",
    "STATE_DIR_KEY",
    "ProviderConfig",
    "check_option_types",
    "default_state_dir",
    "java_class_name",
    "parse_provider_config",
    "provider_from_url",
    "short_names",
    "spark_checkpoint_location",
]

PROVIDER_KEY = "topology.state.provider"
PROVIDER_CONFIG_KEY = "topology.state.provider.config"
STATE_DIR_KEY = "weir.state.dir"

_COMMON_KEYS = {"keyClass", "valueClass", "keySerializerClass", "valueSerializerClass", "url"}


def short_names() -> tuple[str, ...]:
    """The short names of the built-in providers (every registered connector with a Storm backend)."""
    return tuple(c.name for c in registry.providers())


def default_state_dir(conf: Mapping[str, Any] | None = None) -> str:
    """``weir.state.dir`` from ``conf``, else ``$WEIR_STATE_DIR``, else ``./weir-state``."""
    if conf and conf.get(STATE_DIR_KEY):
        return str(conf[STATE_DIR_KEY])
    return os.environ.get("WEIR_STATE_DIR", "./weir-state")


def spark_checkpoint_location(topology: str, conf: Mapping[str, Any]) -> str:
    """Where Spark's checkpoint of ``topology`` lives; a local path made absolute.

    ``weir.spark.checkpoint.location`` when set; else ``<weir.state.dir>/spark/<topology>`` when
    ``weir.state.dir`` (or ``$WEIR_STATE_DIR``) is set, or the store is the embedded SQLite file
    under it (the checkpoint then moves with the store). A shared store (Redis, PostgreSQL, HBase,
    or ``weir.coordinator.url``) with neither set gets a location derived from the store and the
    topology, independent of the working directory:
    ``$XDG_STATE_HOME/weir/spark/<store id>/<topology>`` (``~/.local/state`` without
    ``XDG_STATE_HOME``), where the store id is a hash of the store's address.
    """
    ckpt = conf.get("weir.spark.checkpoint.location")
    if not ckpt:
        store = None if conf.get(STATE_DIR_KEY) or os.environ.get("WEIR_STATE_DIR") else shared_store_id(conf)
        if store is None:
            ckpt = os.path.join(default_state_dir(conf), "spark", topology)
        else:
            home = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
            ckpt = os.path.join(home, "weir", "spark", store, topology)
    ckpt = str(ckpt)
    if ":" not in ckpt.split("/", 1)[0]:
        ckpt = os.path.abspath(ckpt)  # relative to the driver's directory, not to the JVM's
    return ckpt


def shared_store_id(conf: Mapping[str, Any]) -> str | None:
    """A short stable id of the shared store holding the topology's coordinator record, or None.

    None for the embedded SQLite file and the in-memory provider (and a configuration that does not
    parse, which fails elsewhere with its own message). The id is a hash: no password is shown.
    """
    url = conf.get("weir.coordinator.url")
    try:
        cfg = parse_provider_config(conf)
    except ConfigError:
        return None
    if cfg.provider in ("redis", "postgres", "hbase"):
        ident = json.dumps([cfg.provider, dict(cfg.options)], sort_keys=True, default=str)
    elif cfg.provider == "custom" and isinstance(url, str) and not url.startswith("sqlite:"):
        ident = json.dumps(["coordinator", url])
    else:
        return None
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ProviderConfig:
    """The parsed state provider configuration (picklable; shipped to executors).

    Attributes
    ----------
    provider:
        Short name of a built-in provider, or ``"custom"``.
    options:
        Provider options (``url``, ``jedisPoolConfig``, ...), validated.
    custom_class:
        Dotted path of a user :class:`~weir.state.base.StateProvider` when ``provider == "custom"``.
    """

    provider: str
    options: Mapping[str, Any] = field(default_factory=dict)
    custom_class: str | None = None

    def __post_init__(self) -> None:
        if self.provider != "custom" and self.provider not in short_names():
            msg = f"{PROVIDER_KEY}: unknown provider {self.provider!r}; use one of {', '.join(short_names())}"
            raise ConfigError(msg)

    @property
    def key_class(self) -> str | None:
        """Storm's ``keyClass`` (serializer short name)."""
        return self.options.get("keyClass")

    @property
    def value_class(self) -> str | None:
        """Storm's ``valueClass``."""
        return self.options.get("valueClass")

    @property
    def url(self) -> str | None:
        """The ``url`` option."""
        return self.options.get("url")

    def cache_key(self) -> str:
        """A stable string identifying the store (used to share one backend per process)."""
        return self.provider + ":" + json.dumps(dict(self.options), sort_keys=True, default=str)

    def redacted(self) -> dict[str, Any]:
        """Options with passwords hidden (``***``), for messages and status."""
        out: dict[str, Any] = redact_config(json.loads(json.dumps(dict(self.options), default=str)))
        return out

    def __repr__(self) -> str:
        return (
            f"ProviderConfig(provider={self.provider!r}, options={self.redacted()!r}, "
            f"custom_class={self.custom_class!r})"
        )


def provider_from_url(url: str) -> str:
    """The short provider name of a URL (``sqlite:///x.db`` → ``sqlite``)."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    found = registry.connector_for_scheme(scheme) if scheme else None
    if found is None or not found.is_provider:
        shapes = ", ".join(c.url_example for c in registry.providers() if c.url_example)
        msg = f"state URL {redact_url(url)!r} has an unknown scheme {scheme!r}; expected one of {shapes}"
        raise ConfigError(msg)
    return found.name


def check_option_types(where: str, data: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
    """Check the keys and value types of the option object ``where`` (a connector's nested options).

    ``spec`` maps each allowed key to its type (or tuple of types); a secret's value is never shown.
    """
    for k, v in data.items():
        if k not in spec:
            msg = f"{PROVIDER_CONFIG_KEY}: unknown key {where}.{k}; expected some of {', '.join(spec)}"
            raise ConfigError(msg)
        want = spec[k]
        if not isinstance(v, want) or (want is int and isinstance(v, bool)):
            names = " or ".join(t.__name__ for t in (want if isinstance(want, tuple) else (want,)))
            shown = "(value hidden)" if is_secret_key(k) else repr(v)
            msg = f"{PROVIDER_CONFIG_KEY}: {where}.{k} must be {names}, got {type(v).__name__} {shown}"
            raise ConfigError(msg)


def parse_provider_config(conf: Mapping[str, Any]) -> ProviderConfig:
    """Build a :class:`ProviderConfig` from a topology configuration.

    The default provider is ``sqlite`` at ``<weir.state.dir>/state.db``.
    """
    raw_provider = conf.get(PROVIDER_KEY)
    raw_cfg = conf.get(PROVIDER_CONFIG_KEY)
    if raw_cfg is None or raw_cfg == "":
        options: dict[str, Any] = {}
    elif isinstance(raw_cfg, str):
        try:
            options = json.loads(raw_cfg)
        except json.JSONDecodeError as exc:
            msg = f"{PROVIDER_CONFIG_KEY} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            raise ConfigError(msg) from exc
        if not isinstance(options, dict):
            msg = f"{PROVIDER_CONFIG_KEY} must be a JSON object, got {type(options).__name__}"
            raise ConfigError(msg)
    elif isinstance(raw_cfg, Mapping):
        options = dict(raw_cfg)
    else:
        msg = f"{PROVIDER_CONFIG_KEY} must be a JSON string or a dict, got {type(raw_cfg).__name__}"
        raise ConfigError(msg)

    if raw_provider is None or raw_provider == "":
        if options.get("url"):
            provider = provider_from_url(str(options["url"]))
        else:
            inferred = [c.name for c in registry.providers() if c.infer_keys & set(options)]
            provider = inferred[0] if len(inferred) == 1 else "sqlite"
    elif not isinstance(raw_provider, str):
        msg = f"{PROVIDER_KEY} must be a string, got {type(raw_provider).__name__}"
        raise ConfigError(msg)
    else:
        named = registry.connector(raw_provider) or registry.connector_for_storm_class(raw_provider)
        provider = named.name if named is not None and named.is_provider else raw_provider

    connector = registry.connector(provider)
    if connector is None or not connector.is_provider:
        if java_class_name(provider):
            storm = registry.storm_providers()
            close = difflib.get_close_matches(provider, list(storm), n=1, cutoff=0.8)
            if close:
                msg = (
                    f"{PROVIDER_KEY}: unknown class {raw_provider!r}; did you mean {close[0]!r} (weir's "
                    f"{storm[close[0]]} provider)?"
                )
                raise ConfigError(msg)
            msg = (
                f"{PROVIDER_KEY}: {raw_provider!r} (a Java class) is not available in weir, which runs Python; "
                f"Storm's providers map to: {', '.join(f'{k} -> {v}' for k, v in sorted(storm.items()))}. Use "
                f"one of {', '.join(short_names())} or a dotted path to a weir.state.StateProvider subclass"
            )
            raise ConfigError(msg)
        if "." not in provider and ":" not in provider:
            known = [n for c in registry.providers() for n in (c.name, *c.aliases) if "." not in n]
            close = difflib.get_close_matches(provider, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            msg = (
                f"{PROVIDER_KEY}: unknown provider {raw_provider!r}; {hint}use one of {', '.join(short_names())} "
                "or a dotted path to a weir.state.StateProvider subclass"
            )
            raise ConfigError(msg)
        return ProviderConfig("custom", options, custom_class=provider)

    allowed = _COMMON_KEYS | connector.option_keys
    for k in options:
        if k not in allowed:
            msg = (
                f"{PROVIDER_CONFIG_KEY}: unknown key {k!r} for the {provider} provider; "
                f"expected some of {', '.join(sorted(allowed))}"
            )
            raise ConfigError(msg)
    for k in ("keyClass", "valueClass", "keySerializerClass", "valueSerializerClass", "url"):
        if k in options and not isinstance(options[k], str):
            msg = f"{PROVIDER_CONFIG_KEY}: {k} must be a string, got {type(options[k]).__name__}"
            raise ConfigError(msg)
    if "url" in options and provider_from_url(options["url"]) != provider:
        msg = f"{PROVIDER_CONFIG_KEY}: url {redact_url(options['url'])!r} does not match provider {provider!r}"
        raise ConfigError(msg)
    if connector.check_options is not None:
        connector.check_options(options, conf, PROVIDER_CONFIG_KEY)
    for k in ("keySerializerClass", "valueSerializerClass", "keyClass", "valueClass"):
        if k in options:
            from weir.state.serializers import serializer_for

            serializer_for(options[k], what=f"{PROVIDER_CONFIG_KEY}.{k}")
    return ProviderConfig(provider, options)
