"""``weir.state.ttl.ms`` for Trident map states: a cell expires a time after the batch that last wrote it.

``conf["weir.state.ttl.ms"] = {"counts": 60_000}`` (state name → ms, or ``"trident:<name>"``) makes
each cell of map state ``counts`` expire 60 s after the batch time of the txid that last wrote it.
The batch time is the one the checkpoint coordinator records with ``PREPARING(n)`` (``batch_ms``,
driven by ``weir.batch.clock``) and reuses when txid *n* is retried or replayed.

**No change to the stored cells.** Every cell already carries the txid that wrote it (an opaque
cell's ``curr_txid``, a transactional cell's ``txid``). The driver keeps a *time log*
(``txid → batch_ms``, row :data:`TIMES_KEY` in the coordinator's namespace, epoch-fenced) and gives
each batch, per state, its *expiry cutoff*: the greatest logged txid ``t < n`` with
``batch_ms(t) + ttl <= batch_ms(n)``. Batch times never go back, so a cell is expired exactly when
its txid is at or below the cutoff. An expired cell reads as absent in the batch's update
(``multi_update`` starts from the aggregator's init, an opaque cell's ``prev`` becomes ``None``) and in
``state_query``/``MapGet``. A replay of txid *n* reads the same log and the same ``batch_ms(n)``, so it
computes the same cutoff: it sees the same expiries, and recovery never brings an expired value back.
An opaque cell replayed at its own txid rebuilds from ``prev``, which was chosen (live) at that same
batch time.

Cells written before the first logged txid (``initial_state`` seeds at txid 0, or cells written before
TTL was turned on) count as written at the first logged batch.

What it does not do (yet): expired cells stay in the store until their key is written again (no
sweep deletes them), and readers outside a batch (``weir.state.read``, ``weir state get/dump``) show
them. A key that an opaque replay *touches* (written by a failed attempt, not by the replay) is
rewritten with its own value and so counts as written at the replayed txid.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from weir.errors import ConfigError, StateError
from weir.state.ttl import TTL_CONF_KEY, ttl_ms_of

__all__ = ["SUPPORTED_STORES", "TIMES_KEY", "cutoffs", "expire_upto", "record_batch_time", "resolve_ttls"]

#: the time log of a Trident topology, in its coordinator's namespace
TIMES_KEY = b"trident-times"
#: the map stores whose TTL is tested (their ``MapStore`` class names)
SUPPORTED_STORES = frozenset({"SqliteMapStore", "RedisMapStore", "PostgresMapStore"})
_PREFIX = "trident:"


def resolve_ttls(name: str, conf: Mapping[str, Any], topology: Any) -> dict[str, int]:
    """``weir.state.ttl.ms`` of a Trident topology → {state id: ms}, checked at submit.

    Raises
    ------
    ConfigError
        Not a mapping, a name that is no state of the topology, a bad TTL, a state that is not an
        opaque or transactional map state of SQLite, Redis or PostgreSQL.
    """
    from weir.trident.backing import MapStateFactory
    from weir.trident.state import StateType

    raw = conf.get(TTL_CONF_KEY)
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        msg = (
            f"topology {name!r}: {TTL_CONF_KEY} of a Trident topology names its map states: give a dict "
            f"{{state name: ms}}, e.g. {{'counts': 60000}} (got {raw!r:.80})"
        )
        raise ConfigError(msg)
    states = {s.state_id: s for s in topology.states}
    out: dict[str, int] = {}
    for given, value in raw.items():
        sid = given[len(_PREFIX) :] if isinstance(given, str) and given.startswith(_PREFIX) else given
        where = f"topology {name!r}, state {sid!r}: {TTL_CONF_KEY}"
        state = states.get(sid)
        if state is None:
            msg = (
                f"topology {name!r}: {TTL_CONF_KEY} names {given!r}, which is no state of this Trident topology "
                f"(its states: {sorted(states)}; name one with TridentState.name(...))"
            )
            raise ConfigError(msg)
        ms = ttl_ms_of(value, where)
        assert ms is not None
        factory = state.factory
        store = type(getattr(factory, "store", None)).__name__
        if not isinstance(factory, MapStateFactory) or store not in SUPPORTED_STORES:
            what = factory.describe() if isinstance(factory, MapStateFactory) else type(factory).__qualname__
            msg = (
                f"{where}: TTL is supported on weir's map states in SQLite, Redis and PostgreSQL "
                f"(SqliteMapState, RedisMapState, PostgresMapState); this state is "
                f"{what}, whose expiry is not tested "
                "(remove the state from the key)"
            )
            raise ConfigError(msg)
        if factory.state_type is StateType.NON_TRANSACTIONAL:
            msg = (
                f"{where}: a non-transactional map state keeps no txid in its cells, so weir cannot tell when a "
                "cell was written; use an opaque or transactional map state"
            )
            raise ConfigError(msg)
        if sid in out:
            msg = f"{where}: the state is named twice"
            raise ConfigError(msg)
        out[sid] = ms
    return out


def _load(raw: bytes | None, namespace: str) -> dict[int, int]:
    if raw is None:
        return {}
    try:
        doc = json.loads(raw)
        return {int(t): int(m) for t, m in doc["times"]}
    except (ValueError, TypeError, KeyError) as exc:
        msg = (
            f"namespace {namespace!r}, key {TIMES_KEY.decode()!r}: not weir's Trident time log ({exc}); "
            "weir wrote it as JSON {'v': 1, 'times': [[txid, ms], ...]}"
        )
        raise StateError(msg) from exc


def expire_upto(times: Mapping[int, int], txid: int, ttl_ms: int) -> int | None:
    """The greatest logged txid before ``txid`` whose cells have expired at ``txid``'s time (None: none)."""
    now = times[txid]
    best: int | None = None
    for t, ms in times.items():
        if t < txid and ms + ttl_ms <= now and (best is None or t > best):
            best = t
    return best


