"""Storm spouts (``next_tuple`` / ``ack`` / ``fail``) on the replaying engine: driver-side tasks and a spout log.

A Storm spout has no offsets Spark could replay, so weir gives it some: every batch, what each spout
task emitted is written to the **spout log** in the topology's store (namespace
``$spoutlog-<topology>``, one key per spout task per txid, one write per batch for all spout tasks)
*before* any bolt sees it, and the batch reads its tuples from there. A retried attempt, or the
same batch after a crash and restart, replays exactly those tuples.

The protocol, per batch with txid *n* (inside the coordinator's attempt, see
:mod:`weir.checkpoint.coordinator`):

1. For each spout task: if the log holds its entry for *n* (an earlier attempt, or a driver that
   died), replay it; otherwise call ``next_tuple`` until it emits nothing, the batch holds
   ``weir.spout.batch.max.tuples`` tuples, ``topology.max.spout.pending`` tuples with message ids
   are in flight, or a checkpoint interval has passed. A tuple whose message id is already in the
   log (the source redelivered it) is not emitted again. Then write the entry (crash point
   ``after_spout_log``). With ``weir.spout.poll.ahead`` (the default) the polling of batch *n* began
   while batch *n - 1*'s job ran, on the spout task's own thread (:mod:`.spoutthread`): batch *n*
   starts from that buffer and tops it up; tuples polled ahead are not logged until batch *n* writes
   its entry (a crash before leaves them un-acked at the source, which redelivers them).
2. Run the batch's job over those tuples; the coordinator prepares and commits as for any batch.
3. Once ``COMMITTED(n)`` is stored (and, after a restart, for every committed entry the log still
   holds): ``ack(msg_id)`` for each tuple with a message id (crash point ``between_spout_acks``),
   then prune the entries. An id the spout did not hold (``ack`` returned ``False``: a message
   delivered to an instance before a restart) stays in the log until the source redelivers it;
   then it is acked and not emitted. A message redelivered while its id is in an uncommitted entry
   (a broker that lost its connection requeues every un-acked delivery, and any task of the spout
   may get it) is not emitted either; the task that got it acks it once that entry is committed.
4. A batch abandoned after its retries: ``fail(msg_id)`` for its tuples, and every spout task is
   closed (``deactivate``, ``close``); the next batch (after a supervised restart) opens them again.
   Its entries stay in the log, so the same txid replays the same tuples.
5. A retry of a batch (same driver) starting ``topology.message.timeout.secs`` or more after the
   batch was polled: ``fail(msg_id)`` for its tuples first (Storm's tuple timeout), then the retry
   replays them from the log; the clock restarts, so each further timeout fails them again.

Spout tasks run on the driver: a queue consumer's deliveries belong to its connection, and the
acks must come from the process that knows when the batch committed. The tuples then travel to the
bolts' tasks as one partition per spout task. Log entries are JSON (values and message ids must be
JSON values: str, int, float, bool, None, lists, dicts); nothing is unpickled.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from weir._faults import crash_point
from weir._util import positive_int
from weir.checkpoint.coordinator import TaskFailure
from weir.errors import ConfigError, TopologyError
from weir.runtime.spark.executor import TaskSpec, task_report
from weir.runtime.spark.pacing import write_more
from weir.runtime.spark.spoutthread import Emitted, SpoutThread
from weir.state.backend import Backend
from weir.topology.builder import Topology
from weir.topology.components import Spout
from weir.topology.context import TopologyContext
from weir.topology.punctuation import Punctuation
from weir.topology.spout_collector import SpoutOutputCollector

__all__ = ["SpoutDriver", "SpoutOptions", "check_storm_spouts", "logged_spout_task", "spout_log_namespace"]

log = logging.getLogger("weir.runtime")

#: a logged tuple: ``[stream, values, msg_id, direct task]`` (JSON)
_Logged = list[Any]


def spout_log_namespace(topology: str) -> str:
    """The namespace of a topology's spout log: ``$spoutlog-<topology>``."""
    return f"$spoutlog-{topology}"


