"""Live progress of a running topology: one status line a person reads at a glance."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from weir.cli._table import human_count, human_duration

__all__ = ["Progress", "status_line"]


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


class Progress:
    """Prints the status of ``run`` every ``interval`` seconds (in place on a terminal)."""

    def __init__(
        self,
        run: Any,
        interval: float = 0.5,
        out: TextIO | None = None,
        unit: str = "tuples",
        count: Callable[[Any], float] | None = None,
    ) -> None:
        self.run = run
        self.unit = unit
        self.count = count
        self.interval = interval
        self.out = out or sys.stderr
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._tty = self.out.isatty()
        self._last = ""

    def _emit(self, final: bool = False) -> None:
        line = status_line(self.run.status(), self.unit, self.count)
        if self._tty:
            self.out.write("\r\033[K" + line + ("\n" if final else ""))
        elif final or line != self._last:
            self.out.write(line + "\n")
        self.out.flush()
        self._last = line

    def _loop(self) -> None:
        next_plain = 0.0
        while not self._stop.wait(self.interval):
            if self._tty or time.monotonic() >= next_plain:
                self._emit()
                next_plain = time.monotonic() + 5.0

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._emit(final=True)
