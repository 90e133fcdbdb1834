"""Executor and driver sides of Streams operators on weir's batch engine.

Executor (:func:`run_operator_task`, called by the Spark task runner for every ``Operator`` task of a
micro-batch with txid *n*):

1. **Restore.** Read the task's committed :class:`~weir.streams.store.Head`. The live instance kept
   by this Python worker is used as is when it wrote that head (same attempt token). Otherwise it is
   restored: ``reset(latest complete checkpoint)``; ``reset_to_initial_state()`` when the task ran
   before but has no complete checkpoint; nothing on the very first start. A new instance is
   created (and ``prepare``-d) when the worker has none. Chunk sets of failed attempts and retired
   checkpoints are garbage-collected.
2. **Process** every tuple (``process``); ``create_checkpoint()`` may checkpoint meanwhile
   (operators outside consistent regions).
3. **Cut** (operators in a consistent region, every batch; checkpoint id = *n*): the tuples of
   data ports were processed in step 2 → ``drain()`` on every handler → the tuples of control
   ports → every permit released (all within the region's ``drain_timeout``) → in non-blocking
   mode ``prepare_for_non_blocking_checkpoint(n)`` and the drained tuples flow on while
   ``checkpoint()`` and the chunk writes run on a background thread → the task waits for that
   thread. Outside regions, a periodic checkpoint is taken when
   ``checkpoint.period.ms`` has passed since the last one.
4. **Prepare** the new head (retained checkpoints, the ones retired now) as transaction *n*.

Tuples of autonomous ports are processed after the cut's checkpoint. An ``independent`` operator
whose live instance prepared this txid in an earlier attempt (another region failed it) keeps that
cut and does not run again.

Driver (:class:`StreamsParticipants`, one of the coordinator's participants): commits or rolls back
every operator task's head with the batch (with several regions, only the regions that failed),
then, after ``COMMITTED(n)``, deletes retired checkpoint data and calls ``region_checkpointed(n)``
(start operators) and ``retire_checkpoint(id)`` on an instance of the operator prepared on the
driver with the task's context.

Crash points (``WEIR_CRASH_AT``, executor side): ``during_processing@n[@task]`` (first tuple),
``during_checkpoint@n[@task]`` (chunks written, head not prepared), ``between_prepares@n[@task]``.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark import cloudpickle

from weir._faults import armed, crash_point
from weir.checkpoint.coordinator import Participants
from weir.errors import CheckpointError, ConfigError, FencedError, TopologyError
from weir.runtime.spark.config import RuntimeConfig
from weir.runtime.spark.executor import TaskReport, TaskSpec, check_emitted, dead_letter, task_report
from weir.runtime.spark.streams.handoff import Entry, HandOff, handoff_for_task
from weir.state.factory import KeyValueStateProvider
from weir.streams.checkpoint import Checkpoint
from weir.streams.context import ConsistentRegionContext, ContextHandle, OperatorContext
from weir.streams.handler import StateHandler
from weir.streams.operator import InputPort, Operator
from weir.streams.regions import Placement, placements
from weir.streams.store import CheckpointMeta, Head, TaskCheckpoints
from weir.topology.builder import Topology
from weir.topology.collector import FailedTuple, OutputCollector
from weir.topology.punctuation import Aligner, Punctuation
from weir.topology.tuple import Tuple

__all__ = ["StreamsParticipants", "clear_live_instances", "live_instance", "run_operator_task"]

log = logging.getLogger("weir.streams")


# ---- live instances kept by a worker process ------------------------------------------------------
@dataclass
class _Live:
    """An operator instance kept between batches by one Python worker."""

    operator: Operator
    context: OperatorContext
    collector: OutputCollector
    #: the contexts' runtime side: the checkpoint function and the region's current sequence id
    handle: ContextHandle
    #: token of the batch attempt this instance last prepared (None: dirty, must be restored)
    token: str | None = None
    seq: int = 0
    last_ckpt_ts: float = 0.0
    created: float = field(default_factory=time.time)


_LIVE: dict[tuple[str, str, str, int], _Live] = {}
_LIVE_LOCK = threading.Lock()


def live_instance(store: str, topology: str, component: str, task: int) -> Operator | None:
    """The operator instance this process keeps for a task (tests and debugging), if any."""
    with _LIVE_LOCK:
        live = _LIVE.get((store, topology, component, task))
    return live.operator if live else None


def clear_live_instances(topology: str | None = None, *, close: bool = False) -> int:
    """Forget the live instances of ``topology`` (all when None), as if the worker had died.

    With ``close`` their handlers are closed and ``cleanup()`` is called. Returns how many.
    """
    with _LIVE_LOCK:
        keys = [k for k in _LIVE if topology is None or k[1] == topology]
        dropped = [_LIVE.pop(k) for k in keys]
    if close:
        for live in dropped:
            _close(live.operator, live.context)
    return len(dropped)


def _close(op: Operator, ctx: OperatorContext) -> None:
    for h in reversed(ctx.state_handlers):
        try:
            h.close()
        except Exception:
            log.exception("%s: closing handler %s failed", ctx.where, type(h).__qualname__)
    try:
        op.cleanup()
    except Exception:
        log.exception("%s: cleanup failed", ctx.where)


def _new_instance(spec: TaskSpec, task: int, placement: Placement, *, hooks_only: bool = False) -> _Live:
    op: Operator = cloudpickle.loads(cloudpickle.dumps(spec.component))  # type: ignore[no-untyped-call]
    handle = ContextHandle()
    region = None
    if placement.region is not None:
        opts = placement.options
        region = ConsistentRegionContext(
            placement.region,
            is_start_of_region=placement.is_start,
            is_end_of_region=placement.is_end,
            drain_timeout=opts.drain_timeout,
            reset_timeout=opts.reset_timeout,
            max_consecutive_reset_attempts=opts.max_consecutive_reset_attempts,
            handle=handle,
        )
    ctx = OperatorContext(
        spec.context(task), region=region, checkpointed=spec.stateful, hooks_only=hooks_only, handle=handle
    )
    out = OutputCollector(spec.component_id, task, dict(spec.outputs), topology=spec.topology)
    if isinstance(op, StateHandler):
        ctx.register_state_handler(op)
    op.context = ctx
    op.collector = out
    op.prepare(spec.conf, ctx, out)
    return _Live(op, ctx, out, handle)


def _placement(spec: TaskSpec) -> Placement:
    p = spec.placement
    return p if isinstance(p, Placement) else Placement()


def _call(ctx: OperatorContext, handler: StateHandler, method: str, arg: Any, what: str) -> None:
    """Call ``handler.method(arg)``; any error becomes a CheckpointError naming operator, task and id."""
    fn: Callable[..., None] = getattr(handler, method)
    try:
        fn() if arg is None else fn(arg)
    except FencedError:
        raise
    except Exception as exc:
        arg_text = "" if arg is None else (f"checkpoint {arg.sequence_id}" if isinstance(arg, Checkpoint) else str(arg))
        msg = (
            f"{ctx.where}: {type(handler).__qualname__}.{method}({arg_text}) failed{what}: {type(exc).__name__}: {exc}"
        )
        raise CheckpointError(msg) from exc


# ---- executor side ------------------------------------------------------------------------------
class _OperatorTask:
    """One task of one operator for one micro-batch (see the module docstring for the steps)."""

    def __init__(self, spec: TaskSpec, task: int, txid: int, epoch: int | None) -> None:
        self.spec = spec
        self.task = task
        self.txid = txid
        self.epoch = epoch
        self.placement = _placement(spec)
        self.token = uuid.uuid4().hex
        self.where = f"operator {spec.component_id!r} task {task}"
        self.stats: dict[str, Any] = {"n_in": 0, "n_out": 0, "failed": 0}
        self.metas: list[CheckpointMeta] = []
        self.stage = "open"
        self.current: Tuple | None = None
        self.live: _Live | None = None
        self.store: TaskCheckpoints | None = None
        #: tuples of control and autonomous input ports, kept for their place in the cut
        self.held: dict[str, list[tuple[Any, ...]]] = {"control": [], "autonomous": []}
        #: merges the marks of every upstream task per input port (punctuation)
        self.aligner = Aligner()
        self.final_sent = False
        #: the machine's hand-off between workers (None outside Spark: live instances only)
        self.handoff: HandOff | None = None
        #: the last checkpoint this batch took, and whether tuples were processed after it
        self.last_ckpt: Checkpoint | None = None
        self.after_cut = False

    # ---- restore -----------------------------------------------------------------------------
    def restore(self, store: TaskCheckpoints) -> tuple[_Live, Head | None]:
        spec, task = self.spec, self.task
        key = (store.backend.describe(), spec.topology, spec.component_id, task)
        head = store.head()
        with _LIVE_LOCK:
            live = _LIVE.get(key)
        if live is not None and head is not None and live.token == head.token:
            self.stats["restore"] = "live"
            return live, head
        t0 = time.perf_counter()
        handed = self._handed_off(key, head)
        if handed is not None:  # the task moved between workers: the state its last worker handed off
            if live is None:
                self.stage = "prepare"
                live = _new_instance(spec, task, self.placement)
                with _LIVE_LOCK:
                    _LIVE[key] = live
            live.token = None  # dirty until this batch prepares
            self.stage = "reset"
            for h in live.context.state_handlers:
                _call(live.context, h, "reset", handed[0], " (hand-off from another worker)")
            live.seq = head.seq if head is not None else handed[1].seq
            live.last_ckpt_ts = handed[1].ts
            self.stats["restore"] = "handoff"
            self.stats["restore_ms"] = (time.perf_counter() - t0) * 1000
            return live, head
        fresh = live is None
        if live is None:
            self.stage = "prepare"
            live = _new_instance(spec, task, self.placement)
            with _LIVE_LOCK:
                _LIVE[key] = live
        live.token = None  # dirty until this batch prepares
        latest = head.latest if head is not None else None
        ctx = live.context
        t_reset = time.monotonic()
        if latest is not None:
            self.stage = "reset"
            ckpt = store.load(latest)
            if ctx.consistent_region_context is not None:
                live.handle.sequence_id = latest.id
            for h in ctx.state_handlers:
                _call(ctx, h, "reset", ckpt, "")
            live.last_ckpt_ts = latest.timestamp
            how = "reset"
        elif not fresh or head is not None or store.started():
            self.stage = "reset_to_initial_state"
            for h in ctx.state_handlers:
                _call(ctx, h, "reset_to_initial_state", None, "")
            live.last_ckpt_ts = live.created
            how = "initial"
        else:
            store.mark_started()
            live.last_ckpt_ts = live.created
            how = "first"
        live.seq = head.seq if head is not None else 0
        region = ctx.consistent_region_context
        took = time.monotonic() - t_reset
        if region is not None and how != "first" and took > region.reset_timeout:
            msg = (
                f"{self.where}: resetting took {took:.3f} s, more than the reset_timeout of consistent region "
                f"{region.index} ({region.reset_timeout:g} s); make reset() faster or raise "
                "builder.consistent_region(..., reset_timeout=...)"
            )
            raise CheckpointError(msg)
        self.stats["restore"] = how
        self.stats["restore_id"] = latest.id if latest is not None else None
        self.stats["restore_ms"] = (time.perf_counter() - t0) * 1000
        return live, head

    def _handed_off(self, key: tuple[str, str, str, int], head: Head | None) -> tuple[Checkpoint, Entry] | None:
        """The checkpoint another worker handed off after the batch ``head`` committed, if any."""
        if self.handoff is None or head is None or self.epoch is None or self.store is None:
            return None
        entry = self.handoff.load(_handoff_key(key), head.token, self.epoch)
        if entry is None:
            return None
        ckpt = Checkpoint.from_bytes(
            entry.data, entry.seq, entry.ts, where=f"{self.where} (hand-off)", serializer=self.store.serializer
        )
        return ckpt, entry

    def _hand_off(self, key: tuple[str, str, str, int], cut: Checkpoint | None) -> None:
        """Write the live state for the task's next batch, wherever Spark runs it (see :mod:`.handoff`)."""
        assert self.live is not None and self.store is not None and self.handoff is not None
        if self.epoch is None:
            return
        live = self.live
        ckpt = cut
        if ckpt is None:  # no checkpoint of this batch holds the state at its end: take one for the hand-off
            ckpt = Checkpoint(live.seq, live.last_ckpt_ts, where=f"{self.where} (hand-off)",
                              serializer=self.store.serializer)  # fmt: skip
            for h in live.context.state_handlers:
                _call(live.context, h, "checkpoint", ckpt, " (hand-off to the next batch)")
        entry = Entry(ckpt.to_bytes(), live.seq, live.last_ckpt_ts, self.txid)
        self.handoff.save(_handoff_key(key), self.token, self.epoch, self.txid, entry)
        self.stats["handoff_bytes"] = len(entry.data)

    def _kept(self, store: TaskCheckpoints) -> bool:
        """Whether this task's cut of this txid was prepared by an earlier attempt of this driver.

        The driver keeps such a cut only when another region failed the attempt (see
        :meth:`StreamsParticipants.rollback_all`); the store's epoch tells it was written under this
        driver's epoch, so the same Spark batch produced it.
        """
        if self.epoch is None:
            return False
        rec = store.backend.txids(store.namespace)
        return rec.prepared == self.txid and rec.epoch == self.epoch

    # ---- checkpoints ---------------------------------------------------------------------------
    def checkpoint_now(self, cid: int) -> CheckpointMeta:
        """Every handler's ``checkpoint()`` into one Checkpoint, then its chunks to the store."""
        assert self.live is not None and self.store is not None
        ctx = self.live.context
        t0 = time.perf_counter()
        ckpt = Checkpoint(cid, time.time(), where=self.where, serializer=self.store.serializer)
        for h in ctx.state_handlers:
            _call(ctx, h, "checkpoint", ckpt, "")
        try:
            meta = self.store.write(ckpt, self.token)
        except (CheckpointError, FencedError):
            raise
        except Exception as exc:
            msg = f"{self.where}: storing checkpoint {cid} failed: {type(exc).__name__}: {exc}"
            raise CheckpointError(msg) from exc
        crash_point("during_checkpoint", self.txid, task=self.task, topology=self.spec.topology)
        self.stats["checkpoint_ms"] = self.stats.get("checkpoint_ms", 0.0) + (time.perf_counter() - t0) * 1000
        self.stats["checkpoint_bytes"] = self.stats.get("checkpoint_bytes", 0) + meta.size
        self.metas.append(meta)
        self.live.last_ckpt_ts = ckpt.timestamp
        self.last_ckpt = ckpt
        return meta

    def operator_driven(self) -> int:
        """``context.create_checkpoint()``: the next sequence id, checkpointed on this thread."""
        assert self.live is not None
        cid = self.live.seq + 1
        self.live.seq = cid
        self.checkpoint_now(cid)
        return cid

    def new_head(self, prev: Head | None) -> Head:
        assert self.live is not None
        retained = [*(prev.retained if prev else ()), *self.metas]
        keep = self.placement.retain
        retired = retained[:-keep] if len(retained) > keep else []
        return Head(
            token=self.token,
            txid=self.txid,
            retained=tuple(retained[-keep:]),
            retired=tuple(retired),
            seq=self.live.seq,
            region=self.placement.region is not None,
        )

    # ---- the task ------------------------------------------------------------------------------
    def _flush(self, out: OutputCollector) -> Iterator[tuple[Any, ...]]:
        spec = self.spec
        if out.failed:
            if not spec.deadletter:
                tup, reason = out.failed[0]
                msg = f"tuple {list(tup.values)!r:.200} failed: {reason}"
                raise TopologyError(msg, component=spec.component_id, task=self.task, txid=self.txid)
            for tup, reason in out.failed:
                self.stats["failed"] += 1
                yield dead_letter(spec, self.task, self.txid, tup, list(tup.values), reason)
            out.failed.clear()
        if out.emitted:
            consumed = spec.consumed_streams
            for stream_id, vals, direct in out.emitted:
                if _is_punctuation(vals):  # a mark, in its place among the tuples
                    if stream_id in consumed:
                        yield ("P", stream_id, vals, self.task, None)
                    continue
                self.stats["n_out"] += 1
                if stream_id in consumed:
                    check_emitted(spec, self.task, vals)
                    yield ("T", stream_id, vals, self.task, direct)
            out.emitted.clear()

    def _punctuation(self, live: _Live, port: tuple[str, str], mark: Punctuation) -> Iterator[tuple[Any, ...]]:
        """Deliver ``mark`` on ``port`` (``process_punctuation``); forward a final mark once every port has one."""
        op, out = live.operator, live.collector
        self.stage = f"process_punctuation({mark.name})"
        kind = self.placement.port_kind(*port)
        op.process_punctuation(InputPort(port[0], port[1], kind), mark)
        self.stats["marks_in"] = self.stats.get("marks_in", 0) + 1
        if mark is Punctuation.FINAL_MARKER and not self.final_sent:
            if set(self.spec.input_fields) <= self.aligner.final_ports():
                self.final_sent = True
                sent = {s for s, v, _d in out.emitted if _is_punctuation(v, Punctuation.FINAL_MARKER)}
                for stream in self.spec.outputs:
                    if stream not in sent:
                        out.emitted.append((stream, Punctuation.FINAL_MARKER, None))  # type: ignore[arg-type]
        yield from self._flush(out)
        self.stage = "process"

    def _process(
        self, live: _Live, records: Iterable[tuple[Any, ...]], *, hold: bool = False
    ) -> Iterator[tuple[Any, ...]]:
        """Process ``records``.

        With ``hold``, tuples of control and autonomous ports are kept aside (in :attr:`held`) for
        their place in the cut.
        """
        spec, txid = self.spec, self.txid
        op, out = live.operator, live.collector
        fields_of = spec.input_fields
        crash_first = armed("during_processing", spec.topology)
        placement = self.placement
        sorting = hold and bool(placement.control or placement.autonomous)
        self.stage = "process"
        if spec.punctuation:
            if sorting:  # control / autonomous records (marks too) keep their place in their phase
                records = self._data_ports(records)
                sorting = False
            records = self._aligned(live, records)
        for rec in records:
            source, stream, values, source_task = rec
            if source is None:  # records of a mark delivered by the aligner
                yield values
                continue
            if sorting:
                kind = placement.port_kind(source, stream)
                if kind != "data":
                    self.held[kind].append(rec)
                    continue
            self.current = tup = Tuple(values, fields_of[(source, stream)], source, stream, source_task, txid)
            self.stats["n_in"] += 1
            if crash_first:
                crash_point("during_processing", txid, task=self.task, topology=self.spec.topology)
            try:
                op.process(tup)
            except FailedTuple as exc:
                out.fail(tup, str(exc) or "FailedTuple")
            except (FencedError, CheckpointError):
                raise
            except Exception as exc:
                if not spec.deadletter:
                    raise
                out.fail(tup, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            yield from self._flush(out)
        self.current = None

    def _data_ports(self, records: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        """The records of data ports; those of control and autonomous ports go to :attr:`held`."""
        placement = self.placement
        for rec in records:
            kind = placement.port_kind(rec[0], rec[1])
            if kind == "data":
                yield rec
            else:
                self.held[kind].append(rec)

    def _aligned(self, live: _Live, records: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        """Input records with marks aligned per port; a delivered mark's outputs as ``(None, None, rec, None)``."""
        aligner = self.aligner
        for phase in (aligner.feed(records), aligner.end()):
            for item in phase:
                if item[0] == "T":
                    yield item[1]
                    continue
                self.current = None
                for rec in self._punctuation(live, item[1], item[2]):
                    yield (None, None, rec, None)

    def run(self, records: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        t0 = time.perf_counter()
        spec, task, txid = self.spec, self.task, self.txid
        thread: threading.Thread | None = None
        try:
            provider = spec.provider
            if not isinstance(provider, KeyValueStateProvider):
                msg = f"{self.where}: Streams operators need a built-in provider (sqlite, redis, postgres)"
                raise ConfigError(msg)
            ns = spec.context(task).state_namespace
            self.store = store = TaskCheckpoints(
                provider.backend,
                ns,
                self.where,
                self.epoch,
                serializer=self.placement.serializer,
            )
            if self.placement.independent and self._kept(store):
                # another region failed the previous attempt of this batch; this region's cut is
                # prepared already (under this driver's epoch): keep it, do not run again
                yield task_report(spec, task, txid, restore="kept", ms=(time.perf_counter() - t0) * 1000, **self.stats)
                return
            self.stage = "restore"
            self.handoff = handoff_for_task()
            key = (store.backend.describe(), spec.topology, spec.component_id, task)
            live, prev = self.restore(store)
            self.live = live
            self.stats["gc"] = store.collect_garbage(prev)
            ctx = live.context
            region = ctx.consistent_region_context
            if region is not None:
                live.handle.sequence_id = txid
            out = live.collector
            out.emitted.clear()
            out.failed.clear()
            out.errors.clear()
            out.acked = 0
            live.handle.checkpointer = self.operator_driven
            yield from self._process(live, records, hold=True)
            cid: int | None = None
            drained: list[tuple[Any, ...]] = []
            if region is not None:
                # seed 002: data ports processed → drain() → control ports processed → permits
                # released → checkpoint()
                self.stage = "drain"
                t_drain = time.monotonic()
                region.acquire_permit()  # drain() holds a permit implicitly
                try:
                    for h in ctx.state_handlers:
                        _call(ctx, h, "drain", None, f" while draining for checkpoint {txid}")
                finally:
                    region.release_permit()
                if out.emitted or out.failed:
                    drained = list(self._flush(out))
                if self.held["control"]:
                    drained.extend(self._process(live, self.held["control"]))
                    self.stage = "drain"
                self.held["control"] = []
                self.stage = "wait_for_permits"
                left = region.drain_timeout - (time.monotonic() - t_drain)
                if not region._wait_permits(left) or time.monotonic() - t_drain > region.drain_timeout:
                    msg = (
                        f"{self.where}: draining for checkpoint {txid} (drain(), control ports, "
                        f"{region.permits} permit(s) still held) took longer than the drain_timeout of "
                        f"consistent region {region.index} ({region.drain_timeout:g} s)"
                    )
                    raise CheckpointError(msg)
                cid = txid
                live.seq = txid
            else:
                if self.held["control"]:
                    yield from self._process(live, self.held["control"])
                    self.held["control"] = []
                period = self.placement.period_ms
                if period is not None and (time.time() - live.last_ckpt_ts) * 1000 >= period:
                    cid = live.seq + 1
                    live.seq = cid
            live.handle.checkpointer = None
            if out.emitted or out.failed:
                drained.extend(self._flush(out))
            t_pause = time.perf_counter()
            if cid is not None and region is not None and region.non_blocking:
                self.stage = "prepare_for_non_blocking_checkpoint"
                for h in ctx.state_handlers:
                    _call(ctx, h, "prepare_for_non_blocking_checkpoint", cid, "")
                self.stats["pause_ms"] = (time.perf_counter() - t_pause) * 1000
                self.stage = "checkpoint"
                errors: list[BaseException] = []

                def background(cid: int = cid) -> None:
                    try:
                        self.checkpoint_now(cid)
                    except BaseException as exc:  # re-raised on the task's thread
                        errors.append(exc)

                thread = threading.Thread(target=background, name=f"weir-checkpoint-{self.where}", daemon=True)
                thread.start()
                yield from drained  # the rest of the batch flows while the checkpoint is written
                t_wait = time.perf_counter()
                thread.join()
                thread = None
                self.stats["wait_ms"] = (time.perf_counter() - t_wait) * 1000
                if errors:
                    raise errors[0]
            elif cid is not None:
                self.stage = "checkpoint"
                self.checkpoint_now(cid)
                self.stats["pause_ms"] = (time.perf_counter() - t_pause) * 1000
            if self.held["autonomous"]:  # outside the cut: after its checkpoint, in the next one
                self.after_cut = True
                live.handle.checkpointer = self.operator_driven if region is None else None
                yield from self._process(live, self.held["autonomous"])
                self.held["autonomous"] = []
                live.handle.checkpointer = None
            self.stage = "prepare_commit"
            head = self.new_head(prev)
            store.prepare(txid, head)
            live.token = self.token
            if self.handoff is not None:
                self.stage = "hand-off"
                cut = self.last_ckpt if cid is not None and not self.after_cut else None
                self._hand_off(key, cut)
            crash_point("between_prepares", txid, task=task, topology=self.spec.topology)
            if cid is None or region is None or not region.non_blocking:
                yield from drained
        except Exception as exc:
            if self.live is not None:
                self.live.token = None  # partial state: restore before the next use
                self.live.handle.checkpointer = None
            where = self.stage + (f" of tuple {list(self.current.values)!r:.200}" if self.current is not None else "")
            text = _strip(str(exc), self.where)
            error = f"{type(exc).__name__} in {where} ({self.where}, txid {txid}): {text}"
            n_in, n_out = self.stats["n_in"], self.stats["n_out"]
            yield (
                "R",
                TaskReport.from_exception(spec.component_id, task, txid, exc, error=error, n_in=n_in, n_out=n_out),
            )
            return
        finally:
            if thread is not None:  # the consumer stopped early: never leave a writer behind
                thread.join()
                if self.live is not None:
                    self.live.token = None
        yield task_report(
            spec,
            task,
            txid,
            acked=self.live.collector.acked if self.live else 0,
            checkpoint=self.metas[-1].id if self.metas else None,
            ms=(time.perf_counter() - t0) * 1000,
            **self.stats,
        )


def _handoff_key(key: tuple[str, str, str, int]) -> str:
    return "\x1f".join(map(str, key))


def _is_punctuation(values: Any, mark: Punctuation | None = None) -> bool:
    """Whether an emitted entry's values are a mark (``submit_punctuation``), ``mark`` if given."""
    return values.__class__ is Punctuation and (mark is None or values is mark)


def _strip(text: str, where: str) -> str:
    """``text`` without a leading ``<where>: `` (the report names the operator and task already)."""
    return text[len(where) + 2 :] if text.startswith(where + ": ") else text


def _run_stateless(
    spec: TaskSpec, task: int, txid: int, records: Iterable[tuple[Any, ...]]
) -> Iterator[tuple[Any, ...]]:
    """An operator with ``checkpointed = False``: a fresh instance per batch, drained at its end."""
    t0 = time.perf_counter()
    runner = _OperatorTask(spec, task, txid, None)
    try:
        runner.stage = "prepare"
        live = _new_instance(spec, task, _placement(spec))
        runner.live = live
        yield from runner._process(live, records)
        runner.stage = "drain"
        for h in live.context.state_handlers:
            _call(live.context, h, "drain", None, "")
        yield from runner._flush(live.collector)
        runner.stage = "cleanup"
        live.operator.cleanup()
    except Exception as exc:
        error = f"{type(exc).__name__} in {runner.stage} ({runner.where}, txid {txid}): {exc}"
        n_in, n_out = runner.stats["n_in"], runner.stats["n_out"]
        yield ("R", TaskReport.from_exception(spec.component_id, task, txid, exc, error=error, n_in=n_in, n_out=n_out))
        return
    yield task_report(spec, task, txid, ms=(time.perf_counter() - t0) * 1000, **runner.stats)


def run_operator_task(
    spec: TaskSpec, task: int, txid: int, epoch: int | None, records: Iterable[tuple[Any, ...]]
) -> Iterator[tuple[Any, ...]]:
    """Run task ``task`` of a Streams operator for the batch ``txid``; yields T / D / R records."""
    if not spec.stateful:
        yield from _run_stateless(spec, task, txid, records)
        return
    yield from _OperatorTask(spec, task, txid, epoch).run(records)


# ---- driver side --------------------------------------------------------------------------------
class StreamsParticipants(Participants):
    """The coordinator's participant for every task of the topology's checkpointed operators.

    Parameters
    ----------
    specs : the TaskSpecs of the operators (each gets its :class:`Placement` attached here)
    provider : the topology's state provider (a built-in one: sqlite, redis, postgres)
    rc : the runtime configuration (``weir.checkpoint.retain``)
    topology : the topology (its consistent regions)
    """

    def __init__(self, specs: list[TaskSpec], provider: Any, rc: RuntimeConfig, topology: Topology) -> None:
        if not isinstance(provider, KeyValueStateProvider):
            msg = (
                f"topology {rc.topology!r}: Streams operators keep checkpoints in a built-in state provider "
                f"(sqlite, redis, postgres); {type(provider).__qualname__} is a custom provider"
            )
            raise ConfigError(msg)
        self.specs = specs
        self.provider = provider
        self.rc = rc
        self.places = placements(rc.topology, topology, {s.component_id: s.conf for s in specs}, rc.checkpoint_retain)
        for s in specs:
            place = self.places.get(s.component_id, Placement(retain=rc.checkpoint_retain))
            s.placement = replace(place, serializer=rc.checkpoint_serializer)
        #: the topology's consistent regions (several: independent regions are possible)
        self.places_regions = list(topology.regions) or [tuple(topology.components)]
        self.hook_errors: list[str] = []
        self._epoch: int | None = None
        self._resets: dict[int | None, int] = {}  # per region: resets in a row
        self._topology = topology

    def tasks(self) -> list[tuple[TaskSpec, int]]:
        """(spec, task) of every operator task."""
        return [(s, i) for s in self.specs for i in range(s.parallelism)]

    def namespaces(self) -> list[str]:
        """``<topology>-<operator>-<task>`` of every operator task."""
        return [s.context(i).state_namespace for s, i in self.tasks()]

    def _store(self, spec: TaskSpec, task: int, epoch: int | None) -> TaskCheckpoints:
        return TaskCheckpoints(
            self.provider.backend,
            spec.context(task).state_namespace,
            f"operator {spec.component_id!r} task {task}",
            epoch,
        )

    def commit_all(self, txid: int, epoch: int, after_first: Callable[[], None] | None = None) -> None:
        """Commit every task's prepared head of ``txid`` (its checkpoints become complete)."""
        self._epoch = epoch
        for i, (spec, task) in enumerate(self.tasks()):
            store = self._store(spec, task, epoch)
            rec = store.backend.txids(store.namespace)
            if rec.prepared is None and (rec.committed is None or rec.committed < txid):
                log.warning("%s: nothing prepared to commit for txid %d", store.where, txid)
            else:
                store.commit(txid)
            if i == 0 and after_first is not None:
                after_first()
        self._resets = {}

    def rollback_all(self, epoch: int, after_first: Callable[[], None] | None = None) -> None:
        """Discard prepared heads (the attempt's chunks become garbage); independent regions stay.

        With several consistent regions, a region every task of which prepared the attempt's txid
        under this driver's epoch did not fail: its heads are kept when its operators are
        ``independent`` (nothing outside the region consumes them) — on the retry they are not run
        again, so only the failed regions are reset. Otherwise (one region, nothing prepared, or
        the recovery of a previous driver's batch) every head is rolled back.
        """
        self._epoch = epoch
        tasks = self.tasks()
        stores = [self._store(spec, task, epoch) for spec, task in tasks]
        recs = [st.backend.txids(st.namespace) for st in stores]
        mine = [r.prepared if r.epoch == epoch else None for r in recs]
        txid = max((t for t in mine if t is not None), default=None)
        regions = {_placement(spec).region for spec, _ in tasks}
        failed: set[int | None] = set(regions)
        if txid is not None and len(self.places_regions) > 1:
            failed = {_placement(spec).region for (spec, _), t in zip(tasks, mine, strict=True) if t != txid}
            failed.add(None)  # operators outside regions are reset (to their latest checkpoint) anyway
        kept = 0
        first = True
        for (spec, _task), store in zip(tasks, stores, strict=True):
            place = _placement(spec)
            if place.region not in failed and place.independent:
                kept += 1
                continue
            store.rollback()
            if first and after_first is not None:
                after_first()
            first = False
        for region in failed:
            if region is not None and region in regions:
                self._resets[region] = self._resets.get(region, 0) + 1
        if kept and txid is not None:
            log.warning(
                "topology %s: txid %d failed in consistent region(s) %s; %d task(s) of the other regions keep "
                "their prepared checkpoints",
                self.rc.topology,
                txid,
                sorted(r for r in failed if r is not None),
                kept,
            )
            crash_point("after_region_rollback", txid, topology=self.rc.topology)
        self._check_resets()

    def _check_resets(self) -> None:
        """Stop once a region was reset more than its ``max_consecutive_reset_attempts`` times in a row."""
        limits = {
            p.region: p.options.max_consecutive_reset_attempts for p in self.places.values() if p.region is not None
        }
        over = sorted((lim, region) for region, lim in limits.items() if self._resets.get(region, 0) > lim)
        if not over:
            return
        limit, region = over[0]
        members = sorted(cid for cid, p in self.places.items() if p.region == region)
        msg = (
            f"topology {self.rc.topology!r}: consistent region {region} (operators {', '.join(members)}) was reset "
            f"{self._resets[region]} times in a row, more than its max_consecutive_reset_attempts ({limit}); its "
            "state is rolled back to the last complete checkpoint. Fix the failure, then restart"
        )
        raise TopologyError(msg, topology=self.rc.topology, component=members[0] if members else None)

    def after_commit(self, txid: int) -> None:
        """Delete retired checkpoints; call ``region_checkpointed`` / ``retire_checkpoint`` hooks."""
        for spec, task in self.tasks():
            store = self._store(spec, task, self._epoch)
            head = store.head()
            if head is None or head.txid != txid:
                continue
            place = _placement(spec)
            latest = head.latest
            notify = place.region is not None and place.is_start and latest is not None and latest.id == txid
            if head.retired:
                store.delete(head.retired)
            if notify or head.retired:
                self._hooks(spec, task, txid if notify else None, [m.id for m in head.retired])

    def _hooks(self, spec: TaskSpec, task: int, region_id: int | None, retired: list[int]) -> None:
        where = f"operator {spec.component_id!r} task {task}"
        try:
            live = _new_instance(spec, task, _placement(spec), hooks_only=True)
        except Exception as exc:
            self._hook_error(f"{where}: preparing the driver-side instance for checkpoint hooks failed: {exc!r}")
            return
        ctx = live.context
        region = ctx.consistent_region_context
        if region is not None and region_id is not None:
            live.handle.sequence_id = region_id
        calls: list[tuple[str, int]] = []
        if region_id is not None:
            calls.append(("region_checkpointed", region_id))
        calls.extend(("retire_checkpoint", cid) for cid in retired)
        for method, cid in calls:
            for h in ctx.state_handlers:
                try:
                    getattr(h, method)(cid)
                except Exception as exc:
                    self._hook_error(f"{where}: {type(h).__qualname__}.{method}({cid}) failed: {exc!r}")
        _close(live.operator, ctx)

    def _hook_error(self, text: str) -> None:
        log.error("%s (the batch is committed; the hook is not retried)", text)
        self.hook_errors = [*self.hook_errors[-99:], text]
