"""Where a topology's state lives: its committed txid, its stateful components and their namespaces.

Everything is found in the store alone, from the coordinator record (``$checkpointspout-<topology>``:
the committed txid and each stateful component's parallelism) and the topology shape stored beside it
(the groupings). A component is one of:

* ``bolt`` — a Storm stateful bolt: task *i*'s :class:`~weir.state.KeyValueState` is namespace
  ``<topology>-<component>-<i>``;
* ``windowed`` — a Storm stateful windowed bolt: the same namespaces hold the bolt's own
  ``KeyValueState`` (what ``init_state`` got); the stored window tuples (``…-window``) are the
  window's bookkeeping and are not rows of the component;
* ``streams`` — an IBM Streams operator: each task's namespace holds checkpoints; its rows are the
  key-value map (``Checkpoint.put``) of the task's latest complete checkpoint;
* ``trident`` — a Trident map state, named ``trident:<table or key prefix>`` as ``weir state ls``
  shows it (map states are named by the user, not by the topology).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from weir.checkpoint.coordinator import CheckpointPhase, CheckPointState, CheckpointStore
from weir.checkpoint.history import load_topology_shape
from weir.checkpoint.rescale import hash_route, task_namespace
from weir.errors import ConfigError, StateError
from weir.state import ttl
from weir.state.backend import Backend
from weir.state.serializers import Serializer

__all__ = [
    "TRIDENT_PREFIX",
    "ComponentState",
    "KeyLocation",
    "TopologyState",
    "check_readable",
    "find_key",
    "resolve",
]

#: a Trident map state is named ``trident:<name>`` (as ``weir state ls`` shows it)
TRIDENT_PREFIX = "trident:"


@dataclass(frozen=True)
class ComponentState:
    """One stateful component of a topology and where its state is."""

    component: str
    kind: str  # bolt | windowed | streams | trident
    parallelism: int
    #: the groupings feeding it (from the stored topology shape; empty when unknown)
    groupings: tuple[str, ...] = ()

    def namespace(self, topology: str, task: int) -> str:
        """Task ``task``'s namespace."""
        return task_namespace(topology, self.component, task)


@dataclass(frozen=True)
class TopologyState:
    """A topology's committed txid and stateful components, read from its coordinator record."""

    topology: str
    record: CheckPointState
    components: dict[str, ComponentState]

    @property
    def txid(self) -> int:
        """The last committed txid."""
        return self.record.last_committed


def check_readable(url: str, what: str = "weir.state.read") -> None:
    """Refuse a store that cannot be read as data: one without a Storm key-value backend (memcached).

    Such a store holds Trident map states only, and a reader must enumerate keys. Memcached cannot
    list its items, and weir keeps no index of the keys it writes there (a second write per batch
    and an ever-growing item an eviction would empty; see :mod:`weir.connectors.memcached.maps`).
    """
    from urllib.parse import urlsplit

    from weir.state.registry import connector_for_scheme

    scheme = urlsplit(url).scheme
    conn = connector_for_scheme(scheme) if scheme else None
    if conn is not None and not conn.is_provider:
        msg = (
            f"{what}: the {conn.name} store {url.split('@')[-1]!r} cannot be read into a DataFrame: {conn.name} "
            "cannot enumerate its keys and weir keeps no index of them there (it holds Trident map states only, "
            "and no coordinator record). Read one key with `weir state get --url URL trident:<name> KEY`, or "
            "keep the map state in SQLite, Redis, PostgreSQL or HBase to read it whole"
        )
        raise ConfigError(msg)


def _record(backend: Backend, topology: str) -> CheckPointState:
    cstore = CheckpointStore(backend, topology)
    rec = cstore.load()
    if rec is None:
        msg = (
            f"topology {topology!r} has no coordinator record ({cstore.namespace!r}) in {backend.describe()}: it "
            "never committed a batch there. Check the topology name and the store URL (`weir state ls` lists "
            "the store's namespaces)"
        )
        raise StateError(msg)
    return rec


