"""Driver side: compile a Trident plan into Spark DataFrame operations for one micro-batch.

Per batch, every node becomes a DataFrame whose columns are the node's fields:

- projections, partitioning, joins, merges and the built-in aggregators (``Count``, ``Sum`` on a
  typed number) are Spark SQL (``select``, ``repartition``, ``join``, ``groupBy().agg``);
- user operations run as ``mapInArrow`` stages (:mod:`weir.runtime.spark.trident.tasks`);
- states are updated per state partition by :mod:`weir.runtime.spark.trident.state_tasks` after a routing
  stage and a ``repartition`` that puts state partition *p* in Spark partition *p*.

A node read by several others is persisted for the batch so user code and state updates run
once; a state node's output is always persisted before anything reads it.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from weir.errors import TopologyError
from weir.runtime.spark.executor import BATCH_PROPERTY, batch_property
from weir.runtime.spark.session import is_connect
from weir.runtime.spark.trident._arrow import spout_failure_prefix
from weir.runtime.spark.trident.state_tasks import (
    SPARK_HASHED_TYPES,
    JournalSpec,
    PersistAggStage,
    PersistStage,
    QueryStage,
    RouteStage,
    read_touches,
    spark_routing_values,
)
from weir.runtime.spark.trident.tasks import AggStage, OpStage
from weir.trident.fields import FieldSpec, StreamSchema
from weir.trident.nodes import DRPC_RID, Node

__all__ = ["BatchPlanner", "Compiled", "RunContext"]

P_COL, Q_COL, V_COL, N_COL = "_weir_p", "_weir_q", "_weir_v", "_weir_n"
_WRITERS = frozenset({"persist_agg", "partition_persist"})  # plan nodes that update a state
_OBSERVATIONS = itertools.count()  # Spark observation names must not repeat


@dataclass
class Compiled:
    """A node's DataFrame in this batch and its fields (``dtype`` ``None`` = an any-field)."""

    df: Any
    fields: list[FieldSpec]

    @property
    def names(self) -> list[str]:
        """The column names."""
        return [f.name for f in self.fields]

    def index(self, names: Any) -> list[int]:
        """Positions of ``names``."""
        own = self.names
        return [own.index(n) for n in names]


def typed_fields(df: Any, any_names: set[str] | frozenset[str] = frozenset()) -> list[FieldSpec]:
    """The fields of ``df``: its Spark types, except ``any_names`` (any-encoded binary columns)."""
    return [FieldSpec(f.name, None if f.name in any_names else f.dataType) for f in df.schema.fields]


@dataclass
class RunContext:
    """What stays the same across batches of one submitted topology."""

    topology: str
    conf: Mapping[str, Any]
    nodes: list[Node]
    source: Any  # weir.runtime.spark.trident.runner.TridentSource (its schemas, multi-spout or not)
    provider: Any = None  # the coordinator's store (for the journal)
    journal_namespace: str = ""
    journal_states: frozenset[str] = frozenset()
    #: factories replacing a state's own for this run (MemoryMapState on Spark: a run-scoped store)
    factories: Mapping[str, Any] = field(default_factory=dict)
    #: ``weir.state.ttl.ms``: state id → ms (see :mod:`weir.runtime.spark.trident.ttl`)
    ttls: Mapping[str, int] = field(default_factory=dict)
    #: the coordinator's store, where the time log of a topology with TTLs lives
    ttl_provider: Any = None
    #: the commit-time sweep of expired cells (:class:`weir.runtime.spark.trident.ttl.TtlSweep`)
    ttl_sweep: Any = None

    def __post_init__(self) -> None:
        self.consumers: dict[int, int] = {n.id: 0 for n in self.nodes}
        for n in self.nodes:
            for p in n.parents:
                self.consumers[p.id] += 1
        self.needed = needed_fields(self.nodes)
        #: per-run caches of what every batch plans the same way: column references and the
        #: Spark types of nodes' outputs (asking Spark for a schema is a driver round trip)
        self.columns: dict[str, Any] = {}
        self.types: dict[tuple[int, str], list[FieldSpec]] = {}
        #: the Python stages' UDF expressions, made once per run: a stage takes its batch's txid from
        #: its job's local property, so one pickled stage (and one JVM function) serves every batch
        self.udfs: dict[tuple[int, str], Any] = {}
        self.default_n: int | None = None
        self.shuffle_now: int | None = None
        #: JVM sequences of column expressions or names, keyed by what they hold (each a driver
        #: round trip per element to build: a batch's select/groupBy/repartition reuse them)
        self.seqs: dict[tuple[Any, ...], Any] = {}
        #: per aggregation node, its Spark SQL aggregate expression (``None``: a Python aggregator)
        self.aggs: dict[tuple[int, str], Any] = {}
        #: per state id, the key types of a state partitioned by Spark's hash (``None``: stable_hash)
        self.routing: dict[str, list[str] | None] = {}
        #: per state-writing node, the shuffle partitions its job needs (its state's parallelism)
        self.shuffles: dict[int, int] = {}
        self.count_rows: Any = None  # the spouts' observed row count, ``count(1) AS n``
        #: per DRPC function, the last operation of its stream (whose tuples are the answer)
        self.drpc_leaves: dict[str, Node] = {
            n.drpc: n for n in self.nodes if n.drpc is not None and self.consumers[n.id] == 0
        }

    @functools.cached_property
    def feeds_state(self) -> frozenset[int]:
        """Ids of the nodes whose output reaches a state update: their stages' failures must stop the Spark job."""
        found: set[int] = set()
        stack = [p for n in self.nodes if n.kind in _WRITERS for p in n.parents]
        while stack:
            n = stack.pop()
            if n.id not in found:
                found.add(n.id)
                stack.extend(n.parents)
        return frozenset(found)


