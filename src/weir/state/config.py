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
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from weir._redact import is_secret_key, redact_config, redact_url
from weir.errors import ConfigError

__all__ = [
    "PROVIDER_CONFIG_KEY",
    "PROVIDER_KEY",
    "SHORT_NAMES",
    "STATE_DIR_KEY",
    "ProviderConfig",
    "default_state_dir",
    "java_class_name",
    "parse_provider_config",
    "spark_checkpoint_location",
]

PROVIDER_KEY = "topology.state.provider"
PROVIDER_CONFIG_KEY = "topology.state.provider.config"
STATE_DIR_KEY = "weir.state.dir"

SHORT_NAMES = ("memory", "sqlite", "redis", "postgres", "hbase")
#: Storm's provider class names that weir serves with its own providers
_STORM_PROVIDERS = {
    "org.apache.storm.state.InMemoryKeyValueStateProvider": "memory",
    "org.apache.storm.redis.state.RedisKeyValueStateProvider": "redis",
    "org.apache.storm.redis.state.RedisClusterKeyValueStateProvider": "redis",
    "org.apache.storm.hbase.state.HBaseKeyValueStateProvider": "hbase",
}
#: Storm's provider class names weir has no equivalent for (a clear error instead of an import failure)
_STORM_UNAVAILABLE: dict[str, str] = {}
_JAVA_PREFIXES = ("org.apache.", "org.", "com.", "java.", "javax.", "io.")
_ALIASES = {
    **_STORM_PROVIDERS,
    "postgresql": "postgres",
    "pg": "postgres",
    "redis-cluster": "redis",
}
_SCHEMES = {
    "memory": "memory",
    "sqlite": "sqlite",
    "redis": "redis",
    "rediss": "redis",
    "redis+cluster": "redis",
    "postgres": "postgres",
    "postgresql": "postgres",
    "hbase": "hbase",
}

_COMMON_KEYS = {"keyClass", "valueClass", "keySerializerClass", "valueSerializerClass", "url"}
_PROVIDER_KEYS: dict[str, set[str]] = {
    "memory": {"name"},
    "sqlite": {"path", "timeout", "synchronous", "mergeRows"},
    "redis": {"jedisPoolConfig", "jedisClusterConfig", "tls"},
    "postgres": {"schema", "tablePrefix", "connectTimeout", "statementTimeout", "socketTimeout"},
    "hbase": {"hbaseConfigKey", "tableName", "columnFamily", "layout", "buckets"},
}
_POOL_KEYS = {"host": str, "port": int, "timeout": int, "database": int, "password": (str, type(None))}
_CLUSTER_KEYS = {"nodes": list, "timeout": int, "maxRedirections": int, "password": (str, type(None))}


def default_state_dir(conf: Mapping[str, Any] | None = None) -> str:
    """``weir.state.dir`` from ``conf``, else ``$WEIR_STATE_DIR``, else ``./weir-state``."""
    if conf and conf.get(STATE_DIR_KEY):
        return str(conf[STATE_DIR_KEY])
    return os.environ.get("WEIR_STATE_DIR", "./weir-state")


def spark_checkpoint_location(topology: str, conf: Mapping[str, Any]) -> str:
    """``weir.spark.checkpoint.location``, else ``<weir.state.dir>/spark/<topology>``; a local path made absolute."""
    ckpt = str(conf.get("weir.spark.checkpoint.location") or os.path.join(default_state_dir(conf), "spark", topology))
    if ":" not in ckpt.split("/", 1)[0]:
        ckpt = os.path.abspath(ckpt)  # relative to the driver's directory, not to the JVM's
    return ckpt


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
        if self.provider not in (*SHORT_NAMES, "custom"):
            msg = f"{PROVIDER_KEY}: unknown provider {self.provider!r}; use one of {', '.join(SHORT_NAMES)}"
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
    if scheme not in _SCHEMES:
        msg = (
            f"state URL {redact_url(url)!r} has an unknown scheme {scheme!r}; expected one of "
            "sqlite:///PATH, redis://HOST:PORT/DB, redis+cluster://H1:P1,H2:P2, postgresql://..., "
            "hbase://HOST:PORT/TABLE?family=CF, memory://NAME"
        )
        raise ConfigError(msg)
    return _SCHEMES[scheme]


