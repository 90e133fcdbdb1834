"""Resolve ``topology.state.provider`` into a provider and make states (Storm's ``StateFactory``)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from weir._util import import_object
from weir.errors import ConfigError
from weir.state import registry
from weir.state.backend import Backend
from weir.state.base import State, StateProvider
from weir.state.config import ProviderConfig, parse_provider_config, provider_from_url, short_names
from weir.state.kv import TransactionalKeyValueState
from weir.state.serializers import serializer_for
from weir.state.ttl import TTL_CONF_KEY

__all__ = ["KeyValueStateProvider", "StateFactory", "open_backend"]

_BACKENDS: dict[str, Backend] = {}
_LOCK = threading.Lock()


def open_backend(cfg: ProviderConfig, *, fresh: bool = False) -> Backend:
    """The backend of ``cfg``, shared per process (connections are made once per worker).

    Unreachable servers and bad credentials raise :class:`ConfigError`.
    """
    if cfg.provider == "custom":
        msg = f"provider {cfg.custom_class!r} is a custom StateProvider and has no weir backend"
        raise ConfigError(msg)
    key = cfg.cache_key()
    with _LOCK:
        if not fresh and key in _BACKENDS:
            return _BACKENDS[key]
        connector = registry.connector(cfg.provider)
        if connector is None or connector.open_backend is None:  # a ProviderConfig checks its provider
            msg = f"provider {cfg.provider!r} has no weir backend; use one of {', '.join(short_names())}"
            raise ConfigError(msg)
        backend: Backend = connector.open_backend(cfg)
        if not fresh:
            _BACKENDS[key] = backend
        return backend


def close_backends() -> None:
    """Close every shared backend of this process."""
    with _LOCK:
        for b in _BACKENDS.values():
            b.close()
        _BACKENDS.clear()


class KeyValueStateProvider(StateProvider):
    """Provider of :class:`TransactionalKeyValueState` over a built-in backend (picklable)."""

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self._key_ser = config.options.get("keySerializerClass") or config.key_class
        self._val_ser = config.options.get("valueSerializerClass") or config.value_class

    @property
    def backend(self) -> Backend:
        """The shared backend of this process."""
        return open_backend(self.config)

    def new_state(
        self, namespace: str, conf: Mapping[str, Any] | None = None, context: Any = None
    ) -> TransactionalKeyValueState:
        """A key-value state of ``namespace`` with the configured serializers (and change feed, if set)."""
        state = TransactionalKeyValueState(
            self.backend,
            namespace,
            serializer_for(self._key_ser, what="keySerializerClass"),
            serializer_for(self._val_ser, what="valueSerializerClass"),
            ttl_ms=(conf or {}).get(TTL_CONF_KEY),
            topology=getattr(context, "topology", None),
        )
        if conf:
            from weir.state.changelog import check_supported

            state.changelog_retain = check_supported(state.backend, conf)
        return state

    def validate(self) -> None:
        """Connect once now (submit time), so a bad config never fails inside a worker."""
        b = self.backend
        b.txids("$weir-validate")

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"])  # type: ignore[misc]


class StateFactory:
    """Storm's ``StateFactory``: the provider named by the topology configuration."""

    @staticmethod
    def get_provider(conf: Mapping[str, Any]) -> StateProvider:
        """Resolve and validate the provider of ``conf`` (does not connect)."""
        return StateFactory.provider_for(parse_provider_config(conf))

    @staticmethod
    def provider_for(cfg: ProviderConfig) -> StateProvider:
        """The provider of a parsed configuration (does not connect)."""
        if cfg.provider == "custom":
            assert cfg.custom_class is not None
            obj = import_object(cfg.custom_class)
            # checked before anything is instantiated: only weir's SPI may be constructed by name
            if not isinstance(obj, type) or not issubclass(obj, StateProvider):
                msg = (
                    f"topology.state.provider: {cfg.custom_class!r} is not a subclass of weir.state.StateProvider; "
                    f"a provider named by class must subclass it, or use a short name: {', '.join(short_names())}"
                )
                raise ConfigError(msg)
            try:
                inst = obj()
            except Exception as exc:
                msg = f"topology.state.provider: cannot create {cfg.custom_class!r}: {type(exc).__name__}: {exc}"
                raise ConfigError(msg) from exc
            return inst
        return KeyValueStateProvider(cfg)

    @staticmethod
    def get_state(namespace: str, conf: Mapping[str, Any], context: Any = None) -> State:
        """Storm's ``StateFactory.getState(namespace, conf, context)``."""
        return StateFactory.get_provider(conf).new_state(namespace, conf, context)

    @staticmethod
    def from_url(url: str, **options: Any) -> KeyValueStateProvider:
        """A provider for a store URL (``sqlite:///x.db``, ``redis://…``, ``postgresql://…``)."""
        provider = provider_from_url(url)
        cfg = parse_provider_config(
            {"topology.state.provider": provider, "topology.state.provider.config": {"url": url, **options}}
        )
        return KeyValueStateProvider(cfg)