class BatchPlanner:
    """Builds (lazily, memoised) the DataFrame of every node for one batch."""

    def __init__(self, ctx: RunContext, batch: Any, txid: int, epoch: int | None, acc: Any) -> None:
        self.ctx = ctx
        self.batch = batch
        self.txid = txid
        self.epoch = epoch
        self.acc = acc
        #: per state with a TTL: this batch's expiry cutoff (set by the runner before ``run``)
        self.expiry: dict[str, int | None] = {}
        self.spark = batch.sparkSession
        self.connect = is_connect(self.spark)
        self.memo: dict[int, Compiled] = {}
        self.persisted: list[Any] = []
        self.observations: list[Any] = []
        self.counted_by: list[str] = []  # components whose reports count a spout's rows
        #: this batch's DRPC requests per function, ``(request id, args)`` (set by the runner)
        self.requests: Mapping[str, list[tuple[str, str]]] = {}
        if ctx.default_n is None:  # the query's session keeps its shuffle partitions for the run
            ctx.default_n = ctx.shuffle_now = int(self.spark.conf.get("spark.sql.shuffle.partitions") or 2)
        self.default_n = ctx.default_n

    # ---- driving -------------------------------------------------------------------------
    def actions(self) -> list[Node]:
        """The nodes to execute, in order: every state writer, then every other leaf."""
        nodes = self.ctx.nodes
        states = [n for n in nodes if n.kind in ("persist_agg", "partition_persist")]
        leaves = [n for n in nodes if self.ctx.consumers[n.id] == 0 and n not in states and n.drpc is None]
        return states + leaves  # DRPC streams run after the states (run_drpc)

    def run_drpc(self, function: str) -> list[tuple[str, list[Any]]]:
        """Evaluate DRPC ``function``'s stream for this batch's requests: ``(request id, visible values)`` rows.

        One Spark job (``collect``); a user function raising there raises here.
        """
        from weir.trident.fields import decode_any

        comp = self.compile(self.ctx.drpc_leaves[function])
        if self.connect:
            rows = comp.df.collect()
        else:
            sc = self.spark.sparkContext
            sc.setLocalProperty(BATCH_PROPERTY, batch_property(self.txid, self.epoch))
            try:
                rows = comp.df.collect()
            finally:
                sc.setLocalProperty(BATCH_PROPERTY, None)
        rid_at = comp.names.index(DRPC_RID)
        out = []
        for row in rows:
            values = [decode_any(v) if f.dtype is None else v for v, f in zip(row, comp.fields, strict=True)]
            rid = values.pop(rid_at)
            out.append((str(rid), values))
        return out

    def run(self) -> None:
        """Execute every action (one Spark job each), the batch named in the jobs' local property.

        Over Spark Connect (no job-local properties) each run-wide stage carries the batch's txid
        and epoch itself: Connect pickles a stage into the plan when an action (or a persist) sends
        it, and :meth:`_map` binds the stage to this batch before that.
        """
        if self.connect:
            for node in self.actions():
                df = self.compile(node).df
                self._shuffle_partitions(self.ctx.shuffles.get(node.id, self.default_n))
                df.write.format("noop").mode("overwrite").save()
            return
        sc = self.spark.sparkContext
        sc.setLocalProperty(BATCH_PROPERTY, batch_property(self.txid, self.epoch))
        try:
            for node in self.actions():
                df = self.compile(node).df
                # a Spark-hash-routed state's aggregate shuffles straight into its n state partitions
                self._shuffle_partitions(self.ctx.shuffles.get(node.id, self.default_n))
                df.write.format("noop").mode("overwrite").save()
        finally:
            sc.setLocalProperty(BATCH_PROPERTY, None)

    def _shuffle_partitions(self, n: int) -> None:
        """Set the batch session's ``spark.sql.shuffle.partitions`` (the query's own clone) to ``n``."""
        if self.ctx.shuffle_now != n:
            self.spark.conf.set("spark.sql.shuffle.partitions", str(n))
            self.ctx.shuffle_now = n

    def release(self) -> None:
        """Unpersist what this batch persisted."""
        for df in self.persisted:
            try:
                df.unpersist(blocking=False)
            except Exception:  # noqa: S110 - best effort at the end of a batch
                pass
        self.persisted.clear()

    def tuples_in(self, reports: Sequence[Any] = (), timeout: float = 10.0) -> int:
        """Tuples read from the spouts in this batch (0 if unknown within ``timeout`` seconds).

        Observed counts, plus the rows the first Python stage of a spout read (its ``reports``).
        """
        import threading

        counted: int = sum(r.n_in for r in reports if r.component in self.counted_by)
        if not self.observations:
            return counted
        found: list[int] = []

        def read() -> None:
            total = 0
            for obs in self.observations:
                try:
                    total += int(obs.get.get("n", 0))
                except Exception:  # noqa: S112 - stats only
                    continue
            found.append(total)

        t = threading.Thread(target=read, name="weir-trident-stats", daemon=True)
        t.start()
        t.join(timeout)  # an observation only blocks if its plan never ran; never hold up the batch
        return counted + (found[0] if found else 0)

    # ---- planning helpers ----------------------------------------------------------------------
    def col(self, name: str) -> Any:
        """``F.col(name)`` (quoted), made once per run: the same unresolved reference fits every batch."""
        c = self.ctx.columns.get(name)
        if c is None:
            from pyspark.sql import functions as F  # noqa: N812

            c = self.ctx.columns[name] = F.col(f"`{name}`")
        return c

    def fields_of(self, node: Node, tag: str, df: Any, any_names: frozenset[str] = frozenset()) -> list[FieldSpec]:
        """:func:`typed_fields` of ``df``, asked of Spark once per run for ``(node, tag)``."""
        key = (node.id, tag)
        found = self.ctx.types.get(key)
        if found is None:
            found = self.ctx.types[key] = typed_fields(df, any_names)
        return found

    def _seq(self, key: tuple[Any, ...], make: Any) -> Any:
        """The JVM ``Seq`` of ``make()`` (Java objects or strings), built once per run for ``key``."""
        seq = self.ctx.seqs.get(key)
        if seq is None:
            from pyspark.sql.classic.column import _to_seq

            seq = self.ctx.seqs[key] = _to_seq(self.spark.sparkContext, make())
        return seq

    def _jcols(self, names: list[str]) -> Any:
        return self._seq(("cols", *names), lambda: [self.col(n)._jc for n in names])

    def _df(self, jdf: Any) -> Any:
        from pyspark.sql import DataFrame

        return DataFrame(jdf, self.spark)

    def select(self, df: Any, names: list[str]) -> Any:
        """``df.select(*names)`` (quoted names)."""
        jdf = getattr(df, "_jdf", None)
        if jdf is None:
            return df.select(*[self.col(n) for n in names])
        return self._df(jdf.select(self._jcols(names)))

    def rename(self, df: Any, names: list[str]) -> Any:
        """``df.toDF(*names)``."""
        jdf = getattr(df, "_jdf", None)
        if jdf is None:
            return df.toDF(*names)
        return self._df(jdf.toDF(self._seq(("names", *names), lambda: list(names))))

    def repartition(self, df: Any, n: int, names: list[str]) -> Any:
        """``df.repartition(n, *names)``."""
        jdf = getattr(df, "_jdf", None)
        if jdf is None:
            return df.repartition(n, *[self.col(c) for c in names])
        return self._df(jdf.repartition(n, self._jcols(names)))

    def group_agg(self, df: Any, keys: list[str], expr: Any) -> Any:
        """``df.groupBy(*keys).agg(expr)``."""
        jdf = getattr(df, "_jdf", None)
        if jdf is None:
            return df.groupBy(*[self.col(k) for k in keys]).agg(expr)
        return self._df(jdf.groupBy(self._jcols(keys)).agg(expr._jc, self._seq(("empty",), list)))

    # ---- compiling -----------------------------------------------------------------------
    def compile(self, node: Node) -> Compiled:
        """The node's DataFrame for this batch."""
        done = self.memo.get(node.id)
        if done is not None:
            return done
        out: Compiled = getattr(self, f"_c_{node.kind}")(node)
        if node.kind not in ("partition", "spout") and node.parallelism:
            out = Compiled(out.df.repartition(node.parallelism), out.fields)
        shared = self.ctx.consumers[node.id] > 1 or (
            node.kind in ("persist_agg", "partition_persist") and self.ctx.consumers[node.id] > 0
        )
        if shared:
            from pyspark import StorageLevel

            out = Compiled(out.df.persist(StorageLevel.MEMORY_AND_DISK), out.fields)
            self.persisted.append(out.df)
        self.memo[node.id] = out
        return out

    def _stage_args(self, node: Node, in_fields: list[FieldSpec], out_fields: list[FieldSpec]) -> dict[str, Any]:
        return {
            "topology": self.ctx.topology,
            "component": node.name,
            "txid": None,
            "conf": self.ctx.conf,
            "in_fields": in_fields,
            "out_fields": out_fields,
            "acc": self.acc,
            # a DRPC stage's failure must reach the driver (it fails the requests, not the batch)
            "stops_job": node.id in self.ctx.feeds_state or node.drpc is not None,
        }

    def _map(self, df: Any, stage: Any, out_fields: list[FieldSpec], key: tuple[int, str]) -> Compiled:
        """``stage`` over ``df``: its UDF made once per run (``key``) unless the stage is this batch's own."""
        udf = self.ctx.udfs.get(key) if stage.txid is None else None
        if udf is None:
            schema = StreamSchema(tuple(out_fields)).spark_schema()
            udf = arrow_udf(stage, schema, [self.col(f.name) for f in stage.in_fields])
            if stage.txid is None:
                self.ctx.udfs[key] = udf
        if self.connect:  # no job-local property: the stage is pickled with this batch's txid and epoch
            udf.stage.bind(self.txid, self.epoch)
        return Compiled(map_in_arrow(df, udf), out_fields)

    def _n(self, node: Node) -> int:
        return node.parallelism or self.default_n

    # -- sources and per-tuple operations ----------------------------------------------------
    def _c_drpc(self, node: Node) -> Compiled:
        """The batch's requests of the node's DRPC function: ``(_weir_rid, args)`` strings."""
        from pyspark.sql.types import StringType, StructField, StructType

        assert node.drpc is not None
        rows = list(self.requests.get(node.drpc, ()))
        schema = StructType([StructField(DRPC_RID, StringType(), False), StructField("args", StringType(), True)])
        df = self.spark.createDataFrame(rows, schema)
        return Compiled(df, [FieldSpec(DRPC_RID, StringType()), FieldSpec("args", StringType())])

    def _drpc_zero(self, node: Node, out: Compiled) -> Compiled:
        """A DRPC stream's ungrouped combiner ``aggregate``: a request without tuples gets the aggregator's zero.

        As Storm does for a batch's global aggregation: every request answers (``Sum`` of nothing is 0).
        """
        from pyspark.sql import functions as F  # noqa: N812

        from weir.trident.fields import encode_any

        assert node.drpc is not None
        rows = [(rid,) for rid, _args in self.requests.get(node.drpc, ())]
        ids = self.spark.createDataFrame(rows, f"{DRPC_RID} string")
        value = out.fields[-1]
        zero = node.params["agg"].zero()
        lit = F.lit(encode_any(zero)) if value.dtype is None else F.lit(zero).cast(value.dtype)
        joined = ids.join(out.df, on=DRPC_RID, how="left")
        df = joined.select(F.col(DRPC_RID), F.coalesce(F.col(f"`{value.name}`"), lit).alias(value.name))
        return Compiled(df, out.fields)

    def _c_spout(self, node: Node) -> Compiled:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F  # noqa: N812

        from weir.sources.builtin import CORRUPT, FileSpout
        from weir.sources.replayable import ReplayableSpout
        from weir.topology.components import Spout

        spout = node.params["spout"]
        df = self.ctx.source.batch_for(self.batch, node.params["index"])
        names = list(node.names)
        sql_spout = isinstance(spout, FileSpout) or (
            isinstance(spout, ReplayableSpout) and type(spout).to_values is ReplayableSpout.to_values
        )
        columns = [f.name for f in self.fields_of(node, "raw", df)]
        if sql_spout and CORRUPT in columns:
            # a malformed record fails the batch in Spark SQL, naming the spout: no Python pass
            what = (
                f"FileSpout({spout.path!r}): malformed {spout.format} record: "
                if isinstance(spout, FileSpout)
                else f"{spout.describe()}: malformed record: "
            )
            bad = F.raise_error(F.concat(F.lit(spout_failure_prefix(node.name, self.txid) + what), F.col(CORRUPT)))
            first = F.col(f"`{names[0]}`")
            df = df.withColumn(names[0], F.when(F.col(CORRUPT).isNotNull(), bad).otherwise(first))
            df = df.select(*[F.col(f"`{n}`") for n in names])
        elif not sql_spout and type(spout).to_values is not Spout.to_values:
            raw = self.fields_of(node, "raw", df)
            outs = [FieldSpec(n, None) for n in names]
            stage = OpStage(
                **self._stage_args(node, raw, outs),
                kind="to_values",
                op=spout,
                in_idx=list(range(len(raw))),
                in_names=[f.name for f in raw],
            )
            df = self._map(df, stage, outs, (node.id, "to_values")).df
            comp = Compiled(df, outs)
            return self._spout_tail(node, comp)
        elif len(columns) == len(names):
            df = self.rename(df, names)
        else:
            df = self.select(df, names)
        counter = self._spout_counter(node)
        if counter is not None:  # its one reader, a Python stage, reports how many rows it read
            self.counted_by.append(counter)
            return self._spout_tail(node, Compiled(df, self.fields_of(node, "spout", df)))
        obs = Observation(f"weir-trident-{self.txid}-{next(_OBSERVATIONS)}")
        if self.ctx.count_rows is None:
            self.ctx.count_rows = F.count(F.lit(1)).alias("n")
        df = df.observe(obs, self.ctx.count_rows)
        self.observations.append(obs)
        return self._spout_tail(node, Compiled(df, self.fields_of(node, "spout", df)))

    def _spout_counter(self, node: Node) -> str | None:
        """The component that counts ``node``'s rows in its task reports, or ``None`` (observe them).

        A spout read by exactly one per-tuple Python operation (and by nothing else) needs no
        observed count: that stage reads every row of the spout (only projections come between)
        and its reports say how many.
        """
        readers = [n for n in self.ctx.nodes if node in n.parents]
        if len(readers) != 1 or readers[0].kind != "op" or node.parallelism:
            return None
        name = readers[0].name
        if sum(1 for n in self.ctx.nodes if n.name == name) != 1:
            return None
        return name

    def _spout_tail(self, node: Node, comp: Compiled) -> Compiled:
        if node.parallelism:
            return Compiled(comp.df.repartition(node.parallelism), comp.fields)
        return comp

    def _c_op(self, node: Node) -> Compiled:
        parent = self.compile(node.parents[0])
        kind = node.params["op_kind"]
        inp = list(node.params["input"])
        needed = self.ctx.needed.get(node.id)
        if kind in ("function", "filter", "peek"):
            parent = self._prune(parent, _required(node, needed))
        keep_idx = list(range(len(parent.fields)))
        if kind == "function":
            if needed is not None:  # pass on only the input fields someone reads afterwards
                keep_idx = [i for i, f in enumerate(parent.fields) if f.name in needed]
            out = [parent.fields[i] for i in keep_idx] + list(node.new_fields)
        elif kind in ("filter", "peek"):
            out = list(parent.fields)
        elif node.params.get("keep_types"):
            out = list(parent.fields)
        else:
            out = list(node.new_fields)
        stage = OpStage(
            **self._stage_args(node, parent.fields, out),
            kind=kind,
            op=node.params["op"],
            in_idx=parent.index(inp),
            in_names=inp,
            new_fields=list(node.new_fields),
            keep_idx=keep_idx,
        )
        return self._map(parent.df, stage, out, (node.id, "op"))

    def _prune(self, comp: Compiled, keep: frozenset[str] | None) -> Compiled:
        """``comp`` restricted to the fields in ``keep`` (in its order), before a Python stage reads it."""
        if keep is None or all(f.name in keep for f in comp.fields):
            return comp

        fields = [f for f in comp.fields if f.name in keep]
        return Compiled(self.select(comp.df, [f.name for f in fields]), fields)

    def _c_project(self, node: Node) -> Compiled:

        parent = self.compile(node.parents[0])
        keep = list(node.params["fields"])
        fields = [parent.fields[i] for i in parent.index(keep)]
        return Compiled(self.select(parent.df, keep), fields)

    def _c_partition(self, node: Node) -> Compiled:
        from pyspark.sql import functions as F  # noqa: N812

        parent = self.compile(node.parents[0])
        how = node.params["how"]
        df = parent.df
        if how == "fields":
            df = self.repartition(df, self._n(node), list(node.params["fields"]))
        elif how == "shuffle":
            df = df.repartition(self._n(node))
        elif how == "global":
            df = df.repartition(1)
        else:  # broadcast: one copy per partition
            n = self._n(node)
            copies = self.spark.createDataFrame([(q,) for q in spark_routing_values(n)], f"{Q_COL} int")
            df = df.crossJoin(copies).repartition(n, F.col(Q_COL)).drop(Q_COL)
        return Compiled(df, parent.fields)

    # -- aggregation -------------------------------------------------------------------------
    def _spark_agg(self, node: Node, agg: Any, parent: Compiled, inp: list[str]) -> Any:
        """The aggregator's Spark SQL expression over ``inp`` (made once per run), or ``None``."""
        key = (node.id, "")
        if key in self.ctx.aggs:
            return self.ctx.aggs[key]
        expr = None
        if node_kind_is_combiner(agg):
            idx = parent.index(inp)
            expr = agg.spark_agg([self.col(n) for n in inp], [parent.fields[i].dtype for i in idx])
        self.ctx.aggs[key] = expr
        return expr

    def _c_agg(self, node: Node) -> Compiled:
        out = self._c_agg_plain(node)
        if node.params.get("drpc_global") and node.params["agg_kind"] == "combiner":
            return self._drpc_zero(node, out)
        return out

    def _c_agg_plain(self, node: Node) -> Compiled:
        from pyspark.sql import functions as F  # noqa: N812

        parent = self.compile(node.parents[0])
        agg, kind, scope = node.params["agg"], node.params["agg_kind"], node.params["scope"]
        inp = agg_input(node)
        keys = list(node.params["group"] or ())
        key_fields = [parent.fields[i] for i in parent.index(keys)]
        outs = list(node.new_fields)
        expr = self._spark_agg(node, agg, parent, inp)
        kcols = [F.col(f"`{k}`") for k in keys]
        if expr is not None:
            name = outs[0].name
            if outs[0].dtype is not None:
                expr = expr.cast(outs[0].dtype)
            if scope == "partition":
                df = parent.df.withColumn(P_COL, F.spark_partition_id()).groupBy(F.col(P_COL), *kcols)
                df = df.agg(expr.alias(name)).drop(P_COL)
            elif keys:
                df = parent.df.groupBy(*kcols).agg(expr.alias(name))
            else:
                df = parent.df.agg(F.coalesce(expr, F.lit(agg.zero())).alias(name))
            return Compiled(df, key_fields + [FieldSpec(name, outs[0].dtype or df.schema[name].dataType)])
        out_fields = key_fields + outs
        base = {"agg": agg, "key_idx": parent.index(keys), "in_idx": parent.index(inp), "in_names": inp}
        if scope == "partition":
            stage = AggStage(**self._stage_args(node, parent.fields, out_fields), mode=kind, **base)
            return self._map(parent.df, stage, out_fields, (node.id, "agg"))
        df = parent.df
        if kind == "combiner":
            partial_out = key_fields + [FieldSpec(V_COL, None)]
            partial = AggStage(**self._stage_args(node, parent.fields, partial_out), mode="partial", **base)
            pre = self._map(df, partial, partial_out, (node.id, "partial"))
            pre_df = pre.df.repartition(self._n(node), *kcols) if keys else pre.df.repartition(1)
            final = AggStage(
                **self._stage_args(node, partial_out, out_fields),
                mode="combine",
                agg=agg,
                key_idx=list(range(len(keys))),
                value_idx=len(keys),
                emit_if_empty=not keys,
            )
            return self._map(pre_df, final, out_fields, (node.id, "combine"))
        df = df.repartition(self._n(node), *kcols) if keys else df.repartition(1)
        stage = AggStage(**self._stage_args(node, parent.fields, out_fields), mode=kind, emit_if_empty=not keys, **base)
        return self._map(df, stage, out_fields, (node.id, "agg"))

    # -- combining streams ---------------------------------------------------------------------
    def _encode(self, node: Node, comp: Compiled, names: set[str], tag: str) -> Compiled:
        """Re-encode the typed columns ``names`` of ``comp`` as any-fields (to union or join them)."""
        targets = [i for i, f in enumerate(comp.fields) if f.name in names and not f.is_any]
        if not targets:
            return comp
        out = [FieldSpec(f.name, None) if i in targets else f for i, f in enumerate(comp.fields)]
        stage = OpStage(
            **self._stage_args(node, comp.fields, out),
            kind="map",
            op=_identity,
            in_idx=list(range(len(comp.fields))),
            in_names=comp.names,
        )
        return self._map(comp.df, stage, out, (node.id, f"encode/{tag}"))

    def _c_merge(self, node: Node) -> Compiled:
        names = list(node.names)
        parts = [self.compile(p) for p in node.parents]
        renamed = [
            Compiled(c.df.toDF(*names), [FieldSpec(n, f.dtype) for n, f in zip(names, c.fields, strict=True)])
            for c in parts
        ]
        mixed = {n for i, n in enumerate(names) if len({_type_key(c.fields[i]) for c in renamed}) > 1}
        if mixed:
            renamed = [self._encode(node, c, mixed, str(i)) for i, c in enumerate(renamed)]
        df = renamed[0].df
        for c in renamed[1:]:
            df = df.unionByName(c.df)
        return Compiled(df, renamed[0].fields)

    def _c_join(self, node: Node) -> Compiled:
        from pyspark.sql import functions as F  # noqa: N812

        left, right = (self.compile(p) for p in node.parents)
        p = node.params
        k1, k2, r1, r2 = list(p["keys1"]), list(p["keys2"]), list(p["rest1"]), list(p["rest2"])
        mixed_l, mixed_r = set(), set()
        for a, b in zip(k1, k2, strict=True):
            fa, fb = left.fields[left.index([a])[0]], right.fields[right.index([b])[0]]
            if _type_key(fa) != _type_key(fb):
                mixed_l.add(a)
                mixed_r.add(b)
        left = self._encode(node, left, mixed_l, "left")
        right = self._encode(node, right, mixed_r, "right")
        kn = [f"_weir_k{i}" for i in range(len(k1))]
        ldf = left.df.select(
            *[F.col(f"`{a}`").alias(k) for a, k in zip(k1, kn, strict=True)],
            *[F.col(f"`{c}`").alias(f"_weir_l{i}") for i, c in enumerate(r1)],
        )
        rdf = right.df.select(
            *[F.col(f"`{b}`").alias(k) for b, k in zip(k2, kn, strict=True)],
            *[F.col(f"`{c}`").alias(f"_weir_r{i}") for i, c in enumerate(r2)],
        )
        joined = ldf.join(rdf, on=kn, how="inner")
        src = kn + [f"_weir_l{i}" for i in range(len(r1))] + [f"_weir_r{i}" for i in range(len(r2))]
        out_names = list(node.names)
        df = joined.select(*[F.col(s).alias(n) for s, n in zip(src, out_names, strict=True)])
        fields_src = (
            [left.fields[i] for i in left.index(k1)]
            + [left.fields[i] for i in left.index(r1)]
            + [right.fields[i] for i in right.index(r2)]
        )
        return Compiled(df, [FieldSpec(n, f.dtype) for n, f in zip(out_names, fields_src, strict=True)])

    # -- states --------------------------------------------------------------------------------
    def _route(self, node: Node, comp: Compiled, how: str, n: int, key_idx: list[int], **extra: Any) -> Compiled:
        from pyspark.sql.types import IntegerType

        if extra.get("combine_agg") is not None:
            out = [comp.fields[i] for i in key_idx] + [FieldSpec(V_COL, None)]
        else:
            out = list(comp.fields)
        out = out + [FieldSpec(P_COL, IntegerType()), FieldSpec(Q_COL, IntegerType())]
        args = self._stage_args(node, comp.fields, out)
        args["component"] = f"{node.name}/route"
        args["stops_job"] = args["stops_job"] or node.kind in _WRITERS  # the route feeds the node's own update
        stage = RouteStage(**args, how=how, n=n, key_idx=key_idx, **extra)
        routed = self._map(comp.df, stage, out, (node.id, "route"))
        return Compiled(self.repartition(routed.df, n, [Q_COL]), routed.fields)

    def _state_common(
        self, node: Node, in_fields: list[FieldSpec], out_fields: list[FieldSpec], n: int, p_idx: int
    ) -> dict[str, Any]:
        state = node.params["state"]
        common = {
            **self._stage_args(node, in_fields, out_fields),
            "n": n,
            "factory": self.ctx.factories.get(state.state_id, state.factory),
            "state_id": state.state_id,
            "p_idx": p_idx,
        }
        if state.state_id in self.ctx.ttls:  # the cutoff is this batch's: the batch's own stage carries it
            common.update(txid=self.txid, epoch=self.epoch, expire_upto=self.expiry.get(state.state_id))
        return common

    def _c_persist_agg(self, node: Node) -> Compiled:
        from pyspark.sql import functions as F  # noqa: N812

        parent = self.compile(node.parents[0])
        p = node.params
        state, agg, kind = p["state"], p["agg"], p["agg_kind"]
        keys = list(p["group"] or ())
        inp = agg_input(node)
        n = state.parallelism if keys else 1
        key_fields = [parent.fields[i] for i in parent.index(keys)]
        in_types = [parent.fields[i].dtype for i in parent.index(inp)]
        value = node.new_fields[0]
        if value.dtype is None:
            vt = agg.value_type(in_types) if kind == "combiner" else None
            value = FieldSpec(value.name, vt)
        out_fields = key_fields + [value]
        journal = None
        touches: dict[int, list[tuple[Any, ...]]] = {}
        if state.state_id in self.ctx.journal_states and self.ctx.provider is not None:
            journal = JournalSpec(self.ctx.provider, self.ctx.journal_namespace, state.state_id, self.epoch)
            touches = read_touches(self.ctx.provider, self.ctx.journal_namespace, state.state_id, n, self.txid)
        k = len(keys)
        expr = self._spark_agg(node, agg, parent, inp)
        if expr is not None and keys:
            aliased = self.ctx.aggs.get((node.id, V_COL))
            if aliased is None:
                aliased = self.ctx.aggs[(node.id, V_COL)] = expr.alias(V_COL)
            pre = self.group_agg(parent.df, keys, aliased)
            pre_c = Compiled(pre, key_fields + self.fields_of(node, "pre", pre)[-1:])
            args: dict[str, Any] = {"mode": "combiner", "key_idx": list(range(k)), "value_idx": k}
            kinds = self._spark_routed(state.state_id)
            if kinds:
                # the aggregate's own exchange puts each key in its state partition: no routing stage
                # and no second shuffle (the repartition is dropped by Spark when the aggregate's
                # exchange already has ``n`` partitions, see ``run``)
                self.ctx.shuffles[node.id] = n
                routed = Compiled(self.repartition(pre, n, keys), pre_c.fields)
                args["key_kinds"] = kinds
            else:
                routed = self._route(node, pre_c, "key", n, list(range(k)))
        elif expr is not None:
            pre = parent.df.agg(expr.alias(V_COL), F.count(F.lit(1)).alias(N_COL)).withColumn(P_COL, F.lit(0))
            routed = Compiled(pre, typed_fields(pre))
            args = {"mode": "combiner", "key_idx": [], "value_idx": 0, "count_idx": 1}
        elif kind == "combiner":
            routed = self._route(
                node,
                parent,
                "key" if keys else "single",
                n,
                parent.index(keys),
                combine_agg=agg,
                in_idx=parent.index(inp),
                in_names=inp,
            )
            args = {"mode": "combiner", "key_idx": list(range(k)), "value_idx": k}
        else:
            routed = self._route(node, parent, "key" if keys else "single", n, parent.index(keys))
            args = {"mode": "reducer", "key_idx": parent.index(keys), "in_idx": parent.index(inp), "in_names": inp}
        p_idx = -1 if "key_kinds" in args else routed.index([P_COL])[0]  # -1: the task's partition
        common = self._state_common(node, routed.fields, out_fields, n, p_idx)
        if touches:  # an opaque replay after a failed attempt: this batch's own stage carries the keys
            common.update(txid=self.txid, epoch=self.epoch)
        stage = PersistAggStage(**common, agg=agg, journal=journal, touches=touches, **args)
        return self._map(routed.df, stage, out_fields, (node.id, "persist"))

    def _spark_routed(self, state_id: str) -> list[str] | None:
        """The key types of a state whose partitions are Spark's hash partitions of its keys, or ``None``.

        A state whose factory has a ``shared_keyspace`` (weir's own map states), written by one
        ``persistent_aggregate`` whose aggregator runs in Spark SQL, grouped by keys of types whose
        hash weir computes too (string, int, bigint): the aggregate's own
        shuffle then places each key in its state partition (``pmod(hash(keys), n)``), and
        ``state_query`` routes its keys by the same hash. Every other state partitions keys by
        :func:`~weir._util.stable_hash`.
        """
        if state_id in self.ctx.routing:
            return self.ctx.routing[state_id]
        writers = [n for n in self.ctx.nodes if n.kind in _WRITERS and n.params["state"].state_id == state_id]
        kinds = None
        factory = self.ctx.factories.get(state_id)
        if factory is None and writers:
            factory = writers[0].params["state"].factory
        if (
            len(writers) == 1
            and writers[0].kind == "persist_agg"
            and writers[0].params.get("group")
            and getattr(factory, "shared_keyspace", False) is True
        ):
            w = writers[0]
            parent = self.compile(w.parents[0])
            keys = list(w.params["group"])
            fields = [parent.fields[i] for i in parent.index(keys)]
            simple = [f.dtype.simpleString() if f.dtype is not None else "" for f in fields]
            if all(t in SPARK_HASHED_TYPES for t in simple) and (
                self._spark_agg(w, w.params["agg"], parent, agg_input(w)) is not None
            ):
                kinds = simple
        self.ctx.routing[state_id] = kinds
        return kinds

    def _c_state_query(self, node: Node) -> Compiled:
        parent = self.compile(node.parents[0])
        state = node.params["state"]
        inp = list(node.params["input"])
        n = state.parallelism if state.kind != "snapshot" else 1
        kinds = self._spark_routed(state.state_id) if state.kind != "snapshot" else None
        if kinds is not None and len(kinds) == len(inp):
            routed = self._route(node, parent, "spark", n, parent.index(inp), key_kinds=kinds)
        else:
            routed = self._route(node, parent, "key", n, parent.index(inp))
        out = parent.fields + list(node.new_fields)
        stage = QueryStage(
            **self._state_common(node, routed.fields, out, n, len(parent.fields)),
            qf=node.params["qf"],
            in_idx=parent.index(inp),
            in_names=inp,
            keep=len(parent.fields),
            new_fields=list(node.new_fields),
            snapshot=state.kind == "snapshot",
        )
        return self._map(routed.df, stage, out, (node.id, "query"))

    def _c_partition_persist(self, node: Node) -> Compiled:
        parent = self.compile(node.parents[0])
        state = node.params["state"]
        inp = list(node.params["input"])
        n = state.parallelism
        how, keys = _upstream_partitioning(node.parents[0])
        key_idx: list[int] = []
        if how == "fields" and all(k in parent.names for k in keys):
            route, key_idx = "key", parent.index(keys)
        elif how == "global":
            route = "single"
        elif how == "broadcast":
            route = "broadcast"
        else:
            route = "round_robin"
        routed = self._route(node, parent, route, n, key_idx)
        out = list(node.new_fields)
        stage = PersistStage(
            **self._state_common(node, routed.fields, out, n, len(parent.fields)),
            updater=node.params["updater"],
            in_idx=parent.index(inp),
            in_names=inp,
        )
        return self._map(routed.df, stage, out, (node.id, "persist"))


