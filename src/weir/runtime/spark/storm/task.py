"""Executor side: run one task (partition) of one component for one micro-batch.

Records between stages are plain tuples:

* ``("T", stream, values, source_task, direct_task)`` — an emitted tuple;
* ``("R", report)`` — the task's report (counts, timing, failure with traceback);
* ``("D", dead_letter)`` — a failed tuple routed to the dead-letter sink.

A task: ``prepare`` → (stateful) ``init_state`` → ``execute`` per tuple → (stateful) ``pre_prepare(txid)``
and ``state.prepare_commit(txid)`` → ``cleanup``. A failure stops the task and is reported (not
raised), so the driver can name the component, task and txid; the coordinator then rolls back.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import Any

from weir._faults import armed, crash_point
from weir.errors import FencedError, TopologyError
from weir.runtime.spark.executor import (
    TaskReport,
    TaskSpec,
    check_emitted,
    dead_letter,
    task_report,
)
from weir.runtime.spark.storm.common import failure_report_at, forwarding_marks
from weir.runtime.spark.storm.instances import keep, lineage_of_job, take
from weir.runtime.spark.storm.ticks import ticks_in
from weir.state.kv import TransactionalKeyValueState
from weir.topology.collector import BasicOutputCollector, FailedTuple, OutputCollector
from weir.topology.components import BasicBolt, Spout, StatefulBolt
from weir.topology.punctuation import MarkRecord, Punctuation
from weir.topology.shape import execute_shape
from weir.topology.ticks import SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, TICK_FIELDS
from weir.topology.tuple import Tuple

__all__ = ["TaskSpec", "run_spout_task", "run_task", "unacked_error"]


_UNACKED = "never acked or failed (Storm's message timeout): a Bolt must ack or fail every input tuple"


def unacked_error(spec: TaskSpec, task: int, txid: int, unacked: list[Tuple]) -> TopologyError:
    """The error of a task that ends its batch with tuples neither acked nor failed (Storm: timed out)."""
    first = unacked[0]
    msg = (
        f"topology {spec.topology!r}, component {spec.component_id!r}, task {task}, txid {txid}: "
        f"{len(unacked)} input tuple(s) were never acked or failed (first: {list(first.values)!r:.120} from "
        f"{first.source_component!r}); in Storm they would time out and be replayed. Call "
        "self.collector.ack(tup) (or fail) for every input, write execute(self, tup, collector) to have "
        "them acked automatically, or set topology.acker.executors = 0 to turn acking off"
    )
    return TopologyError(msg, topology=spec.topology, component=spec.component_id, task=task, txid=txid)


def run_spout_task(
    spec: TaskSpec, task: int, txid: int, rows: Iterable[Any], *, final: bool = False
) -> Iterator[tuple[Any, ...]]:
    """Turn a partition of the batch's DataFrame into tuples of the spout's default stream.

    Punctuation: a row the spout's ``is_window_mark`` accepts becomes a window mark, a spout with
    ``window_mark_each_batch`` ends its part with one, and ``final`` (the end of a finite run) ends
    it with a final mark.
    """
    spout: Spout = spec.component
    t0 = time.perf_counter()
    n = 0
    failed = 0
    marker = spout.is_window_mark if type(spout).is_window_mark is not Spout.is_window_mark else None
    for row in rows:
        if marker is not None and marker(row):
            yield ("P", "default", Punctuation.WINDOW_MARKER, task, None)
            continue
        try:
            values = spout.to_values(row)
        except Exception as exc:
            err = f"{type(exc).__name__}: {exc}"
            if spec.deadletter:
                failed += 1
                yield dead_letter(spec, task, txid, None, list(row), f"malformed input record: {err}")
                continue
            error = f"malformed input record {tuple(row)!r:.200}: {err}"
            yield ("R", TaskReport.from_exception(spec.component_id, task, txid, exc, error=error, n_in=n))
            return
        n += 1
        yield ("T", "default", values, task, None)
    if spout.window_mark_each_batch:
        yield ("P", "default", Punctuation.WINDOW_MARKER, task, None)
    if final:
        yield ("P", "default", Punctuation.FINAL_MARKER, task, None)
    yield task_report(spec, task, txid, n_in=n, n_out=n, failed=failed, ms=(time.perf_counter() - t0) * 1000)


def records_of(blocks: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    """The input records ``(source, stream, values, source_task)`` of input blocks (marks pass as they are)."""
    for b in blocks:
        payload = b[2]
        if payload.__class__ is MarkRecord:
            yield b
            continue
        source, stream, source_task = b[0], b[1], b[3]
        for values in payload:
            yield (source, stream, values, source_task)


def run_task(
    spec: TaskSpec, task: int, txid: int, epoch: int | None, records: Iterable[tuple[Any, ...]]
) -> Iterator[tuple[Any, ...]]:
    """Run task ``task`` of a bolt over its input ``records`` (``(source, stream, values, source_task)``).

    The record-at-a-time form of :func:`run_task_blocks` (the one the batch job runs): each input
    record is a block of one, and each emitted block comes out as ``("T", stream, values, task, None)``
    records.
    """
    blocks = ((r[0], r[1], r[2] if r[2].__class__ is MarkRecord else [r[2]], r[3]) for r in records)
    for rec in run_task_blocks(spec, task, txid, epoch, blocks):
        if rec[0] == "B":
            stream, src_task = rec[1], rec[3]
            for values in rec[2]:
                yield ("T", stream, values, src_task, None)
        else:
            yield rec


_BLOCK = 1024  # emitted tuples per ("B", ...) record

#: a component's task loop: ``(spec, task, txid, epoch, input blocks)`` → its output records
TaskLoop = Callable[[TaskSpec, int, int, "int | None", Iterable[tuple[Any, ...]]], Iterator[tuple[Any, ...]]]


def task_loop(component: Any) -> TaskLoop:
    """The task loop of ``component``, chosen once when the batch job is built.

    As Storm's builder picks a bolt's executor once: a Streams operator's (state handlers), a
    windowed bolt's (windows in the state store) or a bolt's (:func:`run_bolt_blocks`).
    """
    from weir.streams.operator import Operator
    from weir.topology.windowing import WindowedBolt

    if isinstance(component, Operator):
        return _operator_blocks
    if isinstance(component, WindowedBolt):
        return _windowed_blocks
    return run_bolt_blocks


def _operator_blocks(
    spec: TaskSpec, task: int, txid: int, epoch: int | None, blocks: Iterable[tuple[Any, ...]]
) -> Iterator[tuple[Any, ...]]:
    from weir.runtime.spark.streams.operators import run_operator_task

    return run_operator_task(spec, task, txid, epoch, records_of(blocks))


def _windowed_blocks(
    spec: TaskSpec, task: int, txid: int, epoch: int | None, blocks: Iterable[tuple[Any, ...]]
) -> Iterator[tuple[Any, ...]]:
    from weir.runtime.spark.storm.windowed import run_windowed_task

    return run_windowed_task(spec, task, txid, epoch, records_of(blocks))


def run_task_blocks(
    spec: TaskSpec, task: int, txid: int, epoch: int | None, blocks: Iterable[tuple[Any, ...]]
) -> Iterator[tuple[Any, ...]]:
    """Run task ``task`` of any component that is not a spout over its input blocks (see :func:`run_bolt_blocks`).

    Picks the task loop on each call; the batch job picks it once per component (:func:`task_loop`).
    """
    return task_loop(spec.component)(spec, task, txid, epoch, blocks)


def run_bolt_blocks(
    spec: TaskSpec, task: int, txid: int, epoch: int | None, blocks: Iterable[tuple[Any, ...]]
) -> Iterator[tuple[Any, ...]]:
    """Run task ``task`` of a bolt over its input blocks; yield its output records.

    An input block is ``(source, stream, [values, ...], source_task)``: a run of tuples one
    upstream task emitted on one stream, in order; a mark travels as ``(source, stream,
    MarkRecord, source_task)``. The output: ``("B", stream, [values, ...], task)`` runs of emitted
    tuples (up to ``_BLOCK``), ``("T", stream, values, task, direct)`` for a direct emit, ``("P", ...)``
    marks, ``("D", ...)`` dead letters and the task's ``("R", report)`` last.
    """
    t0 = time.perf_counter()
    comp = spec.component
    ctx = spec.context(task)
    lineage = lineage_of_job()
    kept = take(spec.topology, spec.component_id, task, txid, lineage) if lineage is not None else None
    if kept is not None:  # this worker's instance of the task finished the batch before: it lives on
        comp, out = kept
        out.new_batch()
    else:
        out = OutputCollector(spec.component_id, task, dict(spec.outputs), topology=spec.topology, acking=spec.acking)
    n_in = n_out = n_failed = 0
    state = None
    keys_written: dict[str, int] = {}
    stage = "prepare"
    current: Tuple | None = None
    run: list[Any] = []  # the output block being filled: tuples emitted on run_stream
    run_stream = ""
    crash_after = 0 if armed("during_processing", spec.topology) else -1
    try:
        shape = execute_shape(comp, spec.component_id)
        if kept is None:
            if isinstance(comp, BasicBolt):
                comp.prepare(spec.conf, ctx)
            else:
                comp.collector = out
                comp.prepare(spec.conf, ctx, out)
        basic = BasicOutputCollector(out) if shape == "basic" else None
        if spec.stateful and isinstance(comp, StatefulBolt):
            stage = "init_state"
            state = spec.provider.new_state(ctx.state_namespace, spec.conf, ctx)
            if isinstance(state, TransactionalKeyValueState):
                # the driver claimed the namespace with this epoch: a store that lost it refuses the prepare
                state.fence(epoch, owned=spec.claimed)
            else:
                state.fence(epoch)
            if isinstance(state, TransactionalKeyValueState):
                state.read_dense()  # this instance lives for this task's batch only
            comp.init_state(state)
        stage = "execute"
        fields_of = spec.input_fields
        if spec.punctuation:  # align marks record by record; each record travels as a block of one
            blocks = (
                (r[0], r[1], r[2] if r[0] is None else [r[2]], r[3])
                for r in forwarding_marks(spec, task, records_of(blocks))
            )
        if ticks_in(txid, spec.ticks):  # after the batch's last tuple, before the state is prepared
            assert spec.ticks is not None
            blocks = chain(blocks, [(SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, [(spec.ticks[0],)], -1)])
            fields_of = {**fields_of, (SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID): TICK_FIELDS}
        consumed = spec.consumed_streams
        new_object = object.__new__
        token = out.token
        pending = out.pending if basic is None and out.acking else None
        emitted = out.emitted
        failed = out.failed
        for source, stream, payload, source_task in blocks:
            if source is None:  # a mark this bolt forwards (Storm bolts know no punctuation)
                if run:
                    yield ("B", run_stream, run, task)
                    run = []
                yield payload
                continue
            fields = fields_of[(source, stream)]
            tracked = pending if source is not SYSTEM_COMPONENT_ID else None  # ticks are never anchored
            for values in payload:
                current = new_object(Tuple)  # Tuple(values, fields, ...) without the call: one per input tuple
                current.values = values
                current.fields = fields
                current.source_component = source
                current.source_stream_id = stream
                current.source_task = source_task
                current.txid = txid
                current.owner = token
                if tracked is not None:
                    tracked[id(current)] = current
                n_in += 1
                if crash_after >= 0 and n_in > crash_after:
                    crash_point("during_processing", txid, task=task, topology=spec.topology)
                try:
                    if basic is not None:
                        basic.current = current
                        comp.execute(current, basic)
                        out.ack(current)  # Storm's IBasicBolt: acked automatically unless it failed
                    else:
                        comp.execute(current)
                except FailedTuple as exc:
                    out.fail(current, str(exc) or "FailedTuple")
                except FencedError:
                    raise
                except Exception as exc:
                    if not spec.deadletter:
                        raise
                    out.fail(current, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
                if failed:
                    if not spec.deadletter:
                        tup, reason = failed[0]
                        msg = f"tuple {list(tup.values)!r:.200} failed: {reason}"
                        raise TopologyError(msg, component=spec.component_id, task=task, txid=txid)
                    for tup, reason in failed:
                        n_failed += 1
                        yield dead_letter(spec, task, txid, tup, list(tup.values), reason)
                    failed.clear()
                if emitted:
                    n_out += len(emitted)
                    for stream_id, vals, direct in emitted:
                        if stream_id not in consumed:
                            continue
                        check_emitted(spec, task, vals)
                        if direct is None:
                            if stream_id != run_stream:
                                if run:
                                    yield ("B", run_stream, run, task)
                                    run = []
                                run_stream = stream_id
                            run.append(vals)
                        else:  # a direct emit names its consumer task: a record of its own, in its place
                            if run:
                                yield ("B", run_stream, run, task)
                                run = []
                            yield ("T", stream_id, vals, task, direct)
                    emitted.clear()
                    if len(run) >= _BLOCK:
                        yield ("B", run_stream, run, task)
                        run = []
        if run:
            yield ("B", run_stream, run, task)
            run = []
        current = None
        if out.acking and out.pending:
            stage = "ack check"
            for tup in out.unacked:
                if not spec.deadletter:
                    raise unacked_error(spec, task, txid, out.unacked)
                n_failed += 1
                yield dead_letter(spec, task, txid, tup, list(tup.values), _UNACKED)
        if state is not None:
            stage = "pre_prepare"
            comp.pre_prepare(txid)
            stage = "prepare_commit"
            if isinstance(state, TransactionalKeyValueState):
                keys_written[ctx.state_namespace] = state.pending_count
            state.prepare_commit(txid)
            crash_point("between_prepares", txid, task=task, topology=spec.topology)
        if lineage is not None:  # the next batch's task may continue with it (see .instances)
            keep(spec.topology, spec.component_id, task, txid, lineage, comp, out)
        else:
            stage = "cleanup"
            comp.cleanup()
    except Exception as exc:
        if run:  # what was emitted before the failure, in its place before the report
            yield ("B", run_stream, run, task)
        yield failure_report_at(spec, task, txid, exc, stage, current, n_in, n_out)
        return
    yield task_report(
        spec,
        task,
        txid,
        n_in=n_in,
        n_out=n_out,
        failed=n_failed,
        acked=out.acked,
        errors=out.errors[:5],
        keys_written=keys_written,
        ms=(time.perf_counter() - t0) * 1000,
        instance="kept" if kept is not None else "new",
    )