@dataclass(frozen=True)
class SpoutOptions:
    """How a Storm spout's batches are cut (parsed once at submit).

    Attributes
    ----------
    max_pending : ``topology.max.spout.pending``: tuples with a message id in flight per spout task
        (``None``: no bound, Storm's default)
    batch_max : ``weir.spout.batch.max.tuples`` (default 10000): tuples per spout task per batch
    poll_ms : how long a batch may poll ``next_tuple`` at most (default: the checkpoint interval,
        at least 100 ms)
    timeout_ms : ``topology.message.timeout.secs``: a batch retried this long after it was polled
        fails its tuples (``fail``) before the retry; a committed message id the spout did not hold
        (``ack`` returned ``False``) and the source did not redeliver within it (and within
        :data:`UNSETTLED_KEEP_MS`) is forgotten
    poll_ahead : ``weir.spout.poll.ahead`` (default ``True``): poll the next batch while a batch's
        Spark job and commit run (see :mod:`weir.runtime.spark.spoutthread`)
    """

    max_pending: int | None = None
    batch_max: int = 10_000
    poll_ms: int = 1000
    timeout_ms: int = 30_000
    poll_ahead: bool = True

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any], interval_ms: int, timeout_secs: int = 30) -> SpoutOptions:
        """Parse Storm's and weir's keys; a bad value raises :class:`ConfigError` at submit."""
        pending = conf.get("topology.max.spout.pending")
        try:
            if pending is not None:
                positive_int(pending, "topology.max.spout.pending", expected="a positive int or None")
            batch_max = conf.get("weir.spout.batch.max.tuples", 10_000)
            positive_int(batch_max, "weir.spout.batch.max.tuples")
        except (TypeError, ValueError) as exc:
            raise ConfigError(str(exc)) from exc
        ahead = conf.get("weir.spout.poll.ahead", True)
        if isinstance(ahead, str) and ahead.strip().lower() in ("true", "false"):
            ahead = ahead.strip().lower() == "true"
        if not isinstance(ahead, bool):
            msg = f"weir.spout.poll.ahead must be true or false, got {ahead!r}"
            raise ConfigError(msg)
        return cls(pending, int(batch_max), max(100, interval_ms), timeout_secs * 1000, ahead)


def check_storm_spouts(name: str, topology: Topology) -> list[str]:
    """The Storm spouts (``next_tuple``) of ``topology``; refuses what weir cannot run (at submit).

    A spout must implement ``create_stream`` (a Spark source) or ``next_tuple`` (a Storm spout), and
    a topology's spouts must all be of one kind: a Storm spout's batches are cut on the driver, a
    Spark source's by Spark, and one batch cannot be both.
    """
    storm, spark = [], []
    for c in topology.spouts:
        obj = c.obj
        if not isinstance(obj, Spout):
            continue  # the builder refuses a set_spout of anything else
        if obj.is_storm_spout():
            storm.append(c.id)
        elif type(obj).create_stream is Spout.create_stream:
            msg = (
                f"topology {name!r}, spout {c.id!r}: {type(obj).__name__} implements neither next_tuple (a Storm "
                "spout) nor create_stream (a Spark source); implement one of them"
            )
            raise TopologyError(msg, topology=name, component=c.id)
        else:
            spark.append(c.id)
    if storm and spark:
        msg = (
            f"topology {name!r}: Storm spout(s) {', '.join(map(repr, storm))} (next_tuple) and Spark-source "
            f"spout(s) {', '.join(map(repr, spark))} cannot share a topology (a batch is cut either on the driver "
            "or by Spark); run them as two topologies, or write the Spark source as a Storm spout"
        )
        raise TopologyError(msg, topology=name, component=storm[0])
    return storm


def _key(cid: str, task: int, txid: int) -> bytes:
    return f"{cid}/{task}/{txid:020d}".encode()


#: a committed id the source has not redelivered yet is kept at least this long (5 min), however short
#: the message timeout: forgotten too early, its redelivery would be counted again
UNSETTLED_KEEP_MS = 300_000

#: values that come back from the log's JSON exactly as emitted (no round trip needed to normalise them)
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _id_key(msg_id: Any) -> str:
    """A message id as a set key (a str id is its own key; any other JSON value its canonical JSON)."""
    if type(msg_id) is str:
        return msg_id
    return "\x00" + json.dumps(msg_id, sort_keys=True, separators=(",", ":"))