def _kind(backend: Backend, topology: str, component: str, known: set[str]) -> str:
    ns = task_namespace(topology, component, 0)
    if backend.get(ns, b"head") is not None and backend.get(ns, b"started") is not None:
        return "streams"
    if f"{ns}-window" in known:
        return "windowed"
    return "bolt"


def _groupings(shape: dict[str, Any] | None, component: str) -> tuple[str, ...]:
    for c in (shape or {}).get("components", []):
        if isinstance(c, dict) and c.get("id") == component:
            return tuple(sorted({str(i.get("grouping")) for i in c.get("inputs", []) if isinstance(i, dict)}))
    return ()


def resolve(backend: Backend, topology: str, component: str | None = None) -> TopologyState:
    """The committed txid and stateful components of ``topology`` (only ``component`` when given).

    Raises
    ------
    StateError
        When the topology has no coordinator record in the store.
    ConfigError
        When ``component`` is not a stateful component of the topology (the message lists them).
    """
    rec = _record(backend, topology)
    names = sorted(rec.parallelism)
    if component is not None and component.startswith(TRIDENT_PREFIX):
        return TopologyState(topology, rec, {component: ComponentState(component, "trident", 1)})
    if component is not None and component not in rec.parallelism:
        msg = (
            f"topology {topology!r} has no stateful component {component!r} (its stateful components: "
            f"{', '.join(names) or 'none'}; a Trident map state is read as 'trident:<name>', see `weir state ls`)"
        )
        raise ConfigError(msg)
    known = set(backend.namespaces())
    shape = load_topology_shape(backend, CheckpointStore(backend, topology).namespace)
    wanted = [component] if component is not None else names
    comps = {
        c: ComponentState(c, _kind(backend, topology, c, known), rec.parallelism[c], _groupings(shape, c))
        for c in wanted
    }
    return TopologyState(topology, rec, comps)


def committed(backend: Backend, topology: str) -> CheckPointState:
    """The coordinator record, refusing none; a reader waits while it is ``COMMITTING``."""
    return _record(backend, topology)


def is_committing(rec: CheckPointState) -> bool:
    """Whether the record is between ``COMMITTING(n)`` and ``COMMITTED(n)`` (namespaces disagree)."""
    return rec.phase is CheckpointPhase.COMMITTING


@dataclass(frozen=True)
class KeyLocation:
    """Where ``weir state get --topology`` found (or looked for) a key."""

    topology: str
    component: str
    task: int
    namespace: str
    txid: int
    value: Any
    found: bool


def find_key(
    backend: Backend,
    topology: str,
    component: str,
    key: Any,
    key_serializer: Serializer,
    value_serializer: Serializer,
) -> KeyLocation:
    """The task whose namespace holds ``key`` by the fields grouping's hash, and its committed value.

    Raises
    ------
    ConfigError
        For an unknown component, a Streams operator or Trident map state, or a component fed by
        another grouping than fields (its keys are not placed by a hash of the key).
    """
    ts = resolve(backend, topology, component)
    comp = ts.components[component]
    if comp.kind in ("streams", "trident"):
        what = (
            "an IBM Streams operator (its checkpoints are not split by key)"
            if comp.kind == "streams"
            else ("a Trident map state (read it with `weir state get trident:<name> KEY`)")
        )
        msg = (
            f"topology {topology!r}: component {component!r} is {what}; --topology/--component finds Storm bolts' keys"
        )
        raise ConfigError(msg)
    if comp.groupings and comp.groupings != ("fields",):
        msg = (
            f"topology {topology!r}: component {component!r} is fed by grouping(s) {', '.join(comp.groupings)}, "
            "so no hash says which task holds a key; look in each namespace with "
            f"`weir state get {topology}-{component}-<task> KEY` (tasks 0..{comp.parallelism - 1})"
        )
        raise ConfigError(msg)
    skey = key_serializer.serialize(key)
    task = hash_route(key_serializer)(comp.parallelism)(skey)
    ns = comp.namespace(topology, task)
    stored = backend.get(ns, skey)
    data = None if stored is None else ttl.unwrap(stored, ttl.batch_time(backend, topology)[1])  # expired: gone
    value = None if data is None else value_serializer.deserialize(data)
    return KeyLocation(topology, component, task, ns, ts.txid, value, data is not None)
