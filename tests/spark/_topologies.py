"""Bolts used by the Spark end-to-end tests (module-level so executors can import them)."""

from __future__ import annotations

import json
import os
from typing import Any

from weir.topology import BasicBolt, Bolt, Fields, StatefulBolt, Values


class FlakyCount(StatefulBolt):
    """Counts words; raises on its first attempt of a batch while a marker file exists."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def declare_output_fields(self, d: Any) -> None:
        d.declare(Fields("word", "count"))

    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute(self, tup: Any) -> None:
        if os.path.exists(self.marker):
            try:
                os.remove(self.marker)
            except FileNotFoundError:
                pass
            else:
                msg = "injected failure (first attempt)"
                raise RuntimeError(msg)
        w = tup.get_string(0)
        self.counts.put(w, self.counts.get(w, 0) + 1)
        self.collector.ack(tup)


class PickyCount(StatefulBolt):
    """Counts words, but fails (or raises on) words starting with ``bad``."""

    def __init__(self, raise_instead: bool = False) -> None:
        self.raise_instead = raise_instead

    def declare_output_fields(self, d: Any) -> None:
        d.declare(Fields("word", "count"))

    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute(self, tup: Any) -> None:
        w = tup.get_string(0)
        if w.startswith("bad"):
            if self.raise_instead:
                msg = f"cannot count {w!r}"
                raise ValueError(msg)
            self.collector.fail(tup)
            return
        self.counts.put(w, self.counts.get(w, 0) + 1)
        self.collector.ack(tup)


class TaskRecorder(StatefulBolt):
    """Stores, per task, how many times it saw each word (to check groupings)."""

    def declare_output_fields(self, d: Any) -> None:
        pass

    def init_state(self, state: Any) -> None:
        self.seen = state

    def execute(self, tup: Any) -> None:
        w = tup.get_value(0)
        self.seen.put(w, self.seen.get(w, 0) + 1)
        self.collector.ack(tup)


class TxidRecorder(StatefulBolt):
    """Stores, per word, the txid of the batch whose tuple carried it."""

    def declare_output_fields(self, d: Any) -> None:
        pass

    def init_state(self, state: Any) -> None:
        self.seen = state

    def execute(self, tup: Any) -> None:
        self.seen.put(tup.get_value(0), tup.txid)
        self.collector.ack(tup)


class Router(BasicBolt):
    """Emits each word on stream ``short`` or ``long`` and directly to task len(word) % 2 on ``direct``."""

    def declare_output_fields(self, d: Any) -> None:
        d.declare_stream("short", Fields("word"))
        d.declare_stream("long", Fields("word"))
        d.declare_stream("direct", Fields("word"), direct=True)

    def execute(self, tup: Any, collector: Any) -> None:
        for w in tup.get_string(0).split():
            collector.emit(Values(w), stream="short" if len(w) <= 3 else "long")
            collector.emit_direct(len(w) % 2, Values(w), stream="direct")


class HookRecorder(StatefulBolt):
    """Appends every hook call to a JSON-lines file; with ``marker``, the first tuple that finds the
    marker file removes it and raises (that batch attempt fails and is rolled back)."""

    def __init__(self, path: str, marker: str | None = None) -> None:
        self.path = path
        self.marker = marker

    def declare_output_fields(self, d: Any) -> None:
        pass

    def _log(self, event: str, txid: int | None) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"event": event, "txid": txid, "task": self.task}) + "\n")

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.task = context.task_index

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Any) -> None:
        if self.marker and os.path.exists(self.marker):
            try:
                os.remove(self.marker)
            except FileNotFoundError:
                pass
            else:
                self._log("failed", None)
                msg = "injected failure"
                raise RuntimeError(msg)
        self.state.put("n", self.state.get("n", 0) + 1)
        self.collector.ack(tup)

    def pre_prepare(self, txid: int) -> None:
        self._log("pre_prepare", txid)

    def pre_commit(self, txid: int) -> None:
        self._log("pre_commit", txid)

    def pre_rollback(self) -> None:
        self._log("pre_rollback", None)


class Unpicklable(Bolt):
    """Holds a lock: cannot be shipped to executors."""

    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()

    def execute(self, tup: Any) -> None:
        pass


class KvOps(StatefulBolt):
    """Runs commands on its KeyValueState: ``+k`` puts k (value: times seen), ``-k`` deletes k and
    records what ``delete`` returned, ``?`` iterates the state and records the keys it saw."""

    def declare_output_fields(self, d: Any) -> None:
        pass

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Any) -> None:
        for cmd in tup.get_string(0).split():
            op, key = cmd[0], cmd[1:]
            if op == "+":
                self.state.put(key, self.state.get(key, 0) + 1)
            elif op == "-":
                self.state.put(f"$deleted-{key}", self.state.delete(key))
            elif op == "?":
                seen = sorted(k for k, _ in self.state if not k.startswith("$"))
                self.state.put(f"$iter-{tup.get_string(0)}", seen)
        self.collector.ack(tup)
