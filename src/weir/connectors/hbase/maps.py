"""HBase backing maps: one row per Trident key in a pre-created table, the cell in one column.

Layout: the cell of key ``("man",)`` of a map state with ``key_prefix="wc:"`` is the column
``<family>:c`` of row ``wc:["man"]`` (the JSON of the key; a key whose JSON is longer than 16,000
bytes gets the row ``<key_prefix>#<sha256 of it>`` instead — HBase row keys stop at 32 KiB). The
cell is JSON: ``[txid, curr, prev]`` for opaque, ``[txid, val]`` for transactional, the value itself
for non-transactional maps, so the HBase shell reads it (``get 'trident', 'wc:["man"]'``).

Per partition and batch, ``multi_get`` is **one** multi-get and ``multi_put`` **one** batched put
through the Thrift gateway. HBase applies each row atomically but a batch of rows is not atomic:
if the region server fails mid-way, some rows hold the new cells and others the old. That is safe
for opaque and transactional maps, whose cells carry their txid: the batch is replayed with the
same txid and every key is repaired on its own. The table and column family are never created or
altered by weir (as for the state provider, a missing one is a clear error naming the command).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from weir.connectors.hbase.client import HBaseClient, HBaseSettings, hbase_settings_from_storm
from weir.errors import ConfigError, StateError, StoreUnavailableError
from weir.state.connections import shared_connections
from weir.trident.backing.catalog import PREFIX, MapCatalog, MapInfo
from weir.trident.backing.codec import decode_cell, encode_cell, encode_key
from weir.trident.backing.factory import MapStateFamily, MapStore
from weir.trident.state import BackingMap, Key, StateType, as_keys
from weir.trident.state.map_state import check_same_length

__all__ = ["REGISTRY_ROW", "HBaseBackingMap", "HBaseMapCatalog", "HBaseMapState", "HBaseMapStore"]

_LONG_ROW = 16_000
#: the row whose columns ``<family>:<key prefix>`` = state type list the table's map states (``weir state``)
REGISTRY_ROW = b"weir:trident:maps"


def _close(client: HBaseClient) -> None:
    client.close()


@dataclass(frozen=True)
class HBaseMapStore(MapStore):
    """The rows ``<key_prefix><JSON key>`` of an HBase table, holding one map state.

    Attributes
    ----------
    settings : HBaseSettings
        Thrift gateway, table and column family.
    key_prefix : str
        Prefix of every row of this map state; give every map state its own.
    """

    kind: ClassVar[str] = "hbase"

    settings: HBaseSettings
    key_prefix: str = "trident:"

    def __post_init__(self) -> None:
        if not isinstance(self.settings, HBaseSettings):
            msg = f"HBaseMapStore needs HBaseSettings, got {self.settings!r}"
            raise ConfigError(msg)
        if not isinstance(self.key_prefix, str) or not self.key_prefix:
            msg = f"HBaseMapState key_prefix must be a non-empty string, got {self.key_prefix!r}"
            raise ConfigError(msg)
        if self.settings.layout == "buckets" or self.settings.buckets is not None:
            msg = (
                "HBaseMapState keeps a row per Trident key: layout=buckets / buckets= are options of the "
                "hbase state provider only; remove them (or give layout=rows)"
            )
            raise ConfigError(msg)

    def catalog_name(self) -> str:
        """The key prefix: the name ``weir state`` lists the map state by."""
        return self.key_prefix

    def describe(self) -> str:
        """``hbase://host:port/table (column family …) key prefix '…'``."""
        return f"{self.settings.describe()} key prefix {self.key_prefix!r}"

    def client(self) -> HBaseClient:
        """The gateway client of this process (one connection per thread inside)."""
        settings = self.settings
        return shared_connections(("hbase", settings), lambda: HBaseClient(settings), _close, per_thread=False).get()

    def validate(self, state_type: StateType) -> None:
        """Connect now, check that the table and the column family exist, and record the map state.

        The record (column ``<family>:<key prefix>`` of row :data:`REGISTRY_ROW`) is what ``weir
        state`` lists; it is written here, at submit time, not on the batches' path.
        """
        try:
            self.client().check_table()
            self.register(state_type)
        except (ConfigError, StateError) as exc:
            msg = f"HBaseMapState (key prefix {self.key_prefix!r}): {exc}"
            raise ConfigError(msg) from exc

    def register(self, state_type: StateType) -> None:
        """Record this key prefix's state type in row :data:`REGISTRY_ROW` (one put)."""
        client = self.client()
        column = client.column(self.key_prefix.encode())
        client.mutate_rows([(REGISTRY_ROW, [client.put(column, state_type.value.encode())])])

    def scan_rows(self, *, hashed: bool = False) -> Iterator[tuple[bytes, bytes]]:
        """``(JSON key, cell)`` of every row of this map state, in row order (one scan).

        With ``hashed``, the rows of keys too long to be a row key (``<key_prefix>#<sha256>``)
        instead: their key is not stored, so the first item of each pair is the row's hash part.
        """
        client = self.client()
        col = client.column(b"c")
        prefix = self.key_prefix.encode()
        start, stop = (prefix + b"#", prefix + b"$") if hashed else (prefix + b"[", prefix + b"\\")
        for r in client.scan(start, stop, [col]):
            cell = r.columns.get(col)
            if cell is not None:
                yield r.row[len(prefix) :], cell.value

    def backing_map(self, state_type: StateType) -> HBaseBackingMap:
        """An :class:`HBaseBackingMap` of ``state_type`` cells under this prefix."""
        return HBaseBackingMap(self, state_type)


