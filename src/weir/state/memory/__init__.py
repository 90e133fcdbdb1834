"""The ``memory`` store: process-local dicts, for unit tests and driver-local runs.

- :mod:`weir.state.memory.kv` — :class:`MemoryBackend`, the ``memory`` provider of Storm's
  key-value state (``memory://NAME``), and :func:`open_backend`, its opener.

Nothing here connects, retries or needs a client library, so it stays beside Storm's SPI instead of
under :mod:`weir.connectors`; it registers with :mod:`weir.state.registry` like a connector
(:data:`CONNECTOR`). Trident's in-memory map state, :class:`~weir.trident.state.MemoryMapState`,
stays in :mod:`weir.trident.state` (it is part of the Trident API that tests use without any store).
"""

from __future__ import annotations

from weir.state.config import ProviderConfig
from weir.state.memory.kv import MemoryBackend
from weir.state.registry import Connector, register

__all__ = ["CONNECTOR", "MemoryBackend", "open_backend"]


def open_backend(cfg: ProviderConfig) -> MemoryBackend:
    """The process-wide memory store named by ``name`` or ``memory://NAME`` (default ``default``)."""
    name = cfg.options.get("name")
    url = cfg.url
    if not name and url:
        name = url.split("://", 1)[1] or "default"
    return MemoryBackend.shared(name or "default")


CONNECTOR = register(
    Connector(
        name="memory",
        url_schemes=("memory",),
        url_example="memory://NAME",
        storm_providers=("org.apache.storm.state.InMemoryKeyValueStateProvider",),
        option_keys=frozenset({"name"}),
        open_backend=open_backend,
    )
)
