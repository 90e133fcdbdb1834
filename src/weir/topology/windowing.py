"""Storm's windowed bolts: ``BaseWindowedBolt`` / ``BaseStatefulWindowedBolt`` with persistent windows.

A windowed bolt receives a :class:`TupleWindow` instead of single tuples::

    class Average(StatefulWindowedBolt):
        def init_state(self, state):
            self.state = state

        def execute(self, window):
            values = [t.get_value_by_field("value") for t in window.get()]
            self.collector.emit(Values(sum(values) / len(values)))

    builder.set_bolt("avg", Average().with_window(Count.of(30), Count.of(10)).with_persistence(), 1)

Windows are tumbling (:meth:`WindowedBolt.with_tumbling_window`) or sliding
(:meth:`WindowedBolt.with_window`), by :class:`Count` or by :class:`Duration`, in processing time
(the time a task processes the tuple) or in event time (:meth:`WindowedBolt.with_timestamp_field`,
watermarks with :meth:`~WindowedBolt.with_lag`, late tuples to
:meth:`~WindowedBolt.with_late_tuple_stream`).

Every window is persistent in weir: a bolt instance lives for one micro-batch, so the window's
tuples are kept in the topology's state store (namespace ``<topology>-<component>-<task>-window``)
and committed with the bolt's own state by the same checkpoint coordinator, exactly once. At most
``with_max_events_in_memory(n)`` decoded window tuples are held in memory; the rest are read back
from the store chunk by chunk when a window fires.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from weir._util import positive_int
from weir.errors import TopologyError
from weir.topology.components import StatefulBolt
from weir.topology.tuple import Fields, Tuple

if TYPE_CHECKING:
    from weir.topology.window_manager import WindowManager

__all__ = [
    "Count",
    "Duration",
    "StatefulWindowedBolt",
    "TupleWindow",
    "WindowConfig",
    "WindowedBolt",
]

S = TypeVar("S")

#: Storm's field of the single value emitted on the late-tuple stream (the late Tuple itself)
LATE_TUPLE_FIELD = "late_tuple"
DEFAULT_MAX_EVENTS_IN_MEMORY = 100_000


@dataclass(frozen=True)
class Count:
    """A window length or sliding interval in tuples (Storm's ``BaseWindowedBolt.Count``)."""

    value: int

    def __post_init__(self) -> None:
        positive_int(self.value, "Count", error=ValueError)

    @classmethod
    def of(cls, value: int) -> Count:
        """Storm's ``Count.of(n)``."""
        return cls(value)


@dataclass(frozen=True)
class Duration:
    """A window length or sliding interval in milliseconds (Storm's ``BaseWindowedBolt.Duration``)."""

    value: int  # milliseconds

    def __post_init__(self) -> None:
        positive_int(self.value, "Duration", error=ValueError, expected="a positive number of milliseconds")

    @classmethod
    def of(cls, millis: int) -> Duration:
        """Storm's ``Duration.of(ms)``."""
        return cls(millis)

    milliseconds = of

    @classmethod
    def seconds(cls, n: int) -> Duration:
        """``n`` seconds."""
        return cls(int(n * 1000))

    @classmethod
    def minutes(cls, n: int) -> Duration:
        """``n`` minutes."""
        return cls(int(n * 60_000))

    @classmethod
    def hours(cls, n: int) -> Duration:
        """``n`` hours."""
        return cls(int(n * 3_600_000))

    @classmethod
    def days(cls, n: int) -> Duration:
        """``n`` days."""
        return cls(int(n * 86_400_000))


@dataclass(frozen=True)
class WindowConfig:
    """A windowed bolt's settings, as its ``with_*`` methods set them."""

    length: Count | Duration | None = None
    sliding: Count | Duration | None = None
    timestamp_field: str | None = None
    lag: Duration | None = None
    watermark_interval: Duration | None = None
    late_stream: str | None = None
    persistence: bool = True
    max_events_in_memory: int = DEFAULT_MAX_EVENTS_IN_MEMORY

    @property
    def by_count(self) -> bool:
        """Whether the window counts tuples (else it spans milliseconds)."""
        return isinstance(self.length, Count)

    @property
    def event_time(self) -> bool:
        """Whether tuples carry their timestamp (else the processing time is used)."""
        return self.timestamp_field is not None

    def validate(self, cid: str, inputs: Mapping[tuple[str, str], Fields]) -> None:
        """Refuse, at submit time, a window weir cannot run (naming the component)."""

        def bad(text: str) -> TopologyError:
            return TopologyError(f"windowed bolt {cid!r}: {text}", component=cid)

        if self.length is None:
            msg = "no window; call with_window(length, sliding) or with_tumbling_window(length)"
            raise bad(msg)
        sliding = self.sliding or self.length
        if type(sliding) is not type(self.length):
            msg = (
                f"window length {self.length} and sliding interval {sliding} must both be Count or both "
                "Duration in weir"
            )
            raise bad(msg)
        if sliding.value > self.length.value:
            msg = f"the sliding interval {sliding} is longer than the window {self.length}"
            raise bad(msg)
        if self.event_time and self.by_count:
            msg = (
                "count windows count tuples in arrival order; with_timestamp_field (event time) needs "
                "Duration windows in weir"
            )
            raise bad(msg)
        if not self.event_time and (self.lag is not None or self.late_stream is not None):
            msg = "with_lag and with_late_tuple_stream need event time: call with_timestamp_field(name)"
            raise bad(msg)
        if self.event_time:
            for (src, stream), fields in inputs.items():
                if self.timestamp_field not in fields:
                    msg = (
                        f"timestamp field {self.timestamp_field!r} is not a field of stream {stream!r} of "
                        f"{src!r} (fields {fields.to_list()})"
                    )
                    raise bad(msg)
        positive_int(self.max_events_in_memory, "with_max_events_in_memory", error=bad)


class WindowedBolt(StatefulBolt[S]):
    """Storm's ``BaseWindowedBolt``: ``execute(window)`` runs once per window that fires.

    The collector is ``self.collector`` (set by the default ``prepare``). Window tuples are acked by
    the framework; emits may anchor to them. ``init_state`` is optional here.
    """

    _window: WindowConfig = WindowConfig()

    def _set(self, **changes: Any) -> Any:
        from dataclasses import replace

        self._window = replace(self._window, **changes)
        return self

    def with_window(self, length: Count | Duration, sliding: Count | Duration | None = None) -> Any:
        """A sliding window of ``length`` advancing by ``sliding``.

        Without ``sliding`` it slides with every tuple, as in Storm (``Count.of(1)``, or
        ``Duration.of(1)`` ms: one window per distinct timestamp).
        """
        for v in (length, sliding):
            if v is not None and not isinstance(v, (Count, Duration)):
                msg = f"with_window takes Count or Duration values, got {type(v).__name__} {v!r}"
                raise TypeError(msg)
        if sliding is None:
            sliding = Count(1) if isinstance(length, Count) else Duration(1)
        return self._set(length=length, sliding=sliding)

    def with_tumbling_window(self, length: Count | Duration) -> Any:
        """Consecutive, non-overlapping windows of ``length``."""
        return self.with_window(length, length)

    def with_timestamp_field(self, name: str) -> Any:
        """Event time: the tuple's field ``name`` holds its timestamp in epoch milliseconds."""
        return self._set(timestamp_field=name)

    def with_lag(self, lag: Duration) -> Any:
        """How far out of order tuples may arrive: the watermark is the latest timestamp minus ``lag``."""
        return self._set(lag=lag)

    def with_watermark_interval(self, interval: Duration) -> Any:
        """Accepted for Storm code; weir advances the watermark at the end of every micro-batch."""
        return self._set(watermark_interval=interval)

    def with_late_tuple_stream(self, stream_id: str) -> Any:
        """Emit tuples older than the watermark on ``stream_id`` (one field, ``late_tuple``)."""
        return self._set(late_stream=stream_id)

    @property
    def window_config(self) -> WindowConfig:
        """The settings made with the ``with_*`` methods."""
        return self._window

    def init_state(self, state: Any) -> None:
        """Receive the task's key-value state (optional for a plain windowed bolt)."""
        self.state = state

    @abstractmethod
    def execute(self, window: TupleWindow) -> None:  # type: ignore[override]
        """Process the tuples of one window."""


class StatefulWindowedBolt(WindowedBolt[S]):
    """Storm's ``BaseStatefulWindowedBolt``: a windowed bolt with its own checkpointed state."""

    def with_persistence(self) -> Any:
        """Persist the window's tuples in the state store (always the case in weir)."""
        return self._set(persistence=True)

    def with_max_events_in_memory(self, n: int) -> Any:
        """Keep at most ``n`` decoded window tuples in memory; the rest stay in the state store."""
        return self._set(max_events_in_memory=n)

    @abstractmethod
    def init_state(self, state: Any) -> None:
        """Receive the task's state with what was last committed."""


class TupleWindow:
    """The tuples of one window (Storm's ``TupleWindow``).

    ``get()`` — every tuple in the window; ``get_new()`` — those not in any earlier window;
    ``get_expired()`` — those of the previous windows that left; ``get_iter()`` — the window
    lazily, a stored chunk at a time (for windows too large for memory).
    """

    def __init__(self, manager: WindowManager, start: float, end: float, previous_end: float | None) -> None:
        self._m = manager
        self._start = start
        self._end = end
        self._prev = previous_end

    def get(self) -> list[Tuple]:
        """Every tuple of the window."""
        return list(self._m.tuples(self._start, self._end))

    def get_iter(self) -> Iterator[Tuple]:
        """The window's tuples, read chunk by chunk."""
        return self._m.tuples(self._start, self._end)

    def __iter__(self) -> Iterator[Tuple]:
        return self.get_iter()

    def get_new(self) -> list[Tuple]:
        """Tuples that were in no earlier window."""
        lo = self._start if self._prev is None else max(self._start, self._prev)
        return list(self._m.tuples(lo, self._end))

    def get_expired(self) -> list[Tuple]:
        """Tuples of earlier windows that are not in this one."""
        if self._prev is None:
            return []
        return list(self._m.tuples(self._prev - self._m.length, self._start))

    def get_start_timestamp(self) -> int | None:
        """Start (exclusive) of a duration window in ms; None for count windows."""
        return None if self._m.by_count else int(self._start)

    def get_end_timestamp(self) -> int | None:
        """End (inclusive) of a duration window in ms; None for count windows."""
        return None if self._m.by_count else int(self._end)

    def __repr__(self) -> str:
        return f"TupleWindow({self._start}, {self._end}]"
