"""The window engine of one windowed-bolt task: tuples in, windows out, everything in a state store.

Every tuple gets a position ``v`` on the window's axis: its sequence number (count windows), the
processing time in ms (duration windows; never decreasing within a task) or its timestamp field
(event time). Windows end at multiples of the sliding interval ``S`` on that axis and hold the tuples
with ``end - L < v <= end`` (``L`` = window length), Storm's eviction rule. A window fires when the
task's clock reaches its end: the last sequence number (counts), the processing time, or the
watermark (event time: the smallest of the largest timestamps of the input streams, minus the lag,
advanced at the end of every micro-batch). Windows without any tuple do not fire (as in Storm);
``get_expired()`` of the next window that fires holds every tuple that left since the previous
window that fired.

Storage (a :class:`~weir.state.kv.TransactionalKeyValueState` with JSON keys and values, so nothing
read back is unpickled): tuples sit in *slices* of the axis of width ``B`` (``max(S, L/16)`` for
durations, the chunk size for counts), each slice in chunks of at most ``P`` tuples under key ``["c", slice,
chunk]``; key ``"meta"`` holds the clock, the next window end and the slice sizes. A decoded chunk
cache holds at most ``max_events_in_memory`` tuples (at least one chunk); a dirty chunk leaving the
cache is written to the state. After a window fired, slices no later window can see are deleted.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from weir.errors import TopologyError
from weir.state.kv import TransactionalKeyValueState
from weir.topology.tuple import Tuple
from weir.topology.windowing import TupleWindow, WindowConfig

__all__ = ["WindowManager", "check_layout", "window_layout", "window_namespace"]

_META = "meta"
Event = list[Any]  # [v, source, stream, source_task, txid, values]


def window_layout(cfg: WindowConfig) -> list[Any]:
    """``[kind, time, length, slide, slice width, chunk size]`` of a window configuration."""
    assert cfg.length is not None
    length = cfg.length.value
    slide = (cfg.sliding or cfg.length).value
    chunk = max(1, min(1000, cfg.max_events_in_memory // 4))
    # slice width: the chunk size for counts; the slide for durations, but at least 1/16 of the length
    width = chunk if cfg.by_count else max(slide, length // 16)
    kind = "count" if cfg.by_count else "duration"
    return [kind, "event" if cfg.event_time else "processing", length, slide, width, chunk]


def check_layout(meta: dict[str, Any], layout: list[Any], where: str) -> None:
    """Refuse a window stored with another kind, length, slide or memory limit than configured now."""
    stored = meta.get("layout")
    if stored is not None and list(stored) != layout:
        names = "kind, time, length, sliding interval, slice width, chunk size"
        msg = (
            f"{where}: the stored window was written with ({names}) = {stored}, but the bolt is configured "
            f"with {layout}; restore the window settings (and with_max_events_in_memory), or submit the "
            "topology under a new name to start its windows afresh"
        )
        raise TopologyError(msg)


def window_namespace(task_namespace: str) -> str:
    """The namespace of a task's window: ``<topology>-<component>-<task>-window``.

    Task namespaces end with the task index, so this one never equals a task namespace.
    """
    return f"{task_namespace}-window"


class WindowManager:
    """Windows of one task over ``state``; ``make_tuple(event)`` turns a stored event into a Tuple."""

    def __init__(
        self,
        cfg: WindowConfig,
        state: TransactionalKeyValueState,
        make_tuple: Callable[[Event], Tuple],
        input_streams: list[tuple[str, str]],
        *,
        where: str = "",
    ) -> None:
        assert cfg.length is not None
        self.cfg = cfg
        self.state = state
        self.make_tuple = make_tuple
        self.inputs = [f"{s}\x00{t}" for s, t in input_streams]
        self.where = where
        self.by_count = cfg.by_count
        self.length = cfg.length.value
        self.slide = (cfg.sliding or cfg.length).value
        self.limit = cfg.max_events_in_memory
        layout = window_layout(cfg)
        self.width: int = layout[4]
        self.chunk: int = layout[5]
        self.lag = cfg.lag.value if cfg.lag is not None else 0
        self._cache: OrderedDict[tuple[int, int], list[Event]] = OrderedDict()
        self._dirty: set[tuple[int, int]] = set()
        self.in_memory = 0
        self.peak_in_memory = 0
        self.late = 0
        self.fired = 0
        meta = state.get(_META)
        m: dict[str, Any] = meta if isinstance(meta, dict) else {}
        check_layout(m, self.layout(), where or state.namespace)
        self.seq: int = int(m.get("seq", 0))
        self.axis: float | None = m.get("axis")
        self.next_end: float | None = m.get("next_end")
        self.last_end: float | None = m.get("last_end")
        self.watermark: float | None = m.get("wm")
        self.stream_max: dict[str, float] = dict(m.get("smax", {}))
        self.slices: dict[int, int] = {int(k): int(v) for k, v in m.get("slices", {}).items()}

    def layout(self) -> list[Any]:
        """What the stored window depends on: restarting with another one would misread it."""
        return window_layout(self.cfg)

    # ---- storage ---------------------------------------------------------------------------------
    def _load(self, b: int, c: int) -> list[Event]:
        key = (b, c)
        chunk = self._cache.get(key)
        if chunk is not None:
            self._cache.move_to_end(key)
            return chunk
        got = self.state.get(["c", b, c])
        chunk = list(got) if isinstance(got, list) else []
        self._cache[key] = chunk
        self.in_memory += len(chunk)
        self._shrink(keep=key)
        return chunk

    def _shrink(self, keep: tuple[int, int]) -> None:
        while self.in_memory > self.limit and len(self._cache) > 1:
            key, chunk = next(iter(self._cache.items()))
            if key == keep:
                self._cache.move_to_end(key)
                continue
            del self._cache[key]
            self.in_memory -= len(chunk)
            if key in self._dirty:
                self._dirty.discard(key)
                self.state.put(["c", key[0], key[1]], chunk)
        self.peak_in_memory = max(self.peak_in_memory, self.in_memory)

    def _slice(self, v: float) -> int:
        return math.ceil(v / self.width)

    def _aligned(self, v: float) -> float:
        """The first window end at or after ``v``."""
        return math.ceil(v / self.slide) * self.slide

    # ---- input -----------------------------------------------------------------------------------
    def position(self, tup: Tuple, now_ms: float) -> float:
        """The tuple's position on the window axis (sequence number, processing ms or timestamp)."""
        if self.by_count:
            return float(self.seq + 1)
        if not self.cfg.event_time:
            return max(float(now_ms), self.axis if self.axis is not None else -math.inf)
        name = self.cfg.timestamp_field
        assert name is not None
        try:
            ts = tup.get_value_by_field(name)
        except KeyError as exc:
            msg = f"{self.where}: tuple {list(tup.values)!r:.120} has no timestamp field {name!r}"
            raise TopologyError(msg) from exc
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or math.isnan(ts):
            msg = (
                f"{self.where}: timestamp field {name!r} of tuple {list(tup.values)!r:.120} must be epoch "
                f"milliseconds (a number), got {type(ts).__name__} {ts!r:.40}"
            )
            raise TopologyError(msg)
        return float(ts)

    def add(self, tup: Tuple, now_ms: float) -> bool:
        """Add ``tup`` to the window; False when it is late (older than the watermark) and was not added."""
        v = self.position(tup, now_ms)
        if self.cfg.event_time:
            key = f"{tup.source_component}\x00{tup.source_stream_id}"
            if v > self.stream_max.get(key, -math.inf):
                self.stream_max[key] = v
            if self.watermark is not None and v < self.watermark:
                self.late += 1
                return False
        self.seq += 1
        if not self.cfg.event_time:
            self.axis = v
        b = self._slice(v)
        n = self.slices.get(b, 0)
        c = n // self.chunk
        chunk = self._load(b, c) if n % self.chunk else self._new_chunk(b, c)
        chunk.append([v, tup.source_component, tup.source_stream_id, tup.source_task, tup.txid, list(tup.values)])
        self.in_memory += 1
        self._dirty.add((b, c))
        self.slices[b] = n + 1
        self._shrink(keep=(b, c))
        first = self._aligned(v)
        if self.last_end is not None:
            first = max(first, self.last_end + self.slide)
        if self.next_end is None or first < self.next_end:
            self.next_end = first
        return True

    def _new_chunk(self, b: int, c: int) -> list[Event]:
        chunk: list[Event] = []
        self._cache[(b, c)] = chunk
        return chunk

    # ---- reading ---------------------------------------------------------------------------------
    def _events(self, lo: float, hi: float) -> Iterator[Event]:
        """Stored events with ``lo < v <= hi``, slice by slice, in arrival order within a slice."""
        w = self.width
        for b in sorted(self.slices):
            if b * w <= lo or (b - 1) * w >= hi:
                continue
            n = self.slices[b]
            for c in range((n + self.chunk - 1) // self.chunk):
                for ev in self._load(b, c):
                    if lo < ev[0] <= hi:
                        yield ev

    def tuples(self, lo: float, hi: float) -> Iterator[Tuple]:
        """The window's tuples with ``lo < v <= hi``."""
        for ev in self._events(lo, hi):
            yield self.make_tuple(ev)

    # ---- firing ----------------------------------------------------------------------------------
    def clock(self, now_ms: float) -> float | None:
        """Where the task is on the axis: last sequence number, processing time or watermark."""
        if self.by_count:
            return float(self.seq)
        if not self.cfg.event_time:
            return max(float(now_ms), self.axis if self.axis is not None else -math.inf)
        if not self.inputs or any(k not in self.stream_max for k in self.inputs):
            return self.watermark  # Storm: no watermark before every input stream has a tuple
        wm = min(self.stream_max[k] for k in self.inputs) - self.lag
        if self.watermark is None or wm > self.watermark:
            self.watermark = wm
        return self.watermark

    def fire(self, clock: float | None) -> Iterator[TupleWindow]:
        """Yield every window whose end is at or before ``clock``; evict after each one is consumed."""
        while clock is not None and self.next_end is not None and self.next_end <= clock:
            end = self.next_end
            start = end - self.length
            if next(self._events(start, end), None) is not None:  # Storm skips empty windows
                yield TupleWindow(self, start, end, self.last_end)
                self.fired += 1
                self.last_end = end
                self._evict(end - self.length)
                self.next_end = end + self.slide
            else:
                later = [b for b in self.slices if b * self.width > end]
                first = min((ev[0] for ev in self._events(end, math.inf)), default=None) if later else None
                self.next_end = None if first is None else max(end + self.slide, self._aligned(first))

    def _evict(self, upto: float) -> None:
        """Delete the slices whose tuples are all at or before ``upto`` (no later window sees them)."""
        for b in [b for b in self.slices if b * self.width <= upto]:
            n = self.slices.pop(b)
            for c in range((n + self.chunk - 1) // self.chunk):
                key = (b, c)
                chunk = self._cache.pop(key, None)
                if chunk is not None:
                    self.in_memory -= len(chunk)
                self._dirty.discard(key)
                self.state.delete(["c", b, c])

    def flush(self) -> None:
        """Write dirty chunks and the meta record into the state (before its ``prepare_commit``)."""
        for key in sorted(self._dirty):
            self.state.put(["c", key[0], key[1]], self._cache[key])
        self._dirty.clear()
        self.state.put(
            _META,
            {
                "seq": self.seq,
                "axis": self.axis,
                "next_end": self.next_end,
                "last_end": self.last_end,
                "wm": self.watermark,
                "smax": self.stream_max,
                "slices": {str(b): n for b, n in sorted(self.slices.items())},
                "layout": self.layout(),
            },
        )

    def stored_events(self) -> int:
        """Tuples the window holds (all slices)."""
        return sum(self.slices.values())
