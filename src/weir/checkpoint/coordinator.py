"""The checkpoint coordinator: Storm's ``CheckpointSpout`` state machine, once per micro-batch.

The record ``CheckPointState(txid, phase)`` lives under key ``__state`` in namespace
``$checkpointspout-<topology>`` of the configured store, with weir's additions: the fencing
``epoch``, the Spark query id and ``txid_base``, and the parallelism of each stateful component.

Per batch with txid *n* (:meth:`Coordinator.run_batch`):

1. First batch after a start — **recover**: ``PREPARING(n)`` → roll back every namespace and store
   ``COMMITTED(n-1)``; ``COMMITTING(n)`` → commit every namespace and store ``COMMITTED(n)`` (a
   COMMITTING transaction is always rolled forward); ``COMMITTED`` → nothing.
2. *n* ≤ the last committed txid: a replay of a committed transaction — skip it.
3. Store ``PREPARING(n)``; run the batch's job (each stateful task calls ``pre_prepare(n)`` then
   ``prepare_commit(n)`` after its last tuple).
4. Every task succeeded: store ``COMMITTING(n)``; per namespace ``pre_commit(n)`` then ``commit(n)``;
   store ``COMMITTED(n)``.
5. A task failed: ``pre_rollback()`` then ``rollback()`` per namespace, store ``COMMITTED(n-1)``, and
   retry up to ``weir.batch.max.retries`` times; then stop with a :class:`TopologyError` naming the
   component, task, txid and the original traceback.

Every store of the record is fenced by the epoch taken at :meth:`Coordinator.start`: a second driver
on the same topology makes the first fail with :class:`FencedError` and commit nothing. The fence is
exact (:meth:`~weir.state.backend.Backend.write_owned`): a store that no longer holds this driver's
epoch — emptied, restarted without persistence, restored from an older snapshot — makes the write fail
with :class:`StateLossError` instead of being read as "epoch 0, go on", and the run stops with nothing
further written. Each batch also reads the record back first, so a store rolled back under the same
epoch is noticed before the batch writes anything.

The record also keeps the end offsets of every spout for the transaction it names (``offsets``,
written with ``COMMITTING(n)`` and ``COMMITTED(n)``), so that a start without Spark's checkpoint can
resume the sources exactly where the store's state is (see :mod:`weir.runtime.spark.statecheck`).

With a :class:`~weir.checkpoint.history.CheckpointHistory`, every store of the record also stores
the history entry of the transaction (or recovery) it belongs to, in the same write.
"""

from __future__ import annotations

import enum
import json
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from weir._faults import crash_point
from weir.checkpoint.history import CheckpointHistory, HistoryEntry
from weir.errors import CheckpointError, ConfigError, FencedError, StateError, StateLossError, TopologyError
from weir.state.backend import Backend

if TYPE_CHECKING:
    from weir.checkpoint.rescale import Rescaler

__all__ = [
    "CheckPointState",
    "CheckpointStore",
    "Coordinator",
    "JobOutcome",
    "Participants",
    "batch_failed_error",
    "CheckpointPhase",
    "TaskFailure",
    "checkpoint_namespace",
    "retry_batch",
]

log = logging.getLogger("weir.checkpoint")
RECORD_KEY = b"__state"


def checkpoint_namespace(topology: str) -> str:
    """The coordinator's namespace: ``$checkpointspout-<topology>``."""
    return f"$checkpointspout-{topology}"


class CheckpointPhase(str, enum.Enum):
    """CheckpointPhase of the last transaction (Storm's ``CheckPointState.State``)."""

    COMMITTED = "COMMITTED"
    PREPARING = "PREPARING"
    COMMITTING = "COMMITTING"


