"""Task context handed to components and state providers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TopologyContext"]


@dataclass(frozen=True)
class TopologyContext:
    """Where a component instance runs: topology, component, task index and parallelism.

    Mirrors Storm's ``TopologyContext`` for what a Python bolt needs. ``task_index`` is the
    partition index of the component's stage (task *i* = partition *i*).
    """

    topology: str
    component_id: str
    task_index: int = 0
    parallelism: int = 1
    conf: Mapping[str, Any] = field(default_factory=dict)
    component_tasks: Mapping[str, int] = field(default_factory=dict)
    output_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def this_task_id(self) -> int:
        """Storm spelling of the task index."""
        return self.task_index

    @property
    def this_component_id(self) -> str:
        """Storm spelling of the component id."""
        return self.component_id

    def get_component_tasks(self, component_id: str) -> list[int]:
        """Task indices of ``component_id`` (``range(parallelism)``)."""
        return list(range(self.component_tasks.get(component_id, 0)))

    @property
    def state_namespace(self) -> str:
        """The namespace of this task's state: ``<topology>-<component>-<task index>``."""
        return f"{self.topology}-{self.component_id}-{self.task_index}"
