"""``weir drpc FUNCTION ARGS --url URL``: ask a running topology a DRPC question and print the answer.

The answer is printed as JSON (one line): a single value for a query that ends in an ungrouped
``aggregate`` with one field, else the list of result tuples. Errors (unknown function, timeout,
a failure inside the topology) exit with status 2 and one line on stderr.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["register"]


def _cmd_drpc(args: argparse.Namespace) -> int:
    from weir.drpc import Client

    answer = Client(args.url).execute(args.function, args.args, timeout=args.timeout)
    print(json.dumps(answer, default=str))
    return 0


def register(subparsers: Any) -> None:
    """Add ``weir drpc``."""
    p = subparsers.add_parser(
        "drpc",
        help="run a Trident DRPC request against a running topology and print the answer",
        description=(
            "Append a DRPC request to the store of the topology that serves FUNCTION (new_drpc_stream), wait "
            "for its answer and print it as JSON."
        ),
    )
    p.add_argument("function", metavar="FUNCTION", help="the DRPC function (new_drpc_stream's name)")
    p.add_argument("args", metavar="ARGS", help="the request's arguments (one string)")
    p.add_argument("--url", required=True, help="the topology's store: sqlite:///PATH, redis://HOST:PORT, ...")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the answer (default 30)")
    p.set_defaults(func=_cmd_drpc)
