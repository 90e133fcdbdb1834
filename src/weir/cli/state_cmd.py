"""``weir state``: look into and administer a state store, whichever provider holds it.

Subcommands: ``ls``, ``get``, ``dump``, ``put``, ``delete``, ``inspect`` and ``migrate`` (see
:mod:`weir.cli.state_migrate`). Everything goes through the public :class:`~weir.state.backend.Backend`
SPI, so a provider added later works here unchanged.

The store is chosen by ``--url`` (``sqlite:///PATH``, ``redis://HOST:PORT/DB``,
``redis+cluster://H1:P1,H2:P2``, ``postgresql://…``, ``memory://NAME``), by Storm's configuration
(``--conf topology.state.provider=redis --conf 'topology.state.provider.config={…}'`` or
``--conf-file conf.json``), or defaults to the embedded SQLite store in ``./weir-state``
(``weir.state.dir``). Keys and values are read and shown as JSON; ``--key-class`` /
``--value-class`` pick other serializers, like Storm's ``keyClass`` / ``valueClass``.

Trident map states in the same store (SQLite and PostgreSQL tables, Redis and HBase key prefixes;
see :mod:`weir.trident.backing.catalog`) are shown too, as namespaces ``trident:<name>``: keys are
the JSON arrays of the grouping values, cells are decoded (opaque ``{"txid", "curr", "prev"}``,
transactional ``{"txid", "val"}``). ``put`` / ``delete`` refuse opaque and transactional map states,
whose cells carry the txids their replays are checked against. ``--url memcached://HOST:PORT``
opens memcached, which holds map states only: they are listed (without a key count: memcached
cannot enumerate its items) and read key by key with ``get``.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from weir.cli._table import print_table
from weir.errors import ConfigError, SerializationError, StateError
from weir.state import registry
from weir.state.backend import Backend
from weir.state.config import (
    PROVIDER_CONFIG_KEY,
    PROVIDER_KEY,
    ProviderConfig,
    parse_provider_config,
    provider_from_url,
)
from weir.state.factory import open_backend
from weir.state.serializers import (
    BytesSerializer,
    FloatSerializer,
    IntSerializer,
    JsonSerializer,
    Serializer,
    StrSerializer,
    serializer_for,
)
from weir.state.ttl import count_user_rows, expiry_of, is_reserved, now_for_namespace, unwrap

if TYPE_CHECKING:
    from weir.trident.backing.catalog import MapCatalog, MapInfo

__all__ = ["COORDINATOR_PREFIX", "Store", "load_conf", "open_store", "register", "to_jsonable"]

#: namespaces of the checkpoint coordinators (``$checkpointspout-<topology>``), record key ``__state``
COORDINATOR_PREFIX = "$checkpointspout-"
COORDINATOR_KEY = "__state"


# ---- store selection -------------------------------------------------------------------------
def _conf_value(text: str) -> Any:
    """A ``--conf`` value: JSON when it parses, else the plain string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def load_conf(conf_file: str | None, items: Sequence[str], url: str | None) -> dict[str, Any]:
    """The topology configuration given by ``--conf-file``, ``--conf k=v`` and ``--url``.

    ``--conf`` entries override the file; ``--url`` overrides the provider keys of both.
    """
    from weir.cli._conf import expand_env, read_conf_file

    conf: dict[str, Any] = {}
    if conf_file:
        conf.update(read_conf_file(conf_file))
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            msg = f"--conf {item!r}: expected KEY=VALUE, e.g. --conf topology.state.provider=redis"
            raise ConfigError(msg)
        conf[key.strip()] = _conf_value(value)
    if url:
        url = expand_env(url, where="--url")
        conf[PROVIDER_KEY] = provider_from_url(url)
        conf[PROVIDER_CONFIG_KEY] = {"url": url}
    return dict(expand_env(conf))


