"""What a batch's job counted: :class:`BatchStats`, built once from the tasks' reports by every dialect.

The coordinator records a batch's stats in the checkpoint history and the run's status and metrics
read them; they travel there in their JSON form (:meth:`BatchStats.as_dict`, the keys
``components``, ``tuples_in``, ``dead_letters``, ``job_ms`` and ``keys_written``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["BatchStats", "ComponentStats", "CountedTask"]


class CountedTask(Protocol):
    """What the stats read of a task's report (:class:`~weir.runtime.spark.executor.TaskReport`)."""

    @property
    def component(self) -> str:
        """The component's id."""

    @property
    def n_in(self) -> int:
        """Tuples the task read."""

    @property
    def n_out(self) -> int:
        """Tuples the task emitted."""

    @property
    def failed(self) -> int:
        """Input tuples the task failed."""

    @property
    def ms(self) -> float:
        """The task's time."""

    @property
    def keys_written(self) -> Mapping[str, int]:
        """Keys each state namespace prepared."""

    @property
    def extra(self) -> Mapping[str, Any]:
        """The dialect's own counts (``instance``: ``"kept"`` or ``"new"``; ``restore``: how it was restored)."""


@dataclass(frozen=True)
class ComponentStats:
    """One component's tasks in one batch: tuples in and out, tuples failed, tasks and their summed time.

    ``instances`` counts tasks by how their instance came, where a dialect says so: ``kept`` (a
    bolt task that continued with its worker's instance), ``restore_<kind>`` (how a Streams
    operator task's state was restored) and ``idle`` (a task with no input that did not run, in a
    Storm spout stage over Spark Connect whose bolts do nothing without input).
    """

    n_in: int = 0
    n_out: int = 0
    failed: int = 0
    tasks: int = 0
    task_ms: float = 0.0
    instances: Mapping[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``in``, ``out``, ``tasks``, ``failed``, ``task_ms``, then ``instances``' counts)."""
        return {
            "in": self.n_in,
            "out": self.n_out,
            "tasks": self.tasks,
            "failed": self.failed,
            "task_ms": self.task_ms,
            **self.instances,
        }


@dataclass(frozen=True)
class BatchStats:
    """What one batch's job counted.

    Attributes
    ----------
    tuples_in
        Tuples the spouts read in the batch.
    dead_letters
        Tuples routed to the dead-letter sink.
    job_ms
        The job's time on the driver.
    components
        Each component's counts (:class:`ComponentStats`).
    keys_written
        Keys each state namespace prepared.
    """

    tuples_in: int = 0
    dead_letters: int = 0
    job_ms: float = 0.0
    components: Mapping[str, ComponentStats] = field(default_factory=dict)
    keys_written: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, reports: Iterable[CountedTask], *, tuples_in: int, dead_letters: int, job_ms: float) -> BatchStats:
        """The stats of a batch whose tasks sent ``reports`` (one per task)."""
        per: dict[str, list[Any]] = {}
        keys: dict[str, int] = {}
        for r in reports:
            for ns, n in r.keys_written.items():
                keys[ns] = keys.get(ns, 0) + int(n)
            c = per.get(r.component)
            if c is None:
                c = per[r.component] = [0, 0, 0, 0, 0.0, {}]
            c[0] += r.n_in
            c[1] += r.n_out
            c[2] += r.failed
            c[3] += 1
            c[4] += r.ms
            inst: dict[str, int] = c[5]
            if r.extra.get("instance") == "kept":
                inst["kept"] = inst.get("kept", 0) + 1
            elif r.extra.get("idle"):
                inst["idle"] = inst.get("idle", 0) + 1
            restore = r.extra.get("restore")
            if restore is not None:
                inst[f"restore_{restore}"] = inst.get(f"restore_{restore}", 0) + 1
        components = {k: ComponentStats(*v) for k, v in per.items()}
        return cls(tuples_in, dead_letters, job_ms, components, keys)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form the coordinator records (see the module's docstring)."""
        return {
            "components": {k: c.as_dict() for k, c in self.components.items()},
            "tuples_in": self.tuples_in,
            "dead_letters": self.dead_letters,
            "job_ms": self.job_ms,
            "keys_written": dict(self.keys_written),
        }
