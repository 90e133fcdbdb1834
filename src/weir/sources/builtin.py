"""Built-in spouts over Spark's own streaming sources: files, rate and any streaming DataFrame.

All three are transactional by offset: Spark records each batch's offsets in its offset log before
the batch runs and replays exactly that range after a failure.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from weir._util import positive_int
from weir.errors import ConfigError, SourceError
from weir.sources.backlog import batch_growth
from weir.topology.components import Guarantee, OutputFieldsDeclarer, Spout
from weir.topology.context import TopologyContext
from weir.topology.tuple import Fields

__all__ = ["DataFrameSpout", "FileSpout", "RateSpout"]

CORRUPT = "_corrupt_record"


class FileSpout(Spout):
    """A directory of text, JSON-lines or CSV files; new files are picked up oldest first (modification time).

    Parameters
    ----------
    path : the directory (or glob) to watch
    format : ``text`` (one tuple per line, field ``line``), ``json`` or ``csv``
    schema : DDL schema for json/csv, e.g. ``"user STRING, amount BIGINT"`` (the output fields)
    fields : output field names for ``text`` (default ``["line"]``)
    files_per_batch : files per batch (default 1); with ``weir.batch.grow.max`` = *g* in the topology's
        configuration, a batch takes every ready file up to ``files_per_batch × g`` (Spark's
        ``maxFilesPerTrigger``), so a backlog is read in fewer batches (see :mod:`weir.sources.backlog`)
    options : extra reader options (``header``, ``sep``, ...)

    A record that does not parse (bad JSON, wrong column count, wrong type) fails its batch with a
    message quoting the record, or goes to the dead-letter sink when one is configured.
    """

    guarantee = Guarantee.TRANSACTIONAL

    def __init__(
        self,
        path: str,
        format: str = "text",  # noqa: A002 - Spark's name
        schema: str | None = None,
        fields: Sequence[str] | None = None,
        files_per_batch: int = 1,
        **options: Any,
    ) -> None:
        if format not in ("text", "json", "csv"):
            msg = f"FileSpout: format must be 'text', 'json' or 'csv', got {format!r}"
            raise ConfigError(msg)
        if format != "text" and not schema:
            msg = f"FileSpout({path!r}): format {format!r} needs a schema, e.g. schema='word STRING, n BIGINT'"
            raise ConfigError(msg)
        positive_int(files_per_batch, "FileSpout: files_per_batch")
        # a relative path is relative to the driver's working directory now, not to the JVM's
        self.path = path if ":" in path.split("/", 1)[0] else os.path.abspath(path)
        self.format = format
        self.schema = schema
        self.files_per_batch = files_per_batch
        self.options = {k: str(v) for k, v in options.items()}
        if format == "text":
            self.fields = list(fields or ["line"])
            if len(self.fields) != 1:
                msg = "FileSpout: text files have one field per tuple"
                raise ConfigError(msg)
        else:
            self.fields = [c.strip().split()[0].strip("`") for c in _split_ddl(schema or "")]

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """One stream with the file's fields."""
        declarer.declare(Fields(self.fields))

    def create_stream(self, spark: Any, context: TopologyContext) -> Any:
        """``spark.readStream`` over the directory, sorted by file name within a batch."""
        per_batch = self.files_per_batch * batch_growth(context.conf)
        r = spark.readStream.format(self.format).option("maxFilesPerTrigger", per_batch)
        for k, v in self.options.items():
            r = r.option(k, v)
        if self.format == "text":
            return r.load(self.path)
        r = r.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT)
        return r.schema(f"{self.schema}, {CORRUPT} STRING").load(self.path)

    def to_values(self, row: Any) -> tuple[Any, ...]:
        """The row's fields; a corrupt record raises :class:`SourceError` quoting it."""
        values = tuple(row)
        if self.format != "text":
            bad = values[-1]
            if bad is not None:
                msg = f"FileSpout({self.path!r}): malformed {self.format} record: {bad[:300]!r}"
                raise SourceError(msg)
            return values[:-1]
        return values


def _split_ddl(ddl: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in ddl:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


class RateSpout(Spout):
    """Spark's deterministic ``rate-micro-batch`` source: ``rows_per_batch`` rows per batch.

    Fields ``timestamp`` and ``value`` (a long counting from 0); a replayed batch has the same rows.
    """

    guarantee = Guarantee.TRANSACTIONAL

    def __init__(self, rows_per_batch: int = 1000, partitions: int = 2, start_timestamp: int = 0) -> None:
        positive_int(rows_per_batch, "RateSpout: rows_per_batch")
        self.rows_per_batch = rows_per_batch
        self.partitions = partitions
        self.start_timestamp = start_timestamp

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """``timestamp``, ``value``."""
        declarer.declare(Fields("timestamp", "value"))

    def create_stream(self, spark: Any, context: TopologyContext) -> Any:
        """The rate-micro-batch stream."""
        return (
            spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", self.rows_per_batch)
            .option("numPartitions", self.partitions)
            .option("startTimestamp", self.start_timestamp)
            .load()
            .selectExpr("CAST(timestamp AS LONG) AS timestamp", "value")
        )


class DataFrameSpout(Spout):
    """Any streaming DataFrame (or a function ``spark -> DataFrame``); its columns are the fields.

    Declare ``guarantee`` honestly: Kafka and files replay by offset (transactional); a socket does not.
    """

    def __init__(
        self,
        df: Any,
        fields: Sequence[str] | None = None,
        guarantee: Guarantee = Guarantee.TRANSACTIONAL,
    ) -> None:
        self._df = df
        self.guarantee = guarantee
        if fields is None:
            if callable(df) and not hasattr(df, "columns"):
                msg = "DataFrameSpout(factory): give fields=[...] when passing a function"
                raise ConfigError(msg)
            fields = list(df.columns)
        self.fields = list(fields)

    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["_df"] = None  # DataFrames live on the driver only
        return d

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The DataFrame's columns."""
        declarer.declare(Fields(self.fields))

    def create_stream(self, spark: Any, context: TopologyContext) -> Any:
        """The DataFrame (or the factory's result)."""
        df = self._df
        if df is None:
            msg = f"DataFrameSpout {context.component_id!r}: no DataFrame (was the spout unpickled on an executor?)"
            raise SourceError(msg)
        if callable(df) and not hasattr(df, "columns"):
            df = df(spark)
        if not getattr(df, "isStreaming", False):
            msg = f"DataFrameSpout {context.component_id!r}: the DataFrame is not streaming (use spark.readStream)"
            raise ConfigError(msg)
        cols = list(df.columns)
        if cols != self.fields:
            df = df.select(*self.fields) if set(self.fields) <= set(cols) else df.toDF(*self.fields)
        return df
