"""Replayable spouts: a user's offset-range reader registered as a Spark Python data source.

A :class:`ReplayableSpout` says where its data starts (:meth:`~ReplayableSpout.initial_offset`), how
far a batch may go (:meth:`~ReplayableSpout.latest_offset`, honouring a :class:`ReadLimit`) and how
to read a range (:meth:`~ReplayableSpout.read`). weir turns it into a Spark
``DataSourceStreamReader`` with admission control and ``Trigger.AvailableNow`` support, so Spark
records every batch's offsets in its offset log *before* the batch runs and replays exactly that
range after a failure — spout progress is checkpointed, unlike Storm's.

Where each method runs:

=========================  ==========================================================
``initial_offset``          the driver, once per checkpoint (the result is pinned)
``latest_offset``           Spark's source planner (a Python worker next to the driver)
``partitions``, ``commit``  the planner as well
``read``                    executors, on a pickled copy of the spout: keep it stateless
=========================  ==========================================================

Offsets are JSON objects (``dict`` of ``str`` to ``str``/``int``/``bool`` or nested objects);
weir sorts their keys so the same offset always has the same JSON text.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import re
from abc import abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.streaming.datasource import ReadLimit as SparkReadLimit

from weir._util import positive_int
from weir.errors import SourceError, WeirError
from weir.sources.backlog import BatchGrowth, batch_growth
from weir.sources.columnar import ARROW_TYPES
from weir.sources.schema import CORRUPT_COLUMN, Column, parse_columns, to_ddl
from weir.topology.components import Guarantee, OutputFieldsDeclarer, Spout
from weir.topology.tuple import Fields

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from weir.topology.context import TopologyContext

__all__ = ["RESUME_OFFSET_KEY", "Offset", "ReadLimit", "ReplayableSpout", "canonical_offset"]

log = logging.getLogger("weir.sources")

Offset = dict[str, Any]
"""A spout offset: a JSON object."""

#: the key of a spout's context configuration carrying the offset it resumes from: the end offset
#: kept in the store with the last committed txid, set by the runner when Spark's checkpoint is
#: missing or new (see :mod:`weir.runtime.spark.statecheck`); it replaces :meth:`ReplayableSpout.initial_offset`
RESUME_OFFSET_KEY = "weir.internal.resume.offset"


@dataclass(frozen=True)
class ReadLimit:
    """How much one batch may take: at most ``max_records`` records and about ``max_bytes`` bytes.

    ``None`` means no limit. A spout must always admit at least one record when any is available,
    even one larger than ``max_bytes``, or the stream would stop.
    """

    max_records: int | None = None
    max_bytes: int | None = None

    @property
    def unlimited(self) -> bool:
        """Whether everything available may be taken."""
        return self.max_records is None and self.max_bytes is None

    def cap(self, start: int, available: int) -> int:
        """For integer positions: the end of a batch starting after ``start`` with ``available`` the last.

        Example: ``ReadLimit(max_records=100).cap(start=250, available=1000) == 350``.
        """
        if available <= start or self.max_records is None:
            return max(start, available)
        return min(available, start + self.max_records)


class ReplayableSpout(Spout):
    """A spout that reads by offset range, registered with Spark as a Python data source.

    Subclasses implement :meth:`initial_offset`, :meth:`latest_offset` and :meth:`read`, and declare
    their output with ``fields`` (every column ``STRING``) or a DDL ``schema`` such as
    ``"user STRING, amount BIGINT"``. Optional: :meth:`partitions` (split a range for parallel
    reads), :meth:`commit` (Spark finished a range; lags a batch and may be skipped: never rely on
    it), :meth:`stop`, :meth:`clamp_offset` (for offsets that are not numbers).

    ``read(start, end)`` must return the same records every time it is called with the same range:
    that is what makes the spout ``TRANSACTIONAL``. A source that can lose records inside a range
    (retention) declares ``OPAQUE``.

    Attributes
    ----------
    guarantee : what the spout promises on replay (default ``TRANSACTIONAL``)
    fields : output field names (all ``STRING``) when no ``schema`` is given
    schema : DDL of the output columns (``STRING``, ``BIGINT``, ``INT``, ``DOUBLE``, ``BOOLEAN``, ``BINARY``, ...)
    max_records_per_batch : back-pressure: records per batch (``None``: no limit)
    max_bytes_per_batch : back-pressure: approximate bytes per batch (``None``: no limit)
    corrupt_column : rows end with one more value, the reason a record is malformed (or ``None``);
        such a row fails its batch, or goes to the dead-letter sink when the topology has one

    Examples
    --------
    >>> class Numbers(ReplayableSpout):
    ...     schema = "n BIGINT"
    ...     max_records_per_batch = 100
    ...     def __init__(self, total):
    ...         self.total = total
    ...     def initial_offset(self):
    ...         return {"n": 0}
    ...     def latest_offset(self, start, limit):
    ...         return {"n": limit.cap(start["n"], self.total)}
    ...     def read(self, start, end):
    ...         return ((i,) for i in range(start["n"], end["n"]))
    """

    guarantee: Guarantee = Guarantee.TRANSACTIONAL
    fields: Sequence[str] | None = None
    schema: str | None = None
    max_records_per_batch: int | None = None
    max_bytes_per_batch: int | None = None
    corrupt_column: bool = False

    # ---- what a spout implements ---------------------------------------------------------
    @abstractmethod
    def initial_offset(self) -> Offset:
        """Where a new topology starts. Called once; weir pins the result in the checkpoint."""

    @abstractmethod
    def latest_offset(self, start: Offset, limit: ReadLimit) -> Offset:
        """The end of the next batch after ``start``, within ``limit``; ``start`` when nothing is new."""

    @abstractmethod
    def read(self, start: Offset, end: Offset) -> Iterable[Sequence[Any]]:
        """The records after ``start`` up to and including ``end``, as tuples in the output's column order."""

    def partitions(self, start: Offset, end: Offset) -> Sequence[tuple[Offset, Offset]]:
        """Split the range into sub-ranges read in parallel (default: one)."""
        return [] if start == end else [(start, end)]

    def commit(self, end: Offset) -> None:  # noqa: B027 - optional hook
        """Spark has processed everything up to ``end`` (lags a batch; may not be called)."""

    def stop(self) -> None:  # noqa: B027 - optional hook
        """The query stopped (not always called)."""

    def clamp_offset(self, start: Offset, end: Offset, target: Offset) -> Offset:
        """``end`` limited to ``target`` and never before ``start`` (for ``Trigger.AvailableNow``).

        The default handles numbers and nested objects of numbers; keys missing from ``target``
        keep their ``start`` value (or are left out). Override it for offsets that do not compare
        as numbers.
        """
        out: Offset = _clamp(start, end, target, self.describe())
        return out

    def describe(self) -> str:
        """A short description for messages (default: the class name)."""
        return type(self).__name__

    def records(self, start: Offset, end: Offset) -> Iterator[tuple[Any, ...]]:
        """The range's records as Spark receives them, as tuples (for tests and debugging).

        Goes through weir's conversion of :meth:`read`'s output to Arrow, so each tuple has the
        output columns' types, plus the malformed-record reason when the spout has that column.
        """
        part = _Range(0, canonical_offset(start, self.describe()), canonical_offset(end, self.describe()))
        for batch in _read(self, self.describe(), part):
            columns = [c.to_pylist() for c in batch.columns]
            yield from zip(*columns, strict=True)

    # ---- what weir does with it ----------------------------------------------------------
    def columns(self) -> list[Column]:
        """The output columns (validated)."""
        return parse_columns(self.schema, self.fields, where=self.describe())

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """One stream with the spout's fields."""
        declarer.declare(Fields([c.name for c in self.columns()]))

    def arrow_layout(self) -> tuple[list[str], list[pa.DataType]]:
        """The names and Arrow types of the record batches Spark gets (malformed-record column last, if any)."""
        cols = self.columns()
        names = [c.name for c in cols] + ([CORRUPT_COLUMN] if self.corrupt_column else [])
        types = [ARROW_TYPES[c.type] for c in cols] + ([pa.string()] if self.corrupt_column else [])
        return names, types

    def spark_schema(self) -> str:
        """The data source's DDL (output columns, plus the malformed-record column if any)."""
        return to_ddl(self.columns(), corrupt_column=self.corrupt_column)

    def read_limit(self) -> ReadLimit:
        """The configured back-pressure limits (validated)."""
        for name in ("max_records_per_batch", "max_bytes_per_batch"):
            v = getattr(self, name)
            if v is not None:
                positive_int(v, f"{self.describe()}: {name}", expected="a positive int or None")
        return ReadLimit(self.max_records_per_batch, self.max_bytes_per_batch)

    def to_values(self, row: Any) -> tuple[Any, ...]:
        """The row's values; a row marked malformed raises :class:`SourceError`."""
        values = tuple(row)  # indexing a plain tuple: a Spark Row's __getitem__ is slow
        if self.corrupt_column:
            bad = values[-1]
            if bad is not None:
                msg = f"{self.describe()}: malformed record: {bad}"
                raise SourceError(msg)
            return values[:-1]
        return values

    def create_stream(self, spark: SparkSession, context: TopologyContext) -> DataFrame:
        """Register the spout as a Python data source and return ``spark.readStream`` over it."""
        self.columns()
        self.read_limit()
        where = f"spout {context.component_id!r} of topology {context.topology!r} ({self.describe()})"
        from weir.state.config import spark_checkpoint_location

        location = spark_checkpoint_location(context.topology, context.conf)
        path = f"{location.rstrip('/')}/weir/initial-offset/{context.component_id}.json"
        resume = context.conf.get(RESUME_OFFSET_KEY)
        if resume is not None:  # Spark's checkpoint is gone: start where the store's state is
            initial = pin_initial_offset(spark, path, lambda: canonical_offset(resume, where))
        else:
            initial = pin_initial_offset(spark, path, lambda: canonical_offset(self.initial_offset(), where))
        name = source_name(context.topology, context.component_id)
        attrs = {
            "spout": self,
            "where": where,
            "initial": initial,
            "source_name": name,
            "grow_max": batch_growth(context.conf),
            "__module__": __name__,
        }
        cls = type(name, (_SpoutDataSource,), attrs)
        spark.dataSource.register(cls)
        return spark.readStream.format(name).load()


