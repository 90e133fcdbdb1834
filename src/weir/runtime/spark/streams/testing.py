"""``OperatorTester``: run a Streams operator through micro-batches without Spark.

It drives the real pieces — the checkpoint :class:`~weir.checkpoint.coordinator.Coordinator`, the
operator task runner and a real store (memory, SQLite, Redis, PostgreSQL) — in this process, so a
test can feed batches, fail them, "crash" (drop the live instances and start a new coordinator) and
read back what was committed. Calls happen in a deterministic order.

Example
-------
>>> from weir.streams import TumblingWindowSort
>>> t = OperatorTester(TumblingWindowSort(3, ["v"]), input_fields=["v"])
>>> t.run_batch([[3], [1], [2], [9]]).values()
[[1, 0], [2, 0], [3, 0]]
>>> t.crash(); t.run_batch([[8], [7]]).values()
[[7, 1], [8, 1], [9, 1]]
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from weir._util import stable_hash
from weir.checkpoint.coordinator import CheckpointStore, Coordinator, JobOutcome, TaskFailure
from weir.errors import TopologyError
from weir.runtime.spark.config import RuntimeConfig
from weir.runtime.spark.executor import TaskReport, TaskSpec
from weir.runtime.spark.streams.operators import StreamsParticipants, clear_live_instances, run_operator_task
from weir.state.factory import KeyValueStateProvider, StateFactory
from weir.streams.checkpoint import Checkpoint
from weir.streams.operator import Operator
from weir.streams.store import Head, TaskCheckpoints, load_checkpoint
from weir.topology.builder import Topology, TopologyBuilder
from weir.topology.components import OutputFieldsDeclarer, Spout
from weir.topology.punctuation import MarkRecord, Punctuation
from weir.topology.tuple import Fields

__all__ = ["BatchResult", "OperatorTester"]


class _InputSpout(Spout):
    """Declares the tester's input fields; never creates a stream."""

    def __init__(self, fields: Sequence[str]) -> None:
        self.fields = list(fields)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields(self.fields))

    def create_stream(self, spark: Any, context: Any) -> Any:  # pragma: no cover - never called
        msg = "the OperatorTester's input is fed by run_batch()"
        raise TopologyError(msg)


class _Crash(Exception):  # noqa: N818 - a simulated crash, not an error
    """Stops the coordinator after the job, leaving PREPARING(n) and the prepared heads behind."""


@dataclass
class BatchResult:
    """What one ``run_batch`` did."""

    txid: int | None
    committed: bool
    outputs: list[tuple[int, str, list[Any]]] = field(default_factory=list)
    #: the :class:`~weir.runtime.spark.executor.TaskReport` of every task
    reports: list[TaskReport] = field(default_factory=list)
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    error: BaseException | None = None
    #: the coordinator's timings: the job (the tasks) and the commit phase, in ms
    job_ms: float = 0.0
    commit_ms: float = 0.0

    def values(self, stream: str = "default") -> list[list[Any]]:
        """Emitted values on ``stream``, task by task in order (marks left out)."""
        return [v for _, s, v in self.outputs if s == stream and not isinstance(v, Punctuation)]

    def sequence(self, stream: str = "default", task: int | None = None) -> list[Any]:
        """Emitted values and marks (:class:`Punctuation`) on ``stream`` in order (of ``task``, or all)."""
        return [v for t, s, v in self.outputs if s == stream and (task is None or t == task)]


