"""``OperatorContext`` and ``ConsistentRegionContext``: what a Streams operator sees of its task."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from weir.errors import CheckpointError, TopologyError
from weir.streams.handler import StateHandler
from weir.topology.context import TopologyContext

__all__ = ["ConsistentRegionContext", "ContextHandle", "OperatorContext"]


class ContextHandle:
    """The runtime's side of an operator's contexts: what it sets while the task runs.

    The runtime that creates an :class:`OperatorContext` (and its :class:`ConsistentRegionContext`)
    keeps their handle and sets through it what the contexts report, instead of writing their
    private fields: ``checkpointer``, the function behind :meth:`OperatorContext.create_checkpoint`
    (``None`` outside the window where the operator may checkpoint), and ``sequence_id``, the id of
    the region's current cut (:attr:`ConsistentRegionContext.sequence_id`).
    """

    __slots__ = ("checkpointer", "sequence_id")

    def __init__(self) -> None:
        self.checkpointer: Callable[[], int] | None = None
        self.sequence_id = 0


class ConsistentRegionContext:
    """Where an operator sits in its consistent region (IBM Streams' ``ConsistentRegionContext``).

    On weir every region is cut at the micro-batch boundary: the checkpoint ``sequence_id`` of a cut
    is the batch's txid, shared by every operator of the topology.

    Attributes
    ----------
    index : the region's position in ``builder.consistent_region(...)`` calls (0 for the default
        region, which is the whole topology)
    is_start_of_region : the operator reads from a spout or from a component outside the region;
        start operators get ``region_checkpointed(id)``
    is_end_of_region : no component of the region consumes this operator's output
    """

    def __init__(
        self,
        index: int,
        *,
        is_start_of_region: bool,
        is_end_of_region: bool = False,
        drain_timeout: float = 180.0,
        reset_timeout: float = 180.0,
        max_consecutive_reset_attempts: int = 5,
        handle: ContextHandle | None = None,
    ) -> None:
        self.index = index
        self.is_start_of_region = is_start_of_region
        self.is_end_of_region = is_end_of_region
        #: the region's limits (``builder.consistent_region(..., drain_timeout=...)``), in seconds
        self.drain_timeout = drain_timeout
        self.reset_timeout = reset_timeout
        self.max_consecutive_reset_attempts = max_consecutive_reset_attempts
        self._handle = handle if handle is not None else ContextHandle()
        self._non_blocking = False
        self._permits = 0
        self._permit_cond = threading.Condition()

    # ---- permits (IBM Streams' ConsistentRegionContext.acquirePermit / releasePermit) ------------
    def acquire_permit(self) -> None:
        """Take a processing permit: the operator's next ``checkpoint()`` waits until it is released.

        For background threads that submit tuples or change state: hold a permit while doing so, so
        a cut never checkpoints half of the work. ``drain()`` holds one implicitly.
        """
        with self._permit_cond:
            self._permits += 1

    def release_permit(self) -> None:
        """Give back a permit taken with :meth:`acquire_permit`."""
        with self._permit_cond:
            if self._permits <= 0:
                msg = f"release_permit() without acquire_permit() (region {self.index})"
                raise CheckpointError(msg)
            self._permits -= 1
            if self._permits == 0:
                self._permit_cond.notify_all()

    @contextlib.contextmanager
    def permit(self) -> Iterator[None]:
        """``with region.permit(): ...`` — acquire, run the block, release (also on error)."""
        self.acquire_permit()
        try:
            yield
        finally:
            self.release_permit()

    @property
    def permits(self) -> int:
        """Permits held now."""
        with self._permit_cond:
            return self._permits

    def _wait_permits(self, timeout: float) -> bool:
        """Wait until no permit is held (True), at most ``timeout`` seconds (False if still held)."""
        with self._permit_cond:
            return self._permit_cond.wait_for(lambda: self._permits == 0, timeout=max(timeout, 0.0))

    @property
    def sequence_id(self) -> int:
        """Id of the cut being processed (= the id its checkpoint will get), or of the last reset."""
        return self._handle.sequence_id

    @property
    def non_blocking(self) -> bool:
        """Whether :meth:`enable_non_blocking_checkpoint` was called."""
        return self._non_blocking

    def enable_non_blocking_checkpoint(self) -> None:
        """Run ``checkpoint()`` in the background after ``prepare_for_non_blocking_checkpoint(id)``.

        Call it in ``prepare()``. The batch still completes only when the checkpoint is durable.
        """
        self._non_blocking = True

    def __repr__(self) -> str:
        return (
            f"ConsistentRegionContext(index={self.index}, start={self.is_start_of_region}, "
            f"sequence_id={self.sequence_id}, non_blocking={self._non_blocking})"
        )


class OperatorContext:
    """The context of one operator task: the :class:`TopologyContext` fields plus state handling.

    ``register_state_handler(h)`` adds a handler (called in registration order, after the operator
    itself when it is a :class:`StateHandler`); ``create_checkpoint()`` checkpoints now
    (operator-driven checkpointing, outside consistent regions); ``consistent_region_context`` is
    None outside a region.
    """

    def __init__(
        self,
        topology_context: TopologyContext,
        *,
        region: ConsistentRegionContext | None = None,
        checkpointed: bool = True,
        hooks_only: bool = False,
        handle: ContextHandle | None = None,
    ) -> None:
        self.topology_context = topology_context
        self.consistent_region_context = region
        self.checkpointed = checkpointed
        #: True on the driver-side instance that only receives region_checkpointed / retire_checkpoint
        self.hooks_only = hooks_only
        self._handlers: list[StateHandler] = []
        self._handle = handle if handle is not None else ContextHandle()

    # ---- TopologyContext ---------------------------------------------------------------------
    @property
    def topology(self) -> str:
        """The topology name."""
        return self.topology_context.topology

    @property
    def component_id(self) -> str:
        """The operator's component id."""
        return self.topology_context.component_id

    @property
    def task_index(self) -> int:
        """The task index (partition of the operator's stage)."""
        return self.topology_context.task_index

    @property
    def parallelism(self) -> int:
        """Number of tasks of the operator."""
        return self.topology_context.parallelism

    @property
    def conf(self) -> Mapping[str, Any]:
        """Topology configuration merged with the component's."""
        return self.topology_context.conf

    @property
    def this_task_id(self) -> int:
        """Storm spelling of the task index."""
        return self.topology_context.task_index

    @property
    def this_component_id(self) -> str:
        """Storm spelling of the component id."""
        return self.topology_context.component_id

    @property
    def state_namespace(self) -> str:
        """The namespace holding this task's checkpoints: ``<topology>-<component>-<task>``."""
        return self.topology_context.state_namespace

    def get_component_tasks(self, component_id: str) -> list[int]:
        """Task indices of ``component_id``."""
        return self.topology_context.get_component_tasks(component_id)

    @property
    def where(self) -> str:
        """``operator '<id>' task <i>`` for messages."""
        return f"operator {self.component_id!r} task {self.task_index}"

    # ---- state handlers ------------------------------------------------------------------------
    @property
    def is_in_consistent_region(self) -> bool:
        """Whether the operator belongs to a consistent region."""
        return self.consistent_region_context is not None

    def register_state_handler(self, handler: StateHandler) -> None:
        """Register ``handler``; every handler is called in registration order."""
        if not isinstance(handler, StateHandler):
            msg = (
                f"{self.where}: register_state_handler expects a weir.streams.StateHandler, got "
                f"{type(handler).__qualname__}"
            )
            raise TopologyError(msg, topology=self.topology, component=self.component_id, task=self.task_index)
        if any(h is handler for h in self._handlers):
            msg = f"{self.where}: handler {type(handler).__qualname__} is registered twice"
            raise TopologyError(msg, topology=self.topology, component=self.component_id, task=self.task_index)
        self._handlers.append(handler)

    @property
    def state_handlers(self) -> tuple[StateHandler, ...]:
        """The registered handlers, in call order."""
        return tuple(self._handlers)

    def create_checkpoint(self) -> int:
        """Checkpoint every handler now, on this thread; returns the checkpoint's sequence id.

        Operator-driven checkpointing is for operators outside consistent regions (inside one the
        runtime checkpoints every cut). The checkpoint becomes the latest complete one when the
        batch that took it commits.
        """
        if self.consistent_region_context is not None:
            msg = (
                f"{self.where}: create_checkpoint() is not allowed in a consistent region (region "
                f"{self.consistent_region_context.index} checkpoints at every micro-batch); leave the "
                "operator out of builder.consistent_region(...) to use operator-driven checkpointing"
            )
            raise CheckpointError(msg)
        if not self.checkpointed:
            msg = f"{self.where}: the operator sets checkpointed = False, so it cannot create checkpoints"
            raise CheckpointError(msg)
        checkpointer = self._handle.checkpointer
        if checkpointer is None:
            msg = f"{self.where}: create_checkpoint() can only be called while the task processes tuples"
            raise CheckpointError(msg)
        return checkpointer()

    def __repr__(self) -> str:
        return f"OperatorContext({self.where}, region={self.consistent_region_context!r})"
