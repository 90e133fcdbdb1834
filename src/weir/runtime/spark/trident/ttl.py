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

**The sweep.** The commit of each batch (:class:`TtlSweep`, run by the coordinator's commit phase
with ``COMMITTING(n)`` stored, again when recovery rolls ``n`` forward) deletes the cells expired at
*n* from the store: each delete is conditional on the cell's txid still being at or below the cutoff
(a cell rewritten since is never deleted), so a replayed or recovered commit deletes the same set.
Cells are found by txid without a scan (SQLite: an index on the txid inside each cell; PostgreSQL: an
index on the ``txid`` column; Redis: a sorted set kept beside the cells), at most
``weir.state.ttl.sweep.max`` per state and commit (default 10,000); what is left is swept by the
following commits and reads as absent meanwhile. The time log also records each state's TTL and
map, so readers outside a batch (``weir.state.read``, ``weir state get/dump``) hide the cells expired
at the last committed txid (:func:`weir.trident.backing.expiry.reader_cutoff`).

A key that an opaque replay *touches* (written by a failed attempt, not by the replay) is
rewritten with its own value and so counts as written at the replayed txid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from weir.errors import ConfigError, StateError
from weir.state.ttl import TTL_CONF_KEY, ttl_ms_of
from weir.trident.backing.expiry import TIMES_KEY, TimeLog, expire_upto, load_time_log

__all__ = [
    "SUPPORTED_STORES",
    "SWEEP_MAX_KEY",
    "TIMES_KEY",
    "TtlSweep",
    "cutoffs",
    "expire_upto",
    "record_batch_time",
    "resolve_ttls",
    "sweep_max",
]

#: the map stores whose TTL is tested (their ``MapStore`` class names)
SUPPORTED_STORES = frozenset({"SqliteMapStore", "RedisMapStore", "PostgresMapStore"})
#: cells the commit of one batch deletes per state at most (the rest: by later commits)
SWEEP_MAX_KEY = "weir.state.ttl.sweep.max"
SWEEP_MAX_DEFAULT = 10_000
#: cells per delete (one store transaction or round trip each)
SWEEP_CHUNK = 1000
_PREFIX = "trident:"


def sweep_max(name: str, conf: Mapping[str, Any]) -> int:
    """``weir.state.ttl.sweep.max``, checked at submit (a whole number ≥ 1)."""
    raw = conf.get(SWEEP_MAX_KEY, SWEEP_MAX_DEFAULT)
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw.strip())
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 1:
        msg = (
            f"topology {name!r}: {SWEEP_MAX_KEY} is how many expired cells one commit deletes per state; "
            f"give a whole number >= 1 (default {SWEEP_MAX_DEFAULT}), got {raw!r}"
        )
        raise ConfigError(msg)
    return raw


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


def cutoffs(times: Mapping[int, int], txid: int, ttls: Mapping[str, int]) -> dict[str, int | None]:
    """Per state: :func:`expire_upto` at ``txid``."""
    return {sid: expire_upto(times, txid, ms) for sid, ms in ttls.items()}


def record_batch_time(
    provider: Any,
    namespace: str,
    topology: str,
    txid: int,
    epoch: int | None,
    ttls: Mapping[str, int],
    maps: Mapping[str, str | None] | None = None,
) -> dict[str, int | None]:
    """Log batch ``txid``'s time (from the coordinator record) and return each state's cutoff.

    The log keeps what later batches can still need: entries from the smallest cutoff on; it also
    records each state's TTL and map (``maps``: state id → ``trident:<name>``) for readers.
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
    old = load_time_log(backend.get(namespace, TIMES_KEY), namespace)
    times = {t: m for t, m in old.times.items() if t < txid}
    times[txid] = batch_ms
    cuts = cutoffs(times, txid, ttls)
    if cuts and all(c is not None for c in cuts.values()):
        low = min(c for c in cuts.values() if c is not None)
        times = {t: m for t, m in times.items() if t >= low}
    states = {sid: (ms, (maps or {}).get(sid)) for sid, ms in ttls.items()}
    rows = {TIMES_KEY: TimeLog(times, states).encode()}
    if epoch is None:
        backend.write_direct(namespace, rows, None)
    else:  # exactly the coordinator's epoch, as the journal
        backend.write_owned(namespace, rows, epoch)
    crash_point("trident_ttl_time_logged", txid)
    return cuts


@dataclass(frozen=True)
class _Swept:
    state_id: str
    store: Any  # weir.trident.backing.MapStore
    state_type: Any  # weir.trident.state.StateType


@dataclass(frozen=True)
class TtlSweep:
    """The commit-time sweep of a topology's expiring map states (see the module docstring).

    ``commit(txid)`` reads the time log, computes each state's cutoff at ``txid`` exactly as the
    batch did, and deletes up to ``limit`` expired cells per state, :data:`SWEEP_CHUNK` at a time.
    """

    topology: str
    provider: Any
    namespace: str
    ttls: Mapping[str, int]
    states: tuple[_Swept, ...]
    limit: int = SWEEP_MAX_DEFAULT
    #: per state: (txid, cells deleted, more left) of the last commit (for ``status`` and tests)
    last: dict[str, tuple[int, int, bool]] = field(default_factory=dict, compare=False)

    @classmethod
    def of(
        cls,
        topology: str,
        conf: Mapping[str, Any],
        provider: Any,
        ttls: Mapping[str, int],
        factories: Mapping[str, Any],
    ) -> TtlSweep:
        """The sweep of ``ttls``' states, whose factories (with the index kept) are ``factories``."""
        from weir.checkpoint.coordinator import checkpoint_namespace

        states = tuple(_Swept(sid, factories[sid].store, factories[sid].state_type) for sid in sorted(ttls))
        return cls(topology, provider, checkpoint_namespace(topology), dict(ttls), states, sweep_max(topology, conf))

    @property
    def maps(self) -> dict[str, str | None]:
        """State id → ``trident:<name>`` of its map state (recorded in the time log for readers)."""
        out: dict[str, str | None] = {}
        for s in self.states:
            name = s.store.catalog_name()
            out[s.state_id] = None if name is None else _PREFIX + name
        return out

    def prepare(self) -> None:
        """Create the stores' txid indexes (at submit: a store that cannot is a clear error now)."""
        for s in self.states:
            try:
                s.store.prepare_expiry(s.state_type)
            except StateError as exc:
                msg = f"topology {self.topology!r}, state {s.state_id!r}: {TTL_CONF_KEY}: {exc}"
                raise ConfigError(msg) from exc

    def commit(self, txid: int) -> None:
        """Delete the cells expired at ``txid`` (bounded per state); idempotent, so recovery may run it again."""
        from weir._faults import crash_point

        backend = self.provider.backend
        log = load_time_log(backend.get(self.namespace, TIMES_KEY), self.namespace)
        if txid not in log.times:  # the batch ran before TTL was on (or logged nothing): nothing decided
            return
        for s in self.states:
            upto = expire_upto(log.times, txid, self.ttls[s.state_id])
            deleted, more = 0, True
            while more and deleted < self.limit:
                chunk = min(SWEEP_CHUNK, self.limit - deleted)
                try:
                    n, more = s.store.delete_expired(s.state_type, -1 if upto is None else upto, chunk, txid=txid)
                except StateError as exc:
                    msg = f"topology {self.topology!r}, state {s.state_id!r}, txid {txid}: {exc}"
                    raise StateError(msg) from exc
                deleted += n
                crash_point("trident_ttl_during_sweep", txid, topology=self.topology)
                if upto is None:
                    break
            self.last[s.state_id] = (txid, deleted, more)