def cutoffs(times: Mapping[int, int], txid: int, ttls: Mapping[str, int]) -> dict[str, int | None]:
    """Per state: :func:`expire_upto` at ``txid``."""
    return {sid: expire_upto(times, txid, ms) for sid, ms in ttls.items()}


def record_batch_time(
    provider: Any, namespace: str, topology: str, txid: int, epoch: int | None, ttls: Mapping[str, int]
) -> dict[str, int | None]:
    """Log batch ``txid``'s time (from the coordinator record) and return each state's cutoff.

    The log keeps what later batches can still need: entries from the smallest cutoff on.
    """
    from weir._faults import crash_point
    from weir.state.ttl import batch_time

    backend = provider.backend
    rec_txid, batch_ms = batch_time(backend, topology)
    if rec_txid != txid:
        msg = (
            f"topology {topology!r}, txid {txid}: the coordinator record holds the time of txid {rec_txid}, "
            f"not of this batch, so {TTL_CONF_KEY} cannot decide expiries; this is a weir bug, please report it"
        )
        raise StateError(msg)
    times = {t: m for t, m in _load(backend.get(namespace, TIMES_KEY), namespace).items() if t < txid}
    times[txid] = batch_ms
    cuts = cutoffs(times, txid, ttls)
    if cuts and all(c is not None for c in cuts.values()):
        low = min(c for c in cuts.values() if c is not None)
        times = {t: m for t, m in times.items() if t >= low}
    data = json.dumps({"v": 1, "times": sorted([t, m] for t, m in times.items())}, separators=(",", ":"))
    rows = {TIMES_KEY: data.encode()}
    if epoch is None:
        backend.write_direct(namespace, rows, None)
    else:  # exactly the coordinator's epoch, as the journal
        backend.write_owned(namespace, rows, epoch)
    crash_point("trident_ttl_time_logged", txid)
    return cuts