def _required(node: Node, needed: frozenset[str] | None) -> frozenset[str] | None:
    """The fields of its parent that ``node`` reads or passes on, given what is ``needed`` of its output.

    ``None`` means every field. Kinds whose output is positional over the parent's fields
    (merge, join, partition_persist's routing) need them all.
    """
    p = node.params
    if node.kind == "op":
        kind = p.get("op_kind")
        inp = frozenset(p.get("input") or ())
        if kind == "function":
            return None if needed is None else (needed - {f.name for f in node.new_fields}) | inp
        if kind in ("filter", "peek"):
            return None if needed is None else needed | inp
        return inp  # map / flat_map read their input fields only
    if node.kind == "project":
        keep = frozenset(p["fields"])
        return keep if needed is None else needed & keep
    if node.kind == "partition":
        if needed is None:
            return None
        return needed | frozenset(p.get("fields") or ())
    if node.kind in ("agg", "persist_agg"):
        return frozenset(p.get("group") or ()) | frozenset(agg_input(node))
    if node.kind == "state_query":
        inp = frozenset(p.get("input") or ())
        return None if needed is None else (needed - {f.name for f in node.new_fields}) | inp
    return None


def agg_input(node: Node) -> list[str]:
    """The fields an aggregation node's aggregator reads: none for weir's own ``Count``.

    Storm's ``Count`` never looks at its tuple; without input fields a Trident aggregation gets the
    whole stream, which would keep every field alive up to the aggregation.
    """
    from weir.trident.operation import Count

    agg = node.params["agg"]
    if isinstance(agg, Count) and type(agg).init is Count.init and type(agg).spark_agg is Count.spark_agg:
        return []
    return list(node.params["input"])


