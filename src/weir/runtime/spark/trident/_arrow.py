"""Executor-side helpers: Arrow columns ↔ Python values, task context, failure reports.

Trident stages run as ``mapInArrow`` functions: they read Arrow record batches, run the user's
Python on decoded values and write record batches of the declared output schema. A stage that ends
well adds its :class:`~weir.runtime.spark.executor.TaskReport` to the batch's accumulator
(:func:`report`), and so does a failed stage whose output reaches no state update
(:func:`failure_report`). A failed stage whose output does must stop the Spark job — states commit
inside later stages of the same job, which would commit a partial input — and a failed Spark task's
only way to the driver is its error (Spark drops the accumulator updates of a failed task): it
raises :class:`TridentTaskFailure`, whose message carries the same ``TaskReport``
(:meth:`~weir.runtime.spark.executor.TaskReport.to_text`), decoded on the driver by :func:`parse_failure`.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from weir.errors import TopologyError
from weir.runtime.spark.executor import TaskReport
from weir.trident.fields import FieldSpec, decode_any, encode_any

__all__ = [
    "TridentTaskFailure",
    "arrow_schema",
    "build_array",
    "failure_report",
    "parse_failure",
    "spout_failure_prefix",
    "partition_id",
    "py_columns",
    "report",
    "take_column",
]

_SQL_MARK = "weir-trident-record:"
_SQL_RE = re.compile(re.escape(_SQL_MARK) + r"([A-Za-z0-9+/=]+): ([^\n]*)")


class TridentTaskFailure(RuntimeError):
    """A Trident stage failed inside a Spark task (the message carries the details for the driver)."""

    def __init__(self, report: TaskReport) -> None:
        self.report: TaskReport | None = report
        super().__init__(f"{report.component} task {report.task} txid {report.txid}: {report.error} {report.to_text()}")


def fail(component: str, task: int, txid: int, exc: BaseException) -> TridentTaskFailure:
    """The exception to raise for ``exc`` in ``component``'s task ``task`` (call it in ``except``)."""
    if isinstance(exc, TridentTaskFailure):
        return exc
    return TridentTaskFailure(TaskReport.from_exception(component, task, txid, exc))


def failure_report(component: str, task: int, txid: int, exc: BaseException, n_in: int, n_out: int) -> TaskReport:
    """The :class:`~weir.runtime.spark.executor.TaskReport` of a stage that failed with ``exc`` (in ``except``)."""
    if isinstance(exc, TridentTaskFailure) and exc.report is not None:
        return exc.report
    return TaskReport.from_exception(component, task, txid, exc, n_in=n_in, n_out=n_out)


def spout_failure_prefix(component: str, txid: int) -> str:
    """The start of a failure message raised in Spark SQL for ``component``'s records (see :func:`parse_failure`)."""
    blob = base64.b64encode(json.dumps({"component": component, "txid": txid}).encode()).decode()
    return f"{_SQL_MARK}{blob}: SourceError: "


def parse_failure(text: str) -> TaskReport | None:
    """The failed task's report a :class:`TridentTaskFailure` (or Spark SQL's ``raise_error``) put in ``text``."""
    rep = TaskReport.from_text(text)
    if rep is not None:
        return rep
    sql = _SQL_RE.search(text)
    if sql is None:
        return None
    try:
        where: dict[str, Any] = json.loads(base64.b64decode(sql.group(1)))
    except ValueError:
        return None
    error = re.sub(r"\s*SQLSTATE: \w+\s*$", "", sql.group(2)).strip()
    return TaskReport.from_exception(
        str(where.get("component", "?")), -1, int(where.get("txid") or 0), None, error=error
    )


def partition_id() -> int:
    """The Spark partition this task processes (0 outside Spark)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return int(ctx.partitionId()) if ctx is not None else 0


def arrow_type(field: FieldSpec) -> pa.DataType:
    """The Arrow type of a field's column (binary for an any-field)."""
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(field.spark_type(), timezone="UTC")


def arrow_schema(fields: Sequence[FieldSpec]) -> pa.Schema:
    """The Arrow schema of columns ``fields``."""
    return pa.schema([pa.field(f.name, arrow_type(f), nullable=True) for f in fields])


def py_columns(data: pa.RecordBatch | pa.Table, idxs: Sequence[int], fields: Sequence[FieldSpec]) -> list[list[Any]]:
    """The Python values of columns ``idxs`` (any-fields decoded); ``fields`` describe every column."""
    out = []
    for i in idxs:
        vals = data.column(i).to_pylist()
        if fields[i].is_any:
            vals = [decode_any(v) for v in vals]
        out.append(vals)
    return out


def rows_of(cols: list[list[Any]], n_rows: int) -> list[tuple[Any, ...]]:
    """Row tuples from column lists (``n_rows`` empty tuples when there are no columns)."""
    if not cols:
        return [()] * n_rows
    return list(zip(*cols, strict=True))


def build_array(values: list[Any], field: FieldSpec, atype: pa.DataType, what: str) -> pa.Array:
    """An Arrow array of ``values`` for ``field`` (encoded for an any-field)."""
    if field.is_any:
        return pa.array([encode_any(v) for v in values], type=pa.binary())
    try:
        return pa.array(values, type=atype)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
        bad = next((v for v in values if v is not None), None)
        msg = (
            f"{what}: field {field.name!r} is declared {field.type_name()} but got {type(bad).__name__} "
            f"values (e.g. {bad!r:.60}): {exc}. Declare the right type (e.g. '{field.name}:str') or leave it "
            "untyped"
        )
        raise TopologyError(msg) from exc


def take_column(col: pa.Array | pa.ChunkedArray, idx: pa.Array, atype: pa.DataType) -> Any:
    """Rows ``idx`` of a pass-through column, cast to ``atype`` if its Arrow type differs."""
    out = col.take(idx)
    if isinstance(out, pa.ChunkedArray):
        out = out.combine_chunks() if out.num_chunks != 1 else out.chunk(0)
    if out.type != atype:
        out = out.cast(atype)
    return out


def to_batch(arrays: Sequence[Any], schema: pa.Schema) -> pa.RecordBatch:
    """A record batch of ``arrays`` with ``schema``."""
    return pa.RecordBatch.from_arrays(list(arrays), schema=schema)


def concat(batches: Iterable[pa.RecordBatch]) -> pa.Table | None:
    """One table of every batch (``None`` for no batches)."""
    bs = list(batches)
    if not bs:
        return None
    return pa.Table.from_batches(bs).combine_chunks()


def report(acc: Any, component: str, task: int, txid: int, n_in: int, n_out: int, ms: float) -> None:
    """Add a task's :class:`~weir.runtime.spark.executor.TaskReport` to the batch's accumulator (if any)."""
    if acc is not None:
        acc.add([TaskReport(component, task, txid, n_in=n_in, n_out=n_out, ms=ms)])