def source_name(topology: str, component: str) -> str:
    """The data source name a spout is registered under (letters, digits and ``_``)."""
    return "weir_" + re.sub(r"[^A-Za-z0-9_]", "_", f"{topology}__{component}")


# ---- offsets ---------------------------------------------------------------------------------
def canonical_offset(offset: Any, where: str) -> Offset:
    """``offset`` with keys sorted at every level, after checking it is a JSON object of primitives.

    Raises
    ------
    SourceError
        When the offset is not a dict with string keys and str/int/float/bool/None/list/dict values.
    """
    if not isinstance(offset, dict):
        msg = f"{where}: an offset must be a dict (a JSON object), got {type(offset).__name__} {offset!r:.200}"
        raise SourceError(msg)
    out = _canon(offset, where)
    assert isinstance(out, dict)
    return out


def _canon(v: Any, where: str) -> Any:
    if isinstance(v, dict):
        for k in v:
            if not isinstance(k, str):
                msg = f"{where}: offset keys must be strings, got {k!r}"
                raise SourceError(msg)
        return {k: _canon(v[k], where) for k in sorted(v)}
    if isinstance(v, (list, tuple)):
        return [_canon(x, where) for x in v]
    if v is None or isinstance(v, (str, bool, int, float)):
        return v
    msg = f"{where}: offset value {v!r:.100} of type {type(v).__name__} is not JSON (use str, int, bool)"
    raise SourceError(msg)