@dataclass
class Store:
    """An open backend with the key and value serializers the command uses.

    ``catalog`` is set for a store that holds Trident map states only (memcached): ``backend`` is
    then an empty stand-in that nothing is written to.
    """

    backend: Backend
    config: ProviderConfig
    key_serializer: Serializer
    value_serializer: Serializer
    catalog: MapCatalog | None = None

    @property
    def where(self) -> str:
        """The store, for messages."""
        return self.catalog.describe() if self.catalog is not None else self.backend.describe()

    def refuse_key_value(self, namespace: str) -> None:
        """Raise for a key-value namespace in a store of map states only."""
        if self.catalog is not None:
            msg = (
                f"{self.where} holds Trident map states only (trident:<key prefix>, see weir state ls), "
                f"not namespace {namespace!r}"
            )
            raise StateError(msg)


def _serializer(explicit: str | None, cfg: ProviderConfig, keys: tuple[str, str], what: str) -> Serializer:
    spec = explicit or cfg.options.get(keys[0]) or cfg.options.get(keys[1])
    return serializer_for(spec, what=what)


def open_backend_for(conf: dict[str, Any], *, must_exist: bool) -> tuple[Backend, ProviderConfig]:
    """Open (fresh, not shared) the backend of ``conf``.

    With ``must_exist``, an SQLite store must already exist: a read-only command never creates an
    empty database file (``./weir-state/state.db`` or a mistyped path).
    """
    cfg = parse_provider_config(conf)
    if cfg.provider == "custom":
        msg = (
            f"provider {cfg.custom_class!r} is a custom StateProvider; weir state works with the built-in "
            "providers (memory, sqlite, redis, postgres) — pass --url for the store it writes to"
        )
        raise ConfigError(msg)
    if must_exist and cfg.provider == "sqlite":
        # a read-only command never creates a database file (a mistyped path, or no ./weir-state)
        from weir.connectors.sqlite import SqliteOptions

        path = SqliteOptions.from_config(cfg).path
        if not os.path.exists(path):
            if PROVIDER_KEY not in conf and PROVIDER_CONFIG_KEY not in conf:
                msg = (
                    f"no weir state store at {path} (the default embedded store, under weir.state.dir); "
                    "run a topology here first, or choose the store with --url, --conf or --conf-file"
                )
            else:
                msg = f"no SQLite state store at {path}: the file does not exist (check the path)"
            raise ConfigError(msg)
    return open_backend(cfg, fresh=True), cfg


def _maps_only_connector(url: str | None) -> registry.Connector | None:
    """The connector of ``url`` when it names a store of Trident map states only (``memcached://``)."""
    if not url or "://" not in str(url):
        return None
    found = registry.connector_for_scheme(str(url).split("://", 1)[0])
    return found if found is not None and found.url_catalog is not None and not found.is_provider else None


def is_maps_only(url: str | None) -> bool:
    """Whether ``url`` names a store of Trident map states only (``memcached://``)."""
    return _maps_only_connector(url) is not None


@contextmanager
def open_store(args: argparse.Namespace, *, must_exist: bool = True) -> Iterator[Store]:
    """Open the store selected by the common options of ``args``; close it afterwards."""
    maps_only = _maps_only_connector(args.url)
    if maps_only is not None and maps_only.url_catalog is not None:
        from weir.cli._conf import expand_env
        from weir.state.memory import MemoryBackend

        catalog = maps_only.url_catalog(expand_env(args.url, where="--url"))
        json_ser = JsonSerializer()
        yield Store(MemoryBackend(), ProviderConfig("memory", {}), json_ser, json_ser, catalog)
        return
    conf = load_conf(args.conf_file, args.conf or [], args.url)
    backend, cfg = open_backend_for(conf, must_exist=must_exist)
    try:
        raw = getattr(args, "raw", False)
        key_ser = (
            BytesSerializer()
            if raw
            else _serializer(args.key_class, cfg, ("keySerializerClass", "keyClass"), "--key-class")
        )
        val_ser = (
            BytesSerializer()
            if raw
            else _serializer(args.value_class, cfg, ("valueSerializerClass", "valueClass"), "--value-class")
        )
        yield Store(backend, cfg, key_ser, val_ser)
    finally:
        backend.close()