def needed_fields(nodes: list[Node]) -> dict[int, frozenset[str] | None]:
    """Per node, the output fields some consumer reads (``None``: all of them; a leaf: none).

    Computed backwards over the plan (nodes are in creation order, parents first), so that a
    function whose input field nobody reads afterwards does not copy that field into every tuple
    it emits (a ``Split`` of lines would otherwise repeat each line once per word).
    """
    needed: dict[int, frozenset[str] | None] = {}
    has_child = {p.id for n in nodes for p in n.parents}
    for node in reversed(nodes):
        own = needed.setdefault(node.id, frozenset())
        if node.drpc is not None and node.id not in has_child:
            own = needed[node.id] = None  # a DRPC stream's last tuples are the answer: all of them
        for parent in node.parents:
            req = _required(node, own)
            if node.drpc is not None and req is not None:
                req = req | {DRPC_RID}  # every tuple of a DRPC stream carries its request on
            cur = needed.get(parent.id, frozenset())
            needed[parent.id] = None if req is None or cur is None else cur | req
    return needed


@dataclass(frozen=True)
class ArrowUdf:
    """A stage as a ``mapInArrow`` function: its UDF expression over the input's columns, made once."""

    stage: Any
    schema: Any
    jcol: Any  # the JVM's UDF expression (None where the classic internals are missing)