def _clamp(start: Any, end: Any, target: Any, where: str) -> Any:
    if isinstance(end, dict):
        out = {}
        s = start if isinstance(start, dict) else {}
        t = target if isinstance(target, dict) else {}
        for k, v in end.items():
            if k in t:
                out[k] = _clamp(s.get(k), v, t[k], where)
            elif k in s:
                out[k] = s[k]
        return out
    if end == target or end == start:
        return end
    if target == start:
        return start
    numeric = (int, float)
    if all(isinstance(x, numeric) and not isinstance(x, bool) for x in (end, target)):
        low = min(end, target)
        return max(low, start) if isinstance(start, numeric) and not isinstance(start, bool) else low
    msg = (
        f"{where}: cannot tell whether offset value {end!r} is past {target!r}; override "
        "clamp_offset(start, end, target) for offsets that are not numbers"
    )
    raise SourceError(msg)


def pin_initial_offset(spark: Any, path: str, compute: Callable[[], Offset]) -> Offset:
    """The initial offset stored at ``path`` (any Hadoop file system), computing and storing it once.

    Spark asks a source for its initial offset again whenever it replays the first batch, so an
    initial offset that depends on "now" (a stream's current end) must be fixed the first time.
    Over Spark Connect (no JVM in this process) ``path`` must be a local path (the checkpoint
    location of a server on this machine), read and written with Python's file I/O.
    """
    if type(spark).__module__.startswith("pyspark.sql.connect."):  # a Spark Connect session
        return _pin_local_initial_offset(path, compute)
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    target = jvm.org.apache.hadoop.fs.Path(path)
    fs = target.getFileSystem(conf)
    fs.setVerifyChecksum(False)  # a small JSON file people may read or fix by hand: no .crc beside it
    fs.setWriteChecksum(False)
    if fs.exists(target):
        stream = fs.open(target)
        try:
            text = str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()
        try:
            value = json.loads(text)
        except ValueError as exc:
            msg = f"the pinned initial offset at {path} is not JSON ({exc}); delete the file to start afresh"
            raise SourceError(msg) from exc
        if not isinstance(value, dict):
            msg = f"the pinned initial offset at {path} is not a JSON object; delete the file to start afresh"
            raise SourceError(msg)
        return value
    value = compute()
    tmp = jvm.org.apache.hadoop.fs.Path(path + ".tmp")
    out = fs.create(tmp, True)
    try:
        out.write(bytearray(json.dumps(value, sort_keys=True).encode("utf-8")))
    finally:
        out.close()
    if not fs.rename(tmp, target):
        fs.delete(tmp, False)
        if not fs.exists(target):
            msg = f"cannot store the initial offset at {path}"
            raise SourceError(msg)
    return value