# ---- JSON in and out -------------------------------------------------------------------------
def to_jsonable(obj: Any) -> Any:
    """``obj`` as JSON-ready data: bytes as ``{"$bytes": base64}``, other objects as ``{"$repr": …}``."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(obj)).decode("ascii")}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(x) for x in obj]
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj):
            return {k: to_jsonable(v) for k, v in obj.items()}
        return {"$dict": [[to_jsonable(k), to_jsonable(v)] for k, v in obj.items()]}
    if isinstance(obj, (set, frozenset)):
        return sorted((to_jsonable(x) for x in obj), key=lambda x: json.dumps(x, sort_keys=True))
    return {"$repr": repr(obj)}


def _ascii_only() -> bool:
    """Escape non-ASCII text when stdout cannot encode it (a non-UTF-8 terminal)."""
    encoding = (getattr(sys.stdout, "encoding", None) or "utf-8").lower().replace("-", "").replace("_", "")
    return encoding not in ("utf8", "utf16", "utf32")


def dumps(obj: Any) -> str:
    """Compact one-line JSON of ``obj`` (unicode kept as is where stdout can show it)."""
    return json.dumps(to_jsonable(obj), ensure_ascii=_ascii_only(), separators=(",", ":"))


def _revive(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and "$bytes" in obj and isinstance(obj["$bytes"], str):
        try:
            return base64.b64decode(obj["$bytes"], validate=True)
        except ValueError as exc:
            msg = f"{obj['$bytes']!r} is not valid base64 in a {{'$bytes': …}} value"
            raise ConfigError(msg) from exc
    return obj


def parse_arg(text: str, serializer: Serializer, what: str) -> Any:
    """A key or value given on the command line, for ``serializer``.

    JSON by default (``42``, ``"42"``, ``[1,2]``, ``{"$bytes": "AAE="}``); text that is not valid
    JSON is taken as a string. The typed serializers take the plain text: ``str`` as is, ``int`` and
    ``float`` as numbers, ``bytes`` as UTF-8 (or the ``{"$bytes": …}`` form).
    """
    if isinstance(serializer, StrSerializer):
        return text
    if isinstance(serializer, (IntSerializer, FloatSerializer)):
        kind = int if isinstance(serializer, IntSerializer) else float
        try:
            return kind(text)
        except ValueError as exc:
            msg = f"{what} {text!r} is not a valid {kind.__name__} (the {what} serializer is {kind.__name__})"
            raise ConfigError(msg) from exc
    try:
        value = json.loads(text, object_hook=_revive)
    except json.JSONDecodeError:
        value = text
    if isinstance(serializer, BytesSerializer) and not isinstance(value, bytes):
        return text.encode("utf-8")
    return value


def _decode(store: Store, namespace: str, skey: bytes, sval: bytes | None) -> tuple[Any, Any]:
    """Deserialize a stored row for display.

    The coordinator's own record (``$checkpointspout-*``, raw key ``__state``, JSON value) is shown
    whatever serializers were chosen: its key as text when the key serializer cannot read it.
    """
    try:
        key = store.key_serializer.deserialize(skey)
    except SerializationError as exc:
        key = _coordinator_text(namespace, skey)
        if key is None:
            raise _undecodable(namespace, skey, exc) from exc
    try:
        value = None if sval is None else store.value_serializer.deserialize(sval)
    except SerializationError as exc:
        value = None if sval is None else _coordinator_text(namespace, sval)
        if value is None:
            raise _undecodable(namespace, skey, exc) from exc
        try:
            value = json.loads(value)
        except ValueError:
            pass
    return key, value


def _coordinator_text(namespace: str, data: bytes) -> str | None:
    if not namespace.startswith(COORDINATOR_PREFIX):
        return None
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return None


def _undecodable(namespace: str, skey: bytes, exc: Exception) -> SerializationError:
    msg = (
        f"namespace {namespace!r}, stored key {skey[:60]!r}: {exc}; choose the serializers the "
        "store was written with (--key-class / --value-class), or --raw to show the stored bytes"
    )
    return SerializationError(msg)


# ---- Trident map states ----------------------------------------------------------------------
def _catalog(store: Store) -> MapCatalog | None:
    from weir.trident.backing.catalog import catalog_for

    return store.catalog if store.catalog is not None else catalog_for(store.backend)


def _trident_maps(store: Store) -> list[MapInfo]:
    catalog = _catalog(store)
    return [] if catalog is None else catalog.maps()


def _trident(store: Store, namespace: str) -> tuple[MapCatalog, MapInfo] | None:
    """The catalog and map state a ``trident:<name>`` namespace names, or None."""
    from weir.trident.backing.catalog import PREFIX

    if not namespace.startswith(PREFIX):
        return None
    catalog = _catalog(store)
    info = None if catalog is None else catalog.find(namespace)
    return None if catalog is None or info is None else (catalog, info)


def _map_key(text: str) -> tuple[Any, ...]:
    """A Trident key from the command line: a JSON array of the grouping values, or one value."""
    value = parse_arg(text, JsonSerializer(), "key")
    return tuple(value) if isinstance(value, list) else (value,)


def _map_cutoff(store: Store, info: MapInfo) -> int | None:
    """Cells of ``info`` at or below this txid have expired (``weir.state.ttl.ms``); None: none hidden."""
    from weir.trident.backing.expiry import reader_cutoff

    if store.catalog is not None:  # a store of map states only (memcached): no coordinator, no TTL
        return None
    return reader_cutoff(store.backend, info.namespace)


def _expired(cell: Any, upto: int | None) -> bool:
    from weir.trident.backing.expiry import cell_txid

    return upto is not None and (cell_txid(cell) or 0) <= upto


def _dump_map(store: Store, catalog: MapCatalog, info: MapInfo, *, values: bool = False) -> None:
    """One line per unexpired cell; ``values``: the cell's current value instead (what ``weir state load`` takes)."""
    from weir.cli.state_cells import cell_value
    from weir.trident.backing.catalog import cell_to_json

    show = cell_value if values else cell_to_json
    ns_json = json.dumps(info.namespace, ensure_ascii=_ascii_only())
    out = sys.stdout
    upto = _map_cutoff(store, info)
    for key, cell in catalog.cells(info):
        if _expired(cell, upto):
            continue
        out.write(f'{{"ns":{ns_json},"key":{dumps(list(key))},"value":{dumps(show(cell))}}}\n')


