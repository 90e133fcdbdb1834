"""Bootstrap: seed a new topology's stateful component with initial keys, as one fenced, crash-safe step.

``weir.submit(..., initial_state={component: DataFrame})`` and ``weir state load`` write initial
``(key, value)`` rows into the component's task namespaces ``<topology>-<component>-<task>``, each key
into the namespace of the task its tuples reach (the fields grouping's hash, as
:mod:`weir.checkpoint.rescale` routes it), before the first batch. Steps, recorded in the row
``__bootstrap`` beside the coordinator record of ``$checkpointspout-<topology>``:

1. **refuse** a topology that has committed state (a committed txid in its record, or any row,
   prepared set or committed txid in one of the component's task namespaces) — the error names it;
2. the staging namespaces ``$bootstrap-<topology>-<component>-<task>`` are dropped and written
   anew, every row routed to its task (no marker yet: a crash here leaves the task namespaces
   untouched, and the next load drops the staging namespaces first);
3. marker ``{"stage": "switching"}`` and the record (``parallelism[component] = N``, so a later start
   with another parallelism re-partitions the loaded keys) in one write; every task namespace is
   written from its staging namespace;
4. the staging namespaces are dropped; the marker is replaced by ``__bootstrapped-<component>``
   (row count and an order-free digest of the rows), in one write.

A SIGKILL after step 3's write leaves a marker that the next load or start of the topology
(:func:`finish_bootstrap`) rolls forward from the complete staging namespaces. The task
namespaces therefore hold all the rows or none. Loading the identical rows again is a no-op (a
restarted program that passes the same ``initial_state``); anything else once the topology has
state is refused. Every write carries the
epoch taken in the coordinator namespace, so a newer driver fences a load in flight.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from weir._faults import crash_point
from weir.checkpoint.coordinator import RECORD_KEY, CheckPointState, CheckpointStore
from weir.errors import CheckpointError, StateError
from weir.state.backend import Backend

__all__ = ["BOOTSTRAP_KEY", "BootstrapResult", "bootstrap_namespace", "finish_bootstrap", "load_initial_state"]

log = logging.getLogger("weir.checkpoint")

BOOTSTRAP_KEY = b"__bootstrap"
CHUNK_ROWS = 5_000
_MOD = 1 << 256


def bootstrap_namespace(topology: str, component: str, task: int) -> str:
    """Where a load stages task ``task``'s rows: ``$bootstrap-<topology>-<component>-<task>``."""
    return f"$bootstrap-{topology}-{component}-{task}"


def _done_key(component: str) -> bytes:
    return b"__bootstrapped-" + component.encode()


@dataclass(frozen=True)
class BootstrapResult:
    """What a load did: rows per task, or that the identical rows were loaded before."""

    component: str
    rows_per_task: tuple[int, ...]
    already_loaded: bool = False

    @property
    def rows(self) -> int:
        """Rows loaded."""
        return sum(self.rows_per_task)


def _marker(backend: Backend, namespace: str) -> dict[str, object] | None:
    data = backend.get(namespace, BOOTSTRAP_KEY)
    if data is None:
        return None
    try:
        marker = json.loads(data)
        if not isinstance(marker, dict) or marker.get("stage") not in ("staging", "switching"):
            bad = f"unknown marker {marker!r}"
            raise ValueError(bad)
        str(marker["component"]), int(marker["to"])
    except (ValueError, KeyError, TypeError) as exc:
        msg = f"namespace {namespace!r}: the bootstrap marker is corrupt ({exc}); inspect it with `weir state inspect`"
        raise CheckpointError(msg) from exc
    return dict(marker)


def _copy(backend: Backend, src: str, dst: str, epoch: int) -> None:
    chunk: dict[bytes, bytes | None] = {}
    for k, v in backend.scan(src):
        chunk[bytes(k)] = bytes(v)
        if len(chunk) >= CHUNK_ROWS:
            backend.write_direct(dst, chunk, epoch)
            chunk = {}
    if chunk:
        backend.write_direct(dst, chunk, epoch)


def finish_bootstrap(backend: Backend, topology: str, epoch: int) -> None:
    """Resolve a load a crash interrupted: undo it while ``staging``, roll it forward once ``switching``."""
    store = CheckpointStore(backend, topology)
    marker = _marker(backend, store.namespace)
    if marker is None:
        return
    comp, n = str(marker["component"]), int(str(marker["to"]))
    log.warning("topology %s: finishing the interrupted load of %r (stage %s)", topology, comp, marker["stage"])
    if marker["stage"] == "switching":
        for t in range(n):
            _copy(backend, bootstrap_namespace(topology, comp, t), f"{topology}-{comp}-{t}", epoch)
        done = json.dumps({k: marker[k] for k in ("rows", "digest") if k in marker}, sort_keys=True).encode()
        _drop_staging(backend, topology, comp, n)
        backend.write_direct(store.namespace, {BOOTSTRAP_KEY: None, _done_key(comp): done}, epoch)
        return
    _drop_staging(backend, topology, comp, n)
    backend.write_direct(store.namespace, {BOOTSTRAP_KEY: None}, epoch)