@dataclass(frozen=True)
class CheckPointState:
    """The coordinator record."""

    txid: int = 0
    phase: CheckpointPhase = CheckpointPhase.COMMITTED
    epoch: int = 0
    query_id: str | None = None
    txid_base: int | None = None
    parallelism: Mapping[str, int] = field(default_factory=dict)
    updated_ms: int = 0
    #: the end offset of each spout (component id → its offset JSON object) of the transaction this
    #: record names (for ``PREPARING(n)``: of ``n - 1``); None when not known (Spark-native sources)
    offsets: Mapping[str, Any] | None = None
    #: the time of transaction ``batch_txid`` (ms), taken when it is first prepared and reused when it is
    #: retried or replayed after a crash: state TTL decides expiry from it (see :mod:`weir.state.ttl`)
    batch_ms: int | None = None
    batch_txid: int | None = None

    def to_bytes(self) -> bytes:
        """JSON, readable by ``weir state inspect`` and any other tool."""
        return json.dumps(
            {
                "txid": self.txid,
                "phase": self.phase.value,
                "epoch": self.epoch,
                "query_id": self.query_id,
                "txid_base": self.txid_base,
                "parallelism": dict(self.parallelism),
                "updated_ms": self.updated_ms,
                "offsets": None if self.offsets is None else dict(self.offsets),
                "batch_ms": self.batch_ms,
                "batch_txid": self.batch_txid,
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes, namespace: str) -> CheckPointState:
        """Parse a stored record; a corrupt one raises :class:`CheckpointError`."""
        try:
            d = json.loads(data)
            return cls(
                txid=int(d["txid"]),
                phase=CheckpointPhase(d["phase"]),
                epoch=int(d.get("epoch", 0)),
                query_id=d.get("query_id"),
                txid_base=None if d.get("txid_base") is None else int(d["txid_base"]),
                parallelism={str(k): int(v) for k, v in d.get("parallelism", {}).items()},
                updated_ms=int(d.get("updated_ms", 0)),
                offsets=_offsets(d.get("offsets")),
                batch_ms=None if d.get("batch_ms") is None else int(d["batch_ms"]),
                batch_txid=None if d.get("batch_txid") is None else int(d["batch_txid"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            msg = (
                f"namespace {namespace!r}: the coordinator record is corrupt ({exc}); inspect it with "
                "`weir state inspect` and repair or delete it"
            )
            raise CheckpointError(msg) from exc

    @property
    def last_committed(self) -> int:
        """The txid of the last committed transaction (n-1 while n is PREPARING)."""
        return self.txid - 1 if self.phase is CheckpointPhase.PREPARING else self.txid


def _offsets(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not all(isinstance(k, str) for k in raw):
        msg = f"offsets must be a JSON object keyed by spout id, got {type(raw).__name__}"
        raise TypeError(msg)
    return dict(raw)


class CheckpointStore:
    """Loads and stores the coordinator record, fenced by epoch, in any :class:`Backend`."""

    def __init__(self, backend: Backend, topology: str) -> None:
        self.backend = backend
        self.topology = topology
        self.namespace = checkpoint_namespace(topology)

    def acquire_epoch(self) -> int:
        """Take a new epoch: every older driver is fenced from now on."""
        return self.backend.acquire_epoch(self.namespace)

    def load(self) -> CheckPointState | None:
        """The stored record, or None for a topology that never ran."""
        data = self.backend.get(self.namespace, RECORD_KEY)
        return None if data is None else CheckPointState.from_bytes(data, self.namespace)

    def save(self, rec: CheckPointState, epoch: int, extra: Mapping[bytes, bytes | None] | None = None) -> None:
        """Store ``rec`` (and the ``extra`` rows, in the same write) while the store holds exactly ``epoch``.

        :class:`FencedError` when a newer epoch is stored; :class:`StateLossError` when an older or
        no epoch is (the store lost what it held; see :meth:`Backend.write_owned`).
        """
        rec = replace(rec, epoch=epoch, updated_ms=int(time.time() * 1000))
        self.backend.write_owned(self.namespace, {**(extra or {}), RECORD_KEY: rec.to_bytes()}, epoch)


@dataclass(frozen=True)
class TaskFailure:
    """A task that failed, with where and why."""

    component: str
    task: int
    error: str
    traceback: str = ""


@dataclass
class JobOutcome:
    """What a batch's job reports back to the coordinator."""

    failures: list[TaskFailure] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether every task succeeded."""
        return not self.failures


def batch_failed_error(
    topology: str, txid: int, failures: list[TaskFailure], max_retries: int, *, rolled_back: bool = True
) -> TopologyError:
    """The one error of a batch that failed every attempt, naming the first failed task (and the others' count)."""
    first = failures[0]
    others = "" if len(failures) == 1 else f" ({len(failures) - 1} other task(s) failed too)"
    msg = (
        f"topology {topology!r}: component {first.component!r} task {first.task} failed txid {txid} "
        f"{max_retries + 1} times (weir.batch.max.retries={max_retries}): {first.error}{others}. "
        + ("State was rolled back to the last committed txid; " if rolled_back else "")
        + "fix the error, or set weir.deadletter to route failing tuples aside, then restart."
    )
    return TopologyError(
        msg,
        topology=topology,
        component=first.component,
        task=first.task,
        txid=txid,
        remote_traceback=first.traceback or None,
    )


class Participants(ABC):
    """The stateful namespaces of a topology, committed and rolled back by the coordinator.

    :meth:`commit_all` and :meth:`rollback_all` are required; :meth:`namespaces` and
    :meth:`after_commit` are optional hooks whose defaults do nothing.
    """

    @abstractmethod
    def commit_all(self, txid: int, epoch: int, after_first: Callable[[], None] | None = None) -> None:
        """``pre_commit(txid)`` then ``commit(txid)`` for every namespace."""

    @abstractmethod
    def rollback_all(self, epoch: int, after_first: Callable[[], None] | None = None) -> None:
        """``pre_rollback()`` then ``rollback()`` for every namespace."""

    def namespaces(self) -> list[str]:
        """Every namespace these participants checkpoint (shown by ``weir ui``, sized by metrics); none by default."""
        return []

    def after_commit(self, txid: int) -> None:  # noqa: B027 - optional hook
        """Called once ``COMMITTED(txid)`` is stored; the default does nothing."""

    def claim(self, epoch: int) -> None:  # noqa: B027 - optional hook
        """Stamp ``epoch`` on every namespace whose tasks prepare with exactly it (at each start); none by default."""


@dataclass
class BatchReport:
    """What happened to one batch."""

    txid: int
    skipped: bool = False
    attempts: int = 0
    commit_ms: float = 0.0
    job_ms: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)


def retry_batch(
    topology: str,
    txid: int,
    max_retries: int,
    report: BatchReport,
    job: Callable[[int], JobOutcome],
    *,
    before: Callable[[int], None] | None = None,
    failed: Callable[[int, JobOutcome], None] | None = None,
    rolled_back: bool = True,
) -> JobOutcome:
    """Run a batch's ``job(attempt)`` until it succeeds, at most ``max_retries + 1`` times: the one retry loop.

    Every path that runs a batch goes through here — :meth:`Coordinator.run_batch` (which stores
    ``PREPARING`` in ``before`` and rolls back in ``failed``) and a run without a coordinator (a
    topology without state, which has nothing to store or roll back). ``report`` gets the attempts,
    the last attempt's job time and stats.

    Returns
    -------
    JobOutcome
        The outcome of the attempt that succeeded.

    Raises
    ------
    TopologyError
        :func:`batch_failed_error` once every attempt failed (``rolled_back``: whether its text says
        that state was rolled back).
    """
    failures: list[TaskFailure] = []
    for attempt in range(max_retries + 1):
        report.attempts = attempt + 1
        if before is not None:
            before(attempt)
        t0 = time.perf_counter()
        outcome = job(attempt)
        report.job_ms = (time.perf_counter() - t0) * 1000
        report.stats = outcome.stats
        if outcome.ok:
            return outcome
        failures = outcome.failures
        first = failures[0]
        log.warning(
            "topology %s: txid %d attempt %d failed in component %r task %d: %s",
            topology,
            txid,
            attempt + 1,
            first.component,
            first.task,
            first.error,
        )
        if failed is not None:
            failed(attempt, outcome)
    raise batch_failed_error(topology, txid, failures, max_retries, rolled_back=rolled_back)


class Coordinator:
    """Drives prepare/commit/rollback for one topology, one micro-batch at a time (driver side)."""

    def __init__(
        self,
        topology: str,
        store: CheckpointStore,
        participants: Participants,
        parallelism: Mapping[str, int],
        *,
        max_retries: int = 3,
        history: CheckpointHistory | None = None,
        shape: Mapping[str, Any] | None = None,
        rescaler: Rescaler | None = None,
        clock: Callable[[int], int] | None = None,
    ) -> None:
        self.topology = topology
        #: the time of a new transaction, in ms, given its txid (``weir.batch.clock``; default the wall clock)
        self.clock: Callable[[int], int] = clock or (lambda _txid: int(time.time() * 1000))
        #: re-partitions a stateful component whose parallelism changed (None: refuse the change)
        self.rescaler = rescaler
        self.history = history
        self.shape = shape
        #: called with every history entry right after it is stored (metrics, live displays)
        self.observers: list[Callable[[HistoryEntry], None]] = []
        self.store = store
        self.participants = participants
        self.parallelism = dict(parallelism)
        self.max_retries = max_retries
        self.epoch: int | None = None
        self.record: CheckPointState | None = None
        self._recovered = False
        #: where the spouts start when Spark's checkpoint is missing (set by the start-up check)
        self.resume_offsets: dict[str, Any] | None = None
        #: ``weir.accept.state.loss``: the start-up check logs a mismatch instead of refusing
        self.accept_state_loss = False

    # ---- start ---------------------------------------------------------------------------
    def check_parallelism(self) -> None:
        """Refuse a stateful component whose parallelism differs from the stored one (submit time)."""
        rec = self.store.load()
        if rec is None:
            return
        if self.rescaler is not None:  # refuses only what it cannot re-partition
            self.rescaler.check(rec, self.parallelism)
            return
        for comp, stored in rec.parallelism.items():
            now = self.parallelism.get(comp)
            if now is not None and now != stored:
                msg = (
                    f"topology {self.topology!r}: stateful component {comp!r} has parallelism {now}, but its "
                    f"state was written by {stored} tasks (namespaces {self.topology}-{comp}-0..{stored - 1}). "
                    f"Run it with parallelism {stored}, or re-partition the state first (`weir state rescale "
                    f"--topology {self.topology} --component {comp} --to {now}`), or use a new topology name"
                )
                raise ConfigError(msg)

    def start(self) -> int:
        """Take a new epoch (fencing any older driver) and load the record. Returns the epoch.

        A restart of this coordinator (a supervised restart) also compares the store with what this
        driver last wrote: an epoch that did not grow, or a record that is gone or older, is a
        :class:`StateLossError` — the store lost data while the topology ran.
        """
        self.check_parallelism()
        before, before_epoch = self.record, self.epoch
        self.epoch = self.store.acquire_epoch()
        loaded = self.store.load()
        if before is not None and before_epoch is not None:
            self._check_not_lost(before, before_epoch, loaded)
        if self.rescaler is not None:  # re-partition (or finish a crashed re-partition) before anything runs
            self.rescaler.run(self.store, self.epoch, self.parallelism)
            loaded = self.store.load()
        rec = loaded or CheckPointState(parallelism=self.parallelism)
        self.record = replace(rec, parallelism={**rec.parallelism, **self.parallelism})
        self._recovered = False
        # the tasks' prepares require exactly this epoch: a store that loses it refuses them
        self.participants.claim(self.epoch)
        log.info("topology %s: coordinator epoch %d, record %s", self.topology, self.epoch, rec)
        return self.epoch

    def _check_not_lost(self, before: CheckPointState, before_epoch: int, now: CheckPointState | None) -> None:
        """Raise :class:`StateLossError` when the store holds less than this driver wrote (epoch, record)."""
        assert self.epoch is not None
        found = None
        if self.epoch <= before_epoch:
            found = f"a new epoch {self.epoch}, not above this driver's last epoch {before_epoch}"
        elif now is None:
            found = "no coordinator record"
        elif now.last_committed < before.last_committed:
            found = f"committed txid {now.last_committed}"
        if found is not None:
            msg = f"it now holds {found}"
            raise self._lost(msg, before.last_committed, before_epoch)

    def _lost(self, what: str, txid: int, epoch: int, cause: BaseException | None = None) -> StateLossError:
        ns = self.store.namespace
        msg = (
            f"topology {self.topology!r}: the store ({self.store.backend.describe()}, namespace {ns!r}) lost "
            f"committed state while the topology ran: this driver last stored txid {txid} at epoch {epoch}, but "
            f"{what}" + (f" ({cause})" if cause is not None else "") + ". The run stops and writes nothing more. "
            "Ways on: restore the store from a backup and start again; or start with `weir run "
            "--accept-state-loss` (weir.accept.state.loss = true) to continue with what is left; or reset "
            "the topology (`weir state drop` its namespaces, move Spark's checkpoint aside) to recount from "
            "the sources' start"
        )
        return StateLossError(msg)

    def verify_record(self) -> None:
        """Read the record back: :class:`StateLossError` when it is not what this driver last stored."""
        rec = self._rec()
        assert self.epoch is not None
        if rec.query_id is None and rec.txid == 0:
            return  # nothing stored yet
        now = self.store.load()
        if now is None:
            msg = "the coordinator record is gone"
            raise self._lost(msg, rec.txid, self.epoch)
        if now.epoch != self.epoch or now.txid != rec.txid or now.phase is not rec.phase:
            found = f"it now holds txid {now.txid} {now.phase.value} at epoch {now.epoch}"
            if now.epoch > self.epoch:
                msg = f"topology {self.topology!r}: a newer driver (epoch {now.epoch}) took over; this one stops"
                raise FencedError(msg)
            raise self._lost(found, rec.txid, self.epoch)

    def _save(self, rec: CheckPointState, entry: HistoryEntry | None = None, shape: bool = False) -> None:
        assert self.epoch is not None
        extra: dict[bytes, bytes | None] = {}
        if self.history is not None:
            extra.update(self.history.rows(entry))
            if shape and self.shape is not None:
                extra.update(self.history.shape_row(self.shape))
        try:
            if extra:
                self.store.save(rec, self.epoch, extra)
            else:
                self.store.save(rec, self.epoch)
        except FencedError as exc:
            msg = (
                f"topology {self.topology!r}: another driver (a newer epoch) has taken over, or an admin wrote "
                f"with `weir state put/delete --force`; this driver (epoch {self.epoch}) stops and commits "
                f"nothing. ({exc})"
            )
            raise FencedError(msg) from exc
        except StateLossError as exc:
            prior = self.record if self.record is not None else rec
            what = f"storing txid {rec.txid} {rec.phase.value} was refused"
            raise self._lost(what, prior.txid, self.epoch, exc) from exc
        self.record = replace(rec, epoch=self.epoch)
        if entry is not None:
            for observer in self.observers:
                observer(entry)

    def _entry(self, kind: str, txid: int, status: str, **kw: Any) -> HistoryEntry | None:
        if self.history is None:
            return None
        return self.history.begin(kind, txid, status, epoch=self.epoch, **kw)

    def accept_loss(self, query_id: str, last_batch: int, floor: int = 0) -> None:
        """Continue after an accepted loss of store data: Spark batch ``last_batch`` counts as committed.

        The record is re-based on Spark query ``query_id`` so that the next batch gets the next txid
        and the same loss is not reported again (``weir.accept.state.loss``); ``floor`` is the highest
        txid a namespace of the topology still holds, which new txids must follow. A transaction
        still in flight (``PREPARING``/``COMMITTING``) is left to :meth:`recover`.
        """
        rec = self._rec()
        if rec.phase is not CheckpointPhase.COMMITTED:
            return
        if rec.query_id == query_id and rec.txid_base is not None and rec.txid_base + last_batch >= floor:
            base = rec.txid_base
        else:
            base = max(rec.last_committed, floor) - last_batch
        self._save(replace(rec, query_id=query_id, txid_base=base, txid=max(rec.txid, base + last_batch)))

    # ---- recovery ------------------------------------------------------------------------
    def recover(self) -> None:
        """Finish or undo the transaction a previous driver left (step 1)."""
        rec = self._rec()
        assert self.epoch is not None
        if rec.phase is CheckpointPhase.PREPARING:
            log.warning("topology %s: recovery rolls back PREPARING txid %d", self.topology, rec.txid)
            entry = self._entry("recovery", rec.txid, "recovering", note=f"found txid {rec.txid} PREPARING")
            self.participants.rollback_all(
                self.epoch, lambda: crash_point("during_recovery", rec.txid, topology=self.topology)
            )
            if entry is not None:
                entry.mark("ROLLED_BACK", "rolled back")
            self._save(replace(rec, txid=rec.txid - 1, phase=CheckpointPhase.COMMITTED), entry, shape=True)
        elif rec.phase is CheckpointPhase.COMMITTING:
            log.warning("topology %s: recovery rolls forward COMMITTING txid %d", self.topology, rec.txid)
            entry = self._entry("recovery", rec.txid, "recovering", note=f"found txid {rec.txid} COMMITTING")
            self.participants.commit_all(
                rec.txid, self.epoch, lambda: crash_point("during_recovery", rec.txid, topology=self.topology)
            )
            if entry is not None:
                entry.mark("COMMITTED", "rolled forward")
            self._save(replace(rec, phase=CheckpointPhase.COMMITTED), entry, shape=True)
        else:
            # nothing in flight (a stale prepared set of a fenced driver's late task is replaced by
            # the next prepare of that namespace); store the record to claim it with our epoch
            self._save(rec, shape=True)
        self._recovered = True

    def _rec(self) -> CheckPointState:
        if self.record is None or self.epoch is None:
            msg = f"topology {self.topology!r}: coordinator used before start()"
            raise CheckpointError(msg)
        return self.record

    # ---- txids ---------------------------------------------------------------------------
    def txid_for(self, query_id: str, batch_id: int) -> int:
        """``txid_base + batch_id``; a new Spark query id gets a base after the last committed txid."""
        rec = self._rec()
        if rec.query_id != query_id or rec.txid_base is None:
            base = rec.last_committed + 1 - batch_id
            log.info(
                "topology %s: Spark query %s starts at batch %d = txid %d",
                self.topology,
                query_id,
                batch_id,
                base + batch_id,
            )
            self._save(replace(rec, query_id=query_id, txid_base=base))
            rec = self._rec()
        assert rec.txid_base is not None
        return rec.txid_base + batch_id

    # ---- one batch -----------------------------------------------------------------------
    def run_batch(
        self,
        query_id: str,
        batch_id: int,
        job: Callable[[int, int, int], JobOutcome],
        *,
        rebase: int = 0,
        offsets: Mapping[str, Any] | None = None,
    ) -> BatchReport:
        """Run Spark batch ``batch_id`` as a transaction. ``job(txid, epoch, attempt)`` runs the tasks.

        ``rebase``: a transaction of the driver's own that Spark does not know of (the final mark of a
        finite run, batch id = Spark's next one): the record that makes it COMMITTING also moves
        ``txid_base`` on by ``rebase``, so Spark's next batch gets the txid after it.
        ``offsets``: the spouts' end offsets of this batch, stored with ``COMMITTING`` and
        ``COMMITTED`` (None keeps the record's).
        """
        if not self._recovered:
            self.recover()
        else:
            self.verify_record()
        txid = self.txid_for(query_id, batch_id)
        rec = self._rec()
        report = BatchReport(txid=txid)
        if txid <= rec.last_committed:
            log.info("topology %s: txid %d already committed, skipping replayed batch", self.topology, txid)
            report.skipped = True
            return report
        assert self.epoch is not None
        if rec.batch_txid != txid or rec.batch_ms is None:  # a new transaction: its time, never going back
            rec = replace(rec, batch_txid=txid, batch_ms=max(int(self.clock(txid)), rec.batch_ms or 0))
        entry = self._entry("batch", txid, "preparing", batch_id=batch_id)
        epoch = self.epoch

        def prepare(attempt: int) -> None:
            if entry is not None:
                entry.attempts = attempt + 1
                entry.mark("PREPARING", "preparing")
            self._save(replace(rec, txid=txid, phase=CheckpointPhase.PREPARING), entry)
            crash_point("after_preparing", txid, topology=self.topology)

        def roll_back(attempt: int, outcome: JobOutcome) -> None:
            nonlocal rec
            if entry is not None:
                entry.job_ms = round(report.job_ms, 3)
                entry.add_stats(outcome.stats)
            self.participants.rollback_all(epoch)
            if entry is not None:
                entry.add_failures(outcome.failures, attempt + 1)
                entry.mark("ROLLED_BACK", "failed" if attempt == self.max_retries else "retrying")
            self._save(replace(rec, txid=txid - 1, phase=CheckpointPhase.COMMITTED), entry)
            rec = self._rec()

        outcome = retry_batch(
            self.topology,
            txid,
            self.max_retries,
            report,
            lambda attempt: job(txid, epoch, attempt),
            before=prepare,
            failed=roll_back,
        )
        if entry is not None:
            entry.job_ms = round(report.job_ms, 3)
            entry.add_stats(outcome.stats)
        crash_point("after_prepared", txid, topology=self.topology)
        t1 = time.perf_counter()
        if entry is not None:
            entry.mark("COMMITTING", "committing")
        if rebase and rec.txid_base is not None:
            rec = replace(rec, txid_base=rec.txid_base + rebase)
        if offsets is not None:
            rec = replace(rec, offsets=dict(offsets))
        self._save(replace(rec, txid=txid, phase=CheckpointPhase.COMMITTING), entry)
        crash_point("after_committing", txid, topology=self.topology)
        try:
            self.participants.commit_all(
                txid, epoch, lambda: crash_point("between_commits", txid, topology=self.topology)
            )
        except StateError as exc:
            if not isinstance(exc, (FencedError, StateLossError)):
                self.verify_record()  # a prepared set gone with the rest of the store: name the loss
            raise
        if entry is not None:
            entry.commit_ms = round((time.perf_counter() - t1) * 1000, 3)
            entry.mark("COMMITTED", "committed")
        self._save(replace(rec, txid=txid, phase=CheckpointPhase.COMMITTED), entry)
        report.commit_ms = (time.perf_counter() - t1) * 1000
        crash_point("after_committed", txid, topology=self.topology)
        self.participants.after_commit(txid)
        return report
