"""The change feed read back: ``weir.state.read_changes`` and the rewind behind ``read(..., txid=older)``.

A namespace's feed (:mod:`weir.state.changelog`) holds the change sets of its last ``retain``
committed txids, each key with its value before and after the commit. So, with the namespace's
committed txid *C*, the txids it can answer for are ``max(since, C - retain + 1)`` .. *C*, and the
state at an older txid *t* (``t + 1`` still retained) is the committed rows with every key changed
after *t* set back to the *before* value of its first change after *t*.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from weir.errors import ConfigError, StateError
from weir.state import ttl
from weir.state.changelog import RETAIN_KEY, ChangelogBackend, ChangeRow
from weir.statedata.codec import serializer, to_json
from weir.statedata.errors import StateReadConflictError
from weir.statedata.layout import check_readable, resolve

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["CHANGE_COLUMNS", "available", "read_changes", "rewind"]

#: the change feed DataFrame's schema, as Spark DDL
CHANGE_COLUMNS = "txid BIGINT, component STRING, task INT, key STRING, change_type STRING, value STRING"


def available(store: Any, topology: str, namespace: str) -> tuple[int, int]:
    """The txids (first, last) the namespace's feed can answer for; refuses a store or namespace without one."""
    backend: Any = store
    if not isinstance(store, ChangelogBackend):
        msg = (
            f"topology {topology!r}: the {getattr(backend, 'kind', '?')} store ({backend.describe()}) keeps no change "
            "feed (SQLite, PostgreSQL and Redis do); only the committed state can be read"
        )
        raise ConfigError(msg)
    rng = backend.log_range(namespace)
    committed = backend.txids(namespace).committed
    if rng is None or committed is None:
        msg = (
            f"topology {topology!r}, namespace {namespace!r}: no change feed was kept; submit the topology with "
            f"{RETAIN_KEY} = N (the last N txids are kept from then on)"
        )
        raise ConfigError(msg)
    return max(rng.since, committed - rng.retain + 1), committed


def check_range(backend: Any, topology: str, namespace: str, first: int, last: int) -> None:
    """Refuse (naming the retained range) when txids ``first``..``last`` are not all in the feed."""
    lo, hi = available(backend, topology, namespace)
    if first < lo or last > hi:
        msg = (
            f"topology {topology!r}, namespace {namespace!r}: txids {first}..{last} are not all in the change feed, "
            f"which holds txids {lo}..{hi}; raise {RETAIN_KEY} to keep more"
        )
        raise ConfigError(msg)


def rewind(rows: dict[bytes, bytes], changes: list[ChangeRow]) -> dict[bytes, bytes]:
    """The committed ``rows`` set back to before ``changes`` (sorted by txid): each key's first before-image."""
    seen: set[bytes] = set()
    for ch in changes:
        if ch.key in seen:
            continue
        seen.add(ch.key)
        if ch.before is None:
            rows.pop(ch.key, None)
        else:
            rows[ch.key] = ch.before
    return rows


def _changes_task(
    spec: tuple[str, int, str],
    url: str,
    topology: str,
    first: int,
    last: int,
    key_class: str | None,
    value_class: str | None,
) -> Iterator[tuple[int, str, int, str, str, str | None]]:
    """Executor side: the logged changes of one task namespace, txids ``first``..``last``."""
    from weir.state.factory import StateFactory

    component, task, namespace = spec
    backend: Any = StateFactory.from_url(url).backend
    kser, vser = serializer(key_class, "key_class"), serializer(value_class, "value_class")
    rows = backend.log_changes(namespace, first - 1, last)
    lo, _ = available(backend, topology, namespace)
    if lo > first:  # pruned by a commit while reading
        msg = (
            f"topology {topology!r}, namespace {namespace!r}: commits pruned txids before {lo} while the change feed "
            f"was read from txid {first}; read a later range, or raise {RETAIN_KEY}"
        )
        raise StateReadConflictError(msg)
    for ch in rows:
        if ttl.is_reserved(ch.key):  # weir's TTL index rows, not user data
            continue
        key = to_json(kser.deserialize(ch.key))
        if ch.after is None:
            yield ch.txid, component, task, key, "delete", None
        else:
            value = ttl.unwrap(ch.after, None)  # an expiring value's envelope stripped
            assert value is not None
            yield ch.txid, component, task, key, "put", to_json(vser.deserialize(value))


def read_changes(
    spark: SparkSession,
    url: str,
    topology: str,
    from_txid: int,
    to_txid: int,
    *,
    component: str | None = None,
    key_class: str | None = None,
    value_class: str | None = None,
) -> DataFrame:
    """The committed change sets of txids ``from_txid``..``to_txid`` (both included) as a DataFrame.

    Columns ``txid``, ``component``, ``task``, ``key``, ``change_type`` (``put`` / ``delete``) and
    ``value`` (the new value as JSON text; null for a delete), one row per changed key per txid,
    read on the executors (one partition per task namespace). Storm stateful bolts and windowed
    bolts; the topology must run with ``weir.state.changelog.retain`` on SQLite, PostgreSQL or Redis.

    Raises
    ------
    ConfigError
        A range not (or no longer) in the feed, naming the range it holds; a store without a feed.
    StateError
        An unknown topology or component.
    """
    from weir.state.factory import StateFactory

    check_readable(url, "weir.state.read_changes")
    if from_txid > to_txid:
        msg = f"read_changes: from_txid {from_txid} is after to_txid {to_txid}"
        raise ConfigError(msg)
    backend = StateFactory.from_url(url).backend
    ts = resolve(backend, topology, component)
    specs: list[tuple[str, int, str]] = []
    for comp in ts.components.values():
        if comp.kind not in ("bolt", "windowed"):
            if component is not None:
                msg = (
                    f"topology {topology!r}: component {component!r} is a {comp.kind} component; the change feed "
                    "is kept for Storm stateful (and windowed) bolts"
                )
                raise StateError(msg)
            continue
        for t in range(comp.parallelism):
            ns = comp.namespace(topology, t)
            check_range(backend, topology, ns, from_txid, to_txid)
            specs.append((comp.component, t, ns))
    if not specs:
        return spark.createDataFrame([], CHANGE_COLUMNS)
    fn = partial(
        _changes_task,
        url=url,
        topology=topology,
        first=from_txid,
        last=to_txid,
        key_class=key_class,
        value_class=value_class,
    )
    rdd = spark.sparkContext.parallelize(specs, len(specs)).flatMap(fn)
    return spark.createDataFrame(rdd, CHANGE_COLUMNS)
