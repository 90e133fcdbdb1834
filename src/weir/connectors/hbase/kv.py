r"""The ``hbase`` provider: seed 003's HBase design — committed rows, a prepare row, a txid row.

State lives in a **pre-created** table and column family (Storm's ``tableName`` and
``columnFamily``; weir never creates or alters them). Rows of a namespace ``ns`` (``\0`` is a
separator byte, so ``ns`` may not contain it):

==========================  ======================  ================================================
row key                     column                  content
==========================  ======================  ================================================
``ns \0 b <bucket>``        ``cf:<key>``            ``buckets`` layout (the default): the committed
                                                    values of the keys whose CRC-32 modulo the
                                                    bucket count is ``bucket`` (4 hex digits)
``ns \0 d <key>``           ``cf:v``                ``rows`` layout (Storm's): committed value of
                                                    one serialized key
``ns \0 h <sha256(key)>``   ``cf:v``, ``cf:k``      ``rows``: the same for a key longer than
                                                    :data:`LONG_KEY` bytes (row keys stop at 32 KiB)
``ns \0 m``                 ``cf:m``                the txid record (JSON): committed txid, prepared
                                                    ``[txid, token]``, epoch, the commit being
                                                    applied ``[token, txid, ts]``, last timestamp,
                                                    the layout and bucket count of the namespace
``ns \0 s <token>``         ``cf:<key>``            one staged change set: ``=`` + value, or ``-``
==========================  ======================  ================================================

**Layouts.** HBase's cost of a write is mostly per row (locking, a ``Put`` built and shipped per
row, memstore bookkeeping), so the ``buckets`` layout keeps several keys per row: a commit of 10k
keys writes at most :data:`~weir.connectors.hbase.client.DEFAULT_BUCKETS` rows, not 10k. The ``rows``
layout keeps Storm ``HBaseKeyValueState``'s row per key. The layout (and bucket count) a namespace
was first written with is stored in its txid record and followed from then on; an explicit
``layout`` in the configuration that differs from the record is a :class:`~weir.errors.ConfigError`
naming both, so the two layouts are never mixed in one namespace. A record without a layout was
written by a weir that only knew ``rows``.

Every change of the txid record is **one check-and-put** of its single cell (HBase's atomic
compare-and-set on a row), and that is also where the writer's epoch is checked: a writer with an
older epoch changes nothing. A change set is first written to a fresh staged row (one row, so the
set is stored atomically as far as anyone can see: nobody reads it until the txid record names it).

Commit of txid *t* (numbered steps; a crash between any two is finished by the next writer):

1. check-and-put the txid record: epoch checked, the prepared set moves to *applying* with a new
   cell timestamp *ts* (larger than every timestamp this namespace used). **This is the commit
   point**: from here every reader through weir sees *t* as committed.
2. write the staged changes to their rows at timestamp *ts* (one mutation per bucket row, or per
   key row), a few thousand cells per call and several calls at once (not atomic across rows, as in
   Storm — and idempotent).
3. check-and-put the txid record: committed = *t*, nothing applying, the staged row named as
   garbage (``g``); the next prepare deletes it in the same call that writes its own staged row.

Readers never see a half-applied commit: a read takes the txid record, reads the key rows, overlays
the set being applied (if any), and reads the record again — if it changed, the read is repeated.
Writes carry explicit cell timestamps, so a late write of a writer that was fenced out meanwhile
lands *under* newer values and deletes, never over them.

Configuration: Storm's ``{"hbaseConfigKey": "hbase.conf", "tableName": "state", "columnFamily":
"cf"}`` (the Thrift gateway from the ``hbase.conf`` map's ``hbase.regionserver.thrift.port``, default
``localhost:9090``), or ``{"url": "hbase://HOST:PORT/TABLE?family=CF"}``; ``layout`` (``buckets`` /
``rows``) and ``buckets`` (bucket rows of a new namespace) as keys beside ``tableName`` or as url
parameters.

Example
-------
>>> import os
>>> from weir.state import StateFactory
>>> provider = StateFactory.from_url(os.environ.get("HBASE_URL", "hbase://localhost:9090/state?family=cf"))
>>> state = provider.new_state("wordcount-count-0")
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from weir.connectors.hbase.client import DEFAULT_BUCKETS, LAYOUTS, MAX_BUCKETS, HBaseClient, HBaseSettings
from weir.errors import ConfigError, FencedError, StateError, StateLossError, StoreUnavailableError
from weir.state.backend import Backend, Changes, TxidRecord, check_epoch
from weir.state.config import ProviderConfig

__all__ = ["HBaseBackend", "HBaseSettings", "open_backend"]

#: key rows written per Thrift call when a commit is applied
APPLY_CHUNK = 2_500
#: cells per Thrift call of the apply step in the buckets layout (a 10k-key commit: three calls)
APPLY_BUCKET_CHUNK = 3_500
#: Thrift calls of one commit's apply step in flight at once (one gateway connection each)
APPLY_THREADS = 4
#: staged columns written per Thrift call
_STAGE_CHUNK = 20_000
_PUT = b"="
_TOMBSTONE = b"-"
_SEP = b"\x00"
_CAS_ATTEMPTS = 1_000
#: keys longer than this get a hashed row key (the key itself goes to column ``k``)
LONG_KEY = 16_000
#: rows x columns asked for in one multi-get of bucket rows (every row is asked for every column)
_GET_CELLS = 256
#: cells per scan result when reading whole bucket rows
_SCAN_CELLS = 2_000


class Layout(NamedTuple):
    """How a namespace's committed keys are laid out: ``kind`` (``buckets`` / ``rows``), ``buckets``."""

    kind: str
    buckets: int = 0


