"""``initial_state`` for Trident map states: seed a new topology's map state before its first batch.

``weir.submit(name, conf, trident_topology, initial_state={"counts": rows})`` (the state's
``name()``, or ``"trident:<name>"``) writes ``rows`` — a Spark DataFrame with columns ``key`` and
``value``, a dict, or ``(key, value)`` pairs; a key is the list of the state's grouping values, or
one value for a one-field key — as **committed** cells of the map state, in the map state's own
encoding: an opaque state's cell ``OpaqueValue(BOOTSTRAP_TXID, value, None)``, a transactional one
``TransactionalValue(BOOTSTRAP_TXID, value)``, a non-transactional one the value itself.
``BOOTSTRAP_TXID`` is 0, before every batch's txid, so the first batch builds on the loaded value.

It is the fenced, crash-safe step of :mod:`weir.checkpoint.bootstrap`, with the map state's store
as the target. The rows of the load live beside the coordinator record (namespace
``$checkpointspout-<topology>`` of ``topology.state.provider``):

1. **refuse** a topology that has committed a batch (a committed txid in its record), a state that
   was loaded with other rows, and a key the map state already holds — each error names it;
2. the staging namespace ``$bootstrap-<topology>-trident-<state>`` is dropped and written anew with
   the rows (JSON key → JSON value; a crash here leaves the map state untouched);
3. marker ``__bootstrap_trident`` (``{"state", "stage": "switching", "rows", "digest"}``) is stored
   with the coordinator's epoch; the cells are written into the map state, chunk by chunk;
4. the staging namespace is dropped and the marker replaced by ``__bootstrapped-trident:<state>``
   (row count and an order-free digest), in one write.

A SIGKILL after step 3's marker leaves it for the next start of the topology
(:func:`finish_trident_bootstrap`, run at every submit before a batch), which writes the cells again
from the complete staging namespace: writing the same cell twice is harmless, so the map state ends
with every row or (before the marker) none. Loading the identical rows again is a no-op; anything
else once the topology has state is refused. The coordinator namespace's writes carry the epoch, so a
newer driver fences a load in flight; the map state's own writes are not fenced (its store keeps no
epoch), which is why the next start rewrites them all from the staging namespace.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from weir._faults import crash_point
from weir.checkpoint.coordinator import CheckpointStore
from weir.errors import CheckpointError, ConfigError, StateError
from weir.state.backend import Backend
from weir.trident.backing.codec import decode_json, encode_json, encode_key
from weir.trident.backing.factory import MapStateFactory
from weir.trident.state import Key, OpaqueValue, StateType, TransactionalValue, as_key

__all__ = [
    "BOOTSTRAP_TXID",
    "MARKER_KEY",
    "TridentLoadResult",
    "finish_trident_bootstrap",
    "load_trident_state",
    "resolve_initial_states",
    "staging_namespace",
]

log = logging.getLogger("weir.trident")

#: the txid the cells of a loaded map state carry (before every batch's: txids start at 1)
BOOTSTRAP_TXID = 0
MARKER_KEY = b"__bootstrap_trident"
PREFIX = "trident:"
#: cells per write into the map state (and rows per staging write)
CHUNK_ROWS = 1_000
_MOD = 1 << 256


def staging_namespace(topology: str, state_id: str) -> str:
    """Where a load stages a Trident state's rows: ``$bootstrap-<topology>-trident-<state>``."""
    return f"$bootstrap-{topology}-trident-{state_id}"


def _done_key(state_id: str) -> bytes:
    return b"__bootstrapped-" + (PREFIX + state_id).encode()


@dataclass(frozen=True)
class TridentLoadResult:
    """What a load did: the state, its rows, or that the identical rows were loaded before."""

    state: str
    rows: int
    already_loaded: bool = False


def state_key(key: Any, where: str) -> Key:
    """A row's key as a map-state key: a list/tuple of grouping values, or one value for a one-field key."""
    if isinstance(key, (list, tuple)):
        return as_key(key)
    if isinstance(key, Mapping):
        msg = f"{where}: a key is a list of grouping values (or one value), got the mapping {key!r:.80}"
        raise ConfigError(msg)
    return as_key([key])