def _check_types(where: str, data: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
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


def java_class_name(path: str) -> bool:
    """Whether dotted ``path`` names a Java class (``org.``, ``com.``, ``java.``, ... and no such Python package)."""
    import importlib.util

    if not path.startswith(_JAVA_PREFIXES):
        return False
    try:
        return importlib.util.find_spec(path.split(".", 1)[0]) is None
    except (ImportError, ValueError):
        return True


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
        elif "jedisPoolConfig" in options or "jedisClusterConfig" in options:
            provider = "redis"
        elif "tableName" in options or "hbaseConfigKey" in options:
            provider = "hbase"
        else:
            provider = "sqlite"
    elif not isinstance(raw_provider, str):
        msg = f"{PROVIDER_KEY} must be a string, got {type(raw_provider).__name__}"
        raise ConfigError(msg)
    else:
        provider = _ALIASES.get(raw_provider, raw_provider)

    if provider not in SHORT_NAMES:
        if java_class_name(provider):
            what = _STORM_UNAVAILABLE.get(provider, "a Java class")
            close = difflib.get_close_matches(provider, list(_STORM_PROVIDERS), n=1, cutoff=0.8)
            if close:
                msg = (
                    f"{PROVIDER_KEY}: unknown class {raw_provider!r}; did you mean {close[0]!r} (weir's "
                    f"{_STORM_PROVIDERS[close[0]]} provider)?"
                )
                raise ConfigError(msg)
            msg = (
                f"{PROVIDER_KEY}: {raw_provider!r} ({what}) is not available in weir, which runs Python; Storm's "
                f"providers map to: {', '.join(f'{k} -> {v}' for k, v in sorted(_STORM_PROVIDERS.items()))}. Use "
                f"one of {', '.join(SHORT_NAMES)} or a dotted path to a weir.state.StateProvider subclass"
            )
            raise ConfigError(msg)
        if "." not in provider and ":" not in provider:
            close = difflib.get_close_matches(provider, [*SHORT_NAMES, *(a for a in _ALIASES if "." not in a)], n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            msg = (
                f"{PROVIDER_KEY}: unknown provider {raw_provider!r}; {hint}use one of {', '.join(SHORT_NAMES)} "
                "or a dotted path to a weir.state.StateProvider subclass"
            )
            raise ConfigError(msg)
        return ProviderConfig("custom", options, custom_class=provider)

    allowed = _COMMON_KEYS | _PROVIDER_KEYS[provider]
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
    if "jedisPoolConfig" in options:
        if not isinstance(options["jedisPoolConfig"], dict):
            msg = f"{PROVIDER_CONFIG_KEY}: jedisPoolConfig must be an object"
            raise ConfigError(msg)
        _check_types("jedisPoolConfig", options["jedisPoolConfig"], _POOL_KEYS)
    if "jedisClusterConfig" in options:
        if not isinstance(options["jedisClusterConfig"], dict):
            msg = f"{PROVIDER_CONFIG_KEY}: jedisClusterConfig must be an object"
            raise ConfigError(msg)
        _check_types("jedisClusterConfig", options["jedisClusterConfig"], _CLUSTER_KEYS)
        nodes = options["jedisClusterConfig"].get("nodes", [])
        if not nodes or not all(isinstance(n, str) and ":" in n for n in nodes):
            msg = f"{PROVIDER_CONFIG_KEY}: jedisClusterConfig.nodes must be a non-empty list of 'host:port'"
            raise ConfigError(msg)
    if provider == "sqlite" and "url" not in options and "path" not in options:
        options["url"] = "sqlite:///" + os.path.abspath(os.path.join(default_state_dir(conf), "state.db"))
    if provider == "hbase":
        from weir.state.hbase.client import HBaseSettings, hbase_settings_from_storm, layout_options

        storm_keys = {"hbaseConfigKey", "tableName", "columnFamily"} & set(options)
        if "url" in options:
            if storm_keys:
                msg = (
                    f"{PROVIDER_CONFIG_KEY}: give the hbase provider either a url or Storm's "
                    f"hbaseConfigKey/tableName/columnFamily, not both (got url and {', '.join(sorted(storm_keys))})"
                )
                raise ConfigError(msg)
            settings = HBaseSettings.from_url(options["url"])  # validate now
            layout, buckets = layout_options(options, PROVIDER_CONFIG_KEY)
            if layout is not None or buckets is not None:
                settings = replace(
                    settings,
                    layout=settings.layout if layout is None else layout,
                    buckets=settings.buckets if buckets is None else buckets,
                )
                options["url"] = settings.url
        else:
            # Storm's keys resolve (with the hbaseConfigKey map of ``conf``) into one url, so the
            # parsed config is self-contained when it travels to executors
            options["url"] = hbase_settings_from_storm(options, conf, PROVIDER_CONFIG_KEY).url
            for k in storm_keys:
                del options[k]
        for k in ("layout", "buckets"):
            options.pop(k, None)
    if provider == "postgres" and "url" not in options:
        msg = f"{PROVIDER_CONFIG_KEY}: the postgres provider needs a 'url' (postgresql://user@host:port/db)"
        raise ConfigError(msg)
    for k in ("keySerializerClass", "valueSerializerClass", "keyClass", "valueClass"):
        if k in options:
            from weir.state.serializers import serializer_for

            serializer_for(options[k], what=f"{PROVIDER_CONFIG_KEY}.{k}")
    return ProviderConfig(provider, options)
