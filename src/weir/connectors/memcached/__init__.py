"""Memcached: client plumbing (:mod:`.client`) and Trident's ``MemcachedMapState`` (:mod:`.maps`).

Storm has no memcached key-value state provider, so this store has no ``kv.py``; import the map
states from :mod:`weir.trident.backing`.
"""
