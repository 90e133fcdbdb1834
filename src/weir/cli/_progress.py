"""Live progress of a running topology, for ``weir run``.

On a terminal: a live panel drawn with rich — the status line, a table of the components with
their tuples and rates (tuples per second over the last few seconds), and the last batches with
their txid, tuples, job and commit time. Not on a terminal (a log file, a pipe, CI): plain lines a
person or ``grep`` reads — one per batch as it ends, and the status line every few seconds.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TextIO

from weir.cli._table import human_count, human_duration

__all__ = ["Progress", "RateWindow", "batch_line", "status_line"]

log = logging.getLogger("weir.cli")

#: seconds the component rates are averaged over
RATE_WINDOW_S = 5.0
#: seconds between status lines when not on a terminal
PLAIN_EVERY_S = 5.0


def status_line(st: Any, unit: str = "tuples", count: Callable[[Any], float] | None = None) -> str:
    """``[running] txid 12  batches 12  tuples 120k  4.1k/s  commit 3.2 ms``.

    ``count`` picks what is counted from the status (default: tuples from the spouts), ``unit``
    names it (``weir demo`` counts the words its count bolt received).
    """
    txid = "none yet" if st.last_txid is None else str(st.last_txid)
    n = st.tuples_in if count is None else count(st)
    rate = st.tuples_per_s if count is None or not st.tuples_in else st.tuples_per_s * n / st.tuples_in
    parts = [
        f"[{st.state}]",
        f"txid {txid}",
        f"batches {st.batches}",
        f"{unit} {human_count(n)}",
        f"{human_count(rate)}/s",
        f"commit {human_duration(st.last_commit_ms / 1000)}",
        f"elapsed {human_duration(st.elapsed_s)}",
    ]
    if st.retries:
        parts.append(f"retries {st.retries}")
    if st.restarts:
        parts.append(f"restarts {st.restarts}")
    if st.dead_letters:
        parts.append(f"dead-letters {st.dead_letters}")
    return "  ".join(parts)


def batch_line(b: dict[str, Any]) -> str:
    """``batch txid 3: 1.2k tuples in, job 85 ms, commit 2.1 ms`` (one line per ended batch)."""
    if b.get("skipped"):
        return f"batch txid {b['txid']}: already committed, replay skipped"
    line = (
        f"batch txid {b['txid']}: {human_count(b.get('tuples', 0))} tuples in, "
        f"job {human_duration(b.get('job_ms', 0.0) / 1000)}, commit {human_duration(b.get('commit_ms', 0.0) / 1000)}"
    )
    if b.get("attempts", 1) > 1:
        line += f", {b['attempts']} attempts"
    return line


class RateWindow:
    """Tuples per second of each component over the last ``window`` seconds of status snapshots."""

    def __init__(self, window: float = RATE_WINDOW_S) -> None:
        self.window = window
        self.samples: deque[tuple[float, dict[str, tuple[int, int]]]] = deque()

    def add(self, t: float, components: dict[str, dict[str, Any]]) -> None:
        """Record the cumulative counts at time ``t``."""
        self.samples.append((t, {c: (int(v.get("in", 0)), int(v.get("out", 0))) for c, v in components.items()}))
        while len(self.samples) > 2 and t - self.samples[1][0] >= self.window:
            self.samples.popleft()

    def rates(self) -> dict[str, tuple[float, float]]:
        """``{component: (in/s, out/s)}``; empty until two snapshots span some time."""
        if len(self.samples) < 2:
            return {}
        (t0, first), (t1, last) = self.samples[0], self.samples[-1]
        span = t1 - t0
        if span <= 0:
            return {}
        out = {}
        for c, (n_in, n_out) in last.items():
            p_in, p_out = first.get(c, (0, 0))
            out[c] = ((n_in - p_in) / span, (n_out - p_out) / span)
        return out


class Progress:
    """Shows the progress of ``run`` every ``interval`` seconds (a live panel on a terminal).

    Parameters
    ----------
    run : a :class:`~weir.runtime.spark.runner.TopologyRun` (anything with ``status()``)
    interval : seconds between refreshes
    out : where to write (stderr by default)
    unit, count : what the status line counts (see :func:`status_line`)
    terminal : force the live panel on (True) or off (False); by default, when ``out`` is a terminal
    """

    def __init__(
        self,
        run: Any,
        interval: float = 0.5,
        out: TextIO | None = None,
        unit: str = "tuples",
        count: Callable[[Any], float] | None = None,
        *,
        terminal: bool | None = None,
    ) -> None:
        self.run = run
        self.unit = unit
        self.count = count
        self.interval = interval
        self.out = out or sys.stderr
        self._tty = self.out.isatty() if terminal is None else terminal
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="weir-progress", daemon=True)
        self._rates = RateWindow()
        self._last_line = ""
        self._printed = 0
        self._live: Any = None
        self._next_plain = 0.0

    # ---- the terminal panel ----------------------------------------------------------------
    def render(self, st: Any) -> Any:
        """The panel for status ``st`` (a rich renderable)."""
        from rich import box
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        color = {"running": "green", "failed": "red", "stopped": "cyan"}.get(st.state, "yellow")
        head = Text(status_line(st, self.unit, self.count), style=f"bold {color}")
        rates = self._rates.rates()
        comps = Table(title="components", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        for name, justify in (
            ("component", "left"),
            ("tuples in", "right"),
            ("tuples out", "right"),
            ("failed", "right"),
            ("in/s", "right"),
            ("out/s", "right"),
        ):
            comps.add_column(name, justify=justify)  # type: ignore[arg-type]
        for c, v in st.components.items():
            r_in, r_out = rates.get(c, (None, None))
            comps.add_row(
                c,
                human_count(v.get("in", 0)),
                human_count(v.get("out", 0)),
                str(v.get("failed", 0)),
                "-" if r_in is None else human_count(r_in),
                "-" if r_out is None else human_count(r_out),
            )
        batches = Table(title="last batches", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        for name in ("txid", "tuples in", "job", "commit", "attempts", "note"):
            batches.add_column(name, justify="left" if name == "note" else "right")
        for b in reversed(st.recent[-6:]):
            batches.add_row(
                str(b["txid"]),
                "-" if b.get("skipped") else human_count(b.get("tuples", 0)),
                "-" if b.get("skipped") else human_duration(b.get("job_ms", 0.0) / 1000),
                "-" if b.get("skipped") else human_duration(b.get("commit_ms", 0.0) / 1000),
                str(b.get("attempts", 1)),
                "replay skipped" if b.get("skipped") else "",
            )
        parts: list[Any] = [head]
        if st.components:
            parts.append(comps)
        if st.recent:
            parts.append(batches)
        if getattr(st, "error", None):
            parts.append(Text(f"error: {st.error}", style="bold red"))
        if getattr(st, "metrics_url", None):
            parts.append(Text(f"metrics: {st.metrics_url}", style="dim"))
        return Group(*parts)

    # ---- plain lines -----------------------------------------------------------------------
    def _plain(self, st: Any, *, final: bool) -> None:
        for b in st.recent:
            if b["n"] > self._printed:
                self.out.write(batch_line(b) + "\n")
                self._printed = b["n"]
        line = status_line(st, self.unit, self.count)
        now = time.monotonic()
        if final or (line != self._last_line and now >= self._next_plain):
            self.out.write(line + "\n")
            self._last_line = line
            self._next_plain = now + PLAIN_EVERY_S
        self.out.flush()

    # ---- the loop --------------------------------------------------------------------------
    def _emit(self, final: bool = False) -> None:
        st = self.run.status()
        self._rates.add(time.monotonic(), st.components)
        if self._live is not None:
            self._live.update(self.render(st), refresh=True)
        else:
            self._plain(st, final=final)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._emit()
            except Exception:  # noqa: BLE001 - the display never stops the topology
                log.debug("progress display failed", exc_info=True)

    def __enter__(self) -> Progress:
        if self._tty:
            from rich.console import Console
            from rich.live import Live

            console = Console(file=self.out, force_terminal=True)
            self._live = Live(console=console, auto_refresh=False, transient=False)
            self._live.start()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        try:
            self._emit(final=True)
        finally:
            if self._live is not None:
                self._live.stop()
                self._live = None
