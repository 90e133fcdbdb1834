"""A topology's spouts as the one streaming source of its query (every dialect).

Each spout makes its own streaming DataFrame (:func:`spout_streams`); several share the query as
the union of one tagged JSON row per input row (:func:`union_as_json`): a JSON object keeps each
column's type, where an array would cast them to one. The batch runner unpacks a spout's rows with
the tag.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from weir.errors import TopologyError, WeirError
from weir.sources.replayable import RESUME_OFFSET_KEY
from weir.topology.components import Spout
from weir.topology.context import TopologyContext

__all__ = ["spout_streams", "union_as_json"]


def spout_streams(
    spark: Any,
    topology: str,
    conf: Mapping[str, Any],
    spouts: Sequence[tuple[str, Spout]],
    *,
    kind: str = "spout",
    resume: Mapping[str, Any] | None = None,
    create: Callable[[str, Spout, Any, TopologyContext], Any] | None = None,
) -> list[Any]:
    """Each spout's streaming DataFrame, in order; ``kind`` names a spout in errors ("spout", "stream").

    ``resume`` maps a spout's name to the end offsets the store committed for it: that spout starts
    from them (a lost or relocated Spark checkpoint then costs nothing). ``create(name, spout, spark,
    context)`` makes a spout's stream (a dialect's :meth:`BatchRunner.create_stream`); by default
    the spout's own ``create_stream``.

    Raises
    ------
    TopologyError
        Naming the topology and the spout when a spout cannot create its stream (a
        :class:`~weir.errors.WeirError` of the spout's own is raised as it is).
    """
    dfs = []
    for name, spout in spouts:
        spout_conf = {**conf, RESUME_OFFSET_KEY: resume[name]} if resume and name in resume else conf
        ctx = TopologyContext(topology, name, 0, 1, spout_conf)
        try:
            dfs.append(create(name, spout, spark, ctx) if create is not None else spout.create_stream(spark, ctx))
        except WeirError:
            raise
        except Exception as exc:
            msg = f"topology {topology!r}, {kind} {name!r}: cannot create the spout's stream: {exc}"
            raise TopologyError(msg, topology=topology, component=name) from exc
    return dfs


def union_as_json(
    parts: Sequence[tuple[str | int, Any]], *, tag: str, value: str, options: Mapping[str, str] | None = None
) -> Any:
    """The union of ``(tag value, DataFrame)`` parts as rows ``(tag, value)``: the tag, and the row as JSON.

    An ``int`` tag value is an ``int`` column; ``options`` go to Spark's ``to_json``.
    """
    from pyspark.sql import functions as F  # noqa: N812

    rows = [
        d.select(
            (F.lit(t).cast("int") if isinstance(t, int) else F.lit(t)).alias(tag),
            # no options: none passed (Spark Connect sends an empty dict as a MAP<VOID, VOID> it refuses)
            F.to_json(F.struct(*[F.col(_quoted(c)) for c in d.columns]), *([dict(options)] if options else [])).alias(
                value
            ),
        )
        for t, d in parts
    ]
    out = rows[0]
    for r in rows[1:]:
        out = out.unionByName(r)
    return out


def _quoted(column: str) -> str:
    """``column`` as a name Spark takes literally (a dot in it is no nested field)."""
    return "`" + column.replace("`", "``") + "`"
