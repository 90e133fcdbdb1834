"""``weir history TOPOLOGY``: the coordinator's checkpoint history as a table.

Reads the rows the coordinator keeps beside its record in ``$checkpointspout-<topology>`` (see
:mod:`weir.checkpoint.history`); the store is chosen as for ``weir state`` (``--url``, ``--conf``,
``--conf-file`` or the embedded store in ``./weir-state``). It only reads.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, TextIO

from weir.checkpoint.coordinator import checkpoint_namespace
from weir.checkpoint.history import HistoryEntry, load_history
from weir.cli._table import print_table
from weir.errors import StateError

__all__ = ["history_rows", "print_history", "register"]

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


def _cmd_history(args: argparse.Namespace) -> int:
    from weir.cli.state_cmd import open_store

    ns = checkpoint_namespace(args.topology)
    with open_store(args) as store:
        entries = load_history(store.backend, ns, args.last)
        if not entries:
            known = ns in store.backend.namespaces()
            why = (
                "it has no history rows (a stateless topology, or weir.history.size=0)"
                if known
                else f"no namespace {ns!r} (the topology never ran a stateful batch here; see weir state ls)"
            )
            msg = f"topology {args.topology!r}: no checkpoint history in {store.where}: {why}"
            raise StateError(msg)
        if args.json:
            for e in entries:
                sys.stdout.write(json.dumps(asdict(e), sort_keys=True) + "\n")
            return 0
        print(f"topology {args.topology!r}: last {len(entries)} checkpoint(s) in {store.where}")
        print_history(entries, tracebacks=args.tracebacks)
    return 0


def register(subparsers: Any) -> None:
    """Add ``weir history``."""
    from weir.cli.state_cmd import _store_options

    p = subparsers.add_parser(
        "history",
        parents=[_store_options()],
        help="a topology's checkpoint history (txids, phases, timings, failures)",
        description=(
            "Print the checkpoint history the coordinator keeps in the store: one row per transaction or "
            "recovery, oldest first, then the failures. Read-only."
        ),
    )
    p.add_argument("topology", help="the topology name")
    p.add_argument("--last", type=int, default=None, metavar="N", help="only the last N entries")
    p.add_argument("--tracebacks", action="store_true", help="print each failure's traceback")
    p.add_argument("--json", action="store_true", help="one JSON object per entry instead of a table")
    p.set_defaults(func=_cmd_history)