def _read_pinned(path: str) -> Offset:
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    try:
        value = json.loads(text)
    except ValueError as exc:
        msg = f"the pinned initial offset at {path} is not JSON ({exc}); delete the file to start afresh"
        raise SourceError(msg) from exc
    if not isinstance(value, dict):
        msg = f"the pinned initial offset at {path} is not a JSON object; delete the file to start afresh"
        raise SourceError(msg)
    return value


def _pin_local_initial_offset(path: str, compute: Callable[[], Offset]) -> Offset:
    """:func:`pin_initial_offset` on a local path (a Spark Connect client; the first writer wins)."""
    import uuid

    local = path[len("file:") :] if path.startswith("file:") else path
    if "://" in local:
        msg = (
            f"the initial offset of a spout is kept under Spark's checkpoint location, {path}; over Spark Connect "
            "weir reaches it with Python's file I/O, so the location must be a local path (weir.spark.checkpoint"
            ".location, or weir.state.dir) on this machine, which is the server's"
        )
        raise SourceError(msg)
    local = "/" + local.lstrip("/") if path.startswith("file:") else local
    if os.path.exists(local):
        return _read_pinned(local)
    value = compute()
    os.makedirs(os.path.dirname(local) or ".", exist_ok=True)
    tmp = f"{local}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(value, sort_keys=True))
        fh.flush()
        os.fsync(fh.fileno())
    try:
        os.link(tmp, local)  # fails if another writer pinned it first: theirs is the one kept
    except FileExistsError:
        return _read_pinned(local)
    finally:
        os.unlink(tmp)
    return value


