"""The checkpoint history as a table: shared by ``weir history`` and ``weir state ls --history``."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from weir.checkpoint.history import HistoryEntry
from weir.cli._table import print_table

__all__ = ["HEADERS", "history_rows", "print_history"]

HEADERS = [
    "seq",
    "kind",
    "txid",
    "batch",
    "status",
    "attempts",
    "started (UTC)",
    "job ms",
    "commit ms",
    "tuples in",
    "keys written",
    "failures",
    "error",
]


def _clock(ms: int | None) -> str | None:
    if ms is None:
        return None
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}"


def _ms(v: float | None) -> float | None:
    return None if v is None else round(v, 1)


def history_rows(entries: Sequence[HistoryEntry]) -> list[list[Any]]:
    """One table row per entry (columns :data:`HEADERS`)."""
    rows = []
    for e in entries:
        first = e.failures[0] if e.failures else None
        error = f"{first['component']}[{first['task']}]: {first['error']}" if first else (e.note or None)
        rows.append(
            [
                e.seq,
                e.kind,
                e.txid,
                e.batch_id,
                e.status,
                e.attempts or None,
                _clock(e.started_ms),
                _ms(e.job_ms),
                _ms(e.commit_ms),
                e.tuples_in if e.kind == "batch" else None,
                sum(e.keys_written.values()) if e.kind == "batch" else None,
                e.failure_count,
                error,
            ]
        )
    return rows


def print_history(entries: Sequence[HistoryEntry], out: TextIO | None = None, *, tracebacks: bool = False) -> None:
    """The history table, then each failure (with its traceback when asked)."""
    out = out or sys.stdout
    print_table(HEADERS, history_rows(entries), file=out, max_width=60)
    failed = [(e, f) for e in entries for f in e.failures]
    if not failed:
        return
    print(file=out)
    print(f"failures ({len(failed)})", file=out)
    for e, f in failed:
        print(
            f"  txid {e.txid} attempt {f.get('attempt')}: component {f.get('component')!r} task "
            f"{f.get('task')}: {f.get('error')}",
            file=out,
        )
        if tracebacks and f.get("traceback"):
            for line in str(f["traceback"]).rstrip().splitlines():
                print(f"      {line}", file=out)
