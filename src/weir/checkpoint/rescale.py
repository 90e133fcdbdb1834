"""Rescale: re-partition a stateful component's committed state from N task namespaces into M.

A Storm stateful bolt keeps one namespace per task, ``<topology>-<component>-<task>``, and its
fields grouping sends a key to task ``stable_hash(key) % parallelism``
(:func:`weir._util.stable_hash`). When the component's parallelism changes between two runs, the
rows of the N old namespaces are moved to the M new ones by that same hash, so that every key's
row is in the namespace of the task its tuples now reach. It is one fenced, crash-safe step,
recorded beside the coordinator record (row ``__rescale`` of ``$checkpointspout-<topology>``,
stored in the same atomic write as the record):

1. **resolve** — a prepared change set left in an old namespace is committed when the record says
   its txid is ``COMMITTING`` and discarded otherwise (what recovery would do), after the task's
   hook (:attr:`ComponentRoute.resolve`: a Storm bolt's ``pre_commit(txid)`` or ``pre_rollback()``);
2. marker ``{"stage": "staging", "from": N, "to": M}`` — the old layout is the truth; the
   staging namespaces ``$rescale-<topology>-<component>-<task>`` (0..M-1) are dropped and written
   anew from the old namespaces, each with the record's last committed txid as its committed txid;
3. marker ``"switching"`` — the new layout is the truth: every new namespace is dropped and
   copied from its staging namespace, old namespaces M..N-1 are dropped;
4. record ``parallelism[component] = M`` with marker ``"cleanup"`` (one write);
5. the staging namespaces are dropped and the marker removed.

A SIGKILL anywhere leaves a marker that the next start (or ``weir state rescale``) finishes:
``staging`` starts over from the old namespaces (untouched so far), ``switching`` and
``cleanup`` roll forward from the complete staging namespaces. A reader therefore always finds
the old layout or the new one, never a mix, and every count exactly once. Every write carries the
epoch the caller took in the coordinator namespace, so a newer driver fences this one.

An event-time windowed bolt (``ComponentRoute.window_key`` set) has its window namespaces
``<task namespace>-window`` staged, switched and dropped alongside, every stored window tuple moved
to the task of its grouping value; :func:`_plan_windows` says when that is exact and refuses, before
the marker is written, when it is not. The plan holds the component's stored window tuples in memory.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from weir._faults import crash_point
from weir._util import stable_hash
from weir.checkpoint.coordinator import RECORD_KEY, CheckpointPhase, CheckPointState, CheckpointStore
from weir.errors import CheckpointError, ConfigError, FencedError
from weir.state.backend import Backend
from weir.state.serializers import JsonSerializer, Serializer
from weir.state.ttl import is_reserved

__all__ = [
    "RESCALE_KEY",
    "ComponentRoute",
    "Rescaler",
    "hash_route",
    "load_marker",
    "plan_counts",
    "staging_namespace",
    "task_namespace",
]

log = logging.getLogger("weir.checkpoint")

#: the marker row beside the coordinator record while a rescale is under way
RESCALE_KEY = b"__rescale"
#: rows per write while copying
BATCH_ROWS = 5_000

Route = Callable[[bytes], int]
"""Serialized key → new task index (0..M-1)."""


def task_namespace(topology: str, component: str, task: int) -> str:
    """A task's namespace: ``<topology>-<component>-<task>``."""
    return f"{topology}-{component}-{task}"


def staging_namespace(topology: str, component: str, task: int) -> str:
    """Where a rescale stages new task ``task``: ``$rescale-<topology>-<component>-<task>``."""
    return f"$rescale-{topology}-{component}-{task}"


def hash_route(key_serializer: Serializer | None = None) -> Callable[[int], Route]:
    """The fields grouping's routing: ``stable_hash(decoded key) % M``.

    The state key is taken to be the grouping value: the field's value for one field, a list (or
    tuple) of the values in grouping order for several (a list and a tuple hash alike).
    """
    ser = key_serializer or JsonSerializer()

    def for_parallelism(m: int) -> Route:
        def route(skey: bytes) -> int:
            return stable_hash(ser.deserialize(skey)) % m

        return route

    return for_parallelism