def arrow_udf(stage: Any, schema: Any, columns: list[Any]) -> ArrowUdf:
    """The ``mapInArrow`` UDF of ``stage`` over ``columns`` (pickled and sent to the JVM once)."""
    from pyspark.sql.pandas.functions import pandas_udf
    from pyspark.util import PythonEvalType

    # the stubs' overloads of pandas_udf stop short of the map-in-Arrow eval type: called untyped
    make_udf: Callable[..., Any] = pandas_udf
    jcol = None
    if columns and all(hasattr(c, "_jc") for c in columns):
        udf = make_udf(stage, returnType=schema, functionType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF)
        jcol = getattr(udf(*columns), "_jc", None)
    return ArrowUdf(stage, schema, jcol)


def map_in_arrow(df: Any, udf: ArrowUdf) -> Any:
    """``df.mapInArrow(stage, schema)`` with the UDF already made.

    PySpark's own ``mapInArrow`` pickles the function and asks the driver's JVM for the schema and
    each column again on every call; a batch would pay that for every stage. Falls back to the
    public call where the classic internals differ.
    """
    from pyspark.sql import DataFrame

    jdf = getattr(df, "_jdf", None)
    if jdf is None and is_connect(df.sparkSession):  # the input's columns are the stage's (no AnalyzePlan)
        from weir.runtime.spark.connect import map_in_arrow_known

        return map_in_arrow_known(df, udf.stage, [f.name for f in udf.stage.in_fields], udf.schema)
    if jdf is None or udf.jcol is None:
        return df.mapInArrow(udf.stage, udf.schema)
    return DataFrame(jdf.mapInArrow(udf.jcol, False, None), df.sparkSession)