@dataclass
class _Entry:
    """One spout task's log entry for one txid."""

    txid: int
    tuples: list[_Logged]
    committed: bool = False
    unsettled: list[Any] = field(default_factory=list)  # committed ids the spout did not hold
    at_ms: int = 0  # when it was committed
    #: when this driver polled the entry, or last failed its tuples (monotonic s; None: logged by another driver)
    clock: float | None = None

    def to_bytes(self) -> bytes:
        rec: dict[str, Any] = {"txid": self.txid, "committed": self.committed}
        if self.committed:
            rec["unsettled"] = self.unsettled
            rec["at_ms"] = self.at_ms
        else:
            rec["tuples"] = self.tuples
        return json.dumps(rec, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> _Entry:
        try:
            rec = json.loads(data)
            return cls(int(rec["txid"]), list(rec.get("tuples", [])), bool(rec["committed"]),
                       list(rec.get("unsettled", [])), int(rec.get("at_ms", 0)))  # fmt: skip
        except (ValueError, KeyError, TypeError) as exc:
            msg = f"{where}: unreadable spout log entry ({exc}); the store was changed by hand"
            raise TopologyError(msg) from exc


class _Task:
    """One spout task on the driver: its instance, collector and log entries."""

    def __init__(self, driver: SpoutDriver, cid: str, task: int, parallelism: int) -> None:
        self.driver = driver
        self.cid = cid
        self.task = task
        self.parallelism = parallelism
        self.spout: Spout | None = None
        self.collector: SpoutOutputCollector | None = None
        self.entries: dict[int, _Entry] = {}  # txid -> entry (this task's, as in the store)
        #: ids this task's open instance got (a redelivery) while they were in an uncommitted entry of
        #: another task: acked through this instance once that entry is committed
        self.absorbed: dict[str, Any] = {}
        self.where = f"topology {driver.topology_name!r}, spout {cid!r}, task {task}"
        #: owns the spout: every call into it runs there; polls the next batch ahead (see .spoutthread)
        self.thread = SpoutThread(f"weir-spout {driver.topology_name}/{cid}/{task}", topology=driver.topology_name)
        #: the last poll stopped because ``next_tuple`` emitted nothing (the source had nothing more)
        self.drained = False

    # ---- lifecycle -----------------------------------------------------------------------------
    def ensure_open(self) -> Spout:
        """The open spout (opened on the spout's thread, where every later call into it runs)."""
        if self.spout is not None:
            return self.spout
        return self.thread.call(self._open)

    def _open(self) -> Spout:
        if self.spout is not None:
            return self.spout
        comp = self.driver.topology.components[self.cid]
        spout = self.driver.fresh(self.cid)
        outputs = {s: tuple(f) for s, f in comp.outputs.items()}
        collector = SpoutOutputCollector(
            self.driver.topology_name, self.cid, self.task, outputs, frozenset(comp.direct_streams)
        )
        conf = {**self.driver.conf, **comp.conf}
        ctx = TopologyContext(
            self.driver.topology_name, self.cid, self.task, self.parallelism, conf,
            {c: x.parallelism for c, x in self.driver.topology.components.items()}, outputs,
        )  # fmt: skip
        spout.open(conf, ctx, collector)
        spout.activate()
        self.spout, self.collector = spout, collector
        return spout

    def close(self) -> None:
        """``fail`` what was polled ahead, ``deactivate`` and ``close`` the spout; end its thread."""
        if self.spout is not None:
            self.thread.call(self._close)
        self.thread.stop()

    def _close(self) -> None:
        spout, self.spout, self.collector = self.spout, None, None
        self.absorbed.clear()  # its deliveries go back to the source with the instance
        if spout is None:
            return
        ahead, _err, _started = self.thread.take()
        for _s, _v, msg_id, _d in ahead:  # polled ahead, never logged: back to the source
            if msg_id is not None:
                try:
                    spout.fail(msg_id)
                except Exception:
                    log.warning("%s: fail(%r) raised", self.where, msg_id, exc_info=True)
        for hook in (spout.deactivate, spout.close):
            try:
                hook()
            except Exception:  # closing a broken spout: it is dropped either way
                log.warning("%s: %s raised", self.where, hook.__name__, exc_info=True)

    # ---- message ids in the log ----------------------------------------------------------------
    def pending_ids(self) -> set[str]:
        return {_id_key(t[2]) for e in self.entries.values() if not e.committed for t in e.tuples if t[2] is not None}

    def unsettled(self) -> dict[str, int]:
        return {_id_key(i): e.txid for e in self.entries.values() if e.committed for i in e.unsettled}

    # ---- one batch ----------------------------------------------------------------------------------
    def limit(self, opts: SpoutOptions) -> int:
        """Tuples the next batch may take: ``weir.spout.batch.max.tuples``, within ``max.spout.pending``."""
        limit = opts.batch_max
        if opts.max_pending is not None:
            limit = min(limit, max(0, opts.max_pending - len(self.pending_ids())))
        return limit

    def poll_ahead(self, txid: int, opts: SpoutOptions) -> None:
        """Batch ``txid - 1`` is logged: poll batch ``txid`` ahead while its job and commit run."""
        spout, collector = self.spout, self.collector
        if spout is None or collector is None:
            return

        def one() -> list[Emitted]:
            spout.next_tuple()
            return collector.take()

        self.thread.ahead(txid, one, self.limit(opts))

    def poll(self, txid: int, opts: SpoutOptions, siblings: list[_Task]) -> tuple[_Entry, dict[bytes, bytes | None]]:
        """Call ``next_tuple`` until the batch is cut; the new entry and the log changes to write.

        The batch starts with what was polled ahead (see :mod:`.spoutthread`) and tops it up, on
        the spout's thread, until it holds its limit, ``next_tuple`` emits nothing, or the poll
        time (counted from the start of the poll-ahead) is over. Message ids are checked against
        the log entries of every task of the spout (``siblings``): a redelivered message may reach
        another task than the one that first emitted it.
        """
        return self.thread.call(lambda: self._poll(txid, opts, siblings))

    def _poll(self, txid: int, opts: SpoutOptions, siblings: list[_Task]) -> tuple[_Entry, dict[bytes, bytes | None]]:
        spout = self._open()
        assert self.collector is not None
        ahead, error, started = self.thread.take()
        if error is not None:
            raise error
        pending: set[str] = set()
        unsettled: dict[str, tuple[_Task, int]] = {}
        for sib in siblings:
            pending |= sib.pending_ids()
            unsettled.update({k: (sib, t) for k, t in sib.unsettled().items()})
        limit = self.limit(opts)
        tuples: list[_Logged] = []
        settled: dict[tuple[int, int], set[str]] = {}
        for stream, values, msg_id, direct in ahead:
            tuples.extend(self._admit(spout, stream, values, msg_id, direct, pending, unsettled, settled))
        deadline = (started if started is not None else time.monotonic()) + opts.poll_ms / 1000
        # the source's state: ran dry (no more for now), or the batch was cut by its limit or its time
        self.drained = len(tuples) < limit and self.thread.last_empty
        while len(tuples) < limit and time.monotonic() < deadline:
            spout.next_tuple()
            got = self.collector.take()
            self.drained = not got
            self.thread.note_poll(not got)
            if not got:
                break
            for stream, values, msg_id, direct in got:
                tuples.extend(self._admit(spout, stream, values, msg_id, direct, pending, unsettled, settled))
        if settled:
            try:
                spout.flush_acks()  # the redelivered messages' acks reach the source before the log forgets them
            except Exception:
                log.warning("%s: flush_acks raised; acked on the next redelivery", self.where, exc_info=True)
                settled = {}
        entry = _Entry(txid, tuples, clock=time.monotonic())
        changes: dict[bytes, bytes | None] = {_key(self.cid, self.task, txid): entry.to_bytes()}
        by_task = {sib.task: sib for sib in siblings}
        for (task, old_txid), ids in settled.items():
            old = by_task[task].entries[old_txid]
            old.unsettled = [i for i in old.unsettled if _id_key(i) not in ids]
            changes[_key(self.cid, task, old_txid)] = old.to_bytes() if old.unsettled else None
        now = int(time.time() * 1000)
        for sib in siblings:  # not redelivered within the message timeout: forgotten
            for old in sib.entries.values():
                if old.committed and old.unsettled and now - old.at_ms > max(opts.timeout_ms, UNSETTLED_KEEP_MS):
                    changes[_key(self.cid, sib.task, old.txid)] = None
        return entry, changes

    def _admit(
        self,
        spout: Spout,
        stream: str,
        values: tuple[Any, ...],
        msg_id: Any,
        direct: int | None,
        pending: set[str],
        unsettled: dict[str, tuple[_Task, int]],
        settled: dict[tuple[int, int], set[str]],
    ) -> list[_Logged]:
        rec: _Logged = [stream, list(values), msg_id, direct]
        if type(msg_id) not in _PLAIN or any(type(v) not in _PLAIN for v in values):
            # the first attempt sees what a replay reads back from the log: lists, str dict keys
            try:
                rec = json.loads(json.dumps(rec))
            except (TypeError, ValueError) as exc:
                msg = f"{self.where}: emitted values/msg_id that are not JSON ({exc}); the spout log stores JSON"
                raise TopologyError(msg, component=self.cid, task=self.task) from exc
            msg_id = rec[2]
        if msg_id is None:
            return [rec]
        k = _id_key(msg_id)
        if k in unsettled:  # committed before a restart; the source redelivered it: ack now, emit nothing
            if spout.ack(msg_id) is not False:
                owner, old_txid = unsettled.pop(k)
                settled.setdefault((owner.task, old_txid), set()).add(k)
            return []
        if k in pending:  # already in an uncommitted entry (replayed from the log): not counted twice
            if k not in self.pending_ids():
                self.absorbed[k] = msg_id  # another task's entry: acked through this instance at its commit
            return []
        pending.add(k)
        return [rec]

    def records(self, entry: _Entry) -> list[tuple[Any, ...]]:
        return [("T", s, tuple(v), self.task, d) for s, v, _m, d in entry.tuples]

    def ack_committed(self, txid: int) -> dict[bytes, bytes | None]:
        """``ack`` every tuple of this task's entries up to ``txid``; the log changes that prune them."""
        if not any(e <= txid and not x.committed for e, x in self.entries.items()):
            return {}
        return self.thread.call(lambda: self._ack_committed(txid))

    def _ack_committed(self, txid: int) -> dict[bytes, bytes | None]:
        changes: dict[bytes, bytes | None] = {}
        first = True
        for t in sorted(e for e, x in self.entries.items() if e <= txid and not x.committed):
            entry = self.entries[t]
            unsettled: list[Any] = []
            sent: list[Any] = []
            elsewhere: set[str] = set()
            spout = self._open()
            for _s, _v, msg_id, _d in entry.tuples:
                if msg_id is None:
                    continue
                try:
                    ok = spout.ack(msg_id)
                except Exception:  # the source is unreachable: acked when it redelivers the message
                    log.warning("%s: ack(%r) raised; acked on redelivery", self.where, msg_id, exc_info=True)
                    ok = False
                if first:
                    crash_point("between_spout_acks", txid, topology=self.driver.topology_name)
                    first = False
                via = self._ack_absorbed(msg_id)
                if via is True:
                    elsewhere.add(_id_key(msg_id))  # acked through the task that got it redelivered
                if ok is not False:
                    sent.append(msg_id)
                if (ok is False and via is not True) or via is False:
                    unsettled.append(msg_id)
            if sent:
                try:
                    spout.flush_acks()  # buffered acks reach the source before the log forgets their ids
                except Exception:
                    log.warning("%s: flush_acks raised; %d message(s) acked on redelivery", self.where, len(sent),
                                exc_info=True)  # fmt: skip
                    unsettled.extend(i for i in sent if _id_key(i) not in elsewhere)
                else:  # a redelivery polled ahead was acked with them (the spout held it): not a new tuple
                    self.thread.drop(_not_in({_id_key(i) for i in sent}))
            entry.committed, entry.tuples, entry.unsettled = True, [], list({_id_key(i): i for i in unsettled}.values())
            entry.at_ms = int(time.time() * 1000)
            changes[_key(self.cid, self.task, t)] = entry.to_bytes() if entry.unsettled else None
        return changes

    def _ack_absorbed(self, msg_id: Any) -> bool | None:
        """``msg_id`` is committed: ack it through the other tasks whose instance got it redelivered.

        ``None``: no other task got it; ``True``: acked (and flushed) through them; ``False``: an
        ack through them failed (the source redelivers it: keep the id unsettled).
        """
        k = _id_key(msg_id)
        self.absorbed.pop(k, None)  # this instance's own redelivery was in the ack above
        via: bool | None = None
        for sib in self.driver.tasks[self.cid]:
            if sib is self or k not in sib.absorbed:
                continue
            del sib.absorbed[k]
            try:  # on the sibling's own thread: every call into a spout task runs there
                if sib.thread.call(functools.partial(sib._ack_one, msg_id)):
                    via = True if via is None else via
                    continue
            except Exception:
                log.warning("%s: ack(%r) through task %d raised; acked on redelivery", self.where, msg_id, sib.task,
                            exc_info=True)  # fmt: skip
            via = False
        return via

    def _ack_one(self, msg_id: Any) -> bool:
        """``ack`` and flush one id on this task's open instance (run on its thread); whether it was sent."""
        spout = self.spout
        if spout is None or spout.ack(msg_id) is False:
            return False
        spout.flush_acks()
        self.thread.drop(_not_in({_id_key(msg_id)}))  # a redelivery of it polled ahead is not a new tuple
        return True

    def fail_timed_out(self, txid: int, timeout_ms: int) -> int:
        """A retry of ``txid``: ``fail`` its tuples once ``topology.message.timeout.secs`` passed since polled.

        Storm fails a tuple whose tree is not acked within the message timeout; weir's tuple is
        "acked" when its batch commits, so a batch still retrying past the timeout fails its
        tuples (the source may redeliver them; a redelivered id in the log is not emitted again,
        and ``ack`` follows the batch's COMMITTED). The clock restarts: a batch still retrying
        after another timeout fails them again, as Storm's replayed tuples time out again.
        Returns how many ``fail`` calls were made.
        """
        if self.spout is None:
            return 0
        return self.thread.call(lambda: self._fail_timed_out(txid, timeout_ms))

    def _fail_timed_out(self, txid: int, timeout_ms: int) -> int:
        entry = self.entries.get(txid)
        spout = self.spout
        if entry is None or entry.committed or entry.clock is None or spout is None:
            return 0  # an entry logged by an earlier driver: its deliveries died with that connection
        now = time.monotonic()
        if (now - entry.clock) * 1000 < timeout_ms:
            return 0
        entry.clock = now
        n = 0
        for _s, _v, msg_id, _d in entry.tuples:
            if msg_id is not None:
                n += 1
                try:
                    spout.fail(msg_id)
                except Exception:
                    log.warning("%s: fail(%r) raised", self.where, msg_id, exc_info=True)
        if not n:
            return 0
        log.warning(
            "%s: txid %d not committed within topology.message.timeout.secs (%d ms): fail() called for "
            "its %d tuple(s); the retry replays them from the spout log",
            self.where, txid, timeout_ms, n,
        )  # fmt: skip
        return n

    def fail_pending(self) -> None:
        """``fail`` every tuple of this task's uncommitted entries (a batch abandoned after its retries)."""
        if self.spout is not None:
            self.thread.call(self._fail_pending)

    def _fail_pending(self) -> None:
        spout = self.spout
        if spout is None:
            return
        for entry in self.entries.values():
            if entry.committed:
                continue
            for _s, _v, msg_id, _d in entry.tuples:
                if msg_id is not None:
                    try:
                        spout.fail(msg_id)
                    except Exception:
                        log.warning("%s: fail(%r) raised", self.where, msg_id, exc_info=True)


class SpoutDriver:
    """The Storm spouts of one topology: their driver-side tasks and their spout log."""

    def __init__(
        self,
        name: str,
        conf: Mapping[str, Any],
        topology: Topology,
        backend: Backend | None,
        options: SpoutOptions,
    ) -> None:
        self.topology_name = name
        self.conf = dict(conf)
        self.topology = topology
        self.backend = backend  # None: a topology without a store (at-least-once: acks after the job)
        self.options = options
        self.namespace = spout_log_namespace(name)
        self.spout_ids = [c.id for c in topology.spouts if isinstance(c.obj, Spout) and c.obj.is_storm_spout()]
        self.tasks: dict[str, list[_Task]] = {}
        for cid in self.spout_ids:
            n = topology.components[cid].parallelism
            self.tasks[cid] = [_Task(self, cid, t, n) for t in range(n)]
        self.epoch: int | None = None
        self._loaded = False
        self._memory: dict[bytes, bytes] = {}
        #: seconds spent since the start: polling ``next_tuple``, writing the log, acking (and flushing);
        #: ``poll_ahead_s`` (in :meth:`timings_now`) overlaps the previous batch's job and commit
        self.timings: dict[str, float] = {"poll_s": 0.0, "log_write_s": 0.0, "ack_s": 0.0}
        #: poll the next batch ahead while a batch's job runs (``weir.spout.poll.ahead``, default on)
        self.poll_ahead = bool(options.poll_ahead)
        #: the txid :meth:`batch` polled last, and whether a task's poll was cut before its source ran dry
        self._polled: int | None = None
        self._more = True
        #: where :meth:`committed` tells the pacing stream whether there is more (``process_available``)
        self.more_file = _more_file(name)

    def timings_now(self) -> dict[str, float]:
        """:attr:`timings`, plus ``poll_ahead_s``: ``next_tuple`` time that overlapped Spark's jobs."""
        ahead = sum(t.thread.ahead_s for tasks in self.tasks.values() for t in tasks)
        return {**self.timings, "poll_ahead_s": ahead}

    def fresh(self, cid: str) -> Spout:
        """A new instance of spout ``cid`` (a copy of the submitted one, as Storm deserialises it per task)."""
        import pickle  # the user's own object from this process, never data read from a store or source

        from pyspark import cloudpickle

        obj = self.topology.components[cid].obj
        spout: Spout = pickle.loads(cloudpickle.dumps(obj))  # noqa: S301
        return spout

    # ---- the log in the store ------------------------------------------------------------------
    def _write(self, changes: dict[bytes, bytes | None]) -> None:
        if not changes:
            return
        if self.backend is None:
            for k, v in changes.items():
                if v is None:
                    self._memory.pop(k, None)
                else:
                    self._memory[k] = v
            return
        t0 = time.perf_counter()
        self.backend.write_direct(self.namespace, changes, self.epoch)
        self.timings["log_write_s"] += time.perf_counter() - t0

    def _load(self) -> None:
        """Read the log once after a start: entries a previous driver left are replayed or acked."""
        if self._loaded:
            return
        if self.backend is not None:
            self.epoch = self.backend.acquire_epoch(self.namespace)
            rows = list(self.backend.scan(self.namespace))
        else:
            rows = list(self._memory.items())
        for task_list in self.tasks.values():
            for t in task_list:
                t.entries.clear()
        for key, data in rows:
            try:
                cid, task_s, _txid = key.decode().rsplit("/", 2)
                task = self.tasks[cid][int(task_s)]
            except (ValueError, KeyError, IndexError):
                log.warning("topology %s: spout log key %r names no spout task of this topology; left alone",
                            self.topology_name, key)  # fmt: skip
                continue
            entry = _Entry.from_bytes(data, f"{task.where}, spout log key {key.decode()!r}")
            task.entries[entry.txid] = entry
        self._loaded = True

    # ---- the batch ------------------------------------------------------------------------------
    def batch(self, txid: int) -> tuple[dict[str, list[list[tuple[Any, ...]]]], list[TaskFailure]]:
        """Each Storm spout's tuples of batch ``txid``, per task (replayed from the log, or polled and logged)."""
        self._load()
        out: dict[str, list[list[tuple[Any, ...]]]] = {}
        failures: list[TaskFailure] = []
        wrote = False
        changes: dict[bytes, bytes | None] = {}  # every task's entry: one write to the store per batch
        t0 = time.perf_counter()
        for cid, task_list in self.tasks.items():
            parts: list[list[tuple[Any, ...]]] = []
            for t in task_list:
                entry = t.entries.get(txid)
                if entry is None or entry.committed:
                    try:
                        entry, task_changes = t.poll(txid, self.options, task_list)
                    except Exception as exc:
                        err = f"{type(exc).__name__} in next_tuple of spout {cid!r} task {t.task}: {exc}"
                        failures.append(TaskFailure(cid, t.task, err, traceback.format_exc()))
                        t.close()  # opened again by the next attempt (Storm restarts the executor)
                        parts.append([])
                        continue
                    changes.update(task_changes)
                    wrote = True
                    for old_key, v in task_changes.items():
                        if v is None:
                            _c, task_s, txid_s = old_key.decode().rsplit("/", 2)
                            task_list[int(task_s)].entries.pop(int(txid_s), None)
                    t.entries[txid] = entry
                else:
                    t.ensure_open()  # a replay after a restart: the spout is opened (redeliveries follow)
                    t.fail_timed_out(txid, self.options.timeout_ms)  # a retry past the message timeout
                parts.append(t.records(entry))
            out[cid] = parts
        self.timings["poll_s"] += time.perf_counter() - t0
        self._write(changes)
        if wrote:
            crash_point("after_spout_log", txid, topology=self.topology_name)
        self._polled = txid
        self._more = bool(failures) or any(not t.drained for tasks in self.tasks.values() for t in tasks)
        if not failures and self.poll_ahead:  # logged: the next batch is polled while this one's job runs
            for task_list in self.tasks.values():
                for t in task_list:
                    t.poll_ahead(txid + 1, self.options)
        return out, failures

    def committed(self, txid: int) -> None:
        """``COMMITTED(txid)`` is stored: ack the tuples of every entry up to ``txid``, prune the log."""
        self._load()
        t0 = time.perf_counter()
        changes: dict[bytes, bytes | None] = {}
        for task_list in self.tasks.values():
            for t in task_list:
                task_changes = t.ack_committed(txid)
                changes.update(task_changes)
                for k, v in task_changes.items():
                    if v is None:
                        t.entries.pop(int(k.decode().rsplit("/", 1)[1]), None)
        self.timings["ack_s"] += time.perf_counter() - t0
        self._write(changes)  # one write per batch prunes every task's entries
        if self.options.max_pending is not None:  # the acks freed room: the poll-ahead may take more
            for task_list in self.tasks.values():
                for t in task_list:
                    t.thread.set_limit(t.limit(self.options))
        # a batch skipped as a replay of a committed one polled nothing: there may be more
        write_more(self.more_file, self._more if self._polled == txid else True)

    def abandoned(self) -> None:
        """The batch failed every attempt: ``fail`` its tuples, close every spout task (opened again later)."""
        for task_list in self.tasks.values():
            for t in task_list:
                t.fail_pending()
                t.close()
        self._loaded = False  # the next start reads the log again (and takes a new epoch)

    def close(self) -> None:
        """The topology stops: close every spout task."""
        for task_list in self.tasks.values():
            for t in task_list:
                t.close()
        self._loaded = False
        try:  # made again by the next committed batch
            os.remove(self.more_file)
        except OSError:
            pass


def _not_in(keys: set[str]) -> Callable[[Emitted], bool]:
    """Whether an emitted tuple's message id is not one of ``keys`` (a tuple without an id never is)."""

    def keep(e: Emitted) -> bool:
        return e[2] is None or _id_key(e[2]) not in keys

    return keep


def _more_file(topology: str) -> str:
    """A new path for a driver's *more* file (see :mod:`weir.runtime.spark.pacing`), written once a batch commits."""
    import re
    import tempfile
    import uuid

    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", topology)[:80]
    return os.path.join(tempfile.gettempdir(), f"weir-more-{safe}-{uuid.uuid4().hex}.json")


def logged_spout_task(
    spec: TaskSpec, task: int, txid: int, parts: Iterator[list[tuple[Any, ...]]], *, final: bool = False
) -> Iterator[tuple[Any, ...]]:
    """Executor side: a Storm spout task's logged tuples of the batch (its partition), then its report."""
    t0 = time.perf_counter()
    n = 0
    for part in parts:
        for rec in part:
            n += 1
            yield rec
    if final:
        yield ("P", "default", Punctuation.FINAL_MARKER, task, None)
    yield task_report(spec, task, txid, n_in=n, n_out=n, ms=(time.perf_counter() - t0) * 1000)