@dataclass(frozen=True)
class ComponentRoute:
    """How one stateful component is re-partitioned, or why it cannot be.

    ``route(M)`` gives the routing of a serialized key to a new task; ``refusal`` (when set) is the
    message that refuses a parallelism change of this component.
    """

    component: str
    route: Callable[[int], Route] | None = None
    refusal: str | None = None
    #: a windowed bolt's stored event ``[v, source, stream, source_task, txid, values]`` → its
    #: fields grouping value; set, the task's window namespace (``…-window``) is re-partitioned too
    window_key: Callable[[list[Any]], Any] | None = None
    #: called per old task before its pending prepare is resolved (step 1): ``resolve(task, old
    #: parallelism, txid, commit)`` — the Storm runtime runs the bolt's ``pre_commit(txid)`` (commit)
    #: or ``pre_rollback()`` there, as recovery would
    resolve: Callable[[int, int, int, bool], None] | None = None


def load_marker(backend: Backend, namespace: str) -> dict[str, object] | None:
    """The ``__rescale`` marker of a coordinator namespace, or None."""
    data = backend.get(namespace, RESCALE_KEY)
    if data is None:
        return None
    try:
        marker = json.loads(data)
        if not isinstance(marker, dict) or marker.get("stage") not in ("staging", "switching", "cleanup"):
            bad = f"unknown marker {marker!r}"
            raise ValueError(bad)
        int(marker["from"]), int(marker["to"]), str(marker["component"])
    except (ValueError, KeyError, TypeError) as exc:
        msg = (
            f"namespace {namespace!r}: the rescale marker {RESCALE_KEY.decode()!r} is corrupt ({exc}); "
            "inspect it with `weir state inspect`"
        )
        raise CheckpointError(msg) from exc
    return dict(marker)


