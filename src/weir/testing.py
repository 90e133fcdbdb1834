"""Test doubles for users: run a bolt against in-memory state without Spark.

``BoltTester`` drives one task of a component through Storm's lifecycle — ``prepare``,
``init_state``, ``execute`` per tuple, and the checkpoint protocol (``pre_prepare`` →
``prepare_commit`` → ``pre_commit`` → ``commit``, or ``pre_rollback`` → ``rollback``) — with the
``memory`` provider, so a unit test can check emits and state in milliseconds::

    t = BoltTester(WordCount(), inputs={"split": ["word"]})
    t.execute("split", ["hello"])
    t.execute("split", ["hello"])
    assert t.emitted() == [("default", ("hello", 1)), ("default", ("hello", 2))]
    t.checkpoint()                       # txid 1 committed
    assert t.committed() == {"hello": 2}

Storm's ack contract holds as on Spark: a rich bolt's input that is neither acked nor failed makes
``checkpoint()`` raise, naming the count. A windowed bolt fires its count windows as tuples arrive
and its time windows when ``execute(..., now_ms=)`` or ``checkpoint(now_ms=)`` moves the clock (event
time: at every ``checkpoint``, from the timestamps seen).

``OperatorTester`` does the same for an IBM Streams operator (its handlers, checkpoints and
consistent regions, with the task loop a Spark task runs); see ``docs/streams-handlers.md``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from weir.errors import TopologyError
from weir.state.factory import StateFactory
from weir.state.kv import TransactionalKeyValueState
from weir.topology.collector import BasicOutputCollector, FailedTuple, OutputCollector
from weir.topology.components import BasicBolt, OutputFieldsDeclarer, StatefulBolt
from weir.topology.context import TopologyContext
from weir.topology.shape import execute_shape
from weir.topology.tuple import DEFAULT_STREAM, Fields, Tuple, Values
from weir.topology.window_manager import WindowManager, window_namespace
from weir.topology.windowing import WindowedBolt

__all__ = ["BatchResult", "BoltTester", "OperatorTester"]  # noqa: F822 - the first and last load lazily


def __getattr__(name: str) -> Any:
    """``OperatorTester`` and ``BatchResult``, imported on first use (they load the Spark runtime's task loop)."""
    if name in ("OperatorTester", "BatchResult"):
        from weir.runtime.spark.streams import testing

        return testing.OperatorTester if name == "OperatorTester" else testing.BatchResult
    msg = f"module 'weir.testing' has no attribute {name!r}"
    raise AttributeError(msg)


class BoltTester:
    """One task of ``bolt`` with in-memory state, driven by hand.

    Parameters
    ----------
    bolt : a ``Bolt``, ``BasicBolt`` or ``StatefulBolt``
    inputs : ``{source component: field names}`` (or ``{(component, stream): fields}``)
    topology, component, task, parallelism, conf : the task's context
    store : name of the memory store (a fresh one by default); two testers with the same store and
        namespace see each other's committed state, as two tasks of one store would. A URL
        (``sqlite:///PATH``, ``redis://…``, ``postgresql://…``) runs the bolt against that real store
    """

    def __init__(
        self,
        bolt: Any,
        inputs: Mapping[Any, Sequence[str]],
        *,
        topology: str = "test",
        component: str = "bolt",
        task: int = 0,
        parallelism: int = 1,
        conf: Mapping[str, Any] | None = None,
        store: str | None = None,
    ) -> None:
        self.bolt = bolt
        self.conf = dict(conf or {})
        self._inputs: dict[tuple[str, str], Fields] = {}
        for k, names in inputs.items():
            key = (k, DEFAULT_STREAM) if isinstance(k, str) else (str(k[0]), str(k[1]))
            self._inputs[key] = Fields(list(names))
        decl = OutputFieldsDeclarer()
        bolt.declare_output_fields(decl)
        streams = dict(decl.streams)
        late = bolt.window_config.late_stream if isinstance(bolt, WindowedBolt) else None
        if late is not None and late not in streams:
            streams[late] = Fields("late_tuple")
        if isinstance(bolt, WindowedBolt):
            bolt.window_config.validate(component, self._inputs)
        self.shape = execute_shape(bolt, component)
        self.context = TopologyContext(
            topology,
            component,
            task,
            parallelism,
            self.conf,
            {component: parallelism},
            {s: tuple(f) for s, f in streams.items()},
        )
        self.collector = OutputCollector(component, task, streams, topology=topology, acking=True)
        url = store if store is not None and "://" in store else f"memory://{store or uuid.uuid4().hex}"
        self.provider = StateFactory.from_url(url)
        self.txid = 0
        self.state: TransactionalKeyValueState | None = None
        self.window_state: TransactionalKeyValueState | None = None
        self.windows: WindowManager | None = None
        self._start()

    def _start(self) -> None:
        self.collector = OutputCollector(
            self.context.component_id,
            self.context.task_index,
            {s: Fields(list(f)) for s, f in self.context.output_fields.items()},
            topology=self.context.topology,
            acking=True,
        )
        if isinstance(self.bolt, BasicBolt):
            self.bolt.prepare(self.conf, self.context)
        else:
            self.bolt.collector = self.collector
            self.bolt.prepare(self.conf, self.context, self.collector)
        if isinstance(self.bolt, StatefulBolt):
            self.state = self.provider.new_state(self.context.state_namespace, self.conf, self.context)
            self.bolt.init_state(self.state)
        if isinstance(self.bolt, WindowedBolt):
            from weir.state.serializers import JsonSerializer

            wns = window_namespace(self.context.state_namespace)
            self.window_state = TransactionalKeyValueState(
                self.provider.backend, wns, JsonSerializer(), JsonSerializer()
            )
            out = self.collector

            def make_tuple(ev: list[Any]) -> Tuple:
                _v, src, stream, stask, tx, values = ev
                tup = Tuple(values, self._inputs[(src, stream)], src, stream, stask, tx)
                tup.owner = out.token
                return tup

            self.windows = WindowManager(
                self.bolt.window_config,
                self.window_state,
                make_tuple,
                sorted(self._inputs),
                where=f"topology {self.context.topology!r}, component {self.context.component_id!r}",
            )

    def execute(
        self,
        source: str,
        values: Sequence[Any],
        stream: str = DEFAULT_STREAM,
        source_task: int = 0,
        *,
        now_ms: float | None = None,
    ) -> Tuple:
        """Deliver one tuple from ``source``/``stream`` and return it; failures raise as they would fail the batch.

        ``now_ms`` is the processing time of a windowed bolt (default: the wall clock).
        """
        fields = self._inputs.get((source, stream))
        if fields is None:
            msg = f"BoltTester: no input declared for ({source!r}, {stream!r}); known: {sorted(self._inputs)}"
            raise TopologyError(msg, component=self.context.component_id)
        tup = Tuple(list(values), fields, source, stream, source_task, self.txid + 1)
        tup.owner = self.collector.token
        if self.windows is not None:
            now = time.time() * 1000 if now_ms is None else now_ms
            if not self.windows.add(tup, now):
                late = self.bolt.window_config.late_stream
                if late is not None:
                    self.collector.emit(late, tup, Values(tup))
            elif not self.bolt.window_config.event_time:
                self._fire(self.windows.clock(now))
            return tup
        if self.shape == "basic":
            basic = BasicOutputCollector(self.collector)
            basic.current = tup
            try:
                self.bolt.execute(tup, basic)
            except FailedTuple as exc:
                self.collector.fail(tup, str(exc) or "FailedTuple")
            else:
                self.collector.ack(tup)
        else:
            self.collector.received(tup)
            self.bolt.execute(tup)
        return tup

    def _fire(self, clock: float | None) -> None:
        assert self.windows is not None
        for window in self.windows.fire(clock):
            self.bolt.execute(window)

    @property
    def unacked(self) -> list[Tuple]:
        """Inputs of a rich bolt neither acked nor failed yet."""
        return self.collector.unacked

    def emitted(self, stream: str | None = None, *, clear: bool = True) -> list[tuple[str, tuple[Any, ...]]]:
        """``(stream, values)`` emitted since the last call (only ``stream`` if given)."""
        out = [(s, v) for s, v, _d in self.collector.emitted if stream is None or s == stream]
        if clear:
            self.collector.emitted.clear()
        return out

    @property
    def failed(self) -> list[tuple[Tuple, str]]:
        """Tuples failed with ``collector.fail`` (or ``FailedTuple``) and why."""
        return list(self.collector.failed)

    def checkpoint(self, *, now_ms: float | None = None) -> int:
        """Run one successful checkpoint: pre_prepare, prepare_commit, pre_commit, commit. Returns the txid.

        A windowed bolt first fires the windows the clock (``now_ms``, or the watermark) completes.
        """
        if self.collector.unacked:
            n = len(self.collector.unacked)
            msg = (
                f"topology {self.context.topology!r}, component {self.context.component_id!r}, task "
                f"{self.context.task_index}, txid {self.txid + 1}: {n} input tuple(s) were never acked or failed"
            )
            raise TopologyError(msg, component=self.context.component_id, txid=self.txid + 1)
        if self.windows is not None:
            self._fire(self.windows.clock(time.time() * 1000 if now_ms is None else now_ms))
            self.windows.flush()
        self.txid += 1
        if isinstance(self.bolt, StatefulBolt) and self.state is not None:
            self.bolt.pre_prepare(self.txid)
            self.state.prepare_commit(self.txid)
            if self.window_state is not None:
                self.window_state.prepare_commit(self.txid)
            self.bolt.pre_commit(self.txid)
            self.state.commit(self.txid)
            if self.window_state is not None:
                self.window_state.commit(self.txid)
        self.collector.pending.clear()
        return self.txid

    def rollback(self) -> None:
        """Fail the current transaction: pre_rollback then rollback; state returns to the last commit."""
        if isinstance(self.bolt, StatefulBolt) and self.state is not None:
            self.bolt.pre_rollback()
            self.state.rollback()
            if self.window_state is not None:
                self.window_state.rollback()
                self._start()  # the window restarts from what was committed

    def committed(self) -> dict[Any, Any]:
        """What another reader sees: the committed state of this task's namespace."""
        fresh = self.provider.new_state(self.context.state_namespace)
        return dict(fresh)

    def restart(self) -> None:
        """A new instance of the task (as after a crash): prepare and init_state with committed state."""
        self._start()