class HBaseBackingMap(BackingMap[Any]):
    """Bulk get/put of JSON cells in an HBase table (see the module docstring).

    Parameters
    ----------
    store : HBaseMapStore
        Gateway, table and key prefix.
    state_type : StateType
        Which cells are stored (they are read back as ``OpaqueValue`` / ``TransactionalValue``).
    """

    def __init__(self, store: HBaseMapStore, state_type: StateType | str) -> None:
        self.store = store
        self.state_type = StateType.parse(state_type)
        self._prefix = store.key_prefix.encode()

    def rows(self, keys: Sequence[Key]) -> list[bytes]:
        """The HBase row of each map key."""
        where = self.store.describe()
        out = []
        for k in as_keys(keys):
            data = encode_key(k, where=where).encode()
            if len(data) > _LONG_ROW:
                data = b"#" + hashlib.sha256(data).hexdigest().encode()
            out.append(self._prefix + data)
        return out

    def _fail(self, op: str, n: int, exc: BaseException) -> StateError:
        msg = (
            f"HBaseMapState {self.store.describe()}: {op} of {n} keys failed ({exc}); check that HBase and "
            "its Thrift gateway are up (the batch will be retried; cells carry their txid, so a partly "
            "written batch is repaired by the replay)"
        )
        return StoreUnavailableError(msg) if isinstance(exc, StoreUnavailableError) else StateError(msg)

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        """Cells of ``keys`` (``None`` where absent): one multi-get."""
        ks = as_keys(keys)
        if not ks:
            return []
        rows = self.rows(ks)
        client = self.store.client()
        col = client.column(b"c")
        try:
            got = client.get_rows(list(dict.fromkeys(rows)), [col])
        except StateError as exc:
            op = "multi_get"
            raise self._fail(op, len(rows), exc) from exc
        where = self.store.describe()
        st = self.state_type
        return [decode_cell(got.get(r, {}).get(col), st, k, where=where) for r, k in zip(rows, ks, strict=True)]

    def multi_put(self, keys: Sequence[Key], vals: Sequence[Any]) -> None:
        """Store every cell: one batched put (``mutateRows``)."""
        ks = as_keys(keys)
        check_same_length(ks, vals, what="values", op="HBaseBackingMap.multi_put")
        if not ks:
            return
        where = self.store.describe()
        st = self.state_type
        client = self.store.client()
        col = client.column(b"c")
        batch = [
            (r, [client.put(col, encode_cell(v, st, k, where=where))])
            for r, k, v in zip(self.rows(ks), ks, vals, strict=True)
        ]
        try:
            client.mutate_rows(batch)
        except StateError as exc:
            op = "multi_put"
            raise self._fail(op, len(batch), exc) from exc

    def __getstate__(self) -> dict[str, Any]:
        return {"store": self.store, "state_type": self.state_type}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["store"], state["state_type"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"HBaseBackingMap({self.store.describe()}, {self.state_type.name})"


def _settings(url: str | Mapping[str, Any] | HBaseSettings, conf: Mapping[str, Any] | None) -> HBaseSettings:
    if isinstance(url, HBaseSettings):
        return url
    try:
        if isinstance(url, str):
            return HBaseSettings.from_url(url)
        if isinstance(url, Mapping):
            if "url" in url:
                return HBaseSettings.from_url(str(url["url"]))
            return hbase_settings_from_storm(url, conf or {}, "HBaseMapState")
    except ConfigError as exc:
        msg = f"HBaseMapState: {exc}"
        raise ConfigError(msg) from exc
    msg = (
        "HBaseMapState: give an hbase://host:port/table?family=cf url, a mapping with Storm's "
        f"tableName / columnFamily (/ hbaseConfigKey), or HBaseSettings; got {url!r}"
    )
    raise ConfigError(msg)


class HBaseMapState(MapStateFamily):
    """Trident map states in an HBase table: ``HBaseMapState.opaque(url, key_prefix=...)``.

    ``opaque`` / ``transactional`` / ``non_transactional`` take the arguments of :meth:`store`
    plus ``cache_size``, ``global_key`` and ``check`` (see :class:`MapStateFamily`) and return a
    picklable :class:`~weir.trident.backing.MapStateFactory`.

    Examples
    --------
    >>> import os
    >>> factory = HBaseMapState.opaque(
    ...     os.environ.get("HBASE_URL", "hbase://127.0.0.1:9090/trident?family=cf"), key_prefix="wc:")
    """

    @classmethod
    def store(
        cls,
        url: str | Mapping[str, Any] | HBaseSettings,
        key_prefix: str = "trident:",
        conf: Mapping[str, Any] | None = None,
    ) -> HBaseMapStore:
        """The rows ``<key_prefix><JSON key>`` of the table at ``url``.

        Parameters
        ----------
        url : str, mapping or HBaseSettings
            ``hbase://host:port/table?family=cf``, or Storm's provider config form
            ``{"hbaseConfigKey": ..., "tableName": ..., "columnFamily": ...}`` (with ``conf``, the
            topology configuration holding the ``hbaseConfigKey`` map).
        key_prefix : str
            Prefix of this map state's rows; give every map state its own.
        conf : mapping, optional
            The topology configuration, for ``hbaseConfigKey``.
        """
        return HBaseMapStore(_settings(url, conf), key_prefix)


class HBaseMapCatalog(MapCatalog):
    """The Trident map states of one HBase table (the key prefixes row :data:`REGISTRY_ROW` lists).

    Keys are listed with a scan of the rows ``<key_prefix>[…``. A key whose JSON is longer than
    16,000 bytes is stored under its hash (``<key_prefix>#…``) without the key itself: such rows are
    counted, and deleted by :meth:`drop`, but cannot be listed — :meth:`scan` raises after the
    others when a map has any, so ``dump`` and ``migrate`` never silently leave them out.
    """

    def __init__(self, settings: HBaseSettings) -> None:
        self.settings = settings

    def describe(self) -> str:
        """The table, without credentials."""
        return self.settings.describe()

    def _client(self) -> HBaseClient:
        return HBaseMapStore(self.settings).client()

    def maps(self) -> list[MapInfo]:
        """Every key prefix recorded in row :data:`REGISTRY_ROW`, with its state type."""
        client = self._client()
        family = client.column(b"")
        try:
            found = client.get_rows([REGISTRY_ROW], [client.family]).get(REGISTRY_ROW, {})
        except StateError as exc:
            msg = f"reading the Trident map states of {self.describe()} failed ({exc}); check that HBase is up"
            raise StateError(msg) from exc
        out = [
            MapInfo(col[len(family) :].decode(errors="replace"), StateType.parse(value.decode()))
            for col, value in found.items()
            if col.startswith(family)
        ]
        return sorted(out, key=lambda m: m.name)

    def store(self, name: str) -> HBaseMapStore:
        """The :class:`HBaseMapStore` of the key prefix ``name``."""
        return HBaseMapStore(self.settings, name)

    def scan(self, name: str) -> Iterator[tuple[str, bytes | str]]:
        """``(JSON key, JSON cell)`` of every row, in key order; raises if some keys are only stored hashed."""
        store = self.store(name)
        for key, cell in store.scan_rows():
            yield key.decode("utf-8", "surrogatepass"), cell
        hashed = sum(1 for _ in store.scan_rows(hashed=True))
        if hashed:
            msg = (
                f"map state {PREFIX}{name} in {self.describe()}: {hashed} key(s) longer than {_LONG_ROW} bytes of "
                "JSON are stored under their hash, without the key, and cannot be listed (weir state get reads them)"
            )
            raise StateError(msg)

    def count(self, name: str) -> int:
        """Rows of the map state (hashed ones included)."""
        store = self.store(name)
        return sum(1 for _ in store.scan_rows()) + sum(1 for _ in store.scan_rows(hashed=True))

    def delete(self, name: str, keys: list[Key]) -> None:
        """Delete the rows of ``keys`` (one batched mutation)."""
        store = self.store(name)
        client = store.client()
        col = client.column(b"c")
        rows = HBaseBackingMap(store, StateType.NON_TRANSACTIONAL).rows(keys)
        client.mutate_rows([(r, [client.delete(col)]) for r in rows])

    def drop(self, name: str) -> None:
        """Delete every row of the map state and its :data:`REGISTRY_ROW` column."""
        store = self.store(name)
        client = store.client()
        col = client.column(b"c")
        prefix = name.encode()
        rows = [prefix + k for hashed in (False, True) for k, _ in store.scan_rows(hashed=hashed)]
        for i in range(0, len(rows), 5000):
            client.mutate_rows([(r, [client.delete(col)]) for r in rows[i : i + 5000]])
        client.mutate_rows([(REGISTRY_ROW, [client.delete(client.column(prefix))])])

    def register(self, name: str, state_type: StateType) -> None:
        """Record ``name`` as a map state of ``state_type``."""
        self.store(name).register(state_type)


def catalog_for(backend: Any) -> HBaseMapCatalog:
    """The catalog of the table of a :class:`~weir.connectors.hbase.kv.HBaseBackend`."""
    return HBaseMapCatalog(backend.settings)