def resolve_initial_states(
    name: str, topology: Any, initial: Mapping[str, Any], factories: Mapping[str, Any], provider: Any
) -> dict[str, tuple[str, MapStateFactory]]:
    """``initial_state`` name → (state id, factory), checked at submit before anything is written.

    Raises
    ------
    ConfigError
        A name that is no state of the topology (the message lists them), a state whose factory is not
        one of weir's map-state stores, a ``MemoryMapState`` (not durable), or a coordinator store that
        is not a weir key-value store.
    """
    from weir.state.factory import KeyValueStateProvider

    states = {s.state_id: s for s in topology.states}
    out: dict[str, tuple[str, MapStateFactory]] = {}
    for given in initial:
        sid = given[len(PREFIX) :] if isinstance(given, str) and given.startswith(PREFIX) else given
        state = states.get(sid)
        if state is None:
            msg = (
                f"topology {name!r}: initial_state names {given!r}, which is no state of this Trident topology "
                f"(its states: {sorted(states)}; name one with TridentState.name(...))"
            )
            raise ConfigError(msg)
        if sid in factories:
            msg = (
                f"topology {name!r}, state {sid!r}: initial_state cannot seed a MemoryMapState, which lives for "
                "one run only; use a durable map state (SqliteMapState, RedisMapState, PostgresMapState, ...)"
            )
            raise ConfigError(msg)
        if not isinstance(state.factory, MapStateFactory):
            msg = (
                f"topology {name!r}, state {sid!r}: initial_state seeds weir's map states "
                f"(weir.trident.backing: SqliteMapState, RedisMapState, PostgresMapState, ...); "
                f"{type(state.factory).__name__} is not one"
            )
            raise ConfigError(msg)
        if sid in {s for s, _ in out.values()}:
            msg = f"topology {name!r}: initial_state names state {sid!r} twice"
            raise ConfigError(msg)
        out[given] = (sid, state.factory)
    if out and not isinstance(provider, KeyValueStateProvider):
        msg = (
            f"topology {name!r}: initial_state needs the coordinator's store (topology.state.provider) to be a "
            f"weir key-value store (sqlite, redis, postgres, hbase), not {type(provider).__name__}"
        )
        raise ConfigError(msg)
    return out


def _marker(backend: Backend, namespace: str) -> dict[str, Any] | None:
    data = backend.get(namespace, MARKER_KEY)
    if data is None:
        return None
    try:
        marker = json.loads(data)
        if not isinstance(marker, dict) or marker.get("stage") != "switching":
            bad = f"unknown marker {marker!r}"
            raise ValueError(bad)
        str(marker["state"])
    except (ValueError, KeyError, TypeError) as exc:
        msg = (
            f"namespace {namespace!r}: the Trident bootstrap marker is corrupt ({exc}); inspect it with "
            "`weir state inspect`"
        )
        raise CheckpointError(msg) from exc
    return dict(marker)


def _cell(state_type: StateType, value: Any) -> Any:
    if state_type is StateType.OPAQUE:
        return OpaqueValue(BOOTSTRAP_TXID, value, None)
    if state_type is StateType.TRANSACTIONAL:
        return TransactionalValue(BOOTSTRAP_TXID, value)
    return value


def _write_cells(backend: Backend, staging: str, factory: MapStateFactory, where: str, topology: str) -> int:
    """Write every staged row into the map state as a committed cell; returns the rows written."""
    return write_staged(
        backend,
        staging,
        factory,
        where,
        lambda v: _cell(factory.state_type, v),
        "trident_bootstrap_between_chunks",
        topology=topology,
    )


def write_staged(
    backend: Backend,
    staging: str,
    factory: MapStateFactory,
    where: str,
    to_cell: Callable[[Any], Any],
    crash_at: str,
    on_put_error: Callable[[Exception], Exception] | None = None,
    *,
    topology: str | None = None,
) -> int:
    """Write a staging namespace's rows (JSON key → JSON value) into ``factory``'s map state, in chunks.

    Shared by the initial-state load and ``weir state convert``: ``to_cell`` makes each stored cell from
    its staged value; ``crash_at`` is the crash point after the first chunk; ``on_put_error`` turns a
    store's refusal into the caller's error; ``topology`` names the crash point's topology (the crash
    barrier of the tests). Returns the rows written.
    """
    backing = factory.store.backing_map(factory.state_type)
    keys: list[Key] = []
    cells: list[Any] = []
    n = 0
    first = True

    def put() -> None:
        try:
            backing.multi_put(keys, cells)
        except Exception as exc:
            if on_put_error is None:
                raise
            raise on_put_error(exc) from exc

    for raw_k, raw_v in backend.scan(staging):
        keys.append(tuple(decode_json(bytes(raw_k), what=f"{where}: staged key")))
        cells.append(to_cell(decode_json(bytes(raw_v), what=f"{where}: staged value")))
        if len(keys) >= CHUNK_ROWS:
            put()
            n += len(keys)
            keys, cells = [], []
            if first:
                crash_point(crash_at, 0, topology=topology)
                first = False
    if keys:
        put()
        n += len(keys)
    return n