class OperatorTester:
    """One operator fed by a pseudo spout ``src``, run batch by batch in this process.

    Parameters
    ----------
    operator : the Operator under test
    input_fields : fields of the input tuples
    store_url : the store (default: a fresh ``memory://`` store)
    parallelism : tasks of the operator
    fields_grouping : input fields to group by (default: round-robin over tasks)
    region : whether the operator is in a consistent region (else: periodic / operator-driven)
    conf : topology configuration (e.g. ``weir.checkpoint.retain``), component configuration
        (e.g. ``checkpoint.period.ms``) goes in ``component_conf``
    inputs : more input components ``{id: fields}`` (pseudo spouts, shuffle-grouped), e.g. for the
        operator's ``control_ports`` / ``autonomous_ports``; feed them with ``run_batch(ports=...)``
    region_options : ``drain_timeout``, ``reset_timeout``, ``max_consecutive_reset_attempts`` of the
        operator's consistent region
    """

    def __init__(
        self,
        operator: Operator,
        *,
        input_fields: Sequence[str] = ("value",),
        store_url: str | None = None,
        parallelism: int = 1,
        fields_grouping: Sequence[str] | None = None,
        region: bool = True,
        topology: str = "tester",
        component_id: str = "op",
        conf: Mapping[str, Any] | None = None,
        component_conf: Mapping[str, Any] | None = None,
        deadletter: bool = False,
        inputs: Mapping[str, Sequence[str]] | None = None,
        region_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = topology
        self.component_id = component_id
        self.store_url = store_url or f"memory://tester-{uuid.uuid4().hex[:10]}"
        self.provider: KeyValueStateProvider = StateFactory.from_url(self.store_url)
        b = TopologyBuilder()
        b.set_spout("src", _InputSpout(input_fields))
        decl = b.set_bolt(component_id, operator, parallelism)
        if fields_grouping:
            decl.fields_grouping("src", Fields(list(fields_grouping)))
        else:
            decl.shuffle_grouping("src")
        self.inputs = {k: list(v) for k, v in (inputs or {}).items()}
        for source, fields in self.inputs.items():
            b.set_spout(source, _InputSpout(fields))
            decl.shuffle_grouping(source)
        for k, v in (component_conf or {}).items():
            decl.add_configuration(k, v)
        if not region:
            b.consistent_region("src")
        elif region_options:
            b.consistent_region("src", *self.inputs, component_id, **region_options)
        self.topology: Topology = b.create_topology()
        self.conf = dict(conf or {})
        self.rc = RuntimeConfig.from_conf(topology, self.conf)
        c = self.topology.components[component_id]
        self.fields = Fields(list(input_fields))
        self.group_idx = [self.fields.field_index(f) for f in fields_grouping] if fields_grouping else None
        self.spec = TaskSpec(
            topology=topology,
            component_id=component_id,
            component=operator,
            parallelism=c.parallelism,
            outputs=dict(c.outputs),
            input_fields={
                ("src", "default"): self.fields,
                **{(k, "default"): Fields(v) for k, v in self.inputs.items()},
            },
            conf={**self.conf, **c.conf},
            component_tasks={"src": 1, **dict.fromkeys(self.inputs, 1), component_id: c.parallelism},
            provider=self.provider,
            deadletter=deadletter,
            stateful=c.is_stateful,
            consumed_streams=frozenset(c.outputs),
            punctuation=True,
        )
        self.participants = StreamsParticipants([self.spec], self.provider, self.rc, self.topology)
        self.query_id = f"tester-{uuid.uuid4().hex[:8]}"
        self.batch_id = 0
        self.coordinator = self._coordinator()

    def _coordinator(self) -> Coordinator:
        coord = Coordinator(
            self.name,
            CheckpointStore(self.provider.backend, self.name),
            self.participants,
            {self.component_id: self.spec.parallelism},
            max_retries=0,
        )
        coord.start()
        return coord

    @property
    def parallelism(self) -> int:
        """Tasks of the operator."""
        return self.spec.parallelism

    def _partition(self, tuples: Iterable[Sequence[Any]]) -> list[list[tuple[Any, ...]]]:
        n = self.parallelism
        parts: list[list[tuple[Any, ...]]] = [[] for _ in range(n)]
        for i, values in enumerate(tuples):
            vals = tuple(values)
            if self.group_idx is None:
                task = i % n
            elif len(self.group_idx) == 1:
                task = stable_hash(vals[self.group_idx[0]]) % n
            else:
                task = stable_hash(tuple(vals[j] for j in self.group_idx)) % n
            parts[task].append(vals)
        return parts

    def run_batch(
        self,
        tuples: Iterable[Sequence[Any]],
        *,
        fail: bool = False,
        crash: bool = False,
        ports: Mapping[str, Iterable[Sequence[Any]]] | None = None,
        records: Mapping[int, Sequence[tuple[Any, ...]]] | None = None,
    ) -> BatchResult:
        """Run the next micro-batch over ``tuples``.

        A :class:`Punctuation` in the ``tuples`` list is a mark of ``src`` that reaches every task
        after the tuples before it. ``records`` replaces the input altogether: the exact input
        records of each task, ``(source, "default", values, source_task)``, marks made with
        :meth:`mark` (several upstream tasks, interleavings).

        ``ports`` gives tuples of the other ``inputs`` by component id; they arrive at each task
        *before* the tuples of ``src`` (round-robin over tasks).

        ``fail`` makes another (pseudo) task of the region fail after the operator's tasks ran: the
        batch is rolled back and the same batch (same txid) runs again on the next call. ``crash``
        stops right after the job, as if the driver died before committing; call :meth:`crash` next.
        """
        marks = [i for i, v in enumerate(tuples) if isinstance(v, Punctuation)] if isinstance(tuples, list) else []
        plain = [v for v in tuples if not isinstance(v, Punctuation)] if marks else tuples
        parts = self._partition(plain)
        if marks:  # a mark in the list reaches every task after the tuples before it
            tagged: list[list[tuple[Any, ...]]] = [[] for _ in range(self.parallelism)]
            done = 0
            for v in tuples:
                if isinstance(v, Punctuation):
                    for task in range(self.parallelism):
                        tagged[task].append(("src", "default", MarkRecord(v, 1), 0))
                    continue
                part = self._partition([v])
                if self.group_idx is None:
                    task = done % self.parallelism
                else:
                    task = next(t for t, p in enumerate(part) if p)
                done += 1
                tagged[task].append(("src", "default", tuple(v), 0))
            parts_records: list[list[tuple[Any, ...]]] | None = tagged
        else:
            parts_records = None
        extra: list[list[tuple[Any, ...]]] = [[] for _ in range(self.parallelism)]
        for source, port_tuples in (ports or {}).items():
            if source not in self.inputs:
                msg = f"run_batch(ports=...): {source!r} is not one of the tester's inputs {sorted(self.inputs)}"
                raise TopologyError(msg)
            for i, values in enumerate(port_tuples):
                extra[i % self.parallelism].append((source, "default", tuple(values), 0))
        result = BatchResult(txid=None, committed=False)

        def job(txid: int, epoch: int, attempt: int) -> JobOutcome:
            result.txid = txid
            failures = []
            for task in range(self.parallelism):
                if records is not None:
                    recs = list(records.get(task, ()))
                elif parts_records is not None:
                    recs = [*extra[task], *parts_records[task]]
                else:
                    recs = [*extra[task], *(("src", "default", vals, 0) for vals in parts[task])]
                for rec in run_operator_task(self.spec, task, txid, epoch, recs):
                    if rec[0] == "T":
                        result.outputs.append((task, rec[1], list(rec[2])))
                    elif rec[0] == "P":
                        result.outputs.append((task, rec[1], rec[2]))
                    elif rec[0] == "R":
                        report: TaskReport = rec[1]
                        result.reports.append(report)
                        if not report.ok:
                            failures.append(report.failure())
                    else:
                        result.dead_letters.append(rec[1])
            if crash:
                raise _Crash
            if fail:
                failures.append(TaskFailure("<tester>", 0, "failure injected by OperatorTester.run_batch(fail=True)"))
            return JobOutcome(failures=failures)

        try:
            report = self.coordinator.run_batch(self.query_id, self.batch_id, job)
        except _Crash:
            return result
        except TopologyError as exc:
            result.error = exc
            return result
        result.txid = report.txid
        result.committed = not report.skipped
        result.job_ms, result.commit_ms = report.job_ms, report.commit_ms
        self.batch_id += 1
        return result

    @staticmethod
    def mark(mark: Punctuation, source: str = "src", source_task: int = 0, producers: int = 1) -> tuple[Any, ...]:
        """An input record carrying ``mark`` from ``source_task`` of ``source`` (of ``producers`` tasks)."""
        return (source, "default", MarkRecord(mark, producers), source_task)

    def crash(self) -> None:
        """Simulate losing the driver and every worker.

        Live instances are gone; a new coordinator (new epoch) recovers on the next batch, which
        replays the batch that was in flight.
        """
        clear_live_instances(self.name)
        self.coordinator = self._coordinator()

    # ---- reading back --------------------------------------------------------------------------
    def head(self, task: int = 0) -> Head | None:
        """The committed checkpoint record of ``task``."""
        ns = f"{self.name}-{self.component_id}-{task}"
        return TaskCheckpoints(self.provider.backend, ns, f"operator {self.component_id!r} task {task}").head()

    def checkpoint(self, task: int = 0, checkpoint_id: int | None = None) -> Checkpoint | None:
        """The latest complete checkpoint of ``task`` (or retained ``checkpoint_id``)."""
        return load_checkpoint(self.provider, self.name, self.component_id, task, checkpoint_id)

    def close(self) -> None:
        """Drop this tester's live instances (closing their handlers)."""
        clear_live_instances(self.name, close=True)