class Rescaler:
    """Re-partitions the components of one topology whose parallelism changed (module doc)."""

    def __init__(self, topology: str, routes: Mapping[str, ComponentRoute], *, enabled: bool = True) -> None:
        self.topology = topology
        self.routes = dict(routes)
        self.enabled = enabled

    # ---- submit-time check ------------------------------------------------------------------
    def changes(self, record: CheckPointState | None, parallelism: Mapping[str, int]) -> dict[str, tuple[int, int]]:
        """``{component: (old, new)}`` of every stateful component whose parallelism changed."""
        if record is None:
            return {}
        out = {}
        for comp, old in record.parallelism.items():
            new = parallelism.get(comp)
            if new is not None and new != old:
                out[comp] = (old, new)
        return out

    def check(self, record: CheckPointState | None, parallelism: Mapping[str, int]) -> None:
        """Refuse, before anything is written, a change that cannot be re-partitioned (ConfigError)."""
        for comp, (old, new) in self.changes(record, parallelism).items():
            where = (
                f"topology {self.topology!r}: stateful component {comp!r} has parallelism {new}, but its state "
                f"was written by {old} tasks (namespaces {self.topology}-{comp}-0..{old - 1})"
            )
            if not self.enabled:
                msg = (
                    f"{where}, and weir.rescale=refuse. Run it with parallelism {old}, remove weir.rescale to "
                    f"re-partition the state at submit, or use `weir state rescale --topology {self.topology} "
                    f"--component {comp} --to {new}`"
                )
                raise ConfigError(msg)
            route = self.routes.get(comp)
            if route is None or route.route is None:
                reason = route.refusal if route is not None and route.refusal else "it cannot be split by key"
                msg = f"{where}: {reason}. Run it with parallelism {old}, or use a new topology name"
                raise ConfigError(msg)

    # ---- the step ---------------------------------------------------------------------------
    def run(self, store: CheckpointStore, epoch: int, parallelism: Mapping[str, int]) -> CheckPointState | None:
        """Finish a rescale left by a crash, then re-partition every changed component. Returns the record."""
        rec = store.load()
        marker = load_marker(store.backend, store.namespace)
        if marker is not None and rec is not None:
            route = self.routes.get(str(marker["component"]))
            rec = self._finish(store, epoch, rec, marker, route)
        self.check(rec, parallelism)
        for comp, (old, new) in self.changes(rec, parallelism).items():
            assert rec is not None
            route = self.routes[comp]
            rec = self.rescale(store, epoch, rec, comp, old, new, route)
        return rec

    def _finish(
        self,
        store: CheckpointStore,
        epoch: int,
        rec: CheckPointState,
        marker: Mapping[str, object],
        route: ComponentRoute | None,
    ) -> CheckPointState:
        comp = str(marker["component"])
        old, new = int(str(marker["from"])), int(str(marker["to"]))
        stage = marker["stage"]
        log.warning(
            "topology %s: finishing the rescale of %r (%d -> %d) from stage %s", self.topology, comp, old, new, stage
        )
        if stage == "staging":  # the old layout is intact: start over (or just drop what was staged)
            if route is not None and route.route is not None and self.enabled:
                return self.rescale(store, epoch, rec, comp, old, new, route)
            self._drop_staging(store.backend, comp, new)
            self._save(store, epoch, rec, None)
            return rec
        if stage == "switching":
            self._switch(store.backend, epoch, comp, old, new, rec.txid)
            rec = self._save(store, epoch, replace(rec, parallelism={**rec.parallelism, comp: new}), marker, "cleanup")
        self._drop_staging(store.backend, comp, new)
        return self._save(store, epoch, rec, None)

    def rescale(
        self,
        store: CheckpointStore,
        epoch: int,
        rec: CheckPointState,
        comp: str,
        old: int,
        new: int,
        route: ComponentRoute,
    ) -> CheckPointState:
        """Re-partition ``comp`` from ``old`` to ``new`` tasks (steps 1-5 of the module doc)."""
        assert route.route is not None
        backend = store.backend
        log.warning("topology %s: re-partitioning %r from %d to %d tasks", self.topology, comp, old, new)
        olds = [task_namespace(self.topology, comp, t) for t in range(old)]
        # 1. pending prepares, resolved as recovery would: the task's hook, then its namespaces
        for t, ns in enumerate(olds):
            own = [ns, window_ns(ns)] if route.window_key is not None else [ns]
            pending = [(n, p) for n in own if (p := backend.txids(n).prepared) is not None]
            if not pending:
                continue
            commit = rec.phase is CheckpointPhase.COMMITTING
            if route.resolve is not None:
                route.resolve(t, old, rec.txid, commit and any(p == rec.txid for _, p in pending))
            for n, prepared in pending:
                if commit and prepared == rec.txid:
                    backend.commit_prepared(n, prepared, epoch)
                else:
                    backend.discard_prepared(n, epoch)
        windows = None
        if route.window_key is not None:  # refused before anything is written when not exact
            windows = _plan_windows(backend, self.topology, comp, olds, new, route.window_key)
        marker = {"component": comp, "from": old, "to": new}
        rec = self._save(store, epoch, rec, marker, "staging")
        crash_point("rescale_staging", rec.txid)
        # 2. the staging namespaces, from the old ones
        self._drop_staging(backend, comp, new)
        # the new namespaces' committed txid: the record's last committed one (after step 1 every old
        # namespace is at most there), so recovery's commit of a COMMITTING txid finds it committed
        done = [c for c in (backend.txids(ns).committed for ns in olds) if c is not None]
        if rec.last_committed > 0:
            done.append(rec.last_committed)
        committed = max(done, default=None)
        self._stage(backend, epoch, comp, olds, new, route.route(new), committed)
        if windows is not None:
            for t, rows in enumerate(windows):
                ns = window_ns(staging_namespace(self.topology, comp, t))
                for chunk in _chunks(iter(rows.items())):
                    backend.write_direct(ns, chunk, epoch)
                if committed is not None:
                    _set_committed(backend, ns, committed, epoch)
        crash_point("rescale_staged", rec.txid)
        # 3. switch
        rec = self._save(store, epoch, rec, marker, "switching")
        self._switch(backend, epoch, comp, old, new, rec.txid)
        # 4. the record names the new layout
        rec = self._save(store, epoch, replace(rec, parallelism={**rec.parallelism, comp: new}), marker, "cleanup")
        crash_point("rescale_switched", rec.txid)
        # 5. staging removed
        self._drop_staging(backend, comp, new)
        return self._save(store, epoch, rec, None)

    def _save(
        self,
        store: CheckpointStore,
        epoch: int,
        rec: CheckPointState,
        marker: Mapping[str, object] | None,
        stage: str | None = None,
    ) -> CheckPointState:
        row = None if marker is None else json.dumps({**marker, "stage": stage}, sort_keys=True).encode()
        # the record keeps its time: a rescale is not a run (``weir state rescale`` twice in a row is not
        # refused as a live topology); one atomic write of the record and the marker, fenced
        rec = replace(rec, epoch=epoch)
        try:
            store.backend.write_direct(store.namespace, {RECORD_KEY: rec.to_bytes(), RESCALE_KEY: row}, epoch)
        except FencedError as exc:
            msg = (
                f"topology {self.topology!r}: another driver or `weir state rescale` (a newer epoch) took over "
                f"during the rescale; this one (epoch {epoch}) stops, the newer one finishes it. ({exc})"
            )
            raise FencedError(msg) from exc
        return rec

    def _stage(
        self,
        backend: Backend,
        epoch: int,
        comp: str,
        olds: list[str],
        new: int,
        route: Route,
        committed: int | None,
    ) -> None:
        staged = [staging_namespace(self.topology, comp, t) for t in range(new)]
        buffers: list[dict[bytes, bytes | None]] = [{} for _ in range(new)]
        for ns in olds:
            for skey, sval in backend.scan(ns):
                if is_reserved(skey):
                    continue  # TTL index rows: each new task's namespace re-indexes itself on its first batch
                t = route(skey)
                if not 0 <= t < new:
                    msg = (
                        f"topology {self.topology!r}, component {comp!r}: key {skey!r} was routed to task {t} of {new}"
                    )
                    raise ConfigError(msg)
                buf = buffers[t]
                buf[skey] = sval
                if len(buf) >= BATCH_ROWS:
                    backend.write_direct(staged[t], buf, epoch)
                    buffers[t] = {}
        for t, buf in enumerate(buffers):
            if buf:
                backend.write_direct(staged[t], buf, epoch)
            if committed is not None:
                _set_committed(backend, staged[t], committed, epoch)

    def _switch(self, backend: Backend, epoch: int, comp: str, old: int, new: int, txid: int) -> None:
        # a windowed bolt's window namespaces move too; a staged one exists for every new task
        windowed = any(True for _ in backend.scan(window_ns(staging_namespace(self.topology, comp, 0))))
        for t in range(new):
            pairs = [(staging_namespace(self.topology, comp, t), task_namespace(self.topology, comp, t))]
            if windowed:
                pairs.append((window_ns(pairs[0][0]), window_ns(pairs[0][1])))
            for src, dst in pairs:
                backend.drop(dst)
                for rows in _chunks(backend.scan(src)):
                    backend.write_direct(dst, rows, epoch)
                committed = backend.txids(src).committed
                if committed is not None:
                    _set_committed(backend, dst, committed, epoch)
            if t == 0:
                crash_point("rescale_switching", txid)
        for t in range(new, old):
            backend.drop(task_namespace(self.topology, comp, t))
            if windowed:
                backend.drop(window_ns(task_namespace(self.topology, comp, t)))

    def _drop_staging(self, backend: Backend, comp: str, new: int) -> None:
        prefix = f"$rescale-{self.topology}-{comp}-"
        for ns in backend.namespaces():
            rest = ns[len(prefix) :].removesuffix("-window")
            if ns.startswith(prefix) and rest.isdigit():
                backend.drop(ns)