# ---- the Spark data source -------------------------------------------------------------------
class _Range(InputPartition):
    """One sub-range of a batch, read by one Spark task."""

    def __init__(self, index: int, start: Offset, end: Offset) -> None:
        super().__init__((start, end))
        self.index = index
        self.start = start
        self.end = end


def _weir_limit(limit: SparkReadLimit, configured: ReadLimit) -> ReadLimit:
    """Spark's read limit as weir's: the engine's limit wins; the other configured bound stays."""
    if isinstance(limit, ReadAllAvailable):
        return ReadLimit()
    if isinstance(limit, ReadMaxRows):
        return ReadLimit(int(limit.max_rows), configured.max_bytes)
    if isinstance(limit, ReadMaxBytes):
        return ReadLimit(configured.max_records, int(limit.max_bytes))
    return configured  # ReadMinRows / ReadMaxFiles: keep the spout's own bounds


class _SpoutReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """Adapts a :class:`ReplayableSpout` to Spark's stream reader (admission control, AvailableNow)."""

    def __init__(self, spout: ReplayableSpout, where: str, initial: Offset, grow_max: int = 1) -> None:
        self.spout = spout
        self.where = where
        self.initial = initial
        self.available_now = False
        self.target: Offset | None = None
        self.growth = BatchGrowth(grow_max)

    def initialOffset(self) -> Offset:  # noqa: N802 - Spark's name
        return self.initial

    def getDefaultReadLimit(self) -> SparkReadLimit:  # noqa: N802
        lim = self.spout.read_limit()
        if lim.max_records is not None:
            return ReadMaxRows(lim.max_records)
        if lim.max_bytes is not None:
            return ReadMaxBytes(lim.max_bytes)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self.available_now = True
        self.target = None

    def latestOffset(self, start: Offset, limit: SparkReadLimit) -> Offset:  # noqa: N802
        spout = self.spout
        if self.available_now and self.target is None:
            # the first call after prepare: what is there now is all this run will read
            self.target = canonical_offset(spout.latest_offset(start, ReadLimit()), self.where)
        lim = _weir_limit(limit, spout.read_limit())
        grow = self.growth.enabled and not lim.unlimited
        if grow:  # slow start: the limit doubled per batch that left input behind (weir.batch.grow.max)
            lim = ReadLimit(self.growth.grown(lim.max_records), self.growth.grown(lim.max_bytes))
        try:
            end = canonical_offset(spout.latest_offset(start, lim), self.where)
            if self.target is not None:
                end = canonical_offset(spout.clamp_offset(start, end, self.target), self.where)
            if grow:
                ready = self.target
                if ready is None:
                    ready = canonical_offset(spout.latest_offset(start, ReadLimit()), self.where)
                self.growth.observe(backlogged=end != ready)
        except SourceError as exc:
            named = _named(exc, self.where)
            if named is exc:
                raise
            raise named from exc
        # the end is in Spark's offset log before the batch runs: a replay reads this range, whatever size
        return end

    def partitions(self, start: Offset, end: Offset) -> Sequence[InputPartition]:
        ranges = self.spout.partitions(start, end)
        return [_Range(i, s, e) for i, (s, e) in enumerate(ranges)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, _Range)
        _freeze_worker_heap()
        return _read(self.spout, self.where, partition)

    def commit(self, end: Offset) -> None:
        try:
            self.spout.commit(end)
        except Exception:  # advisory: Spark's commit lags and may be skipped anyway
            log.warning("%s: commit(%s) failed; continuing", self.where, json.dumps(end), exc_info=True)

    def stop(self) -> None:
        try:
            self.spout.stop()
        except Exception:
            log.warning("%s: stop() failed", self.where, exc_info=True)


_FROZEN_IN: list[int] = [0]  # the pid of the Python worker whose heap _freeze_worker_heap froze