def _maps_table(catalog: MapCatalog, maps: list[MapInfo], *, txids: bool) -> None:
    """``ls`` / ``inspect``: one row per map state (``inspect`` also reads every cell for the last txid)."""
    from weir.trident.backing.catalog import last_txid

    rows: list[list[Any]] = []
    for info in maps:
        if not catalog.can_scan:  # memcached: the map state is known, its keys are not
            rows.append([info.namespace, info.state_type.value, "?"] + (["?"] if txids else []))
            continue
        if txids:
            n, last = 0, None
            for _, cell in catalog.cells(info):
                n += 1
                t = last_txid(cell)
                if t is not None and (last is None or t > last):
                    last = t
            rows.append([info.namespace, info.state_type.value, n, last])
        else:
            rows.append([info.namespace, info.state_type.value, catalog.count(info.name)])
    headers = ["trident map state", "type", "keys"] + (["last txid"] if txids else [])
    print_table(headers, rows, max_width=None)


# ---- commands --------------------------------------------------------------------------------
def _cmd_ls(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        b = store.backend
        rows: list[list[Any]] = []
        foreign: list[str] = []
        for ns in sorted(b.namespaces()):
            try:
                rec = b.txids(ns)
                rows.append([ns, rec.committed, rec.prepared, rec.epoch, count_user_rows(b, ns)])
            except StateError as exc:  # another program's keys (Apache Storm's state): listed, not read
                rows.append([ns, "foreign", "", "", ""])
                foreign.append(f"{ns}: {exc}")
        maps = _trident_maps(store)
        if not rows and not maps:
            print(f"no namespaces in {store.where}")
            return 0
        if rows:
            print_table(["namespace", "committed txid", "prepared txid", "epoch", "keys"], rows, max_width=None)
        if foreign:
            print(
                f"{len(foreign)} foreign namespace(s), which weir did not write (Apache Storm's state is imported "
                "with `weir state import-storm`):",
                file=sys.stderr,
            )
            for line in foreign:
                print(f"  {line}", file=sys.stderr)
        if maps:
            if rows:
                print()
            catalog = _catalog(store)
            assert catalog is not None  # noqa: S101 - maps came from it
            _maps_table(catalog, maps, txids=False)
    return 0


def _cmd_get_map(store: Store, args: argparse.Namespace, catalog: MapCatalog, info: MapInfo) -> int:
    from weir.trident.backing.catalog import cell_to_json

    key = _map_key(args.key)
    cell = catalog.store(info.name).backing_map(info.state_type).multi_get([key])[0]
    if _expired(cell, _map_cutoff(store, info)):  # weir.state.ttl.ms: expired at the last committed txid
        cell = None
    if cell is None:
        print(f"weir: key {dumps(list(key))} not found in {info.namespace!r}", file=sys.stderr)
        return 1
    print(dumps(cell_to_json(cell)))
    return 0


def _cmd_get(args: argparse.Namespace) -> int:
    if args.topology is not None or args.component is not None:
        from weir.cli.state_find import cmd_get_by_topology

        return cmd_get_by_topology(args, open_store, parse_arg, dumps)
    if args.key is None:
        msg = "weir state get needs NAMESPACE KEY, or --topology T --component C KEY"
        raise ConfigError(msg)
    with open_store(args) as store:
        found = _trident(store, args.namespace)
        if found is not None:
            return _cmd_get_map(store, args, *found)
        store.refuse_key_value(args.namespace)
        key = parse_arg(args.key, store.key_serializer, "key")
        skey = store.key_serializer.serialize(key)
        data = store.backend.get(args.namespace, skey)
        if data is None and args.namespace.startswith(COORDINATOR_PREFIX):
            skey = args.key.encode("utf-8")  # the coordinator's record has a raw key (__state)
            data = store.backend.get(args.namespace, skey)
        if data is not None and expiry_of(data) is not None:  # a key with a TTL: hidden once expired
            data = unwrap(data, now_for_namespace(store.backend, args.namespace))
        if data is None:
            known = args.namespace in store.backend.namespaces()
            where = "" if known else f" (no such namespace in {store.where}; see weir state ls)"
            print(f"weir: key {dumps(key)} not found in namespace {args.namespace!r}{where}", file=sys.stderr)
            return 1
        print(dumps(_decode(store, args.namespace, skey, data)[1]))
    return 0


def _cmd_dump(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        b = store.backend
        known = b.namespaces()
        maps = {m.namespace: m for m in _trident_maps(store)}
        names = sorted(set(args.namespaces)) if args.namespaces else sorted(known) + sorted(maps)
        missing = [ns for ns in names if ns not in known and ns not in maps]
        if missing:
            msg = f"no namespace {', '.join(map(repr, missing))} in {store.where}; see weir state ls"
            raise StateError(msg)
        out = sys.stdout
        for ns in names:
            if ns not in known:
                catalog = _catalog(store)
                assert catalog is not None  # noqa: S101 - maps came from it
                _dump_map(store, catalog, maps[ns], values=args.values)
                continue
            ns_json = json.dumps(ns, ensure_ascii=_ascii_only())
            now: int | None = None
            for skey, sval in sorted(b.scan(ns)):
                if is_reserved(skey):
                    continue  # TTL index rows
                if expiry_of(sval) is not None:
                    now = now_for_namespace(b, ns, known) if now is None else now
                    live = unwrap(sval, now)
                    if live is None:
                        continue  # expired (deleted by the topology's next commit)
                    sval = live
                key, value = _decode(store, ns, skey, sval)
                out.write(f'{{"ns":{ns_json},"key":{dumps(key)},"value":{dumps(value)}}}\n')
        out.flush()
    return 0


def _admin_write(store: Store, args: argparse.Namespace, changes: dict[bytes, bytes | None]) -> None:
    """Write through :func:`weir.checkpoint.admin.admin_write` (live topologies: refused, or fenced)."""
    from weir.checkpoint.admin import admin_write

    fenced = admin_write(store.backend, args.namespace, changes, force=args.force)
    if fenced is not None:
        print(
            f"weir: topology {fenced.topology!r} was running ({fenced.reason}); it is fenced now and stops "
            "without committing its batch in flight. Restart it: it continues from this write.",
            file=sys.stderr,
        )


def _cmd_put(args: argparse.Namespace) -> int:
    with open_store(args, must_exist=False) as store:
        found = _trident(store, args.namespace)
        if found is not None:
            from weir.trident.backing.catalog import check_writable

            catalog, info = found
            check_writable(info, "write")
            key, value = _map_key(args.key), parse_arg(args.value, JsonSerializer(), "value")
            catalog.store(info.name).backing_map(info.state_type).multi_put([key], [value])
            print(f"{info.namespace}: {dumps(list(key))} = {dumps(value)}")
            return 0
        store.refuse_key_value(args.namespace)
        key = parse_arg(args.key, store.key_serializer, "key")
        value = parse_arg(args.value, store.value_serializer, "value")
        skey = store.key_serializer.serialize(key)
        sval = store.value_serializer.serialize(value)
        _admin_write(store, args, {skey: sval})
        print(f"{args.namespace}: {dumps(key)} = {dumps(value)}")
    return 0


def _cmd_delete(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        found = _trident(store, args.namespace)
        if found is not None:
            from weir.trident.backing.catalog import check_writable

            catalog, info = found
            check_writable(info, "delete")
            key = _map_key(args.key)
            old = catalog.store(info.name).backing_map(info.state_type).multi_get([key])[0]
            if old is None:
                print(f"weir: key {dumps(list(key))} not found in {info.namespace!r}", file=sys.stderr)
                return 1
            catalog.delete(info.name, [key])
            print(f"{info.namespace}: deleted {dumps(list(key))} (was {dumps(old)})")
            return 0
        store.refuse_key_value(args.namespace)
        key = parse_arg(args.key, store.key_serializer, "key")
        skey = store.key_serializer.serialize(key)
        previous = store.backend.get(args.namespace, skey)
        if previous is None:
            print(f"weir: key {dumps(key)} not found in namespace {args.namespace!r}", file=sys.stderr)
            return 1
        _admin_write(store, args, {skey: None})
        old = _decode(store, args.namespace, skey, previous)[1]
        print(f"{args.namespace}: deleted {dumps(key)} (was {dumps(old)})")
    return 0


def _coordinator_record(backend: Backend, namespace: str) -> dict[str, Any] | None:
    """The ``__state`` record of a coordinator namespace as a dict (None when absent)."""
    for skey in (JsonSerializer().serialize(COORDINATOR_KEY), COORDINATOR_KEY.encode()):
        data = backend.get(namespace, skey)
        if data is None:
            continue
        try:
            rec = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            return {"record": data}
        return rec if isinstance(rec, dict) else {"record": rec}
    return None


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return dumps(value)


def _verify(args: argparse.Namespace) -> int:
    """``inspect --verify``: the store's full integrity check; 1 when it found problems."""
    if is_maps_only(args.url):
        msg = f"--verify checks a key-value store; {args.url} holds Trident map states only (weir state inspect)"
        raise ConfigError(msg)
    conf = load_conf(args.conf_file, args.conf or [], args.url)
    try:
        backend, _ = open_backend_for(conf, must_exist=True)
    except ConfigError:
        cfg = parse_provider_config(conf)
        if cfg.provider != "sqlite":
            raise
        from weir.connectors.sqlite import SqliteBackend, SqliteOptions

        backend = SqliteBackend(SqliteOptions.from_config(cfg))  # damaged: report, do not refuse
    try:
        where = backend.describe()
        problems = backend.verify()
    finally:
        backend.close()
    if problems:
        print(f"verify: {len(problems)} problem(s) in {where}")
        for p in problems:
            print(f"  {p}")
        return 1
    print(f"verify: {where} is intact")
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    if args.verify:
        return _verify(args)
    with open_store(args) as store:
        b = store.backend
        known = b.namespaces()
        maps = {m.namespace: m for m in _trident_maps(store)}
        wanted_maps = [maps[ns] for ns in sorted(set(args.namespaces) & set(maps))] or (
            [] if args.namespaces else [maps[ns] for ns in sorted(maps)]
        )
        wanted = set(args.namespaces) - set(maps)
        missing = sorted(wanted - set(known))
        if missing:
            msg = f"no namespace {', '.join(map(repr, missing))} in {store.where}; see weir state ls"
            raise StateError(msg)
        names = sorted(wanted) if wanted else ([] if args.namespaces else sorted(known))
        pending = []
        for ns in names:
            got = b.load_prepared(ns)
            if got is None:
                continue
            txid, changes = got
            changes = {k: v for k, v in changes.items() if not is_reserved(bytes(k))}  # not weir's TTL index rows
            tombstones = sum(1 for v in changes.values() if v is None)
            rec = b.txids(ns)
            pending.append([ns, txid, rec.committed, len(changes) - tombstones, tombstones, rec.epoch])
        print(f"store: {store.where}")
        print()
        if pending:
            print(f"pending prepares ({len(pending)} of {len(names)} namespaces)")
            print_table(
                ["namespace", "prepared txid", "committed txid", "upserts", "tombstones", "epoch"],
                pending,
                max_width=None,
            )
        else:
            print(f"no pending prepares ({len(names)} namespaces)")
        if wanted_maps:
            catalog = _catalog(store)
            assert catalog is not None  # noqa: S101 - maps came from it
            print()
            print(f"trident map states ({len(wanted_maps)}; cells carry their own txids, nothing is pending)")
            _maps_table(catalog, wanted_maps, txids=True)

        coords = []
        for ns in sorted(known):
            if not ns.startswith(COORDINATOR_PREFIX):
                continue
            topology = ns[len(COORDINATOR_PREFIX) :]
            if wanted and ns not in wanted and not any(w.startswith(topology + "-") for w in wanted):
                continue
            coords.append((topology, _coordinator_record(b, ns)))
        print()
        if not coords:
            print(f"no coordinator records ({COORDINATOR_PREFIX}<topology>)")
            return 0
        fields: list[str] = [f for f in ("txid", "phase", "epoch") if any(r and f in r for _, r in coords)]
        for _, r in coords:
            for f in r or {}:
                if f not in fields:
                    fields.append(f)
        rows = [[topo] + [_cell((r or {}).get(f)) for f in fields] for topo, r in coords]
        print("coordinators")
        print_table(["topology", *fields], rows)
        _print_histories(b, [topo for topo, _ in coords], args.history)
    return 0


def _print_histories(backend: Backend, topologies: list[str], last: int) -> None:
    """The last ``last`` checkpoint history entries of each coordinator (``weir history`` shows all)."""
    from weir.checkpoint.history import load_history
    from weir.cli.history_table import print_history

    if last <= 0:
        return
    for topo in topologies:
        entries = load_history(backend, COORDINATOR_PREFIX + topo)
        if not entries:
            continue
        print()
        print(f"checkpoint history of {topo!r} (last {min(last, len(entries))} of {len(entries)}; weir history {topo})")
        print_history(entries[-last:])


# ---- registration ----------------------------------------------------------------------------
def _store_options() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("store")
    g.add_argument(
        "--url",
        help="store URL: sqlite:///PATH, redis://H:P/DB, redis+cluster://H:P,…, postgresql://…, "
        "hbase://H:P/TABLE?family=CF, memcached://H:P (Trident map states only)",
    )
    g.add_argument(
        "--conf",
        action="append",
        metavar="KEY=VALUE",
        help="a configuration key, e.g. topology.state.provider=redis (repeatable; VALUE may be JSON)",
    )
    g.add_argument("--conf-file", metavar="FILE", help="a JSON file of topology configuration keys")
    g.add_argument(
        "--key-class",
        metavar="NAME",
        help="key serializer: json (default), str, int, float, bytes, pickle",
    )
    g.add_argument("--value-class", metavar="NAME", help="value serializer (same names as --key-class)")
    return p


def register(subparsers: Any) -> None:
    """Add ``weir state`` and its subcommands."""
    from weir.cli import state_convert, state_import_storm, state_load, state_migrate, state_rescale

    common = _store_options()
    state = subparsers.add_parser(
        "state",
        help="inspect, edit and migrate state stores",
        description=(
            "Look into and administer a state store, whichever provider holds it. The store is chosen "
            "by --url, by Storm configuration (--conf / --conf-file), or is the embedded SQLite store "
            "in ./weir-state. Keys and values are JSON unless --key-class / --value-class say otherwise."
        ),
    )
    sub = state.add_subparsers(dest="state_command", metavar="SUBCOMMAND")

    def _help(_: argparse.Namespace) -> int:
        state.print_help(sys.stderr)
        return 2

    state.set_defaults(func=_help)

    p = sub.add_parser("ls", parents=[common], help="namespaces with txids, epoch and key count")
    p.set_defaults(func=_cmd_ls)

    p = sub.add_parser("get", parents=[common], help="the committed value of a key, as JSON")
    p.add_argument("namespace", help="the namespace (with --topology/--component: the KEY)")
    p.add_argument("key", nargs="?", help="the key as JSON (text that is not JSON is taken as a string)")
    p.add_argument("--topology", help="find KEY's task by the fields grouping's hash (with --component)")
    p.add_argument("--component", help="the stateful bolt of --topology whose KEY to find")
    p.add_argument("--raw", action="store_true", help="key and value as bytes ({'$bytes': base64} form)")
    p.set_defaults(func=_cmd_get)

    p = sub.add_parser("dump", parents=[common], help="committed rows as JSON lines, sorted (diff-able)")
    p.add_argument("namespaces", nargs="*", metavar="NAMESPACE", help="namespaces to dump (default: all)")
    p.add_argument("--raw", action="store_true", help="keys and values as stored bytes ({'$bytes': base64})")
    p.add_argument(
        "--values",
        action="store_true",
        help="Trident map states: each cell's current value, not the cell (the lines weir state load takes)",
    )
    p.set_defaults(func=_cmd_dump)

    p = sub.add_parser("put", parents=[common], help="set a committed key (admin write)")
    p.add_argument("namespace")
    p.add_argument("key", help="the key as JSON (text that is not JSON is taken as a string)")
    p.add_argument("value", help="the value as JSON (text that is not JSON is taken as a string)")
    p.add_argument("--force", action="store_true", help="write even while the topology runs (fences it)")
    p.set_defaults(func=_cmd_put)

    p = sub.add_parser("delete", parents=[common], help="delete a committed key (admin write)")
    p.add_argument("namespace")
    p.add_argument("key", help="the key as JSON (text that is not JSON is taken as a string)")
    p.add_argument("--force", action="store_true", help="delete even while the topology runs (fences it)")
    p.set_defaults(func=_cmd_delete)

    p = sub.add_parser("inspect", parents=[common], help="pending prepares and coordinator records")
    p.add_argument("namespaces", nargs="*", metavar="NAMESPACE", help="namespaces to show (default: all)")
    p.add_argument(
        "--verify",
        action="store_true",
        help="check the whole store instead: SQLite integrity_check, every txid record and prepared set",
    )
    p.add_argument(
        "--history", type=int, default=10, metavar="N", help="checkpoint history entries per topology (default 10)"
    )
    p.set_defaults(func=_cmd_inspect)

    state_migrate.register(sub, open_backend_for)
    state_rescale.register(sub, common, open_store)
    state_import_storm.register(sub, common, open_store)
    state_load.register(sub, common, open_store)
    state_convert.register(sub, common, open_store)
