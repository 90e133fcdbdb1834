"""Executor side: one task of a windowed bolt (Storm's ``PersistentWindowedBoltExecutor``) for one batch.

A task: ``prepare`` → ``init_state`` (the bolt's state, namespace ``<topology>-<component>-<task>``)
→ load the window (namespace ``…-window``) → per tuple: add it to the window (a late one goes to the
late-tuple stream), fire the count or processing-time windows it completes → at the end of the batch,
advance the processing time or the watermark and fire what it completes → write the window →
``pre_prepare(txid)`` → ``prepare_commit(txid)`` of both states → ``cleanup``. The coordinator commits
or rolls back both namespaces with the rest of the topology, exactly once.

Input tuples are acked as they enter the window (the window is durable once the batch commits);
emits may anchor to any tuple of a window.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from weir._faults import armed, crash_point
from weir.runtime.spark.executor import TaskSpec, check_emitted, dead_letter, task_report
from weir.runtime.spark.storm.common import failure_report_at, forwarding_marks
from weir.state.kv import TransactionalKeyValueState
from weir.state.serializers import JsonSerializer
from weir.topology.collector import FailedTuple, OutputCollector
from weir.topology.tuple import Tuple, Values
from weir.topology.window_manager import Event, WindowManager, window_namespace
from weir.topology.windowing import WindowedBolt

__all__ = ["open_window_state", "run_windowed_task"]


def open_window_state(provider: Any, namespace: str) -> TransactionalKeyValueState:
    """The JSON key-value state of a window namespace on the provider's backend."""
    return TransactionalKeyValueState(provider.backend, namespace, JsonSerializer(), JsonSerializer())


def _now_ms() -> float:
    return time.time() * 1000.0


def run_windowed_task(
    spec: TaskSpec, task: int, txid: int, epoch: int | None, records: Iterable[tuple[Any, ...]]
) -> Iterator[tuple[Any, ...]]:
    """Run task ``task`` of a windowed bolt over ``records`` (``(source, stream, values, source_task)``)."""
    t0 = time.perf_counter()
    comp: WindowedBolt[Any] = spec.component
    cfg = comp.window_config
    ctx = spec.context(task)
    out = OutputCollector(spec.component_id, task, dict(spec.outputs), topology=spec.topology, acking=spec.acking)
    where = f"topology {spec.topology!r}, component {spec.component_id!r}, task {task}, txid {txid}"
    n_in = n_out = n_failed = 0
    stage = "prepare"
    current: Tuple | None = None
    crash_after = 0 if armed("during_processing", spec.topology) else -1
    fields_of = spec.input_fields

    def make_tuple(ev: Event) -> Tuple:
        _v, src, stream, stask, tx, values = ev
        tup = Tuple(values, fields_of[(src, stream)], src, stream, stask, tx)
        tup.owner = out.token
        return tup

    def drain() -> Iterator[tuple[Any, ...]]:
        nonlocal n_out, n_failed
        if out.failed:
            if not spec.deadletter:
                tup, reason = out.failed[0]
                msg = f"{where}: tuple {list(tup.values)!r:.200} failed: {reason}"
                raise FailedWindow(msg)
            for tup, reason in out.failed:
                n_failed += 1
                yield dead_letter(spec, task, txid, tup, list(tup.values), reason)
            out.failed.clear()
        consumed = spec.consumed_streams
        for stream_id, vals, direct in out.emitted:
            n_out += 1
            if stream_id in consumed:
                check_emitted(spec, task, vals)
                yield ("T", stream_id, vals, task, direct)
        out.emitted.clear()

    def run_windows(windows: Iterator[Any]) -> Iterator[tuple[Any, ...]]:
        for window in windows:
            try:
                comp.execute(window)
            except FailedTuple as exc:
                msg = f"{where}: window {window!r} failed: {exc}"
                raise FailedWindow(msg) from exc
            yield from drain()

    try:
        comp.collector = out
        comp.prepare(spec.conf, ctx, out)
        stage = "init_state"
        state = spec.provider.new_state(ctx.state_namespace, spec.conf, ctx)
        owned = spec.claimed  # the driver claimed both namespaces
        if isinstance(state, TransactionalKeyValueState):
            state.fence(epoch, owned=owned)
        else:
            state.fence(epoch)
        comp.init_state(state)
        wstate = open_window_state(spec.provider, window_namespace(ctx.state_namespace))
        wstate.fence(epoch, owned=owned)
        mgr = WindowManager(cfg, wstate, make_tuple, sorted(fields_of), where=where)
        stage = "execute"
        if spec.punctuation:  # marks pass through (Storm's windows ignore punctuation)
            records = forwarding_marks(spec, task, records)
        for source, stream, values, source_task in records:
            if source is None:
                yield values
                continue
            current = Tuple(values, fields_of[(source, stream)], source, stream, source_task, txid)
            current.owner = out.token
            n_in += 1
            if crash_after >= 0 and n_in > crash_after:
                crash_point("during_processing", txid, task=task, topology=spec.topology)
            now = _now_ms()
            if not mgr.add(current, now):
                if cfg.late_stream is not None:
                    out.emit(cfg.late_stream, current, Values(current))
                    yield from drain()
                continue
            if not cfg.event_time:
                yield from run_windows(mgr.fire(mgr.clock(now)))
        current = None
        stage = "watermark"
        yield from run_windows(mgr.fire(mgr.clock(_now_ms())))
        mgr.flush()
        stage = "pre_prepare"
        comp.pre_prepare(txid)
        stage = "prepare_commit"
        state.prepare_commit(txid)
        wstate.prepare_commit(txid)
        crash_point("between_prepares", txid, task=task, topology=spec.topology)
        stage = "cleanup"
        comp.cleanup()
    except Exception as exc:
        yield failure_report_at(spec, task, txid, exc, stage, current, n_in, n_out)
        return
    yield task_report(
        spec,
        task,
        txid,
        n_in=n_in,
        n_out=n_out,
        failed=n_failed,
        acked=n_in,
        late=mgr.late,
        windows=mgr.fired,
        window_events=mgr.stored_events(),
        window_peak_in_memory=mgr.peak_in_memory,
        errors=out.errors[:5],
        ms=(time.perf_counter() - t0) * 1000,
    )


class FailedWindow(Exception):
    """A window tuple was failed (or the window raised ``FailedTuple``): the batch fails."""
