"""``weir state migrate``: copy namespaces between two stores, then verify them.

Per namespace, in order:

1. refuse (before anything is written) a namespace with a prepared transaction in the source — its
   change set is neither committed nor rolled back yet — unless ``--force`` (then only the committed
   rows are copied); refuse a non-empty target namespace unless ``--force`` (then it is dropped first);
2. copy the committed rows as raw bytes in chunks (``write_direct``), the last chunk inside a
   prepare + commit carrying the source's committed txid, so the target's txid record equals the
   source's; writes carry the source's epoch, so the target's epoch is the same too;
3. verify: key count, an order-independent checksum of the key/value bytes, the committed txid and
   the epoch on both sides. Any mismatch makes the command exit with code 1.

No serializer is involved: what is copied is the stored bytes.

Trident map states (``trident:<name>``, see :mod:`weir.trident.backing.catalog`) are copied too:
their cells are read decoded and written with the target store's backing map (a SQLite or
PostgreSQL table, a Redis or HBase key prefix of the same name; a PostgreSQL table needs its key
columns and value type, so only a PostgreSQL map state can be copied into one), then verified by a
checksum of the decoded cells. A map state that exists in the target is refused unless ``--force``
(then it is emptied first). Memcached map states cannot be listed, so they are not migrated.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from weir._util import positive_int
from weir.cli._table import human_duration, print_table
from weir.errors import ConfigError, StateError
from weir.state.backend import Backend
from weir.state.config import PROVIDER_CONFIG_KEY, PROVIDER_KEY, provider_from_url

if TYPE_CHECKING:
    from weir.trident.backing.catalog import MapCatalog, MapInfo

__all__ = ["NamespaceCheck", "checksum", "copy_namespace", "register", "verify_namespace"]

#: opens the backend of a configuration: ``opener(conf, must_exist=...) -> (backend, provider config)``
Opener = Callable[..., tuple[Backend, Any]]

_MASK = (1 << 64) - 1


def checksum(rows: Iterable[tuple[bytes, bytes]]) -> tuple[int, int]:
    """``(count, checksum)`` of ``rows``; the checksum does not depend on the order of the rows.

    Each row is hashed (BLAKE2b, 8 bytes, over the length-prefixed key and the value) and the hashes
    are summed modulo 2**64.
    """
    total = 0
    n = 0
    for k, v in rows:
        h = hashlib.blake2b(len(k).to_bytes(8, "big"), digest_size=8)
        h.update(k)
        h.update(v)
        total = (total + int.from_bytes(h.digest(), "big")) & _MASK
        n += 1
    return n, total


@dataclass(frozen=True)
class NamespaceCheck:
    """The verification of one namespace on both sides."""

    namespace: str
    source_keys: int
    target_keys: int
    source_sum: int
    target_sum: int
    source_txid: int | None
    target_txid: int | None
    source_epoch: int
    target_epoch: int
    counts_agree: bool = True

    @property
    def ok(self) -> bool:
        """Whether both sides hold the same rows and txid record."""
        return (
            self.source_keys == self.target_keys
            and self.source_sum == self.target_sum
            and self.source_txid == self.target_txid
            and self.source_epoch == self.target_epoch
            and self.counts_agree
        )

    def row(self) -> list[Any]:
        """The table row: both values where they differ."""

        def pair(a: Any, b: Any, fmt: Any = str) -> Any:
            if a == b:
                return a if fmt is str else fmt(a)
            return f"{'-' if a is None else fmt(a)} ≠ {'-' if b is None else fmt(b)}"

        hexs = "{:016x}".format
        return [
            self.namespace,
            pair(self.source_keys, self.target_keys),
            pair(self.source_txid, self.target_txid),
            pair(self.source_epoch, self.target_epoch),
            pair(self.source_sum, self.target_sum, hexs),
            "OK" if self.ok else "MISMATCH",
        ]


def verify_namespace(source: Backend, target: Backend, namespace: str) -> NamespaceCheck:
    """Compare ``namespace`` in ``source`` and ``target`` (rows by scan, plus ``count()``)."""
    s_keys, s_sum = checksum(source.scan(namespace))
    t_keys, t_sum = checksum(target.scan(namespace))
    s_rec, t_rec = source.txids(namespace), target.txids(namespace)
    return NamespaceCheck(
        namespace,
        s_keys,
        t_keys,
        s_sum,
        t_sum,
        s_rec.committed,
        t_rec.committed,
        s_rec.epoch,
        t_rec.epoch,
        counts_agree=source.count(namespace) == s_keys and target.count(namespace) == t_keys,
    )


def _map_rows(catalog: MapCatalog, info: MapInfo) -> Iterator[tuple[bytes, bytes]]:
    """The cells of a Trident map state as canonical ``(JSON key, JSON cell)`` bytes (store-independent)."""
    from weir.trident.backing.catalog import cell_to_json
    from weir.trident.backing.codec import encode_json

    for key, cell in catalog.cells(info):
        yield encode_json(list(key), what=info.namespace), encode_json(cell_to_json(cell), what=info.namespace)


def verify_map(source: MapCatalog, target: MapCatalog, info: MapInfo) -> NamespaceCheck:
    """Compare the Trident map state ``info`` in ``source`` and ``target`` (decoded cells, type)."""
    s_keys, s_sum = checksum(_map_rows(source, info))
    found = target.find(info.namespace)
    t_keys, t_sum = checksum(_map_rows(target, info)) if found is not None else (0, 0)
    same_type = found is not None and found.state_type is info.state_type
    return NamespaceCheck(info.namespace, s_keys, t_keys, s_sum, t_sum, None, None, 0, 0, counts_agree=same_type)


def copy_map(
    source: MapCatalog,
    target: MapCatalog,
    info: MapInfo,
    *,
    chunk_size: int = 5000,
    progress: _Progress | None = None,
) -> int:
    """Copy every cell of the Trident map state ``info`` (the target map must be new or dropped)."""
    target.create_like(info)
    backing = target.store(info.name).backing_map(info.state_type)
    total = source.count(info.name)
    copied = 0
    keys: list[Any] = []
    cells: list[Any] = []
    for key, cell in source.cells(info):
        keys.append(key)
        cells.append(cell)
        if len(keys) >= chunk_size:
            backing.multi_put(keys, cells)
            copied += len(keys)
            keys, cells = [], []
            if progress:
                progress.update(f"{info.namespace}: {copied}/{total} keys")
    if keys:
        backing.multi_put(keys, cells)
        copied += len(keys)
    return copied


def _plan_maps(
    source: MapCatalog | None,
    target: MapCatalog | None,
    target_where: str,
    wanted: Sequence[str],
    force: bool,
    verify_only: bool,
) -> list[MapInfo]:
    """The Trident map states to migrate; raises before anything is written when one must be refused."""
    maps = {m.namespace: m for m in source.maps()} if source is not None else {}
    chosen = [maps[ns] for ns in sorted(set(wanted)) if ns in maps] if wanted else [maps[ns] for ns in sorted(maps)]
    if not chosen:
        return []
    if target is None:
        msg = (
            f"--to {target_where} cannot hold Trident map states ({', '.join(m.namespace for m in chosen)}); "
            "migrate them to a SQLite, Redis, PostgreSQL or HBase store, or leave them out with --namespace"
        )
        raise ConfigError(msg)
    assert source is not None  # noqa: S101 - chosen came from it
    if not source.can_scan or not target.can_scan:
        msg = (
            f"{source.describe() if not source.can_scan else target.describe()} cannot list the keys of its "
            "Trident map states (memcached has no way to enumerate items), so they cannot be migrated or "
            "verified; leave them out with --namespace"
        )
        raise ConfigError(msg)
    if verify_only:
        return chosen
    problems = []
    for info in chosen:
        target.check_target(info)
        there = target.find(info.namespace)
        if there is not None and not force and (there.state_type is not info.state_type or target.count(info.name)):
            problems.append(
                f"Trident map state {info.namespace!r} already exists in the target ({there.state_type.value}, "
                f"{target.count(info.name)} keys); pass --force to replace it"
            )
    if problems:
        msg = "refusing to migrate: " + "; ".join(problems)
        raise StateError(msg)
    return chosen


def _chunks(rows: Iterator[tuple[bytes, bytes]], size: int) -> Iterator[list[tuple[bytes, bytes]]]:
    chunk: list[tuple[bytes, bytes]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class _Progress:
    """One progress line on stderr, rewritten in place on a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.live = stream.isatty()

    def update(self, text: str) -> None:
        if self.live:
            self.stream.write("\r\x1b[K" + text)
            self.stream.flush()

    def done(self, text: str) -> None:
        if self.live:
            self.stream.write("\r\x1b[K")
        self.stream.write(text + "\n")
        self.stream.flush()


