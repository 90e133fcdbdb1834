"""``weir.state.read``: a topology's committed state as a Spark DataFrame, read on the executors.

1. On the driver, the coordinator record gives the last committed txid *T* (a record in
   ``COMMITTING`` — namespaces being committed one by one — is waited for, up to ``wait`` seconds)
   and the stateful components with their parallelism (:func:`weir.statedata.layout.resolve`).
2. One Spark partition per task namespace (a big one, on SQLite or PostgreSQL: one per key range
   of about ``rows_per_partition`` rows; a Trident map state: one for the whole map) reads the
   **committed** rows only — never a prepared change set — on an executor, straight from the store;
   nothing is collected through the driver.
3. Each partition reads its namespace's committed txid before and after its scan: a txid above *T*,
   or a change during the scan, means a commit landed while reading, and the read fails with
   :class:`~weir.statedata.errors.StateReadConflictError` naming the namespace and both txids (read
   again). A Trident opaque cell written by a batch after *T* is read as its previous value (the
   cell keeps it); a transactional one raises the same error.

Keys and values are decoded by the topology's serializers (JSON by default; ``pickle`` is refused:
nothing read from a store is unpickled) and put in the DataFrame as compact JSON text
(``F.parse_json("value")`` turns them into a VARIANT, ``.cast("long")`` a count into a number).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from weir.errors import ConfigError, StateError
from weir.state import ttl
from weir.state.ranges import KeyRange, KeyRangeBackend
from weir.statedata.codec import serializer, to_json
from weir.statedata.errors import StateReadConflictError
from weir.statedata.layout import TRIDENT_PREFIX, check_readable, committed, is_committing, resolve
from weir.statedata.typed import spark_value_type, typed_value

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["COLUMNS", "read"]

#: the DataFrame's schema, as Spark DDL
COLUMNS = "component STRING, task INT, key STRING, value STRING, txid BIGINT"


def _conflict(topology: str, namespace: str, txid: int, found: int | None, during: bool) -> StateReadConflictError:
    when = "during the read" if during else "after the read began"
    msg = (
        f"topology {topology!r}, namespace {namespace!r}: a commit landed {when} (committed txid {found}, the read "
        f"is at txid {txid}); the rows would mix two transactions. Read again: the new read is consistent at the "
        "newer txid"
    )
    return StateReadConflictError(msg)


#: one partition's work: component, kind, task, namespace, key range (None: the whole namespace)
Spec = tuple[str, str, int, str, KeyRange | None]


def _scan_task(
    spec: Spec,
    url: str,
    topology: str,
    txid: int,
    key_class: str | None,
    value_class: str | None,
    older: int | None = None,
    value_type: str | None = None,
) -> Iterator[tuple[str, int | None, str, Any, int]]:
    """Executor side: the committed rows of one task namespace (or one Trident map state).

    With ``older``, the rows as of that txid: rewound with the change feed's before-images. With
    ``value_type`` (a Spark type: a typed PostgreSQL map state), values are that type, not JSON text.
    """
    from weir.state.factory import StateFactory

    component, kind, task, namespace, key_range = spec
    backend: Any = StateFactory.from_url(url).backend
    if kind == "trident":
        yield from _scan_map(backend, topology, component, txid, value_type)
        return
    before = backend.txids(namespace).committed
    if before is not None and before > txid:
        raise _conflict(topology, namespace, txid, before, during=False)
    if kind == "streams":
        rows = _streams_rows(backend, topology, component, task, namespace)
    else:
        kser, vser = serializer(key_class, "key_class"), serializer(value_class, "value_class")
        if older is None and key_range is not None:
            stored: Any = backend.scan_range(namespace, key_range)
        elif older is None:
            stored = backend.scan(namespace)
        else:
            from weir.statedata.feed import rewind

            changes = backend.log_changes(namespace, older, before if before is not None else txid)
            stored = rewind(dict(backend.scan(namespace)), changes).items()
        rows = _live(stored, kser, vser, None if older is not None else ttl.batch_time(backend, topology)[1])
    at = txid if older is None else older
    for key, value in rows:
        yield component, task, to_json(key), to_json(value), at
    after = backend.txids(namespace).committed
    if after != before:
        raise _conflict(topology, namespace, txid, after, during=True)


def _live(stored: Any, kser: Any, vser: Any, now_ms: int | None) -> Iterator[tuple[Any, Any]]:
    """Decoded (key, value) pairs of stored rows, as every reader through weir sees them.

    weir's reserved TTL rows are left out, expiring values unwrapped, and values expired at ``now_ms``
    (the topology's last batch time) left out (:mod:`weir.state.ttl`).
    """
    for k, v in stored:
        if ttl.is_reserved(k):
            continue
        plain = ttl.unwrap(v, now_ms)
        if plain is not None:
            yield kser.deserialize(k), vser.deserialize(plain)


def _streams_rows(backend: Any, topology: str, component: str, task: int, namespace: str) -> Iterator[tuple[Any, Any]]:
    """The key-value map of an operator task's latest complete checkpoint (never unpickled)."""
    from weir.streams.store import TaskCheckpoints

    store = TaskCheckpoints(backend, namespace, f"topology {topology!r}, operator {component!r} task {task}")
    head = store.head()
    latest = None if head is None else head.latest
    if latest is None:
        return
    ckpt = store.load(latest)
    for k in ckpt.keys():
        yield k, ckpt.get(k)


def _scan_map(
    backend: Any, topology: str, component: str, txid: int, value_type: str | None = None
) -> Iterator[tuple[str, int | None, str, Any, int]]:
    """A Trident map state's cells as of ``txid`` (an opaque cell of a later batch: its previous value).

    Cells expired at the topology's last committed txid (``weir.state.ttl.ms``) are left out.
    """
    from weir.trident.backing.catalog import catalog_for
    from weir.trident.backing.expiry import cell_txid, reader_cutoff
    from weir.trident.state import OpaqueValue, TransactionalValue

    catalog = catalog_for(backend)
    info = None if catalog is None else catalog.find(component)
    if catalog is None or info is None:
        msg = f"topology {topology!r}: no Trident map state {component!r} in {backend.describe()}; see `weir state ls`"
        raise StateError(msg)
    upto = reader_cutoff(backend, component)  # weir.state.ttl.ms: cells expired at the last committed txid
    for key, cell in catalog.cells(info):
        if upto is not None and (cell_txid(cell) or 0) <= upto:
            continue
        value = cell
        if isinstance(cell, OpaqueValue):
            later = cell.curr_txid is not None and cell.curr_txid > txid
            value = cell.prev if later else cell.curr
        elif isinstance(cell, TransactionalValue):
            if cell.txid is not None and cell.txid > txid:
                raise _conflict(topology, component, txid, cell.txid, during=True)
            value = cell.val
        out = to_json(value) if value_type is None else typed_value(value, value_type)
        yield component, None, to_json(list(key)), out, txid


def _settled(backend: Any, topology: str, wait: float) -> int:
    """The last committed txid, once the record is not in ``COMMITTING`` (waits up to ``wait`` s)."""
    deadline = time.monotonic() + wait
    while True:
        rec = committed(backend, topology)
        if not is_committing(rec):
            return rec.last_committed
        if time.monotonic() >= deadline:
            msg = (
                f"topology {topology!r} has been committing txid {rec.txid} for over {wait:g} s (the record says "
                "COMMITTING): its namespaces are between two txids. Wait for the commit (or for recovery at the "
                "next start, if the driver died), then read again"
            )
            raise StateReadConflictError(msg)
        time.sleep(0.1)


def _check_rewind(backend: Any, topology: str, specs: list[Spec], older: int) -> None:
    """Refuse a read at ``older`` unless every namespace's feed holds the txids after it."""
    from weir.statedata.feed import available, check_range

    for component, kind, _, namespace, _ in specs:
        if kind not in ("bolt", "windowed"):
            msg = (
                f"topology {topology!r}: component {component!r} is a {kind} component, which keeps no change "
                f"feed; read it at the last committed txid (without txid=)"
            )
            raise ConfigError(msg)
        _, last = available(backend, topology, namespace)
        if last > older:
            check_range(backend, topology, namespace, older + 1, last)


def read(
    spark: SparkSession,
    url: str,
    topology: str,
    component: str | None = None,
    *,
    txid: int | None = None,
    key_class: str | None = None,
    value_class: str | None = None,
    wait: float = 30.0,
    rows_per_partition: int = 250_000,
) -> DataFrame:
    """A topology's committed state as a DataFrame (``component``, ``task``, ``key``, ``value``, ``txid``).

    Parameters
    ----------
    spark
        The SparkSession to read with; the store is read on its executors, one partition per task.
    url
        The store: ``sqlite:///PATH``, ``redis://…``, ``postgresql://…``, ``hbase://…``.
    topology
        The topology's name (as submitted).
    component
        One stateful component (default: every one in the coordinator record); a Trident map state
        as ``trident:<name>`` (``task`` is null for it).
    txid
        The txid to read at (default: the last committed one). An older txid is read by rewinding
        the committed rows with the change feed (``weir.state.changelog.retain``), and is refused,
        naming the range the feed holds, when the txids after it are no longer all kept.
    key_class, value_class
        The topology's ``keyClass`` / ``valueClass`` short names (default ``json``; never ``pickle``).
    wait
        Seconds to wait for a commit in progress before failing.
    rows_per_partition
        A namespace with more rows is read as several key ranges, one partition each (SQLite,
        PostgreSQL; each range checks the namespace's txid, so the read stays at one txid).

    Raises
    ------
    StateError
        Unknown topology (no coordinator record in the store).
    ConfigError
        Unknown component, a refused txid or serializer.
    StateReadConflictError
        A commit landed while reading (when the DataFrame is computed); read again.
    """
    from weir.state.factory import StateFactory

    check_readable(url, "weir.state.read")
    serializer(key_class, "key_class")
    serializer(value_class, "value_class")
    backend = StateFactory.from_url(url).backend
    at = _settled(backend, topology, wait)
    if txid is not None and txid > at:
        msg = f"topology {topology!r}: cannot read at txid {txid}: the last committed txid is {at}"
        raise ConfigError(msg)
    older = txid if txid is not None and txid < at else None
    ts = resolve(backend, topology, component)
    specs: list[Spec] = []
    for comp in ts.components.values():
        if comp.kind == "trident":
            specs.append((comp.component, comp.kind, 0, comp.component[len(TRIDENT_PREFIX) :], None))
            continue
        specs.extend((comp.component, comp.kind, t, comp.namespace(topology, t), None) for t in range(comp.parallelism))
    if older is not None:
        _check_rewind(backend, topology, specs, older)
    else:
        specs = _split(backend, specs, rows_per_partition)
    if not specs:
        return spark.createDataFrame([], COLUMNS)
    value_type = _map_value_type(backend, specs)
    columns = COLUMNS if value_type is None else COLUMNS.replace("value STRING", f"value {value_type}")
    scan = partial(
        _scan_task,
        url=url,
        topology=topology,
        txid=at,
        key_class=key_class,
        value_class=value_class,
        older=older,
        value_type=value_type,
    )
    rdd = spark.sparkContext.parallelize(specs, len(specs)).flatMap(scan)
    return spark.createDataFrame(rdd, columns)


def _split(backend: Any, specs: list[Spec], rows_per_partition: int) -> list[Spec]:
    """Each big bolt namespace as key ranges of about ``rows_per_partition`` rows (where the store can)."""
    ranged = isinstance(backend, KeyRangeBackend)
    if not ranged or rows_per_partition < 1:
        return specs
    out: list[Spec] = []
    for spec in specs:
        component, kind, task, namespace, _ = spec
        rows = int(backend.count(namespace)) if kind in ("bolt", "windowed") else 0
        parts = -(-rows // rows_per_partition)
        if parts <= 1:
            out.append(spec)
            continue
        out.extend((component, kind, task, namespace, r) for r in backend.key_ranges(namespace, parts))
    return out


def _map_value_type(backend: Any, specs: list[Spec]) -> str | None:
    """The Spark type of a lone Trident map state's typed ``value`` column (see :mod:`.typed`), else None."""
    if len(specs) != 1 or specs[0][1] != "trident":
        return None
    from weir.trident.backing.catalog import catalog_for

    catalog = catalog_for(backend)
    info = None if catalog is None else catalog.find(specs[0][0])
    layout = None if info is None else info.layout
    return spark_value_type(layout.get("value_type")) if isinstance(layout, dict) else None
