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
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from weir.errors import TopologyError
from weir.state.factory import StateFactory
from weir.state.kv import TransactionalKeyValueState
from weir.topology.collector import BasicOutputCollector, FailedTuple, OutputCollector
from weir.topology.components import BasicBolt, OutputFieldsDeclarer, StatefulBolt
from weir.topology.context import TopologyContext
from weir.topology.tuple import DEFAULT_STREAM, Fields, Tuple

__all__ = ["BoltTester"]


class BoltTester:
    """One task of ``bolt`` with in-memory state, driven by hand.

    Parameters
    ----------
    bolt : a ``Bolt``, ``BasicBolt`` or ``StatefulBolt``
    inputs : ``{source component: field names}`` (or ``{(component, stream): fields}``)
    topology, component, task, parallelism, conf : the task's context
    store : name of the memory store (a fresh one by default); two testers with the same store and
        namespace see each other's committed state, as two tasks of one store would
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
        self.context = TopologyContext(
            topology, component, task, parallelism, self.conf, {component: parallelism},
            {s: tuple(f) for s, f in decl.streams.items()},
        )
        self.collector = OutputCollector(component, task, dict(decl.streams), topology=topology)
        self.provider = StateFactory.from_url(f"memory://{store or uuid.uuid4().hex}")
        self.txid = 0
        self.state: TransactionalKeyValueState | None = None
        self._start()

    def _start(self) -> None:
        if isinstance(self.bolt, BasicBolt):
            self.bolt.prepare(self.conf, self.context)
        else:
            self.bolt.prepare(self.conf, self.context, self.collector)
        if isinstance(self.bolt, StatefulBolt):
            self.state = self.provider.new_state(self.context.state_namespace, self.conf, self.context)
            self.bolt.init_state(self.state)

    def execute(self, source: str, values: Sequence[Any], stream: str = DEFAULT_STREAM, source_task: int = 0) -> None:
        """Deliver one tuple from ``source``/``stream``; failures raise as they would fail the batch."""
        fields = self._inputs.get((source, stream))
        if fields is None:
            msg = f"BoltTester: no input declared for ({source!r}, {stream!r}); known: {sorted(self._inputs)}"
            raise TopologyError(msg, component=self.context.component_id)
        tup = Tuple(list(values), fields, source, stream, source_task, self.txid + 1)
        if isinstance(self.bolt, BasicBolt):
            basic = BasicOutputCollector(self.collector)
            basic.current = tup
            try:
                self.bolt.execute(tup, basic)
            except FailedTuple as exc:
                self.collector.fail(tup, str(exc) or "FailedTuple")
            else:
                self.collector.ack(tup)
        else:
            self.bolt.execute(tup)

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

    def checkpoint(self) -> int:
        """Run one successful checkpoint: pre_prepare, prepare_commit, pre_commit, commit. Returns the txid."""
        self.txid += 1
        if isinstance(self.bolt, StatefulBolt) and self.state is not None:
            self.bolt.pre_prepare(self.txid)
            self.state.prepare_commit(self.txid)
            self.bolt.pre_commit(self.txid)
            self.state.commit(self.txid)
        return self.txid

    def rollback(self) -> None:
        """Fail the current transaction: pre_rollback then rollback; state returns to the last commit."""
        if isinstance(self.bolt, StatefulBolt) and self.state is not None:
            self.bolt.pre_rollback()
            self.state.rollback()

    def committed(self) -> dict[Any, Any]:
        """What another reader sees: the committed state of this task's namespace."""
        fresh = self.provider.new_state(self.context.state_namespace)
        return dict(fresh)

    def restart(self) -> None:
        """A new instance of the task (as after a crash): prepare and init_state with committed state."""
        self.collector.emitted.clear()
        self._start()