def copy_namespace(
    source: Backend,
    target: Backend,
    namespace: str,
    *,
    chunk_size: int = 5000,
    progress: _Progress | None = None,
) -> int:
    """Copy the committed rows and the txid record of ``namespace``; return the number of rows.

    The target namespace must be empty (the caller drops it first when forcing).
    """
    rec = source.txids(namespace)
    epoch = rec.epoch if rec.epoch > 0 else None
    total = source.count(namespace)
    copied = 0
    held: list[tuple[bytes, bytes]] | None = None
    for chunk in _chunks(source.scan(namespace), chunk_size):
        if held is not None:
            target.write_direct(namespace, dict(held), epoch)
            copied += len(held)
            if progress:
                progress.update(f"{namespace}: {copied}/{total} keys")
        held = chunk
    last = dict(held or [])
    if rec.committed is not None:
        # Backend has no "set txid" write: a prepare + commit of the last chunk as the source's
        # committed txid leaves the target's committed txid equal to the source's.
        target.write_prepared(namespace, rec.committed, last, epoch)
        target.commit_prepared(namespace, rec.committed, epoch)
    elif last:
        target.write_direct(namespace, last, epoch)
    copied += len(last)
    while target.txids(namespace).epoch < rec.epoch:
        target.acquire_epoch(namespace)
    return copied


