"""Driver side: the stateful namespaces of a topology, committed and rolled back with their hooks."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyspark import cloudpickle

from weir.checkpoint.coordinator import Participants
from weir.runtime.spark.executor import TaskSpec
from weir.state.base import StateProvider
from weir.state.factory import KeyValueStateProvider
from weir.topology.collector import OutputCollector
from weir.topology.components import StatefulBolt
from weir.topology.window_manager import window_namespace
from weir.topology.windowing import WindowedBolt

__all__ = ["CompositeParticipants", "StatefulParticipants"]


class StatefulParticipants(Participants):
    """Every task namespace ``<topology>-<component>-<task>`` of the stateful components.

    Hooks run on a fresh instance of the component prepared with the task's context (the
    processing instance lived in an executor and is gone).
    """

    def __init__(self, specs: list[TaskSpec], provider: StateProvider, *, parallel: bool) -> None:
        self.specs = specs
        self.provider = provider
        self.parallel = parallel
        self._blobs = {s.component_id: cloudpickle.dumps(s.component) for s in specs}

    def tasks(self) -> list[tuple[TaskSpec, int]]:
        """(spec, task index) of every stateful task."""
        return [(s, i) for s in self.specs for i in range(s.parallelism)]

    def namespaces(self) -> list[str]:
        """Every stateful namespace (a windowed bolt's task has two: its state and its window)."""
        out = []
        for s, i in self.tasks():
            ns = s.context(i).state_namespace
            out.append(ns)
            if isinstance(s.component, WindowedBolt):
                out.append(window_namespace(ns))
        return out

    def claim(self, epoch: int) -> None:
        """Stamp ``epoch`` on every namespace (the tasks' prepares then require exactly it)."""
        if not isinstance(self.provider, KeyValueStateProvider):
            return  # a user's provider: its states fence as they do
        backend = self.provider.backend
        for ns in self.namespaces():
            backend.claim(ns, epoch)

    def _states(self, spec: TaskSpec, task: int, epoch: int) -> list[Any]:
        """The task's states, fenced with ``epoch``: its own, then its window's (windowed bolts)."""
        ctx = spec.context(task)
        states = [self.provider.new_state(ctx.state_namespace, spec.conf, ctx)]
        if isinstance(spec.component, WindowedBolt):
            from weir.runtime.spark.storm.windowed import open_window_state

            states.append(open_window_state(self.provider, window_namespace(ctx.state_namespace)))
        for st in states:
            st.fence(epoch)
        return states

    def run_hook(self, spec: TaskSpec, task: int, inherited: bool, call: Callable[[StatefulBolt[Any]], None]) -> None:
        """``call`` on a fresh instance of ``spec``'s bolt prepared as task ``task`` (nothing for an inherited hook)."""
        if inherited:
            return  # StatefulBolt's empty hook: no need to build an instance
        inst = cloudpickle.loads(self._blobs[spec.component_id])
        ctx = spec.context(task)
        out = OutputCollector(spec.component_id, task, dict(spec.outputs), topology=spec.topology)
        inst.collector = out
        inst.prepare(spec.conf, ctx, out)
        call(inst)

    def _each(self, fn: Callable[[TaskSpec, int], None], after_first: Callable[[], None] | None) -> None:
        tasks = self.tasks()
        if not tasks:
            return
        fn(*tasks[0])
        if after_first is not None:
            after_first()
        rest = tasks[1:]
        if self.parallel and len(rest) > 1:
            with ThreadPoolExecutor(max_workers=min(8, len(rest))) as pool:
                list(pool.map(lambda t: fn(*t), rest))
        else:
            for t in rest:
                fn(*t)

    def commit_all(self, txid: int, epoch: int, after_first: Callable[[], None] | None = None) -> None:
        """``pre_commit(txid)`` then ``commit(txid)`` per namespace."""

        def one(spec: TaskSpec, task: int) -> None:
            states = self._states(spec, task, epoch)
            inherited = type(spec.component).pre_commit is StatefulBolt.pre_commit
            self.run_hook(spec, task, inherited, lambda bolt: bolt.pre_commit(txid))
            for state in states:
                state.commit(txid)

        self._each(one, after_first)

    def rollback_all(self, epoch: int, after_first: Callable[[], None] | None = None) -> None:
        """``pre_rollback()`` then ``rollback()`` per namespace."""

        def one(spec: TaskSpec, task: int) -> None:
            states = self._states(spec, task, epoch)
            inherited = type(spec.component).pre_rollback is StatefulBolt.pre_rollback
            self.run_hook(spec, task, inherited, lambda bolt: bolt.pre_rollback())
            for state in states:
                state.rollback()

        self._each(one, after_first)


class CompositeParticipants(Participants):
    """Several participant groups (stateful bolts, Streams operators, ...) driven as one, in order."""

    def __init__(self, parts: list[Participants]) -> None:
        self.parts = parts

    def namespaces(self) -> list[str]:
        """Every namespace of every group."""
        return [ns for p in self.parts for ns in p.namespaces()]

    def commit_all(self, txid: int, epoch: int, after_first: Callable[[], None] | None = None) -> None:
        """Commit every group; ``after_first`` fires after the very first namespace."""
        for i, p in enumerate(self.parts):
            p.commit_all(txid, epoch, after_first if i == 0 else None)

    def claim(self, epoch: int) -> None:
        """Claim every group's namespaces."""
        for p in self.parts:
            p.claim(epoch)

    def rollback_all(self, epoch: int, after_first: Callable[[], None] | None = None) -> None:
        """Roll back every group."""
        for i, p in enumerate(self.parts):
            p.rollback_all(epoch, after_first if i == 0 else None)

    def after_commit(self, txid: int) -> None:
        """Tell groups that care (Streams: region_checkpointed, retirement) that ``txid`` committed."""
        for p in self.parts:
            p.after_commit(txid)
