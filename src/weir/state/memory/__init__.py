"""Opener of the ``memory`` backend (``memory://NAME``)."""

from __future__ import annotations

from weir.state.config import ProviderConfig
from weir.state.memory import MemoryBackend

__all__ = ["open_backend"]


def open_backend(cfg: ProviderConfig) -> MemoryBackend:
    """The process-wide memory store named by ``name`` or ``memory://NAME`` (default ``default``)."""
    name = cfg.options.get("name")
    url = cfg.url
    if not name and url:
        name = url.split("://", 1)[1] or "default"
    return MemoryBackend.shared(name or "default")