def _set_committed(backend: Backend, namespace: str, txid: int, epoch: int) -> None:
    """Make ``txid`` the committed txid of ``namespace`` without changing a row."""
    backend.write_prepared(namespace, txid, {}, epoch)
    backend.commit_prepared(namespace, txid, epoch)


def _chunks(rows: Iterator[tuple[bytes, bytes]]) -> Iterator[dict[bytes, bytes | None]]:
    buf: dict[bytes, bytes | None] = {}
    for k, v in rows:
        buf[k] = v
        if len(buf) >= BATCH_ROWS:
            yield buf
            buf = {}
    if buf:
        yield buf


def plan_counts(backend: Backend, topology: str, component: str, old: int, new: int, route: Route) -> Counter[int]:
    """How many keys each new task would get (``weir state rescale --dry-run``); writes nothing."""
    counts: Counter[int] = Counter({t: 0 for t in range(new)})
    for t in range(old):
        for skey, _ in backend.scan(task_namespace(topology, component, t)):
            if not is_reserved(skey):
                counts[route(skey)] += 1
    return counts


def window_ns(namespace: str) -> str:
    """A task's window namespace (:func:`weir.topology.window_manager.window_namespace`)."""
    return f"{namespace}-window"


def _plan_windows(
    backend: Backend, topology: str, comp: str, olds: list[str], new: int, key: Callable[[list[Any]], Any]
) -> list[dict[bytes, bytes]]:
    """The rows of the ``new`` window namespaces of an event-time windowed bolt, or a ConfigError.

    Every stored tuple moves to the task of its key (``stable_hash(key) % new``). It is exact only
    when every old task has processed the same window ends, i.e. its watermark lies in the same
    sliding interval ``(P, P + S]`` (windows end at multiples of ``S``; all ends ``<= P`` fired or
    were empty): a key then sees no window twice and none lost. The new tasks take the smallest old
    watermark (per input stream the smallest largest timestamp), the largest last fired end, and
    their next window end from their own tuples, past ``P``.
    """
    ser = JsonSerializer()
    metas: list[tuple[str, dict[str, Any]]] = []
    events: list[list[Any]] = []
    for ns in olds:
        wns = window_ns(ns)
        meta: dict[str, Any] | None = None
        for skey, sval in backend.scan(wns):
            k, v = ser.deserialize(skey), ser.deserialize(sval)
            if k == "meta" and isinstance(v, dict):
                meta = v
            elif isinstance(k, list) and isinstance(v, list):
                events.extend(v)
        if meta is not None:
            metas.append((wns, meta))
    where = f"topology {topology!r}, component {comp!r}"
    out: list[dict[bytes, bytes]] = [{} for _ in range(new)]
    if not metas:
        return out
    layouts = {json.dumps(m.get("layout")) for _, m in metas}
    layout = metas[0][1].get("layout")
    if len(layouts) != 1 or not isinstance(layout, list) or layout[:2] != ["duration", "event"]:
        msg = (
            f"{where}: its stored windows ({', '.join(ns for ns, _ in metas)}) are not event-time windows of one "
            f"layout ({sorted(layouts)}); only event-time windows are re-partitioned. Keep its parallelism"
        )
        raise ConfigError(msg)
    slide, width, size = int(layout[3]), int(layout[4]), int(layout[5])
    done = {ns: (None if m.get("wm") is None else math.floor(float(m["wm"]) / slide) * slide) for ns, m in metas}
    if len(set(done.values())) != 1:
        shown = ", ".join(f"{ns}: watermark {m.get('wm')}" for ns, m in metas)
        msg = (
            f"{where}: its tasks have fired windows up to different ends ({shown}; windows end at multiples of "
            f"{slide}), so a key moving between them would see a window twice or lose one. Keep its parallelism "
            "for now and rescale after a run in which every task's watermark passed the same window end "
            "(e.g. once every key has tuples past it)"
        )
        raise ConfigError(msg)
    p = next(iter(done.values()))
    wms = [float(m["wm"]) for _, m in metas if m.get("wm") is not None]
    smax: dict[str, float] = {}
    for _, m in metas:
        for s, v in dict(m.get("smax", {})).items():
            smax[s] = min(float(v), smax.get(s, math.inf))
    ends = [float(m["last_end"]) for _, m in metas if m.get("last_end") is not None]
    last_end = max(ends) if ends else None
    per_task: list[list[list[Any]]] = [[] for _ in range(new)]
    for ev in events:
        per_task[stable_hash(key(ev)) % new].append(ev)
    for t, evs in enumerate(per_task):
        slices: dict[int, list[list[Any]]] = {}
        for ev in evs:
            slices.setdefault(math.ceil(float(ev[0]) / width), []).append(ev)
        rows = out[t]
        for b, sev in slices.items():
            for c in range(0, len(sev), size):
                rows[ser.serialize(["c", b, c // size])] = ser.serialize(sev[c : c + size])
        next_end: float | None = None
        if evs:
            next_end = math.ceil(min(float(ev[0]) for ev in evs) / slide) * slide
            for floor in (p, last_end):
                if floor is not None:
                    next_end = max(next_end, floor + slide)
        meta = {
            "seq": len(evs),
            "axis": None,
            "next_end": next_end,
            "last_end": last_end,
            "wm": min(wms) if wms else None,
            "smax": smax,
            "slices": {str(b): len(sev) for b, sev in sorted(slices.items())},
            "layout": layout,
        }
        rows[ser.serialize("meta")] = ser.serialize(meta)
    return out
