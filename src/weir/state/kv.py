"""Storm's ``KeyValueState`` semantics over any :class:`~weir.state.backend.Backend`.

Three layers are read in order: **pending** writes (this instance, since the last prepare), the
**prepared** change set this instance stored (durable in the backend, invisible to every other
reader, including a new instance of the same namespace) and the **committed** rows. Protocol, per transaction *t*:

1. ``prepare_commit(t)`` — refuse *t* ≤ committed; merge pending into the change set this instance
   prepared before (if any) and store it (one atomic backend write, replacing a stale prepared set
   left by a crashed attempt) as *t*; pending starts empty.
2. ``commit(t)`` — if *t* is already the committed txid and nothing is prepared, return (idempotent);
   refuse a *t* that is not the prepared txid; else apply the prepared set atomically.
3. ``rollback()`` — drop pending and delete the prepared set.

``commit()`` with no txid applies pending writes directly (Storm uses it for the checkpoint spout's
own record).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Any

from weir._util import HASH_CACHEABLE
from weir.errors import SerializationError, StateError
from weir.state import ttl as _ttl
from weir.state.backend import Backend
from weir.state.base import KeyValueState
from weir.state.serializers import JsonSerializer, Serializer

__all__ = ["StatePhase", "TransactionalKeyValueState"]

_MISSING = object()
_IMMUTABLE = (str, int, float, bool, bytes, type(None))
#: value types the JSON serializer always accepts (a float may be NaN: it is checked at put)
_DEFERRABLE = frozenset({str, int, bool, bytes, type(None)})
_SKEY_CACHE = 200_000
#: read_dense(): first probe after this many missed reads, scan when rows <= ratio * misses
_DENSE_FIRST_PROBE = 512
_DENSE_RATIO = 16
_DENSE_MAX_ROWS = 1_000_000  # serialized keys remembered per state instance


class StatePhase(enum.Enum):
    """Where a state instance is in the protocol."""

    IDLE = "idle"  # nothing prepared by this instance
    PREPARED = "prepared"  # a change set is prepared and waits for commit/rollback


class TransactionalKeyValueState(KeyValueState[Any, Any]):
    """A key-value state with Storm's prepare/commit/rollback protocol and read-own-writes."""

    def __init__(
        self,
        backend: Backend,
        namespace: str,
        key_serializer: Serializer | None = None,
        value_serializer: Serializer | None = None,
        *,
        epoch: int | None = None,
        ttl_ms: int | None = None,
        topology: str | None = None,
    ) -> None:
        self.backend = backend
        self.namespace = namespace
        self.key_serializer: Serializer = key_serializer or JsonSerializer()
        self.value_serializer: Serializer = value_serializer or JsonSerializer()
        self.epoch = epoch
        self._owned = False
        #: ``weir.state.changelog.retain``: commits log their change sets (see weir.state.changelog)
        self.changelog_retain = 0
        self._pending: dict[bytes, bytes | None] = {}
        # the change set this instance prepared and has not committed yet (read-own-writes);
        # a prepared set left by another instance (a crashed attempt) is not visible here
        self._prepared: dict[bytes, bytes | None] | None = None
        self._prepared_txid: int | None = None
        # decoded values of pending writes of immutable types (saves a decode per read-own-write)
        self._pending_obj: dict[bytes, Any] = {}
        # writes of immutable values not serialized yet: (key, value), serialized once at prepare
        # (a key written a thousand times in a batch is serialized once)
        self._deferred: dict[bytes, tuple[Any, Any]] = {}
        self._last_key: Any = _MISSING
        self._last_skey = b""
        self._skeys: dict[Any, bytes] = {}  # serialized str/int/bytes keys (keys repeat)
        self._defer = type(self.value_serializer) is JsonSerializer
        # dense reads (see read_dense): the namespace's committed rows once many keys missed
        self._dense = False
        self._rows: dict[bytes, bytes] | None = None
        self._misses = 0
        self._next_probe = _DENSE_FIRST_PROBE
        # TTL (see weir.state.ttl): the default TTL of every put, the topology whose coordinator
        # records the batch time, the batch time once known, and the expiry buckets written since
        # the last prepare
        self.ttl_ms = _ttl.ttl_ms_of(ttl_ms, f"namespace {namespace!r}: {_ttl.TTL_CONF_KEY}")
        self.topology = topology
        self._now: int | None = None
        self._ttl_seen = self.ttl_ms is not None
        self._ttl_new: dict[int, set[bytes]] = {}

    # ---- helpers -------------------------------------------------------------------------
    def fence(self, epoch: int | None, *, owned: bool = False) -> None:
        """Carry ``epoch`` on every write; the backend refuses it once a newer driver has written.

        ``owned``: the driver stamped ``epoch`` on this namespace at start
        (:meth:`~weir.state.backend.Backend.claim`), so :meth:`prepare_commit` requires exactly that
        epoch (:meth:`~weir.state.backend.Backend.write_prepared_owned`): a store that lost it refuses
        the prepare with :class:`~weir.errors.StateLossError` and writes nothing.
        """
        self.epoch = epoch
        self._owned = owned and epoch is not None

    @property
    def phase(self) -> StatePhase:
        """PREPARED while a change set of this namespace waits for commit or rollback."""
        return StatePhase.PREPARED if self.prepared_txid is not None else StatePhase.IDLE

    @property
    def prepared_txid(self) -> int | None:
        """Txid of the prepared change set stored for this namespace, if any."""
        return self.backend.txids(self.namespace).prepared

    @property
    def committed_txid(self) -> int | None:
        """Txid of the last committed transaction of this namespace."""
        return self.backend.txids(self.namespace).committed

    def _skey(self, key: Any) -> bytes:
        if key is self._last_key:  # get(k) then put(k): serialize once
            return self._last_skey
        cacheable = type(key) in HASH_CACHEABLE  # exact types: 1 == 1.0 == True must not share a slot
        if cacheable:
            found = self._skeys.get(key)
            if found is not None:
                self._last_key, self._last_skey = key, found
                return found
        try:
            skey = self.key_serializer.serialize(key)
        except SerializationError as exc:
            msg = f"namespace {self.namespace!r}: key {key!r:.80} cannot be serialized: {exc}"
            raise SerializationError(msg) from exc
        if cacheable:
            if len(self._skeys) >= _SKEY_CACHE:
                self._skeys.clear()
            self._skeys[key] = skey
        if type(key) in _IMMUTABLE:
            self._last_key, self._last_skey = key, skey
        return skey

    def _flush(self) -> None:
        """Serialize the deferred writes into the pending set."""
        if self._deferred:
            pending = self._pending
            for skey, (key, value) in self._deferred.items():
                pending[skey] = self._sval(key, value)
            self._deferred = {}

    def _sval(self, key: Any, value: Any) -> bytes:
        try:
            return self.value_serializer.serialize(value)
        except SerializationError as exc:
            msg = (
                f"namespace {self.namespace!r}, key {key!r:.80}: value of type "
                f"{type(value).__qualname__} cannot be serialized: {exc}; nothing was written "
                "(use valueSerializerClass 'pickle' for arbitrary Python objects)"
            )
            raise SerializationError(msg) from exc

    def _dval(self, data: bytes, skey: bytes | None = None) -> Any:
        try:
            return self.value_serializer.deserialize(data)
        except SerializationError as exc:
            where = "" if skey is None else f", stored key {bytes(skey)[:60]!r}"
            msg = f"namespace {self.namespace!r}{where}: {exc}"
            raise SerializationError(msg) from exc

    def _lookup(self, skey: bytes) -> Any:
        """Serialized value of ``skey`` through the three layers, or _MISSING."""
        if skey in self._pending:
            v = self._pending[skey]
            return _MISSING if v is None else v
        if self._prepared is not None and skey in self._prepared:
            v = self._prepared[skey]
            return _MISSING if v is None else v
        if self._rows is not None:
            return self._rows.get(skey, _MISSING)
        if self._dense:
            self._misses += 1
            if self._misses >= self._next_probe:
                rows = self._read_rows()
                if rows is not None:
                    return rows.get(skey, _MISSING)
        got = self.backend.get(self.namespace, skey)
        return _MISSING if got is None else got

    def read_dense(self) -> None:
        """Let committed reads switch to one scan of the namespace when most of its keys are read.

        For a state used by one task for one batch (the runtime calls this): the committed rows
        cannot change until the batch is committed. After 512, 1024, 2048, ... point reads that
        missed the pending and prepared layers, the namespace's row count is asked; if it is at
        most 16 times the misses so far (and at most a million rows), its committed rows are read
        in one scan and every later miss is a dictionary lookup. A reader that lives longer than a
        batch (another service reading while the pipeline runs) must not call this: its view would
        stop following commits.
        """
        self._dense = True

    def _read_rows(self) -> dict[bytes, bytes] | None:
        """Read the namespace's rows into memory when there are few enough; ``None`` when not."""
        self._next_probe *= 2
        n = self.backend.count(self.namespace)
        if n > _DENSE_RATIO * self._misses or n > _DENSE_MAX_ROWS:
            return None
        rows = self._rows = dict(self.backend.scan(self.namespace))
        return rows

    # ---- TTL ---------------------------------------------------------------------------------
    def set_batch_time(self, now_ms: int) -> None:
        """Decide expiry as of ``now_ms`` (the runtime reads the batch time from the coordinator)."""
        self._now = int(now_ms)

    def batch_time_ms(self) -> int:
        """The time expiry is decided at: the batch's recorded time (read once), else the clock."""
        if self._now is None:
            if self.topology is None:  # a reader outside a batch: the time of the namespace's topology
                self._now = _ttl.now_for_namespace(self.backend, self.namespace)
            else:
                self._now = _ttl.batch_time(self.backend, self.topology)[1]
        return self._now

    def _live(self, data: Any) -> Any:
        """A stored value as seen now: the serialized value, or _MISSING when it has expired."""
        if data is _MISSING or not data or data[0] != 0:  # no slice on the hot path: JSON never starts with 0
            return data
        if _ttl.expiry_of(data) is None:
            return data
        self._ttl_seen = True
        got = _ttl.unwrap(bytes(data), self.batch_time_ms())
        return _MISSING if got is None else got

    def _sweep(self) -> None:
        """Add the TTL bookkeeping of this transaction to the pending writes (at prepare).

        1. Index the keys written with a TTL since the last prepare in their expiry buckets.
        2. Delete every key whose expiry is at or before the batch time, bucket by bucket from the
           cursor on, and advance the cursor (the bucket of the batch time stays open).
        A missing or far-behind cursor makes one scan rebuild the index instead.
        """
        cursor_raw = self._lookup(_ttl.CURSOR_KEY)
        if cursor_raw is _MISSING and not self._ttl_seen and not self._ttl_new:
            return  # this namespace has never held an expiring key
        now = self.batch_time_ms()
        end = now // _ttl.BUCKET_MS
        new, self._ttl_new = self._ttl_new, {}
        pending = self._pending
        if cursor_raw is _MISSING or end - _ttl.decode_cursor(cursor_raw) > _ttl.MAX_BUCKET_GAP:
            self._reindex(now)
        else:
            new_keys = [_ttl.bucket_key(b) for b in new]
            for bkey, ks, old in zip(new_keys, new.values(), self._lookup_many(new_keys), strict=True):
                pending[bkey] = _ttl.encode_keys(ks if old is _MISSING else ks | _ttl.decode_keys(old))
            due = range(_ttl.decode_cursor(cursor_raw) + 1, end + 1)
            due_keys = [_ttl.bucket_key(b) for b in due]
            listed = [(b, bkey, _ttl.decode_keys(raw)) for b, bkey, raw in zip(
                due, due_keys, self._lookup_many(due_keys), strict=True) if raw is not _MISSING]  # fmt: skip
            cands = sorted({k for _, _, ks in listed for k in ks})
            expiry = {
                k: None if v is _MISSING else _ttl.expiry_of(v)
                for k, v in zip(cands, self._lookup_many(cands), strict=True)
            }
            for b, bkey, ks in listed:
                keep: set[bytes] = set()
                for skey in ks:
                    exp = expiry[skey]
                    if exp is None:
                        continue  # deleted, or overwritten without a TTL
                    if exp <= now:
                        pending[skey] = None
                        self._pending_obj.pop(skey, None)
                    elif exp // _ttl.BUCKET_MS == b:
                        keep.add(skey)  # the open bucket of the batch time
                pending[bkey] = _ttl.encode_keys(keep) if keep else None
        pending[_ttl.CURSOR_KEY] = _ttl.encode_cursor(end - 1)

    def _lookup_many(self, skeys: list[bytes]) -> list[Any]:
        """:meth:`_lookup` of many keys; committed ones fetched in one backend round trip."""
        out: list[Any] = []
        need: list[int] = []
        for i, sk in enumerate(skeys):
            if sk in self._pending or (self._prepared is not None and sk in self._prepared) or self._rows is not None:
                out.append(self._lookup(sk))
            else:
                out.append(_MISSING)
                need.append(i)
        if need:
            got = self.backend.get_many(self.namespace, [skeys[i] for i in need])
            for i, v in zip(need, got, strict=True):
                out[i] = _MISSING if v is None else v
        return out

    def _reindex(self, now: int) -> None:
        """Rebuild the expiry index by one scan, deleting what has expired."""
        overlay: dict[bytes, bytes | None] = dict(self._prepared or {})
        overlay.update(self._pending)
        rows: dict[bytes, bytes | None] = {
            bytes(k): v for k, v in self.backend.scan(self.namespace) if bytes(k) not in overlay
        }
        rows.update(overlay)
        index: dict[int, set[bytes]] = {}
        for skey, stored in rows.items():
            if _ttl.is_reserved(skey):
                if skey != _ttl.CURSOR_KEY and stored is not None:
                    self._pending[skey] = None  # an old bucket row: rebuilt below
                continue
            exp = None if stored is None else _ttl.expiry_of(stored)
            if exp is None:
                continue
            if exp <= now:
                self._pending[skey] = None
                self._pending_obj.pop(skey, None)
            else:
                index.setdefault(exp // _ttl.BUCKET_MS, set()).add(skey)
        for b, ks in index.items():
            self._pending[_ttl.bucket_key(b)] = _ttl.encode_keys(ks)

    # ---- KeyValueState -------------------------------------------------------------------
    def get(self, key: Any, default: Any = None) -> Any:
        """Value of ``key``: own pending writes, then the prepared set, then committed rows."""
        skey = self._skey(key)
        obj = self._pending_obj.get(skey, _MISSING)
        if obj is not _MISSING:
            return obj
        data = self._live(self._lookup(skey))
        return default if data is _MISSING else self._dval(data, skey)

    def get_many(self, keys: list[Any], default: Any = None) -> list[Any]:
        """Values of ``keys``; committed misses are fetched in one backend round trip."""
        self._flush()
        skeys = [self._skey(k) for k in keys]
        out: list[Any] = [_MISSING] * len(skeys)
        need: list[int] = []
        for i, sk in enumerate(skeys):
            if sk in self._pending:
                v = self._pending[sk]
                out[i] = None if v is None else v
            elif self._prepared is not None and sk in self._prepared:
                out[i] = self._prepared[sk]
            else:
                need.append(i)
        if need:
            got = self.backend.get_many(self.namespace, [skeys[i] for i in need])
            for i, v in zip(need, got, strict=True):
                out[i] = v
        out = [_MISSING if v is None else self._live(v) for v in out]
        return [default if v is _MISSING else self._dval(v) for v in out]

    def put(self, key: Any, value: Any, ttl: Any = None) -> None:
        """Write ``key`` = ``value`` into the current (pending) transaction.

        ``ttl`` (ms, or a :class:`datetime.timedelta`; default the component's
        ``weir.state.ttl.ms``): the key expires that long after this batch's time — it is invisible
        from the first batch whose time is at or past its expiry, and that batch's commit deletes it.
        """
        skey = self._skey(key)
        ttl_ms = self.ttl_ms if ttl is None else _ttl.ttl_ms_of(ttl, f"namespace {self.namespace!r}, key {key!r:.80}")
        if ttl_ms is not None:
            expiry = self.batch_time_ms() + ttl_ms
            self._pending[skey] = _ttl.wrap(self._sval(key, value), expiry)
            self._deferred.pop(skey, None)
            if type(value) in _IMMUTABLE:
                self._pending_obj[skey] = value
            else:
                self._pending_obj.pop(skey, None)
            self._ttl_new.setdefault(expiry // _ttl.BUCKET_MS, set()).add(skey)
            self._ttl_seen = True
            return
        t = type(value)
        if t in _DEFERRABLE and self._defer:
            # JSON serializes these without fail: serialized once, at prepare
            self._pending_obj[skey] = value
            self._deferred[skey] = (key, value)  # newer than any _pending entry of the key
        elif t in _IMMUTABLE:
            self._pending[skey] = self._sval(key, value)
            self._pending_obj[skey] = value
            self._deferred.pop(skey, None)
        else:
            self._pending[skey] = self._sval(key, value)
            self._pending_obj.pop(skey, None)
            self._deferred.pop(skey, None)

    def delete(self, key: Any) -> Any:
        """Delete ``key`` in the current transaction and return its previous value."""
        skey = self._skey(key)
        obj = self._pending_obj.get(skey, _MISSING)
        prev = self._live(self._lookup(skey)) if obj is _MISSING else obj
        self._pending[skey] = None
        self._pending_obj.pop(skey, None)
        self._deferred.pop(skey, None)
        if obj is not _MISSING:
            return obj
        return None if prev is _MISSING else self._dval(prev)

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        """Every live key once: committed rows overlaid by the prepared set and pending writes."""
        self._flush()
        overlay: dict[bytes, bytes | None] = {}
        if self._prepared is not None:
            overlay.update(self._prepared)
        overlay.update(self._pending)
        for skey, sval in self.backend.scan(self.namespace):
            if skey in overlay or _ttl.is_reserved(skey):
                continue
            live = self._live(sval)
            if live is not _MISSING:
                yield self.key_serializer.deserialize(skey), self._dval(live, skey)
        for skey, val in overlay.items():
            if val is not None and not _ttl.is_reserved(skey):
                live = self._live(val)
                if live is not _MISSING:
                    yield self.key_serializer.deserialize(skey), self._dval(live)

    def __len__(self) -> int:
        """Number of live keys (walks the state)."""
        return sum(1 for _ in self)

    @property
    def pending_count(self) -> int:
        """Writes not yet prepared."""
        self._flush()
        return len(self._pending)

    # ---- protocol ------------------------------------------------------------------------
    def prepare_commit(self, txid: int) -> None:
        """Fix pending writes as (part of) transaction ``txid`` and store them durably."""
        rec = self.backend.txids(self.namespace)
        if rec.committed is not None and txid <= rec.committed:
            msg = (
                f"namespace {self.namespace!r}: cannot prepare txid {txid}: it is not after the "
                f"committed txid {rec.committed} (txids must strictly increase)"
            )
            raise StateError(msg)
        if self._prepared_txid is not None and txid < self._prepared_txid:
            msg = (
                f"namespace {self.namespace!r}: cannot prepare txid {txid}: txid "
                f"{self._prepared_txid} is already prepared"
            )
            raise StateError(msg)
        self._flush()
        self._sweep()
        merged = dict(self._prepared or {})
        merged.update(self._pending)
        if self._owned and self.epoch is not None:
            self.backend.write_prepared_owned(self.namespace, txid, merged, self.epoch)
        else:
            self.backend.write_prepared(self.namespace, txid, merged, self.epoch)
        self._prepared, self._prepared_txid = merged, txid
        self._pending = {}
        self._pending_obj = {}

    def commit(self, txid: int | None = None) -> None:
        """Commit prepared transaction ``txid`` (idempotent), or with no txid save pending directly."""
        if txid is None:
            self._flush()
            if self._pending:
                self.backend.write_direct(self.namespace, self._pending, self.epoch)
                self._pending = {}
                self._pending_obj = {}
            return
        rec = self.backend.txids(self.namespace)
        if rec.committed is not None and txid <= rec.committed and rec.prepared != txid:
            # already committed (possibly by recovery in another process): idempotent no-op
            self._prepared, self._prepared_txid = None, None
            return
        if rec.prepared != txid:
            msg = (
                f"namespace {self.namespace!r}: cannot commit txid {txid}: the prepared txid is "
                f"{rec.prepared} and the committed txid is {rec.committed}; commit only what was prepared"
            )
            raise StateError(msg)
        self._commit_backend(txid)
        self._prepared, self._prepared_txid = None, None

    def _commit_backend(self, txid: int) -> None:
        """The backend's commit of the prepared set; logged when the change feed is on."""
        if self.changelog_retain:
            from weir.state.changelog import ChangelogBackend

            if isinstance(self.backend, ChangelogBackend):
                self.backend.commit_logged(self.namespace, txid, self.epoch, self.changelog_retain)
                return
        self.backend.commit_prepared(self.namespace, txid, self.epoch)

    def rollback(self) -> None:
        """Discard pending writes and the prepared change set."""
        self._pending = {}
        self._pending_obj = {}
        self._deferred = {}
        self._ttl_new = {}
        self.backend.discard_prepared(self.namespace, self.epoch)
        self._prepared, self._prepared_txid = None, None

    def close(self) -> None:
        """Nothing to release: the backend is shared and closed by its provider."""
