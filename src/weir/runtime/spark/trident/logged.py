"""A Trident stream over a Storm spout (``next_tuple``/``ack``/``fail``): its batches come from the spout log.

Storm's Trident treats such a spout as non-transactional: a replayed batch holds whatever the
source redelivers. On weir the spout runs on the driver through the same spout log a Storm
topology uses (:mod:`weir.runtime.spark.spoutlog`): each batch's tuples are written to the
topology's store before any state sees them, a retried or restarted batch reads exactly those
tuples again under the same txid, and ``ack`` follows the batch's ``COMMITTED``. So the stream is
*transactional* for Trident's spout × state table: the same txid always carries the same tuples.

The batch's tuples become a DataFrame with the spout's declared fields as ``STRING`` columns (a
spout emitting another type fails the batch, naming the field: convert in an ``each`` function).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from weir.checkpoint.coordinator import TaskFailure
from weir.errors import TopologyError
from weir.runtime.spark.config import RuntimeConfig
from weir.runtime.spark.spoutlog import SpoutDriver, SpoutOptions
from weir.state.factory import KeyValueStateProvider
from weir.topology.builder import TopologyBuilder
from weir.topology.components import Spout

__all__ = ["logged_frame", "storm_spout_driver"]


def storm_spout_driver(
    name: str, conf: Mapping[str, Any], spouts: list[tuple[str, Spout, int | None]], provider: Any, rc: RuntimeConfig
) -> SpoutDriver | None:
    """The spout log of a Trident topology's Storm spout (None when it has none); refusals at submit.

    ``spouts``: ``(stream name, spout, parallelism hint)`` of every ``new_stream``.
    """
    storm = [(n, s, p) for n, s, p in spouts if s.is_storm_spout()]
    if not storm:
        return None
    if len(spouts) > 1:
        msg = (
            f"topology {name!r}: Trident stream {storm[0][0]!r} reads a Storm spout (next_tuple); such a spout's "
            f"batches are cut on the driver, so it must be the topology's only spout (found "
            f"{', '.join(repr(n) for n, _s, _p in spouts)}). Run the others as their own topologies"
        )
        raise TopologyError(msg, topology=name, component=storm[0][0])
    sid, spout, hint = storm[0]
    if not isinstance(provider, KeyValueStateProvider):
        msg = (
            f"topology {name!r}: Trident stream {sid!r} reads a Storm spout, whose spout log lives in a weir "
            f"key-value store, but topology.state.provider is the custom {type(provider).__name__}; use sqlite, "
            "redis or postgres"
        )
        raise TopologyError(msg, topology=name, component=sid)
    builder = TopologyBuilder()
    builder.set_spout(sid, spout, hint or 1)
    options = SpoutOptions.from_conf(conf, rc.interval_ms, rc.message_timeout_secs)
    return SpoutDriver(name, conf, builder.create_topology(), provider.backend, options)


def logged_frame(
    spark: Any, topology: str, driver: SpoutDriver, parts: list[list[tuple[Any, ...]]], txid: int
) -> tuple[Any, list[TaskFailure]]:
    """The batch's logged tuples as a DataFrame of the spout's fields (or the failures that stop it)."""
    from pyspark.sql.types import StringType, StructField, StructType

    cid = driver.spout_ids[0]
    names = list(driver.topology.components[cid].outputs["default"])
    schema = StructType([StructField(n, StringType(), True) for n in names])
    rows: list[tuple[Any, ...]] = []
    for task, part in enumerate(parts):
        for rec in part:
            if rec[1] != "default":
                continue
            values = tuple(rec[2])
            for f, v in zip(names, values, strict=True):
                if v is not None and not isinstance(v, str):
                    err = (
                        f"topology {topology!r}, Trident stream {cid!r}, task {task}, txid {txid}: field {f!r} is "
                        f"{type(v).__name__} {v!r}; a Storm spout's Trident stream has STRING columns: emit strings "
                        "and convert them in an each() function (e.g. int(tup[0]))"
                    )
                    return None, [TaskFailure(cid, task, err, "")]
            rows.append(values)
    return spark.createDataFrame(rows, schema), []