def finish_trident_bootstrap(backend: Backend, topology: str, epoch: int, factories: Mapping[str, Any]) -> None:
    """Roll forward a load a crash interrupted after its marker (``factories``: state id → factory)."""
    store = CheckpointStore(backend, topology)
    marker = _marker(backend, store.namespace)
    if marker is None:
        return
    sid = str(marker["state"])
    factory = factories.get(sid)
    if not isinstance(factory, MapStateFactory):
        msg = (
            f"topology {topology!r}: the initial-state load of Trident state {sid!r} was interrupted, and it is "
            f"not among the map states given here ({sorted(factories)}); finish it first: submit the topology that "
            f"has state {sid!r}, or run the same `weir state load --component trident:{sid}` again"
        )
        raise CheckpointError(msg)
    where = f"topology {topology!r}, state {sid!r}: initial_state"
    log.warning("%s: finishing the interrupted load", where)
    staging = staging_namespace(topology, sid)
    _write_cells(backend, staging, factory, where, topology)
    done = json.dumps({k: marker[k] for k in ("rows", "digest") if k in marker}, sort_keys=True).encode()
    backend.drop(staging)
    backend.write_direct(store.namespace, {MARKER_KEY: None, _done_key(sid): done}, epoch)


def load_trident_state(
    backend: Backend,
    topology: str,
    state_id: str,
    factory: MapStateFactory,
    rows: Iterable[tuple[Any, Any]],
    epoch: int,
) -> TridentLoadResult:
    """Load ``(key, value)`` rows into a Trident map state as committed cells (steps 1-4 of the module doc)."""
    store = CheckpointStore(backend, topology)
    where = f"topology {topology!r}, state {state_id!r}: initial_state"
    marker = _marker(backend, store.namespace)
    if marker is not None:
        msg = (
            f"{where}: the interrupted load of state {marker['state']!r} must finish first (submit the topology again)"
        )
        raise StateError(msg)
    rec = store.load()
    staging = staging_namespace(topology, state_id)
    backend.drop(staging)
    buf: dict[bytes, bytes | None] = {}
    keys: dict[bytes, Key] = {}
    digest = 0
    for k, v in rows:
        key = state_key(k, where)
        skey = encode_key(key, where=where).encode()
        sval = encode_json(v, what=f"{where}: value of key {list(key)!r:.80}")
        digest = (digest + int.from_bytes(hashlib.sha256(b"%d:" % len(skey) + skey + sval).digest(), "big")) % _MOD
        if skey in keys:
            msg = f"{where}: key {list(key)!r:.80} is given twice"
            raise StateError(msg)
        keys[skey] = key
        buf[skey] = sval
        if len(buf) >= CHUNK_ROWS:
            backend.write_direct(staging, buf, epoch)
            buf = {}
    if buf:
        backend.write_direct(staging, buf, epoch)
    summary = {"rows": len(keys), "digest": f"{digest:064x}"}
    done_raw = backend.get(store.namespace, _done_key(state_id))
    if done_raw is not None and json.loads(done_raw) == summary:
        backend.drop(staging)
        log.info("%s: the same initial state was loaded before; nothing to do", where)
        return TridentLoadResult(state_id, len(keys), already_loaded=True)
    refusal = None
    if rec is not None and rec.last_committed > 0:
        refusal = (
            f"{where}: the topology already has committed state (txid {rec.last_committed}); initial state is "
            "loaded only into a topology that has never committed a batch. Use a new topology name, or drop its "
            "state first"
        )
    elif done_raw is not None:
        refusal = (
            f"{where}: the state was loaded before with other rows ({json.loads(done_raw).get('rows')} rows); "
            "pass the same initial_state, or none"
        )
    else:
        backing = factory.store.backing_map(factory.state_type)
        order = list(keys.values())
        for i in range(0, len(order), CHUNK_ROWS):
            chunk = order[i : i + CHUNK_ROWS]
            for key, cell in zip(chunk, backing.multi_get(chunk), strict=True):
                if cell is not None:
                    refusal = (
                        f"{where}: the {factory.describe()} already holds key {list(key)!r:.80}; initial state is "
                        "loaded only into keys the map state does not hold. Use a new table or key prefix, or "
                        "drop the map state first"
                    )
                    break
            if refusal:
                break
    if refusal:
        backend.drop(staging)
        raise StateError(refusal)
    crash_point("trident_bootstrap_staged", 0)
    marker_data = {"state": state_id, "stage": "switching", **summary}
    backend.write_direct(store.namespace, {MARKER_KEY: json.dumps(marker_data).encode()}, epoch)
    crash_point("trident_bootstrap_switching", 0)
    _write_cells(backend, staging, factory, where, topology)
    backend.drop(staging)
    done = json.dumps(summary, sort_keys=True).encode()
    backend.write_direct(store.namespace, {MARKER_KEY: None, _done_key(state_id): done}, epoch)
    log.info("%s: loaded %d initial keys into the %s", where, len(keys), factory.describe())
    return TridentLoadResult(state_id, len(keys))
