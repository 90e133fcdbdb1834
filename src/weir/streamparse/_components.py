"""streamparse's ``Bolt`` and ``Spout`` in weir's component model, in-process.

streamparse components (pystorm underneath) talk to Storm over multilang: every ``emit``, ``ack``,
``fail``, ``log`` and ``raise_exception`` becomes one message handed to the component's
``serializer.send_message``. The adapters below create the user's instance in the task, put a
:class:`_Router` where that serializer was, and so turn each message into a call on weir's
collector: no subprocess, no JSON over pipes. The instance receives pystorm ``Tuple`` objects
(``id``, ``component``, ``stream``, ``task``, ``values``; ``values`` a namedtuple of the source's
fields, as under Storm 0.10+).

Mapping (see docs/moving-from-storm.md, "streamparse topologies"):

* ``initialize(conf, ctx)`` runs once per instance, from weir's ``prepare``; ``conf`` is the
  topology's configuration with the component's ``config`` over it, ``ctx`` pystorm's context dict.
* ``process(tup)`` / ``process_tick(tup)`` run per tuple; ``auto_ack`` acks after them,
  ``auto_anchor`` anchors an ``emit`` to the tuple being processed, as pystorm does. An exception
  fails the micro-batch, which weir retries (``auto_fail`` has nothing left to do).
* ``BatchingBolt`` / ``TicklessBatchingBolt``: the micro-batch is the batch. Tuples are grouped by
  ``group_key`` as they come, and ``process_batch`` runs for every group at the end of each
  micro-batch (an input tuple cannot stay un-acked past its micro-batch's commit), so
  ``ticks_between_batches`` / ``secs_between_batches`` are not used; the batching thread of
  ``TicklessBatchingBolt`` is not started.
* A bolt class that defines ``init_state(state)`` (for instance through :class:`WithState`) is a
  stateful bolt: its state is checkpointed with every micro-batch, as a ``StatefulBolt``'s.
* A spout's ``next_tuple`` / ``ack`` / ``fail`` / ``activate`` / ``deactivate`` run through weir's
  Storm spout contract (driver-side tasks, spout log, ``ack`` once the batch is COMMITTED).
"""

from __future__ import annotations

import io
import logging
import threading
from collections import namedtuple
from collections.abc import Mapping, Sequence
from typing import Any

from weir.errors import TopologyError
from weir.topology.collector import OutputCollector
from weir.topology.components import Bolt, OutputFieldsDeclarer, Spout, StatefulBolt
from weir.topology.context import TopologyContext
from weir.topology.spout_collector import SpoutOutputCollector
from weir.topology.ticks import SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, TOPOLOGY_TICK_TUPLE_FREQ_SECS
from weir.topology.tuple import Tuple

__all__ = ["StreamparseBolt", "StreamparseSpout", "StreamparseStatefulBolt", "WithState"]