def _is_empty(backend: Backend, namespace: str) -> bool:
    rec = backend.txids(namespace)
    return backend.count(namespace) == 0 and rec.committed is None and rec.prepared is None


def _open(opener: Opener, url: str, option: str, *, must_exist: bool) -> Backend:
    try:
        conf = {PROVIDER_KEY: provider_from_url(url), PROVIDER_CONFIG_KEY: {"url": url}}
        return opener(conf, must_exist=must_exist)[0]
    except ConfigError as exc:
        msg = f"{option}: {exc}"
        raise ConfigError(msg) from exc


def _plan(source: Backend, target: Backend, wanted: Sequence[str], force: bool, verify_only: bool) -> list[str]:
    """The namespaces to migrate; raises before anything is written when one must be refused."""
    known = source.namespaces()
    names = sorted(set(wanted)) if wanted else sorted(known)
    missing = [ns for ns in names if ns not in known]
    if missing:
        msg = f"--from {source.describe()}: no namespace {', '.join(map(repr, missing))} (see weir state ls)"
        raise StateError(msg)
    if verify_only:
        return names
    problems = []
    for ns in names:
        prepared = source.txids(ns).prepared
        if prepared is not None and not force:
            problems.append(
                f"namespace {ns!r} has a prepared transaction (txid {prepared}) in the source that is "
                "neither committed nor rolled back; restart its topology so recovery resolves it, or "
                "pass --force to copy only the committed rows"
            )
        if not force and not _is_empty(target, ns):
            rec = target.txids(ns)
            problems.append(
                f"namespace {ns!r} is not empty in the target ({target.count(ns)} keys, committed txid "
                f"{rec.committed}, prepared txid {rec.prepared}); pass --force to replace it"
            )
    if len(problems) == 1:
        msg = "refusing to migrate: " + problems[0]
        raise StateError(msg)
    if problems:
        msg = f"refusing to migrate ({len(problems)} problems):\n  " + "\n  ".join(problems)
        raise StateError(msg)
    return names