def _freeze_worker_heap() -> None:
    """Once per Python worker process: exempt the objects alive now from the cyclic garbage collector.

    A reused Spark worker runs a full ``gc.collect()`` after every task, and a batch's read allocates
    many collectable objects (a broker client's messages), which trigger full collections too. Each
    one walks every object of the worker: about 80,000 once pyspark and pyarrow are imported, some
    30 ms a pass. Frozen here (before this task's records exist), those long-lived objects (modules,
    classes, this first task's reader) are skipped; reference counting still frees them as usual.
    Only in a Spark task: elsewhere (the driver, a test) the heap is left alone.
    """
    pid = os.getpid()
    if _FROZEN_IN[0] == pid:  # a worker forked from Spark's daemon starts with the daemon's value
        return
    from pyspark import TaskContext

    if TaskContext.get() is None:  # not a Spark task (a test, a driver): leave the heap alone
        return
    _FROZEN_IN[0] = pid
    gc.freeze()


_CHUNK = 10_000  # rows per Arrow record batch (Spark's default maxRecordsPerBatch)


def _read(spout: ReplayableSpout, where: str, part: _Range) -> Iterator[Any]:
    """The spout's records of one sub-range as Arrow record batches.

    Built column by column, which is much cheaper than Spark's per-value conversion of tuples;
    record batches the spout yields itself pass through.
    """
    names, types = spout.arrow_layout()
    chunk: list[Any] = []
    try:
        for rec in spout.read(part.start, part.end):
            if isinstance(rec, pa.RecordBatch):
                if rec.schema.names != names:
                    msg = (
                        f"{where}: read() returned a record batch with columns {rec.schema.names}; "
                        f"the output has {names}"
                    )
                    raise SourceError(msg)
                yield rec
                continue
            chunk.append(rec)
            if len(chunk) >= _CHUNK:
                yield to_batch(chunk, names, types, where)
                chunk = []
        if chunk:
            yield to_batch(chunk, names, types, where)
    except SourceError as exc:
        named = _named(exc, where)
        if named is exc:
            raise
        raise named from exc
    except WeirError:
        raise
    except Exception as exc:
        msg = f"{where}: read({json.dumps(part.start)}, {json.dumps(part.end)}) failed: {type(exc).__name__}: {exc}"
        raise SourceError(msg) from exc


def _named(exc: SourceError, where: str) -> SourceError:
    """``exc`` (same class: retriable or not) with the spout and topology in front, unless already there."""
    if where in str(exc):
        return exc
    try:
        named = type(exc)(f"{where}: {exc}")
    except TypeError:  # a subclass with its own constructor: keep it as it is
        return exc
    return named


def to_batch(rows: list[Any], names: list[str], types: list[Any], where: str) -> Any:
    """One Arrow record batch of ``rows`` (columns ``names`` of Spark ``types``); ``where`` names the source."""
    width = len(names)
    for r in rows:
        if len(r) != width:
            msg = f"{where}: read() returned a record of {len(r)} values {tuple(r)!r:.200}; the output has {names}"
            raise SourceError(msg)
    columns = list(zip(*rows, strict=True))
    try:
        arrays = [pa.array(col, type=t) for col, t in zip(columns, types, strict=True)]
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
        for name, col, t in zip(names, columns, types, strict=True):
            for v in col:
                try:
                    pa.array([v], type=t)
                except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as bad:
                    msg = f"{where}: field {name!r} ({t}) cannot hold {type(v).__name__} {v!r:.100}: {bad}"
                    raise SourceError(msg) from bad
        raise
    return pa.RecordBatch.from_arrays(arrays, names=names)


class _SpoutDataSource(DataSource):  # type: ignore[misc]
    """Base of the per-spout data source classes :meth:`ReplayableSpout.create_stream` makes."""

    spout: ClassVar[ReplayableSpout]
    where: ClassVar[str]
    initial: ClassVar[Offset]
    source_name: ClassVar[str]
    grow_max: ClassVar[int] = 1

    @classmethod
    def name(cls) -> str:
        return cls.source_name

    def schema(self) -> str:
        return self.spout.spark_schema()

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802
        return _SpoutReader(self.spout, self.where, self.initial, self.grow_max)
