"""The Trident map states a store holds, for ``weir state``: list, read, and (where safe) write them.

A :class:`MapCatalog` is the read side of a store's map states, found without the topology that
wrote them, from a registry the backing maps write when they are first used (or validated at submit):

=========== ====================================================== =====================================
store       registry                                               ``<name>``
=========== ====================================================== =====================================
SQLite      table ``weir_trident_maps (name, state_type)``         the table
Redis       hash ``weir:trident:maps`` (key prefix → state type)   the key prefix
PostgreSQL  table ``<schema>.weir_trident_maps`` (table, type,      the table (``schema.table`` outside
            key columns, value type)                               ``public``)
HBase       row ``weir:trident:maps`` (a column per key prefix)    the key prefix
memcached   item ``weir:trident:maps`` (JSON: key prefix → type)   the key prefix
=========== ====================================================== =====================================

``weir state`` names a map state ``trident:<name>``. Memcached cannot list its items, so a
memcached map state is listed and read key by key (``weir state get``), never scanned: its key
count is unknown and ``dump`` / ``inspect`` / ``migrate`` refuse it (:class:`MapCatalog.can_scan`).

Cells are shown decoded — an opaque cell as ``{"txid", "curr", "prev"}``, a transactional one as
``{"txid", "val"}``. Opaque and transactional map states are **read-only** here: their cells carry
the txid a replayed batch is compared with, so an edited cell would make a replay apply twice or
not at all. Non-transactional map states (plain values, no txid) may be written.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from weir.errors import StateError
from weir.state import registry
from weir.trident.backing.codec import decode_cell, decode_json
from weir.trident.backing.factory import MapStore
from weir.trident.state import Key, OpaqueValue, StateType, TransactionalValue

__all__ = ["PREFIX", "MapCatalog", "MapInfo", "catalog_for", "cell_to_json", "check_writable"]

#: ``weir state`` names a Trident map state ``trident:<table or key prefix>``
PREFIX = "trident:"


@dataclass(frozen=True)
class MapInfo:
    """One map state of a store: its name (table or key prefix) and its type."""

    name: str
    state_type: StateType
    #: what else a store needs to re-create the map elsewhere (PostgreSQL: key columns and value type)
    layout: Any = field(default=None, compare=False)

    @property
    def namespace(self) -> str:
        """The name ``weir state`` shows: ``trident:<name>``."""
        return PREFIX + self.name


class MapCatalog(ABC):
    """The Trident map states of one store (see the module docstring)."""

    @abstractmethod
    def maps(self) -> list[MapInfo]:
        """Every registered map state, sorted by name."""

    @abstractmethod
    def store(self, name: str) -> MapStore:
        """The :class:`MapStore` of the map state ``name`` (table or key prefix)."""

    @abstractmethod
    def scan(self, name: str) -> Iterator[tuple[str, bytes | str]]:
        """``(JSON key, stored cell)`` of every key of ``name``, sorted by the JSON key."""

    @abstractmethod
    def count(self, name: str) -> int:
        """Number of keys of ``name``."""

    @abstractmethod
    def delete(self, name: str, keys: list[Key]) -> None:
        """Delete ``keys`` of ``name`` (callers check :func:`check_writable` first)."""

    @abstractmethod
    def drop(self, name: str) -> None:
        """Delete every key of ``name`` and forget it (``weir state migrate --force``)."""

    @abstractmethod
    def register(self, name: str, state_type: StateType) -> None:
        """Record ``name`` as a map state of ``state_type`` (``weir state migrate``'s target)."""

    @abstractmethod
    def describe(self) -> str:
        """Where the map states live, without credentials."""

    #: whether the store can list the keys of a map state (memcached cannot)
    can_scan: bool = True

    def check_target(self, info: MapInfo) -> None:
        """Raise when this store cannot hold a copy of ``info`` (before ``weir state migrate`` writes)."""
        self.store(info.name)  # a name the store cannot hold (a SQLite table name) fails here

    def create_like(self, info: MapInfo) -> None:
        """Make the (new or emptied) map state ``info.name`` here, of ``info``'s type and layout."""
        self.register(info.name, info.state_type)

    def find(self, namespace: str) -> MapInfo | None:
        """The map state ``trident:<name>``, or None."""
        if not namespace.startswith(PREFIX):
            return None
        name = namespace[len(PREFIX) :]
        return next((m for m in self.maps() if m.name == name), None)

    def cells(self, info: MapInfo) -> Iterator[tuple[Key, Any]]:
        """``(key, cell)`` of every key of ``info``, decoded (OpaqueValue / TransactionalValue / value)."""
        where = f"{self.describe()} map state {info.name!r}"
        for raw_key, raw_cell in self.scan(info.name):
            key = tuple(decode_json(raw_key, what=f"{where}: stored key"))
            yield key, decode_cell(raw_cell, info.state_type, key, where=where)


def cell_to_json(cell: Any) -> Any:
    """A decoded cell for display: opaque ``{"txid", "curr", "prev"}``, transactional ``{"txid", "val"}``."""
    if isinstance(cell, OpaqueValue):
        return {"txid": cell.curr_txid, "curr": cell.curr, "prev": cell.prev}
    if isinstance(cell, TransactionalValue):
        return {"txid": cell.txid, "val": cell.val}
    return cell


def last_txid(cell: Any) -> int | None:
    """The txid a cell was last written by (None for a non-transactional value)."""
    if isinstance(cell, OpaqueValue):
        return cell.curr_txid
    if isinstance(cell, TransactionalValue):
        return cell.txid
    return None


def check_writable(info: MapInfo, what: str) -> None:
    """Refuse ``what`` (put / delete) on an opaque or transactional map state.

    Raises
    ------
    StateError
        Naming the map state, its type and why.
    """
    if info.state_type is StateType.NON_TRANSACTIONAL:
        return
    msg = (
        f"{info.namespace} is a Trident {info.state_type.value} map state: weir state does not {what} its "
        "keys, since every cell carries the txid that replayed batches are checked against (an edited cell "
        "would make a replay apply twice or not at all). Change it through its topology, or migrate it"
    )
    raise StateError(msg)


def catalog_for(backend: Any) -> MapCatalog | None:
    """The catalog of the store ``backend`` (a Storm backend) is in; None for stores without one."""
    connector = registry.connector_for_kind(getattr(backend, "kind", ""))
    if connector is None or connector.catalog is None:
        return None
    catalog: MapCatalog = connector.catalog(backend)
    return catalog


def missing(namespace: str, where: str) -> StateError:
    """The error for a ``trident:`` namespace that names no map state."""
    return StateError(f"no Trident map state {namespace!r} in {where}; see weir state ls")