def _cmd_migrate(args: argparse.Namespace) -> int:
    positive_int(args.chunk_size, "--chunk-size")
    for option, url in (("--from", args.source), ("--to", args.target)):
        if str(url).split("://", 1)[0].lower() == "memcached":
            msg = (
                f"{option} {url}: memcached cannot list the keys of its Trident map states (it has no way to "
                "enumerate items), so weir state migrate can neither copy nor verify them"
            )
            raise ConfigError(msg)
    source = _open(args.open_backend, args.source, "--from", must_exist=True)
    try:
        target = _open(args.open_backend, args.target, "--to", must_exist=False)
    except BaseException:
        source.close()
        raise
    try:
        if source.describe() == target.describe() or args.source == args.target:
            msg = f"--from and --to are the same store ({source.describe()}); migrate between two stores"
            raise ConfigError(msg)
        from weir.trident.backing.catalog import catalog_for

        wanted = args.namespaces or []
        src_maps, dst_maps = catalog_for(source), catalog_for(target)
        map_names = {m.namespace for m in src_maps.maps()} if src_maps is not None else set()
        storm_wanted = [ns for ns in wanted if ns not in map_names]
        names = _plan(source, target, storm_wanted, args.force, args.verify_only) if storm_wanted or not wanted else []
        maps = _plan_maps(src_maps, dst_maps, target.describe(), wanted, args.force, args.verify_only)
        err = sys.stderr
        progress = _Progress(err)
        if not args.verify_only:
            started = time.perf_counter()
            total = 0
            for ns in names:
                t0 = time.perf_counter()
                prepared = source.txids(ns).prepared
                if prepared is not None:
                    print(f"warning: {ns}: prepared txid {prepared} not copied (--force)", file=err)
                # empty (checked) or --force: start from nothing, not even an old epoch
                target.drop(ns)
                n = copy_namespace(source, target, ns, chunk_size=args.chunk_size, progress=progress)
                total += n
                took = human_duration(time.perf_counter() - t0)
                txid = source.txids(ns).committed
                progress.done(f"copied {ns}: {n} keys, committed txid {'-' if txid is None else txid} ({took})")
            for info in maps:
                assert src_maps is not None and dst_maps is not None  # noqa: S101 - _plan_maps checked
                t0 = time.perf_counter()
                if dst_maps.find(info.namespace) is not None:  # empty (checked) or --force
                    dst_maps.drop(info.name)
                n = copy_map(src_maps, dst_maps, info, chunk_size=args.chunk_size, progress=progress)
                total += n
                took = human_duration(time.perf_counter() - t0)
                progress.done(f"copied {info.namespace}: {n} keys, {info.state_type.value} map state ({took})")
            print(
                f"migrated {len(names) + len(maps)} namespaces, {total} keys from {source.describe()} to "
                f"{target.describe()} in {human_duration(time.perf_counter() - started)}",
                file=err,
            )
        checks = [verify_namespace(source, target, ns) for ns in names]
        if maps:
            assert src_maps is not None and dst_maps is not None  # noqa: S101 - _plan_maps checked
            checks += [verify_map(src_maps, dst_maps, info) for info in maps]
            checks.sort(key=lambda c: c.namespace)
        print_table(
            ["namespace", "keys", "committed txid", "epoch", "checksum", "status"],
            [c.row() for c in checks],
            max_width=None,
        )
        bad = [c.namespace for c in checks if not c.ok]
        if bad:
            print(f"weir: verification FAILED for {len(bad)} namespace(s): {', '.join(bad)}", file=err)
            return 1
        print(f"verified {len(checks)} namespaces: OK", file=err)
        return 0
    finally:
        target.close()
        source.close()


def register(sub: Any, opener: Opener) -> None:
    """Add ``weir state migrate``; ``opener`` opens a store's backend (``weir state``'s own)."""
    p = sub.add_parser(
        "migrate",
        help="copy namespaces (rows and txids) to another store, verified",
        description=(
            "Copy every namespace's committed rows and txid record (committed txid, epoch) as raw bytes "
            "from one store to another, then verify key counts and checksums on both sides. Trident map "
            "states (trident:<name>) are copied cell by cell (a SQLite or PostgreSQL table, a Redis or HBase key "
            "prefix <name>)."
        ),
    )
    p.add_argument("--from", dest="source", required=True, metavar="URL", help="source store URL")
    p.add_argument("--to", dest="target", required=True, metavar="URL", help="target store URL")
    p.add_argument(
        "--namespace",
        dest="namespaces",
        action="append",
        metavar="NS",
        help="namespace to copy (repeatable; default: all)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace non-empty target namespaces; copy namespaces with a prepared transaction "
        "(their committed rows only)",
    )
    p.add_argument("--chunk-size", type=int, default=5000, metavar="N", help="rows per write (default 5000)")
    p.add_argument("--verify-only", action="store_true", help="copy nothing; compare the two stores")
    p.set_defaults(func=_cmd_migrate, open_backend=opener)
