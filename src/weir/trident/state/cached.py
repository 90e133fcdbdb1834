""":class:`CachedMap`: an LRU cache in front of a :class:`~weir.trident.state.BackingMap`."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Generic, TypeVar

from weir._util import positive_int
from weir.errors import StateError
from weir.trident.state.map_state import BackingMap, Key, as_keys, check_backing, check_same_length

__all__ = ["CachedMap"]

V = TypeVar("V")


class CachedMap(BackingMap[V], Generic[V]):
    """A backing map that keeps the ``cache_size`` most recently used cells in memory.

    Layer it between a map state and a remote store: ``OpaqueMap.build(CachedMap(store, 1000))``.
    Reads are served from the cache where possible and every miss of a call is fetched with one
    ``multi_get`` of the delegate; a key the store does not have is cached as ``None`` too, so it is
    not asked for again. Writes go to the delegate first, then to the cache (write-through); if the
    delegate's write fails, the keys of that write are dropped from the cache.

    The cache trusts that nothing else writes the delegate's keys: use it for a state that only
    this task updates (a partition of a Trident state), not for data shared with other writers.

    Parameters
    ----------
    delegate : BackingMap
        The map that talks to the store.
    cache_size : int
        Maximum number of keys kept (at least 1).

    Raises
    ------
    ConfigError
        If ``cache_size`` is not a positive int or ``delegate`` is not a backing map.
    """

    def __init__(self, delegate: BackingMap[V], cache_size: int) -> None:
        positive_int(cache_size, "CachedMap cache_size")
        check_backing(delegate, "CachedMap")
        self.delegate = delegate
        self.cache_size = cache_size
        self._cache: OrderedDict[Key, V | None] = OrderedDict()

    def __len__(self) -> int:
        """Number of cached keys."""
        return len(self._cache)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` (a tuple) is cached."""
        return key in self._cache

    def clear(self) -> None:
        """Drop every cached key (the delegate is untouched)."""
        self._cache.clear()

    def _remember(self, key: Key, val: V | None) -> None:
        cache = self._cache
        cache[key] = val
        cache.move_to_end(key)
        while len(cache) > self.cache_size:
            cache.popitem(last=False)

    def multi_get(self, keys: Sequence[Key]) -> list[V | None]:
        """Cached values, with every miss fetched in one delegate ``multi_get``."""
        ks = as_keys(keys)
        found: dict[Key, V | None] = {}
        misses: list[Key] = []
        cache = self._cache
        for key in ks:
            if key in found:
                continue
            if key in cache:
                cache.move_to_end(key)
                found[key] = cache[key]
            else:
                found[key] = None
                misses.append(key)
        if misses:
            fetched = self.delegate.multi_get(misses)
            if len(fetched) != len(misses):
                msg = (
                    f"CachedMap delegate {self.delegate!r} returned {len(fetched)} values for "
                    f"{len(misses)} keys; multi_get must return one value (or None) per key"
                )
                raise StateError(msg)
            for key, val in zip(misses, fetched, strict=True):
                found[key] = val
                self._remember(key, val)
        return [found[key] for key in ks]

    def multi_put(self, keys: Sequence[Key], vals: Sequence[V | None]) -> None:
        """Write through to the delegate, then cache the written values."""
        ks = as_keys(keys)
        check_same_length(ks, vals, what="values", op="CachedMap.multi_put")
        try:
            self.delegate.multi_put(ks, vals)
        except BaseException:
            for key in ks:
                self._cache.pop(key, None)
            raise
        for key, val in zip(ks, vals, strict=True):
            self._remember(key, val)

    def __repr__(self) -> str:
        return f"CachedMap({self.delegate!r}, cache_size={self.cache_size}, cached={len(self._cache)})"
