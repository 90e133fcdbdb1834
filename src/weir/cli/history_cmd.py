"""``weir history TOPOLOGY``: the coordinator's checkpoint history as a table.

Reads the rows the coordinator keeps beside its record in ``$checkpointspout-<topology>`` (see
:mod:`weir.checkpoint.history`); the store is chosen as for ``weir state`` (``--url``, ``--conf``,
``--conf-file`` or the embedded store in ``./weir-state``). It only reads.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from weir.checkpoint.coordinator import checkpoint_namespace
from weir.checkpoint.history import load_history
from weir.cli.history_table import history_rows, print_history
from weir.errors import StateError

__all__ = ["history_rows", "print_history", "register"]


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
