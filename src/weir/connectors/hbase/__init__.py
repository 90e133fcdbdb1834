"""HBase, through its Thrift gateway: the client plumbing, Storm's backend and Trident's backing maps.

- :mod:`weir.connectors.hbase.client` — :class:`HBaseSettings`, the optional ``happybase`` import, the
  per-process (fork-safe) gateway connections and the translation of Thrift errors.
- :mod:`weir.connectors.hbase.kv` — :class:`HBaseBackend`, the ``hbase`` provider of Storm's key-value
  state (seed 003's design: committed rows, a prepare row, a txid row; check-and-put commits; the
  keys bucketed as columns of a few hundred rows per namespace, or Storm's row per key).
- :mod:`weir.connectors.hbase.maps` — ``HBaseMapState``, Trident map states as rows under a key prefix
  (imported from :mod:`weir.trident.backing`).
"""

from weir.connectors.hbase.client import HBaseSettings
from weir.connectors.hbase.kv import HBaseBackend, open_backend

__all__ = ["HBaseBackend", "HBaseSettings", "open_backend"]
