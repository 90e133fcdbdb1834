"""Executor side, shared by every dialect: what a task is given and the one record it sends back.

A task runs inside a Spark task (a Python worker) and tells the driver how it went with one typed
:class:`TaskReport` — its counts, its failure (component, task, txid, traceback, whether a newer
driver fenced it) and the tuples it routed to the dead-letter sink — the way PySpark's
``DataSourceStreamWriter.write()`` returns a ``WriterCommitMessage`` that the driver's ``commit()``
receives. A task that fails ends normally too, with a failed report: reports travel in an
accumulator (:class:`ReportAccumulatorParam`), and the driver turns them into the batch's
:class:`~weir.checkpoint.coordinator.JobOutcome` with :func:`outcome_of`. The one exception is a
Trident stage that must stop its Spark job (its output feeds a state update in the same job): Spark
drops a failed task's accumulator updates, so its report travels in its error's text
(:meth:`TaskReport.to_text`; see ``docs/architecture.md``).

The task loops of the Storm and Streams dialects are generators of plain records:

* ``("T", stream, values, source_task, direct_task)`` — an emitted tuple, passed to the next stage;
* ``("D", dead_letter)`` — a failed tuple for the dead-letter sink (:func:`dead_letter`);
* ``("R", report)`` — the task's :class:`TaskReport`, last.

:func:`send_reports` passes the tuples on and sends the report, with the task's dead letters
attached, to the accumulator.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import re
import traceback
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from pyspark.accumulators import AccumulatorParam

from weir.checkpoint.coordinator import JobOutcome, TaskFailure
from weir.errors import FencedError, TopologyError
from weir.topology.context import TopologyContext
from weir.topology.tuple import Fields, Tuple

__all__ = [
    "ReportAccumulatorParam",
    "TaskReport",
    "TaskSpec",
    "check_emitted",
    "collect_reports",
    "dead_letter",
    "failure_report",
    "outcome_of",
    "send_reports",
    "task_report",
]


def _keep_spark_zip_directories() -> None:
    """Spare each Python task PySpark's re-read of its own zips (``pyspark.zip``, py4j's source zip).

    PySpark's worker calls ``importlib.invalidate_caches()`` before every task. On CPython 3.11 a
    ``zipimporter`` then re-reads its archive's whole directory in Python, and a worker holds one
    importer per package it imported from an archive on its path: 18 of them after a weir task,
    over ``pyspark.zip``, py4j's zip and Spark's ``spark-core`` jar (which Spark also puts on the
    worker's path), measured at 150-270 ms of CPU per task on this project's 2-core machine
    (``docs/performance.md``). Spark's own archives do not change while a worker lives, so their
    importers keep the directory they read; every other archive (a user's ``addPyFile`` zip) is
    re-read as before. Called when this module is imported, in the driver and in every worker that runs a
    weir function (the first task of a worker still pays once).
    """
    import zipimport

    current = zipimport.zipimporter.invalidate_caches
    if getattr(current, "_weir", False):
        return

    def invalidate_caches(self: Any) -> None:
        archive = str(getattr(self, "archive", ""))
        name = os.path.basename(archive)
        parent = os.path.basename(os.path.dirname(archive))
        if parent == "lib" and (name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith("-src.zip"))):
            return
        if parent == "jars" and name.startswith("spark-core_") and name.endswith(".jar"):
            return  # Spark puts its core jar on the worker's path too: thousands of entries
        current(self)

    invalidate_caches._weir = True  # type: ignore[attr-defined]
    zipimport.zipimporter.invalidate_caches = invalidate_caches  # type: ignore[method-assign]


_keep_spark_zip_directories()

#: value types that always pickle: an emitted value of another type is checked before it leaves its task
_PLAIN = (str, int, float, bool, bytes, type(None))


@dataclass
class TaskSpec:
    """Everything a task needs, shipped to executors inside the Spark closure."""

    topology: str
    component_id: str
    component: Any
    parallelism: int
    outputs: dict[str, Fields]
    input_fields: dict[tuple[str, str], Fields] = field(default_factory=dict)
    conf: Mapping[str, Any] = field(default_factory=dict)
    component_tasks: dict[str, int] = field(default_factory=dict)
    provider: Any = None
    deadletter: bool = False
    stateful: bool = False
    #: streams some component subscribes to; tuples on other streams are counted, not shipped
    consumed_streams: frozenset[str] = frozenset()
    #: Storm's acking: every input of a rich bolt must be acked or failed (``topology.acker.executors`` ≠ 0)
    acking: bool = True
    #: what the component's dialect planned for it at submit time (a Streams operator's placement)
    placement: Any = None
    #: marks (window / final punctuation) may reach this task: its input goes through an Aligner
    punctuation: bool = False
    #: Storm's tick tuples: ``(freq_secs, every_n_batches)`` (see :mod:`weir.runtime.spark.storm.ticks`)
    ticks: tuple[float, int] | None = None
    #: the driver stamps its epoch on this component's namespaces at each start (``Backend.claim``):
    #: its tasks prepare only while the store holds exactly that epoch (a store that lost it refuses)
    claimed: bool = False

    def context(self, task: int) -> TopologyContext:
        """The task's context."""
        return TopologyContext(
            topology=self.topology,
            component_id=self.component_id,
            task_index=task,
            parallelism=self.parallelism,
            conf=self.conf,
            component_tasks=self.component_tasks,
            output_fields={s: tuple(f) for s, f in self.outputs.items()},
        )


@dataclass
class TaskReport:
    """What one task of one batch tells the driver (every dialect sends this one record).

    Attributes
    ----------
    component, task, txid
        Which task of which batch.
    ok
        False when the task failed; ``error``, ``error_type`` and ``traceback`` then say why, and
        ``fenced`` whether a newer driver had taken the topology over.
    n_in, n_out
        Tuples the task read and emitted.
    failed, acked
        Input tuples failed (routed to the dead-letter sink) and acked.
    ms
        The task's time.
    errors
        What the component reported with ``collector.report_error`` (the first five).
    keys_written
        Keys of each state namespace the task prepared.
    dead_letters
        The failed tuples for the dead-letter sink (see :func:`dead_letter`).
    extra
        Dialect-specific counts (windows fired, the checkpoint an operator took, ...).
    """

    component: str
    task: int
    txid: int
    ok: bool = True
    n_in: int = 0
    n_out: int = 0
    failed: int = 0
    acked: int = 0
    ms: float = 0.0
    error: str | None = None
    error_type: str | None = None
    traceback: str = ""
    fenced: bool = False
    errors: list[str] = field(default_factory=list)
    keys_written: dict[str, int] = field(default_factory=dict)
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    pid: int = field(default_factory=os.getpid)

    @classmethod
    def from_exception(
        cls,
        component: str,
        task: int,
        txid: int,
        exc: BaseException | None,
        *,
        error: str | None = None,
        n_in: int = 0,
        n_out: int = 0,
    ) -> TaskReport:
        """The report of a task that failed with ``exc`` — the one constructor of a failed report.

        Call it in the ``except`` block that caught ``exc``: the report keeps the current traceback,
        the exception's type and whether a newer driver fenced the task (:class:`FencedError`).
        ``error`` is the message (default ``"<type>: <exc>"``). ``exc`` is ``None`` for a failure
        known only from its text (Spark SQL's ``raise_error``): no type, no traceback.
        """
        if exc is None:
            return cls(component, task, txid, ok=False, n_in=n_in, n_out=n_out, error=error)
        return cls(
            component,
            task,
            txid,
            ok=False,
            n_in=n_in,
            n_out=n_out,
            error=f"{type(exc).__name__}: {exc}" if error is None else error,
            error_type=type(exc).__name__,
            traceback=traceback.format_exc(),
            fenced=isinstance(exc, FencedError),
        )

    def failure(self) -> TaskFailure:
        """The failed task as the coordinator's :class:`~weir.checkpoint.coordinator.TaskFailure`."""
        return TaskFailure(self.component, self.task, self.error or "failed", self.traceback)

    # ---- the one text form: a failed Spark task can only tell the driver through its error -------
    def to_text(self) -> str:
        """The report as a marker that survives in the text of the error a failed Spark task raises."""
        blob = base64.b64encode(json.dumps(asdict(self), default=repr).encode()).decode()
        return f"{_MARK}{blob}{_END}"

    @classmethod
    def from_text(cls, text: str) -> TaskReport | None:
        """The report :meth:`to_text` put in ``text`` (a Spark job's error), if any."""
        m = _RE.search(text)
        if m is None:
            return None
        try:
            data = json.loads(base64.b64decode(m.group(1)))
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        known = {f.name for f in fields(cls)}
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except TypeError:
            return None


_MARK = "weir-task-report:"
_END = ":end-weir-task-report"
_RE = re.compile(re.escape(_MARK) + r"([A-Za-z0-9+/=]+)" + re.escape(_END))
_FIELDS = frozenset(f.name for f in fields(TaskReport))


def task_report(spec: TaskSpec, task: int, txid: int, **kw: Any) -> tuple[str, TaskReport]:
    """The ``("R", report)`` record of task ``task``; keywords that are not fields go to ``extra``."""
    known = {k: v for k, v in kw.items() if k in _FIELDS}
    extra = {k: v for k, v in kw.items() if k not in _FIELDS}
    return ("R", TaskReport(spec.component_id, task, txid, extra=extra, **known))


def failure_report(
    spec: TaskSpec, task: int, txid: int, exc: BaseException, where: str, n_in: int, n_out: int
) -> tuple[str, TaskReport]:
    """The ``("R", report)`` record of a task that failed ``where`` with ``exc``; call it in ``except``."""
    error = f"{type(exc).__name__} in {where}: {exc}"
    return ("R", TaskReport.from_exception(spec.component_id, task, txid, exc, error=error, n_in=n_in, n_out=n_out))


def dead_letter(
    spec: TaskSpec, task: int, txid: int, tup: Tuple | None, values: Any, error: str
) -> tuple[str, dict[str, Any]]:
    """The ``("D", record)`` of a tuple routed to the dead-letter sink (JSON-ready)."""
    return (
        "D",
        {
            "topology": spec.topology,
            "component": spec.component_id,
            "task": task,
            "txid": txid,
            "source_component": tup.source_component if tup else None,
            "source_stream": tup.source_stream_id if tup else None,
            "source_task": tup.source_task if tup else None,
            "values": _jsonable(values),
            "error": error,
        },
    )


def _jsonable(values: Any) -> Any:
    try:
        json.dumps(values, default=repr)
        return json.loads(json.dumps(values, default=repr))
    except Exception:
        return repr(values)


def check_emitted(spec: TaskSpec, task: int, values: tuple[Any, ...]) -> None:
    """Raise a :class:`TopologyError` naming the task when an emitted value cannot reach the next stage."""
    for v in values:
        if type(v) in _PLAIN:
            continue
        try:
            pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            msg = (
                f"topology {spec.topology!r}, component {spec.component_id!r}, task {task}: emitted a value of "
                f"type {type(v).__qualname__} that cannot be serialized to the next component: {exc}"
            )
            raise TopologyError(msg, component=spec.component_id, task=task) from exc


class ReportAccumulatorParam(AccumulatorParam):  # type: ignore[type-arg]
    """Accumulates the :class:`TaskReport` of every task of a batch (a list)."""

    def zero(self, value: list[TaskReport]) -> list[TaskReport]:
        """An empty list."""
        return []

    def addInPlace(self, a: list[TaskReport], b: list[TaskReport]) -> list[TaskReport]:  # noqa: N802 - PySpark's name
        """Concatenate ``b`` onto ``a``."""
        a.extend(b)
        return a


#: the Spark local property naming the batch a job runs (``"<txid>:<epoch>"``, epoch empty if none):
#: the Python functions of a run's components are made (and sent to the JVM) once per run, and each
#: task reads its batch from its job
BATCH_PROPERTY = "weir.batch"


def batch_property(txid: int, epoch: int | None) -> str:
    """The value of :data:`BATCH_PROPERTY` for batch ``txid`` of a driver with ``epoch``."""
    return f"{txid}:{'' if epoch is None else epoch}"


def batch_of_job(component: str) -> tuple[int, int | None]:
    """``(txid, epoch)`` of the batch the running Spark task belongs to (its job's local property)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    raw = ctx.getLocalProperty(BATCH_PROPERTY) if ctx is not None else None
    if not raw:
        msg = (
            f"{component}: this function was planned for every batch of a run but its Spark job has no "
            f"{BATCH_PROPERTY!r} local property (weir's batch runners set it around a batch's jobs)"
        )
        raise RuntimeError(msg)
    txid, _, epoch = raw.partition(":")
    return int(txid), int(epoch) if epoch else None


def collect_reports(reports: list[TaskReport], gen: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    """Pass emitted tuples and punctuation marks on; append the reports (dead letters attached) to ``reports``."""
    dead: list[dict[str, Any]] = []
    for rec in gen:
        kind = rec[0]
        if kind == "B" or kind == "T" or kind == "P":
            yield rec
        elif kind == "D":
            dead.append(rec[1])
        else:
            report: TaskReport = rec[1]
            report.dead_letters.extend(dead)
            dead = []
            reports.append(report)


def send_reports(acc: Any, gen: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    """:func:`collect_reports`, then send the reports to the accumulator ``acc``."""
    reports: list[TaskReport] = []
    yield from collect_reports(reports, gen)
    acc.add(reports)


def outcome_of(
    reports: Iterable[TaskReport], expected: Iterable[tuple[str, int]], stats: dict[str, Any]
) -> tuple[JobOutcome, list[TaskReport]]:
    """The batch's outcome from its tasks' reports (one per task; a failure wins over a recomputed success).

    ``expected`` are the (component, task) pairs that must report; a silent one fails the batch.
    Raises :class:`FencedError` when a task found that a newer driver took the topology over.
    """
    best: dict[tuple[str, int], TaskReport] = {}
    for r in reports:
        k = (r.component, r.task)
        if k not in best or (best[k].ok and not r.ok):
            best[k] = r
    deduped = list(best.values())
    fenced = next((r for r in deduped if r.fenced), None)
    if fenced is not None:
        msg = f"txid {fenced.txid}: {fenced.error}"
        raise FencedError(msg)
    failures = [r.failure() for r in deduped if not r.ok]
    if not failures:
        missing = [k for k in expected if k not in best]
        if missing:
            failures.append(TaskFailure(missing[0][0], missing[0][1], "the task sent no report (lost output?)"))
    return JobOutcome(failures=failures, stats=stats), deduped