def _now_ms() -> int:
    return int(time.time() * 1000)


class HBaseBackend(Backend):
    """Committed rows, prepared sets and txid records in rows of one HBase table (see module doc).

    The backend can be pickled to executors; only the :class:`HBaseSettings` travel.
    """

    kind = "hbase"
    durable = True
    distributed = True

    def __init__(self, settings: HBaseSettings) -> None:
        self.settings = settings
        self.hb = HBaseClient(settings)
        self._value_col = self.hb.column(b"v")
        self._meta_col = self.hb.column(b"m")
        self._key_col = self.hb.column(b"k")
        self._family_col = self.hb.family  # a family without ":" means the whole family
        self._fam = self.hb.family + b":"
        self._staged_cache: dict[bytes, dict[bytes, bytes | None]] = {}
        self._last_meta: dict[str, tuple[bytes | None, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["settings"])  # type: ignore[misc]

    def describe(self) -> str:
        """The store's URL."""
        return self.settings.describe()

    def close(self) -> None:
        """Close this process's connections."""
        self.hb.close()

    # ---- row keys ------------------------------------------------------------------------------
    def _prefix(self, namespace: str) -> bytes:
        if not namespace or "\x00" in namespace:
            msg = f"namespace {namespace!r} cannot be stored in HBase: it is empty or contains a NUL byte"
            raise StateError(msg)
        return namespace.encode() + _SEP

    def _meta_row(self, namespace: str) -> bytes:
        return self._prefix(namespace) + b"m"

    def _key_row(self, prefix: bytes, key: bytes) -> bytes:
        if len(key) > LONG_KEY:
            return prefix + b"h" + hashlib.sha256(key).digest()
        return prefix + b"d" + key

    @staticmethod
    def _bucket_row(prefix: bytes, buckets: int, key: bytes) -> bytes:
        return prefix + b"b%04x" % (zlib.crc32(key) % buckets)

    def _layout(self, namespace: str, raw: bytes | None, meta: dict[str, Any]) -> Layout:
        """The layout of ``namespace`` (its record's; the configured one for a new namespace).

        Raises
        ------
        ConfigError
            When the configuration names a layout other than the recorded one.
        """
        s = self.settings
        if raw is None:
            kind = s.layout or "buckets"
            return Layout(kind, (s.buckets or DEFAULT_BUCKETS) if kind == "buckets" else 0)
        kind = meta.get("l") or "rows"  # a record without a layout predates the buckets layout
        n = 0
        if kind == "buckets":
            recorded = meta.get("n")
            if not isinstance(recorded, int) or not 0 < recorded <= MAX_BUCKETS:
                msg = (
                    f"namespace {namespace!r}: the txid record in {self.describe()} has a bad bucket count {recorded!r}"
                )
                raise StateError(msg)
            n = recorded
        elif kind not in LAYOUTS:
            msg = f"namespace {namespace!r}: the txid record in {self.describe()} names an unknown layout {kind!r}"
            raise StateError(msg)
        if s.layout is not None and s.layout != kind:
            written = f"the {kind} layout" + (f" ({n} buckets)" if n else "")
            msg = (
                f"namespace {namespace!r} in {self.describe()} was written with {written}, but this provider "
                f"is configured with layout={s.layout}; weir never mixes layouts in a namespace: leave layout "
                f"unset (or set layout={kind}) to use it, or copy it to another table with `weir state migrate`"
            )
            raise ConfigError(msg)
        return Layout(kind, n)

    def layout(self, namespace: str) -> Layout:
        """The layout ``namespace`` has (or a new namespace would get), from its txid record."""
        raw, meta = self._read_meta(namespace)
        return self._layout(namespace, raw, meta)

    def _staged_row(self, namespace: str, token: str) -> bytes:
        return self._prefix(namespace) + b"s" + token.encode()

    def _wrap(self, exc: StateError, namespace: str, what: str) -> StateError:
        if isinstance(exc, (FencedError, StateLossError)):
            return exc
        cls = StoreUnavailableError if isinstance(exc, StoreUnavailableError) else StateError  # keep retriable
        return cls(f"namespace {namespace!r}: cannot {what}: {exc}; the batch is retried or recovered")

    # ---- the txid record -----------------------------------------------------------------------
    def _read_meta(self, namespace: str) -> tuple[bytes | None, dict[str, Any]]:
        got = self.hb.get_rows([self._meta_row(namespace)], [self._meta_col])
        raw = next(iter(got.values()), {}).get(self._meta_col)
        if raw is None:
            return None, {}
        try:
            meta = json.loads(raw)
        except ValueError as exc:
            msg = f"namespace {namespace!r}: the txid record in {self.describe()} is not weir's JSON: {raw[:80]!r}"
            raise StateError(msg) from exc
        self._remember(namespace, (raw, meta))
        return raw, meta

    def _cas(self, namespace: str, old: bytes | None, new: dict[str, Any]) -> bytes | None:
        """Replace the record ``old`` by ``new``; the bytes written, or None when ``old`` was stale."""
        new["w"] = uuid.uuid4().hex  # a nonce: our write is recognisable after a retried call
        raw = json.dumps(new, sort_keys=True, separators=(",", ":")).encode()
        row = self._meta_row(namespace)
        ok = self.hb.call("checkAndPut", self.hb.table, row, self._meta_col, old, self.hb.put(self._meta_col, raw), {})
        # a retried call may have succeeded the first time: then the record is exactly ours
        if ok or self._read_meta(namespace)[0] == raw:
            self._remember(namespace, (raw, new))
            return raw
        return None

    def _update(
        self, namespace: str, epoch: int | None, change: Callable[[dict[str, Any]], Any], *, exact: bool = False
    ) -> tuple[bytes, dict[str, Any], Any]:
        """Check the epoch and apply ``change`` to the txid record with one check-and-put (retried).

        A commit still being applied is finished first. Returns the record written (bytes and
        decoded) and what ``change`` returned.

        The first attempt starts from the record this process read or wrote last (the commit
        protocol has just read it): the check-and-put compares the exact bytes, so a stale guess
        only fails and the next attempt reads the record. A guess showing a commit being applied is
        not trusted (that is read first), nor one that would fence this writer out or make
        ``change`` refuse.
        """
        with self._lock:
            guess = self._last_meta.get(namespace)
        for _ in range(_CAS_ATTEMPTS):
            guessed = guess is not None and guess[0] is not None and not guess[1].get("a")
            if guessed and guess is not None:
                raw, meta = guess
                e = int(meta.get("e", 0))
                if epoch is not None and (e > epoch or (exact and e != epoch)):  # fenced or lost: on a fresh read
                    raw, meta = self._read_meta(namespace)
                    guessed = False
            else:
                raw, meta = self._read_meta(namespace)
            guess = None
            if meta.get("a"):
                self._finish(namespace, raw, meta)
                continue
            stored = int(meta.get("e", 0))
            check_epoch(namespace, epoch, stored, exact=exact)
            layout = self._layout(namespace, raw, meta)
            new = dict(meta)
            new["e"] = max(stored, epoch or 0)
            new["l"] = layout.kind
            if layout.buckets:
                new["n"] = layout.buckets
            try:
                out = change(new)
            except StateError:
                if guessed:  # refused on a possibly stale record: decide on a fresh read
                    continue
                raise
            written = self._cas(namespace, raw, new)
            if written is not None:
                return written, new, out
        msg = f"namespace {namespace!r}: the txid record in {self.describe()} keeps changing; is another writer busy?"
        raise StateError(msg)

    @staticmethod
    def _next_ts(meta: dict[str, Any]) -> int:
        ts = max(_now_ms(), int(meta.get("s", 0)) + 1)
        meta["s"] = ts
        return ts

    # ---- staged change sets --------------------------------------------------------------------
    def _stage(self, namespace: str, changes: Changes) -> tuple[str, str | None]:
        """Write ``changes`` to a fresh staged row; its token, and the finished staged row deleted.

        The staged row of the last finished commit (``g`` in the txid record this process saw
        last) is deleted by the same call as the first cells of the new one: a commit does not
        wait for that delete. A stale guess only deletes a row that is already gone (a token is
        named ``g`` only once its commit has finished, and tokens are never reused).
        """
        token = uuid.uuid4().hex
        row = self._staged_row(namespace, token)
        items = list(changes.items())
        hb = self.hb
        fam = self.hb.family + b":"
        with self._lock:
            seen = self._last_meta.get(namespace)
        garbage = seen[1].get("g") if seen is not None else None
        extra = [(self._staged_row(namespace, garbage), [hb.delete(self._family_col)])] if garbage else []
        if not items:
            hb.mutate_rows([(row, [hb.put(fam + b"\x00weir-empty", b"")]), *extra])
        for i in range(0, len(items), _STAGE_CHUNK):
            muts = [
                hb.put(fam + _PUT + k, v) if v is not None else hb.put(fam + _TOMBSTONE + k, b"")
                for k, v in items[i : i + _STAGE_CHUNK]
            ]
            hb.mutate_rows([(row, muts), *extra])
            extra = []
        with self._lock:
            self._staged_cache[token.encode()] = dict(changes)
        return token, garbage

    @staticmethod
    def _collected(meta: dict[str, Any], garbage: str | None) -> None:
        """Forget ``g`` in the record when it names the staged row that :meth:`_stage` deleted."""
        if garbage is not None and meta.get("g") == garbage:
            meta["g"] = None

    def _load_staged(self, namespace: str, token: str) -> dict[bytes, bytes | None] | None:
        with self._lock:
            cached = self._staged_cache.get(token.encode())
        if cached is not None:
            return cached
        got = self.hb.get_rows([self._staged_row(namespace, token)], [self._family_col])
        if not got:
            return None
        cols = next(iter(got.values()))
        out: dict[bytes, bytes | None] = {}
        n = len(self._family_col) + 1
        for col, val in cols.items():
            q = col[n:]
            if q[:1] == _PUT:
                out[q[1:]] = val
            elif q[:1] == _TOMBSTONE:
                out[q[1:]] = None
        return out

    def _drop_staged(self, namespace: str, token: str) -> None:
        with self._lock:
            self._staged_cache.pop(token.encode(), None)
        row = self._staged_row(namespace, token)
        self.hb.mutate_rows([(row, [self.hb.delete(self._family_col)])])

    def _apply(self, namespace: str, changes: dict[bytes, bytes | None], ts: int, layout: Layout) -> None:
        prefix = self._prefix(namespace)
        hb = self.hb
        if layout.kind == "buckets":
            # one row mutation per bucket: the keys are its columns (puts and column deletes)
            fam, n, put, delete = self._fam, layout.buckets, hb.put, hb.delete
            rows: dict[int, list[Any]] = {}
            for k, v in changes.items():
                muts = rows.get(b := zlib.crc32(k) % n)
                if muts is None:
                    muts = rows[b] = []
                muts.append(put(fam + k, v) if v is not None else delete(fam + k))
            bucketed = [(prefix + b"b%04x" % b, muts) for b, muts in rows.items()]
            hb.mutate_rows_parallel(bucketed, ts, chunk=APPLY_BUCKET_CHUNK, threads=APPLY_THREADS)
            return
        col = self._value_col
        kcol = self._key_col
        batch = []
        for k, v in changes.items():
            row = self._key_row(prefix, k)
            if len(k) > LONG_KEY:
                muts = [hb.put(col, v), hb.put(kcol, k)] if v is not None else [hb.delete(col), hb.delete(kcol)]
            else:
                muts = [hb.put(col, v) if v is not None else hb.delete(col)]
            batch.append((row, muts))
        hb.mutate_rows_parallel(batch, ts, chunk=APPLY_CHUNK, threads=APPLY_THREADS)

    def _finish(self, namespace: str, raw: bytes | None, meta: dict[str, Any]) -> None:
        """Steps 2 and 3 of a commit whose commit point has passed (idempotent; any writer may do it)."""
        token, txid, ts = meta["a"]
        changes = self._load_staged(namespace, token)
        if changes is None:  # finished by someone else meanwhile (or the record is gone)
            if self._read_meta(namespace)[0] == raw:
                msg = f"namespace {namespace!r}: the change set being applied ({token}) is missing in {self.describe()}"
                raise StateError(msg)
            return
        self._apply(namespace, changes, ts, self._layout(namespace, raw, meta))
        new = dict(meta)
        new["a"] = None
        if txid is not None:
            new["c"] = txid
        # the staged row is deleted by the next prepare's first write (see _stage), not waited for here
        new["g"] = token
        if self._cas(namespace, raw, new) is not None:
            with self._lock:
                self._staged_cache.pop(token.encode(), None)
            older = meta.get("g")
            if older and older != token:  # not collected yet (no prepare in between): delete it now
                self._drop_staged(namespace, older)

    # ---- reads ---------------------------------------------------------------------------------
    def _consistent(self, namespace: str, read: Callable[[dict[bytes, bytes | None], Layout], Any]) -> Any:
        """``read(overlay, layout)`` between two equal reads of the txid record (repeated until they are).

        The leading read may be the trailing read of the previous call (or the record this process
        wrote last): it was taken before this call's rows are read, which is all the check needs,
        so a steady reader pays two round trips, not three. Every record carries a fresh nonce, so
        equal bytes mean that nothing was written in between.
        """
        with self._lock:
            last = self._last_meta.get(namespace)
        for _ in range(_CAS_ATTEMPTS):
            if last is None:
                last = self._read_meta(namespace)
            raw, meta = last
            overlay: dict[bytes, bytes | None] = {}
            if meta.get("a"):
                overlay = self._load_staged(namespace, meta["a"][0]) or {}
            out = read(overlay, self._layout(namespace, raw, meta))
            last = self._read_meta(namespace)
            if last[0] == raw:
                self._remember(namespace, last)
                return out
        msg = f"namespace {namespace!r}: no stable read of {self.describe()}: the txid record keeps changing"
        raise StateError(msg)

    def _remember(self, namespace: str, meta: tuple[bytes | None, dict[str, Any]]) -> None:
        with self._lock:
            if len(self._last_meta) > 10_000:
                self._last_meta.clear()
            self._last_meta[namespace] = meta

    def get(self, namespace: str, key: bytes) -> bytes | None:
        """Committed value of ``key``."""
        return self.get_many(namespace, [key])[0]

    def get_many(self, namespace: str, keys: list[bytes]) -> list[bytes | None]:
        """Committed values of ``keys`` (one multi-get between two reads of the txid record)."""
        prefix = self._prefix(namespace)

        def read(overlay: dict[bytes, bytes | None], layout: Layout) -> list[bytes | None]:
            if layout.kind == "buckets":
                found = self._get_bucketed(prefix, layout.buckets, [k for k in keys if k not in overlay])
                return [overlay[k] if k in overlay else found.get(k) for k in keys]
            rows = [self._key_row(prefix, k) for k in keys]
            got = self.hb.get_rows(list(dict.fromkeys(rows)), [self._value_col])
            out: list[bytes | None] = []
            for k, r in zip(keys, rows, strict=True):
                if k in overlay:
                    out.append(overlay[k])
                else:
                    out.append(got.get(r, {}).get(self._value_col))
            return out

        if not keys:
            return []
        try:
            result: list[bytes | None] = self._consistent(namespace, read)
        except StateError as exc:
            raise self._wrap(exc, namespace, f"read {len(keys)} keys") from exc
        return result

    def _get_bucketed(self, prefix: bytes, buckets: int, keys: list[bytes]) -> dict[bytes, bytes]:
        """The committed values of those of ``keys`` that have one (``buckets`` layout).

        A Thrift multi-get asks every row for every column it names, so the bucket rows are packed
        into calls of at most :data:`_GET_CELLS` rows x columns, made several at a time.
        """
        by_row: dict[bytes, list[bytes]] = {}
        for k in keys:
            by_row.setdefault(self._bucket_row(prefix, buckets, k), []).append(k)
        fam = self._fam
        requests: list[tuple[list[bytes], list[bytes]]] = []
        rows: list[bytes] = []
        cols: list[bytes] = []
        for row, ks in by_row.items():
            if rows and (len(rows) + 1) * (len(cols) + len(ks)) > _GET_CELLS:
                requests.append((rows, cols))
                rows, cols = [], []
            rows.append(row)
            cols.extend(fam + k for k in dict.fromkeys(ks))
        if rows:
            requests.append((rows, cols))
        got = self.hb.get_rows_many(requests, threads=APPLY_THREADS)
        out: dict[bytes, bytes] = {}
        for row, ks in by_row.items():
            cells = got.get(row)
            if cells:
                for k in ks:
                    v = cells.get(fam + k)
                    if v is not None:
                        out[k] = v
        return out

    def _committed(self, namespace: str, keys_only: bool = False) -> dict[bytes, bytes]:
        prefix = self._prefix(namespace)
        start = prefix + b"d"
        n = len(start)

        def read(overlay: dict[bytes, bytes | None], layout: Layout) -> dict[bytes, bytes]:
            if layout.kind == "buckets":
                return _overlaid(self._scan_bucketed(prefix, keys_only), overlay)
            rows = self.hb.scan(
                start,
                prefix + b"e",
                [self._value_col],
                filter_string=b"KeyOnlyFilter()" if keys_only else None,
            )
            vcol, kcol = self._value_col, self._key_col
            out = {r.row[n:]: r.columns[vcol].value for r in rows if vcol in r.columns}
            for r in self.hb.scan(prefix + b"h", prefix + b"i", [vcol, kcol]):
                if vcol in r.columns and kcol in r.columns:
                    out[r.columns[kcol].value] = r.columns[vcol].value
            return _overlaid(out, overlay)

        try:
            result: dict[bytes, bytes] = self._consistent(namespace, read)
        except StateError as exc:
            raise self._wrap(exc, namespace, "scan the committed rows") from exc
        return result

    def _scan_bucketed(self, prefix: bytes, keys_only: bool) -> dict[bytes, bytes]:
        n = len(self._fam)
        out: dict[bytes, bytes] = {}
        for r in self.hb.scan(
            prefix + b"b",
            prefix + b"c",
            [self._family_col],
            filter_string=b"KeyOnlyFilter()" if keys_only else None,
            cells_per_result=_SCAN_CELLS,
            batch=100,
        ):
            for col, cell in r.columns.items():
                out[col[n:]] = cell.value
        return out

    def scan(self, namespace: str) -> Iterator[tuple[bytes, bytes]]:
        """Every committed row of ``namespace`` (in key order)."""
        return iter(sorted(self._committed(namespace).items()))

    def count(self, namespace: str) -> int:
        """Number of committed rows."""
        return len(self._committed(namespace, keys_only=True))

    def txids(self, namespace: str) -> TxidRecord:
        """The txid record (a commit past its commit point counts as committed)."""
        try:
            _, meta = self._read_meta(namespace)
        except StateError as exc:
            raise self._wrap(exc, namespace, "read the txid record") from exc
        committed = meta.get("c")
        applying = meta.get("a")
        if applying and applying[1] is not None:
            committed = applying[1]
        prepared = meta.get("p")
        return TxidRecord(committed, prepared[0] if prepared else None, int(meta.get("e", 0)))

    def load_prepared(self, namespace: str) -> tuple[int, dict[bytes, bytes | None]] | None:
        """The prepared change set and its txid."""
        for _ in range(_CAS_ATTEMPTS):
            raw, meta = self._read_meta(namespace)
            prepared = meta.get("p")
            if not prepared:
                return None
            changes = self._load_staged(namespace, prepared[1])
            if changes is not None and self._read_meta(namespace)[0] == raw:
                return int(prepared[0]), dict(changes)
        msg = f"namespace {namespace!r}: cannot read the prepared change set: the txid record keeps changing"
        raise StateError(msg)

    def namespaces(self) -> list[str]:
        """Every namespace with key rows or a txid record (a skip-scan over the table)."""
        out: list[str] = []
        start = b""
        hb = self.hb
        while True:
            first_key = b"FirstKeyOnlyFilter() AND KeyOnlyFilter()"
            rows = hb.scan(start, b"", [self._family_col], filter_string=first_key, limit=1)
            if not rows:
                break
            row = rows[0].row
            cut = row.find(_SEP)
            if cut < 0:  # not a weir row
                start = row + b"\x00"
                continue
            ns_bytes = row[:cut]
            start = ns_bytes + b"\x01"
            try:
                ns = ns_bytes.decode()
            except UnicodeDecodeError:
                continue
            prefix = ns_bytes + _SEP
            has_meta = bool(hb.get_rows([prefix + b"m"], [self._meta_col]))
            if has_meta or hb.scan(
                prefix + b"d", prefix + b"e", [self._value_col], filter_string=b"KeyOnlyFilter()", limit=1
            ):
                out.append(ns)
        return sorted(out)

    # ---- writes --------------------------------------------------------------------------------
    def write_prepared(self, namespace: str, txid: int, changes: Changes, epoch: int | None) -> None:
        """Stage ``changes`` in a fresh row, then name it as the prepared set (one check-and-put)."""
        try:
            token, garbage = self._stage(namespace, changes)

            def change(meta: dict[str, Any]) -> Any:
                old = meta.get("p")
                meta["p"] = [txid, token]
                self._collected(meta, garbage)
                return old

            try:
                _, _, old = self._update(namespace, epoch, change)
            except FencedError:
                self._drop_staged(namespace, token)
                raise
            if old:
                self._drop_staged(namespace, old[1])
        except StateError as exc:
            raise self._wrap(exc, namespace, f"prepare txid {txid}") from exc

    def commit_prepared(self, namespace: str, txid: int, epoch: int | None) -> None:
        """Steps 1–3 of the module docstring."""

        def change(meta: dict[str, Any]) -> None:
            prepared = meta.get("p")
            if not prepared or prepared[0] != txid:
                msg = (
                    f"namespace {namespace!r}: cannot commit txid {txid}: it is not prepared (the prepared "
                    f"txid is {prepared[0] if prepared else 'none'}); commit only what was prepared"
                )
                raise StateError(msg)
            meta["a"] = [prepared[1], txid, self._next_ts(meta)]
            meta["p"] = None

        try:
            raw, new, _ = self._update(namespace, epoch, change)
            self._finish(namespace, raw, new)
        except StateError as exc:
            raise self._wrap(exc, namespace, f"commit txid {txid}") from exc

    def discard_prepared(self, namespace: str, epoch: int | None) -> None:
        """Forget the prepared set (one check-and-put), then delete its staged row."""

        def change(meta: dict[str, Any]) -> Any:
            old = meta.get("p")
            meta["p"] = None
            return old

        try:
            _, _, old = self._update(namespace, epoch, change)
            if old:
                self._drop_staged(namespace, old[1])
        except StateError as exc:
            raise self._wrap(exc, namespace, "roll back the prepared change set") from exc

    def write_direct(self, namespace: str, changes: Changes, epoch: int | None) -> None:
        """Stage ``changes``, mark them applying (the commit point), apply, finish."""
        self._direct(namespace, changes, epoch, exact=False)

    def write_owned(self, namespace: str, changes: Changes, epoch: int) -> None:
        """:meth:`write_direct` while the stored epoch is exactly ``epoch`` (checked by the check-and-put)."""
        self._direct(namespace, changes, epoch, exact=True)

    def _direct(self, namespace: str, changes: Changes, epoch: int | None, *, exact: bool) -> None:
        try:
            token, garbage = self._stage(namespace, changes)

            def change(meta: dict[str, Any]) -> None:
                meta["a"] = [token, None, self._next_ts(meta)]
                self._collected(meta, garbage)

            try:
                raw, new, _ = self._update(namespace, epoch, change, exact=exact)
            except (FencedError, StateLossError):
                self._drop_staged(namespace, token)
                raise
            self._finish(namespace, raw, new)
        except StateError as exc:
            raise self._wrap(exc, namespace, f"write {len(changes)} changes") from exc

    def acquire_epoch(self, namespace: str) -> int:
        """Increment the epoch with one check-and-put."""

        def change(meta: dict[str, Any]) -> int:
            meta["e"] = int(meta.get("e", 0)) + 1
            return int(meta["e"])

        try:
            _, _, epoch = self._update(namespace, None, change)
        except StateError as exc:
            raise self._wrap(exc, namespace, "take a new epoch") from exc
        return int(epoch)

    def drop(self, namespace: str) -> None:
        """Delete every row of ``namespace`` (admin)."""
        prefix = self._prefix(namespace)
        try:
            _, meta = self._read_meta(namespace)
            ts = max(int(meta.get("s", 0)), _now_ms()) + 1
            end = prefix[:-1] + b"\x01"
            rows = self.hb.scan(prefix, end, [self._family_col], filter_string=b"KeyOnlyFilter()")
            batch = [(r.row, [self.hb.delete(self._family_col)]) for r in rows]
            self.hb.mutate_rows_parallel(batch, ts, chunk=APPLY_CHUNK, threads=APPLY_THREADS)
        except StateError as exc:
            raise self._wrap(exc, namespace, "drop the namespace") from exc
        while _now_ms() <= ts:  # later writes of this namespace must get larger timestamps
            time.sleep(0.001)


def open_backend(cfg: ProviderConfig) -> HBaseBackend:
    """Open the HBase store of ``cfg`` and check its table and column family now (submit time).

    Raises
    ------
    ConfigError
        When the Thrift gateway is unreachable or the table / column family does not exist (naming
        the ``create`` command of the HBase shell).
    """
    url = cfg.url
    if not url:
        msg = "hbase provider: no url (parse the configuration with parse_provider_config)"
        raise ConfigError(msg)
    backend = HBaseBackend(HBaseSettings.from_url(url))
    backend.hb.check_table()
    return backend


def _overlaid(rows: dict[bytes, bytes], overlay: dict[bytes, bytes | None]) -> dict[bytes, bytes]:
    """``rows`` with a half-applied commit's changes laid over them (``None`` deletes a key)."""
    for k, v in overlay.items():
        if v is None:
            rows.pop(k, None)
        else:
            rows[k] = v
    return rows
