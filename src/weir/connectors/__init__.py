"""Connectors: one package per external system, above the APIs they implement (never imported by them).

Each sub-package — ``sqlite``, ``redis``, ``postgres``, ``memcached``, ``hbase``, ``kafka``, ``nats``, ``rabbitmq`` —
holds the system's plumbing, its Storm key-value backend (``kv.py``), its Trident map state
(``maps.py``) and its spout (``spout.py``) or sink (``sink.py``), and registers one
:class:`~weir.state.registry.Connector` from its ``__init__``; :mod:`weir.state.registry` finds the
sub-packages by listing this package. See ``docs/architecture.md``.
"""

__all__: list[str] = []