def _drop_staging(backend: Backend, topology: str, component: str, n: int) -> None:
    for t in range(n):
        backend.drop(bootstrap_namespace(topology, component, t))


def _has_state(backend: Backend, namespace: str) -> bool:
    rec = backend.txids(namespace)
    return rec.committed is not None or rec.prepared is not None or backend.count(namespace) > 0


def load_initial_state(
    backend: Backend,
    topology: str,
    component: str,
    parallelism: int,
    rows: Iterable[tuple[bytes, bytes]],
    route: Callable[[bytes], int],
    epoch: int,
) -> BootstrapResult:
    """Load serialized ``(key, value)`` rows into ``component``'s task namespaces (steps 1-4 of the module doc).

    ``route`` maps a serialized key to its task (0..parallelism-1); ``epoch`` was taken in the
    coordinator namespace (:meth:`CheckpointStore.acquire_epoch`, or the starting coordinator's).
    """
    store = CheckpointStore(backend, topology)
    finish_bootstrap(backend, topology, epoch)
    where = f"topology {topology!r}, component {component!r}"
    rec = store.load()
    # stage first (the digest is known only after reading every row), then decide
    staged = [bootstrap_namespace(topology, component, t) for t in range(parallelism)]
    if rec is not None and rec.last_committed > 0:
        done = backend.get(store.namespace, _done_key(component))
        if done is None:
            msg = (
                f"{where}: the topology already has committed state (txid {rec.last_committed}); initial state "
                "is loaded only into a topology that has never committed. Use a new topology name, or drop its "
                "state first (`weir state drop`)"
            )
            raise StateError(msg)
    stored_n = None if rec is None else rec.parallelism.get(component)
    if stored_n is not None and stored_n != parallelism:
        msg = (
            f"{where}: its state was laid out for {stored_n} tasks, not {parallelism}; load with parallelism "
            f"{stored_n}, or re-partition first (`weir state rescale`)"
        )
        raise StateError(msg)
    _drop_staging(backend, topology, component, parallelism)
    buffers: list[dict[bytes, bytes | None]] = [{} for _ in range(parallelism)]
    counts = [0] * parallelism
    digest = 0
    for skey, sval in rows:
        t = route(skey)
        if not 0 <= t < parallelism:
            msg = f"{where}: key {skey[:60]!r} was routed to task {t} of {parallelism}"
            raise StateError(msg)
        digest = (digest + int.from_bytes(hashlib.sha256(b"%d:" % len(skey) + skey + sval).digest(), "big")) % _MOD
        buf = buffers[t]
        if skey not in buf:
            counts[t] += 1
        buf[skey] = sval
        if len(buf) >= CHUNK_ROWS:
            backend.write_direct(staged[t], buf, epoch)
            buffers[t] = {}
    summary = {"rows": sum(counts), "digest": f"{digest:064x}"}
    done_raw = backend.get(store.namespace, _done_key(component))
    if done_raw is not None and json.loads(done_raw) == summary:
        _drop_staging(backend, topology, component, parallelism)
        log.info("%s: the same initial state was loaded before; nothing to do", where)
        return BootstrapResult(component, tuple(counts), already_loaded=True)
    if rec is not None and rec.last_committed > 0:
        _drop_staging(backend, topology, component, parallelism)
        msg = (
            f"{where}: the topology already has committed state (txid {rec.last_committed}) and these rows differ "
            "from the initial state it was loaded with; use a new topology name, or drop its state first"
        )
        raise StateError(msg)
    for t in range(parallelism):
        ns = f"{topology}-{component}-{t}"
        if _has_state(backend, ns):
            _drop_staging(backend, topology, component, parallelism)
            msg = (
                f"{where}: namespace {ns!r} already holds state; initial state is loaded only into empty task "
                "namespaces. Use a new topology name, or drop the state first (`weir state drop`)"
            )
            raise StateError(msg)
    for t, buf in enumerate(buffers):
        if buf:
            backend.write_direct(staged[t], buf, epoch)
    crash_point("bootstrap_staged", 0)
    base = rec or CheckPointState()
    new_rec = replace(base, epoch=epoch, parallelism={**base.parallelism, component: parallelism})
    marker = {"component": component, "to": parallelism, "stage": "switching", **summary}
    backend.write_direct(
        store.namespace, {RECORD_KEY: new_rec.to_bytes(), BOOTSTRAP_KEY: json.dumps(marker).encode()}, epoch
    )
    crash_point("bootstrap_switching", 0)
    for t in range(parallelism):
        _copy(backend, staged[t], f"{topology}-{component}-{t}", epoch)
        if t == 0:
            crash_point("bootstrap_between_tasks", 0)
    _drop_staging(backend, topology, component, parallelism)
    done = json.dumps(summary, sort_keys=True).encode()
    backend.write_direct(store.namespace, {BOOTSTRAP_KEY: None, _done_key(component): done}, epoch)
    log.info("%s: loaded %d initial keys into %d tasks", where, sum(counts), parallelism)
    return BootstrapResult(component, tuple(counts))