_LOG_LEVELS = {0: logging.DEBUG, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
#: the tick frequency a batching bolt runs with, so that every micro-batch ends with a tick
_EVERY_BATCH_SECS = 0.001


class WithState:
    """Mixin for a streamparse bolt that keeps weir state: ``self.state`` is the task's ``KeyValueState``.

    ``class WordCounter(WithState, Bolt)``; ``self.state.get(word)`` / ``self.state.put(word, n)``
    in ``process``. The state is committed with every micro-batch and restored after a restart
    (namespace ``<topology>-<component>-<task>``). Override ``init_state`` to do more with it.
    """

    state: Any

    def init_state(self, state: Any) -> None:
        """Keep the task's state as ``self.state`` (called after ``initialize``, before any tuple)."""
        self.state = state


def _identifier(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text.title())


class _Router:
    """Stands in for pystorm's serializer: each multilang message becomes a call on weir's collector."""

    def __init__(self, adapter: _Adapter) -> None:
        self.adapter = adapter
        self.output_stream = None  # pystorm compares it with sys.stdout

    def send_message(self, msg: Mapping[str, Any]) -> None:
        self.adapter.route(msg)


class _Adapter:
    """What the bolt and spout adapters share: the instance, its creation and its messages."""

    component_cls: type[Any]
    component_id: str
    topology_name: str
    outputs: dict[str, tuple[tuple[str, ...], bool]]
    instance: Any = None
    #: per-process fields left out when the component is shipped to a task
    _unshipped: tuple[str, ...] = ("instance", "collector")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for k in self._unshipped:
            state.pop(k, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.instance = None

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The streams of the spec's ``outputs``."""
        for stream, (fields, direct) in self.outputs.items():
            declarer.declare_stream(stream, list(fields), direct)

    def _new_instance(self, conf: Mapping[str, Any], context: TopologyContext, pctx: dict[str, Any]) -> Any:
        import pystorm

        cls = self.component_cls
        if issubclass(cls, pystorm.bolt.TicklessBatchingBolt):
            if "__init__" in _own_dict(cls, pystorm.bolt.TicklessBatchingBolt):
                msg = (
                    f"topology {self.topology_name!r}, component {self.component_id!r}: {cls.__qualname__} defines "
                    "__init__, which weir cannot run without starting TicklessBatchingBolt's timer thread; move the "
                    "setup into initialize(conf, ctx)"
                )
                raise TopologyError(msg, topology=self.topology_name, component=self.component_id)
            inst = object.__new__(cls)
            # pystorm's BatchingBolt set-up, without the timer thread and the SIGUSR1 handler
            pystorm.bolt.BatchingBolt.__init__(inst, **_no_pipes())
            inst.exc_info = None
            inst._batch_lock = threading.RLock()
        else:
            inst = cls(**_no_pipes())
        inst.serializer = _Router(self)
        task = context.task_index
        inst.topology_name = self.topology_name
        inst.task_id = task
        inst.component_name = self.component_id
        inst.debug = bool(conf.get("topology.debug", False))
        inst.storm_conf = dict(conf)
        inst.context = pctx
        inst.logger = logging.getLogger(f"pystorm.component.{self.component_id}")
        return inst

    def route(self, msg: Mapping[str, Any]) -> None:
        command = msg.get("command")
        if command == "emit":
            self._emit(msg)
        elif command == "ack":
            self._ack(msg.get("id"))
        elif command == "fail":
            self._fail(msg.get("id"))
        elif command == "log":
            lvl = _LOG_LEVELS.get(int(msg.get("level", 2) or 2), logging.INFO)
            logging.getLogger(f"pystorm.component.{self.component_id}").log(lvl, "%s", msg.get("msg"))
        elif command == "error":
            self._report_error(str(msg.get("msg")))
        # "sync" and "metrics" have no counterpart: nothing to do

    def _emit(self, msg: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def _ack(self, tup_id: Any) -> None:
        raise NotImplementedError

    def _fail(self, tup_id: Any) -> None:
        raise NotImplementedError

    def _report_error(self, text: str) -> None:
        raise NotImplementedError

    def _task_ids_answer(self, msg: Mapping[str, Any]) -> None:
        """An emit with ``need_task_ids`` and no direct task reads the receiving task ids next: none known."""
        if msg.get("need_task_ids", True) and msg.get("task") is None:
            self.instance._pending_task_ids.append([])


def _no_pipes() -> dict[str, Any]:
    """Constructor arguments of pystorm: no stdin/stdout pipes to Storm, no remote-debugger signal handler."""
    return {"input_stream": io.BytesIO(), "output_stream": io.BytesIO(), "rdb_signal": None}


def _own_dict(cls: type, stop: type) -> dict[str, Any]:
    """The attributes the classes between ``cls`` and ``stop`` (exclusive) define."""
    out: dict[str, Any] = {}
    for k in cls.__mro__:
        if k is stop:
            break
        out.update(vars(k))
    return out


def _pystorm_context(context: TopologyContext, inputs: Mapping[str, Mapping[str, Sequence[str]]]) -> dict[str, Any]:
    return {
        "taskid": context.task_index,
        "componentid": context.component_id,
        "task->component": {str(context.task_index): context.component_id},
        "source->stream->fields": {src: {s: list(f) for s, f in streams.items()} for src, streams in inputs.items()},
        "weir.parallelism": context.parallelism,
    }


class StreamparseBolt(_Adapter, Bolt):
    """A streamparse ``Bolt`` (or ``BatchingBolt``) as a weir bolt; see the module docstring."""

    def __init__(
        self,
        component_cls: type[Any],
        component_id: str,
        outputs: Mapping[str, tuple[Sequence[str], bool]],
        config: Mapping[str, Any],
        inputs: Mapping[str, Mapping[str, Sequence[str]]],
    ) -> None:
        self.component_cls = component_cls
        self.component_id = component_id
        self.outputs = {s: (tuple(f), bool(d)) for s, (f, d) in outputs.items()}
        self.config = dict(config)
        self.inputs = {src: {s: tuple(f) for s, f in st.items()} for src, st in inputs.items()}
        self.topology_name = ""
        self.instance = None

    #: per-process fields left out when the component is shipped to a task
    _unshipped = ("instance", "collector", "_tuples", "_types")

    # ---- weir's component model --------------------------------------------------------------
    def get_component_configuration(self) -> Mapping[str, Any] | None:
        """The spec's ``config``; a batching bolt gets a tick at the end of every micro-batch."""
        conf = dict(self.config)
        if self._batching():
            conf[TOPOLOGY_TICK_TUPLE_FREQ_SECS] = _EVERY_BATCH_SECS
        return conf

    def _batching(self) -> bool:
        import pystorm

        return issubclass(self.component_cls, pystorm.bolt.BatchingBolt)

    def prepare(self, conf: Mapping[str, Any], context: TopologyContext, collector: OutputCollector) -> None:
        """Create the streamparse instance and call its ``initialize(conf, ctx)``."""
        self.collector = collector
        self.topology_name = context.topology
        self._tuples: dict[str, Tuple] = {}
        self._seq = 0
        self._types: dict[tuple[str, str], Any] = {}
        for src, streams in self.inputs.items():
            for stream, fields in streams.items():
                self._types[(src, stream)] = namedtuple(  # type: ignore[misc]
                    _identifier(src) + _identifier(stream) + "Tuple", fields, rename=True
                )
        full = {**dict(conf), **self.config, "topology.name": context.topology}
        pctx = _pystorm_context(context, self.inputs)
        self.instance = self._new_instance(full, context, pctx)
        self.instance.initialize(full, pctx)

    def _to_pystorm(self, tup: Tuple) -> Any:
        from pystorm.component import Tuple as PTuple

        if len(self._tuples) > 100_000 and not self._batching():
            self._tuples.clear()  # ids of earlier batches can no longer be acked or anchored anyway
        self._seq += 1
        tid = f"{self.collector.task_index}:{self._seq}"
        self._tuples[tid] = tup
        vtype = self._types.get((tup.source_component, tup.source_stream_id))
        values = tuple(tup.values) if vtype is None else vtype(*tup.values)
        return PTuple(tid, tup.source_component, tup.source_stream_id, tup.source_task, values)

    def execute(self, tup: Tuple) -> None:
        """Hand ``tup`` to ``process`` (or ``process_tick``); ack it after, when ``auto_ack`` is on."""
        inst = self.instance
        ptup = self._to_pystorm(tup)
        tick = tup.source_component == SYSTEM_COMPONENT_ID and tup.source_stream_id == SYSTEM_TICK_STREAM_ID
        inst._current_tups = [ptup]
        try:
            if self._batching():
                if tick:
                    inst.process_batches()
                else:
                    inst.process(ptup)
                return
            if tick:
                inst.process_tick(ptup)
            else:
                inst.process(ptup)
            if inst.auto_ack:
                inst.ack(ptup)
        finally:
            inst._current_tups = []
            if tick:
                self._tuples.pop(ptup.id, None)

    def cleanup(self) -> None:
        """Drop the instance."""
        self.instance = None

    # ---- the multilang messages ---------------------------------------------------------------
    def _lookup(self, tup_id: Any, call: str) -> Tuple | None:
        found = self._tuples.get(tup_id if isinstance(tup_id, str) else getattr(tup_id, "id", tup_id))
        if found is None:
            msg = (
                f"topology {self.topology_name!r}, component {self.component_id!r}: {call} of tuple id {tup_id!r}, "
                "which this task did not receive in this micro-batch"
            )
            raise TopologyError(msg, topology=self.topology_name, component=self.component_id)
        return found

    def _emit(self, msg: Mapping[str, Any]) -> None:
        values = list(msg.get("tuple") or ())
        stream = msg.get("stream") or "default"
        anchors = [a for a in (self._lookup(i, "emit anchored to") for i in msg.get("anchors") or []) if a is not None]
        anchors = [a for a in anchors if a.source_component != SYSTEM_COMPONENT_ID]
        task = msg.get("task")
        if task is not None:
            self.collector.emit_direct(int(task), values, stream=stream, anchors=anchors or None)
        else:
            self.collector.emit(values, stream=stream, anchors=anchors or None)
        self._task_ids_answer(msg)

    def _seen(self, tup_id: Any) -> bool:
        """Whether ``tup_id`` is an id this instance handed out (acking or failing twice is a no-op)."""
        task, _, seq = str(tup_id).partition(":")
        return task == str(self.collector.task_index) and seq.isdigit() and 0 < int(seq) <= self._seq

    def _ack(self, tup_id: Any) -> None:
        tup = self._tuples.pop(tup_id, None)
        if tup is None:
            if not self._seen(tup_id):
                self._lookup(tup_id, "ack")
            return
        if tup.source_component != SYSTEM_COMPONENT_ID:  # a tick needs no ack
            self.collector.ack(tup)

    def _fail(self, tup_id: Any) -> None:
        tup = self._tuples.pop(tup_id, None)
        if tup is None:
            if not self._seen(tup_id):
                self._lookup(tup_id, "fail")
            return
        if tup.source_component != SYSTEM_COMPONENT_ID:
            self.collector.fail(tup, f"failed by {self.component_cls.__qualname__} (streamparse fail)")

    def _report_error(self, text: str) -> None:
        self.collector.report_error(text)


class StreamparseStatefulBolt(StreamparseBolt, StatefulBolt):  # type: ignore[type-arg]
    """A streamparse bolt that defines ``init_state``: its state is checkpointed with every micro-batch."""

    def init_state(self, state: Any) -> None:
        """Hand the task's state to the instance's ``init_state``."""
        self.instance.init_state(state)

    def pre_commit(self, txid: int) -> None:
        """Forward to the instance's ``pre_commit`` when it has one."""
        hook = getattr(self.instance, "pre_commit", None)
        if callable(hook):
            hook(txid)


class StreamparseSpout(_Adapter, Spout):
    """A streamparse ``Spout`` as a weir Storm spout (``next_tuple`` / ``ack`` / ``fail``)."""

    def __init__(
        self,
        component_cls: type[Any],
        component_id: str,
        outputs: Mapping[str, tuple[Sequence[str], bool]],
        config: Mapping[str, Any],
    ) -> None:
        self.component_cls = component_cls
        self.component_id = component_id
        self.outputs = {s: (tuple(f), bool(d)) for s, (f, d) in outputs.items()}
        self.config = dict(config)
        self.topology_name = ""
        self.instance = None

    def get_component_configuration(self) -> Mapping[str, Any] | None:
        """The spec's ``config``."""
        return dict(self.config)

    def open(self, conf: Mapping[str, Any], context: TopologyContext, collector: SpoutOutputCollector) -> None:
        """Create the streamparse instance and call its ``initialize(conf, ctx)``."""
        self.collector = collector
        self.topology_name = context.topology
        full = {**dict(conf), **self.config, "topology.name": context.topology}
        pctx = _pystorm_context(context, {})
        self.instance = self._new_instance(full, context, pctx)
        self.instance.initialize(full, pctx)

    def next_tuple(self) -> None:
        """The instance's ``next_tuple``."""
        self.instance.next_tuple()

    def ack(self, msg_id: Any) -> bool | None:
        """The instance's ``ack(tup_id)``: the tuple's batch is COMMITTED.

        An instance's ``ack`` may return ``False`` for a message it does not hold (weir's addition
        to Storm's contract, see ``Spout.ack``); anything else means acknowledged.
        """
        return False if self.instance.ack(msg_id) is False else None

    def fail(self, msg_id: Any) -> None:
        """The instance's ``fail(tup_id)``: the tuple's batch was abandoned."""
        self.instance.fail(msg_id)

    def activate(self) -> None:
        """The instance's ``activate``."""
        self.instance.activate()

    def deactivate(self) -> None:
        """The instance's ``deactivate``."""
        self.instance.deactivate()

    def close(self) -> None:
        """Drop the instance."""
        self.instance = None

    def _emit(self, msg: Mapping[str, Any]) -> None:
        values = list(msg.get("tuple") or ())
        stream = msg.get("stream") or "default"
        task = msg.get("task")
        if task is not None:
            self.collector.emit_direct(int(task), values, msg_id=msg.get("id"), stream=stream)
        else:
            self.collector.emit(values, msg_id=msg.get("id"), stream=stream)
        self._task_ids_answer(msg)

    def _ack(self, tup_id: Any) -> None:
        pass  # a spout receives acks; it sends none

    def _fail(self, tup_id: Any) -> None:
        pass

    def _report_error(self, text: str) -> None:
        self.collector.errors.append(text)
