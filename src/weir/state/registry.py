"""The registry of connectors: one :class:`Connector` descriptor per external system.

Every store, spout and sink of an external system lives in one package of :mod:`weir.connectors`
(``weir/connectors/<system>/``), above the APIs it implements. That package's ``__init__`` calls
:func:`register` once with a :class:`Connector` naming everything the lower layers need to know of it:
the provider's short name and aliases, its URL schemes, Storm's provider class names it stands for,
its option keys, and how to open a Storm backend (:class:`~weir.state.backend.Backend`), its Trident
map state family and its ``weir state`` catalog. Nothing below :mod:`weir.connectors` names a
connector: :mod:`weir.state.config`, :mod:`weir.state.factory`, :mod:`weir.trident.backing` and
``weir state`` look them up here. Adding a store is one new folder under ``weir/connectors/``.

Discovery is lazy: the first lookup imports the in-process ``memory`` store (:mod:`weir.state.memory`,
which stays beside Storm's SPI) and every sub-package of the ``weir.connectors`` package (found by
listing its directory, so this module names none of them), then the ``weir.connectors`` entry points
of installed distributions (a connector shipped in another package). A connector whose client
library is missing still registers: its openers raise a :class:`~weir.errors.ConfigError` with the
install hint when used.

Legacy import paths: a connector lists, in :attr:`Connector.exports`, names it also offers from an
API package (``weir.trident.backing.SqliteMapState``, ``weir.sources.KafkaSpout``); those packages
answer unknown attributes through :func:`exported`, so ``from weir.sources import KafkaSpout``
keeps working while :mod:`weir.sources` imports no connector.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from weir.errors import ConfigError

__all__ = [
    "BUILTIN_MODULES",
    "CONNECTORS_PACKAGE",
    "Connector",
    "connector",
    "connector_for_kind",
    "connector_for_scheme",
    "connector_for_storm_class",
    "connectors",
    "exported",
    "exported_names",
    "lazy_attrs",
    "names",
    "providers",
    "register",
    "storm_providers",
]

#: the package whose sub-packages are the built-in connectors, and the entry-point group of others
CONNECTORS_PACKAGE = "weir.connectors"
#: the in-process store that stays beside Storm's SPI (it registers like any connector)
BUILTIN_MODULES = ("weir.state.memory",)


@dataclass(frozen=True)
class Connector:
    """What weir knows of one external system (see the module docstring).

    Attributes
    ----------
    name : str
        The short provider name of ``topology.state.provider`` (``"redis"``); also the
        ``Backend.kind`` of its Storm backend. A connector without a Storm key-value backend
        (memcached, kafka, nats) still has a name.
    url_schemes : tuple of str
        The schemes of its store URLs (``("redis", "rediss", "redis+cluster")``).
    url_example : str
        One URL shape for messages (``"redis://HOST:PORT/DB"``).
    aliases : tuple of str
        Other names ``topology.state.provider`` accepts (``"postgresql"``).
    storm_providers : tuple of str
        Storm's provider class names this connector serves.
    option_keys : frozenset of str
        The keys of ``topology.state.provider.config`` this provider accepts besides the common ones.
    infer_keys : frozenset of str
        Option keys that select this provider when neither a provider nor a url is given
        (Storm's ``jedisPoolConfig`` selects Redis).
    check_options : callable or None
        ``check_options(options, conf, key)``: validate and normalize (in place) the provider's
        options at submit time; ``key`` is the configuration key to name in messages.
    open_backend : callable or None
        ``open_backend(provider_config)``: the Storm key-value :class:`~weir.state.backend.Backend`.
        None when the system has no Storm key-value provider.
    map_state : callable or None
        ``map_state()``: the Trident map state family (``SqliteMapState``) with ``opaque`` /
        ``transactional`` / ``non_transactional``.
    catalog : callable or None
        ``catalog(backend)``: the ``weir state`` catalog of the Trident map states in the store of a
        Storm backend of this connector.
    url_catalog : callable or None
        ``url_catalog(url)``: the ``weir state`` catalog of a store that holds Trident map states
        only (memcached: no Storm backend), opened from its URL.
    exports : mapping of str to mapping of str to callable
        Legacy import paths: ``{api package: {name: loader}}``, e.g.
        ``{"weir.sources": {"KafkaSpout": lambda: KafkaSpout}}``.
    """

    name: str
    url_schemes: tuple[str, ...] = ()
    url_example: str = ""
    aliases: tuple[str, ...] = ()
    storm_providers: tuple[str, ...] = ()
    option_keys: frozenset[str] = frozenset()
    infer_keys: frozenset[str] = frozenset()
    check_options: Callable[[dict[str, Any], Mapping[str, Any], str], None] | None = None
    open_backend: Callable[[Any], Any] | None = None
    map_state: Callable[[], Any] | None = None
    catalog: Callable[[Any], Any] | None = None
    url_catalog: Callable[[str], Any] | None = None
    exports: Mapping[str, Mapping[str, Callable[[], Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").isalnum() or self.name != self.name.lower():
            msg = f"connector name {self.name!r} must be a lowercase word (it is a topology.state.provider value)"
            raise ConfigError(msg)

    @property
    def is_provider(self) -> bool:
        """Whether ``topology.state.provider`` may name it (it opens a Storm key-value backend)."""
        return self.open_backend is not None


_REGISTRY: dict[str, Connector] = {}
_LOCK = threading.RLock()
_discovered = False


def register(desc: Connector) -> Connector:
    """Register ``desc`` (a connector package's ``__init__`` calls this once); return it.

    Raises
    ------
    ConfigError
        If another connector already claims its name, an alias, a URL scheme or a Storm class name.
    """
    with _LOCK:
        old = _REGISTRY.get(desc.name)
        if old is not None and old != desc:
            msg = f"connector {desc.name!r} is registered twice; rename one of them"
            raise ConfigError(msg)
        for other in _REGISTRY.values():
            if other.name == desc.name:
                continue
            clash = (
                ({other.name, *other.aliases} & {desc.name, *desc.aliases})
                | (set(other.url_schemes) & set(desc.url_schemes))
                | (set(other.storm_providers) & set(desc.storm_providers))
            )
            if clash:
                msg = (
                    f"connector {desc.name!r} claims {', '.join(sorted(clash))}, already claimed by connector "
                    f"{other.name!r}; each name, URL scheme and Storm class belongs to one connector"
                )
                raise ConfigError(msg)
        _REGISTRY[desc.name] = desc
    return desc


def _discover() -> None:
    global _discovered
    with _LOCK:
        if _discovered:
            return
        _discovered = True
        for module in BUILTIN_MODULES:
            importlib.import_module(module)
        package = importlib.import_module(CONNECTORS_PACKAGE)
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            if info.ispkg and not info.name.startswith("_"):
                importlib.import_module(f"{CONNECTORS_PACKAGE}.{info.name}")
        _load_entry_points()


def _load_entry_points() -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=CONNECTORS_PACKAGE):
        try:
            loaded = ep.load()
        except Exception as exc:
            msg = (
                f"connector entry point {ep.name!r} ({ep.value}) of group {CONNECTORS_PACKAGE!r} cannot be loaded: "
                f"{type(exc).__name__}: {exc}; fix or uninstall the package that declares it"
            )
            raise ConfigError(msg) from exc
        if isinstance(loaded, Connector):
            register(loaded)


def connectors() -> list[Connector]:
    """Every registered connector, sorted by name (discovering them on first use)."""
    _discover()
    return sorted(_REGISTRY.values(), key=lambda c: c.name)


def providers() -> list[Connector]:
    """The connectors ``topology.state.provider`` may name (those with a Storm backend)."""
    return [c for c in connectors() if c.is_provider]


def connector(name: str) -> Connector | None:
    """The connector of a provider name or alias (``"postgresql"`` → postgres), or None."""
    _discover()
    found = _REGISTRY.get(name)
    if found is not None:
        return found
    return next((c for c in _REGISTRY.values() if name in c.aliases), None)


def connector_for_storm_class(class_name: str) -> Connector | None:
    """The connector serving Storm's provider class ``class_name``, or None."""
    return next((c for c in connectors() if class_name in c.storm_providers), None)


def connector_for_scheme(scheme: str) -> Connector | None:
    """The connector of a URL scheme (``"rediss"`` → redis), or None."""
    scheme = scheme.lower()
    return next((c for c in connectors() if scheme in c.url_schemes), None)


def connector_for_kind(kind: str) -> Connector | None:
    """The connector whose Storm backend has ``Backend.kind == kind``, or None."""
    _discover()
    return _REGISTRY.get(kind)


def storm_providers() -> dict[str, str]:
    """Storm's provider class names weir serves → the short provider name."""
    return {cls: c.name for c in connectors() for cls in c.storm_providers}


def exported_names(package: str) -> list[str]:
    """The legacy names every connector offers from API package ``package``."""
    return sorted({name for c in connectors() for name in c.exports.get(package, {})})


def exported(package: str, name: str) -> Any:
    """The object a connector offers as ``package.name`` (an API package's ``__getattr__``).

    Raises
    ------
    AttributeError
        If no connector offers it.
    """
    for c in connectors():
        loader = c.exports.get(package, {}).get(name)
        if loader is not None:
            return loader()
    msg = f"module {package!r} has no attribute {name!r}"
    raise AttributeError(msg)


def lazy_attrs(module: str, *attrs: str) -> dict[str, Callable[[], Any]]:
    """Loaders of ``module.attr`` for :attr:`Connector.exports` (``module`` is imported on first access)."""

    def loader(attr: str) -> Callable[[], Any]:
        return lambda: getattr(importlib.import_module(module), attr)

    return {a: loader(a) for a in attrs}


def names(items: Iterable[Connector]) -> str:
    """``a, b, c``: the names of ``items`` for messages."""
    return ", ".join(c.name for c in items)