def _identity(tup: Any) -> Any:
    return tuple(tup)


def _type_key(f: FieldSpec) -> str:
    return "any" if f.dtype is None else str(f.dtype.simpleString())


def node_kind_is_combiner(agg: Any) -> bool:
    """Whether ``agg`` is a combiner aggregator."""
    from weir.trident.operation import CombinerAggregator

    return isinstance(agg, CombinerAggregator)


def _upstream_partitioning(node: Node) -> tuple[str, tuple[str, ...]]:
    """The partitioning in effect for ``node``'s output: the nearest ``partition`` node upstream."""
    cur = node
    while True:
        if cur.kind == "partition":
            return cur.params["how"], tuple(cur.params.get("fields") or ())
        if cur.kind in ("op", "project") and len(cur.parents) == 1:
            cur = cur.parents[0]
            continue
        return "none", ()


def check_plan(nodes: list[Node]) -> None:
    """Submit-time checks that need the whole plan."""
    if not any(n.kind == "spout" for n in nodes):
        msg = "the TridentTopology has no stream: call new_stream(name, spout) first"
        if any(n.kind == "drpc" for n in nodes):
            msg = (
                "the TridentTopology has only DRPC streams; weir serves DRPC from a topology that also reads a "
                "spout (new_stream(name, spout)): add the stream that writes the state the queries read"
            )
        raise TopologyError(msg)
