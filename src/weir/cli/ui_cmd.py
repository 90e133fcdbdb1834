"""``weir ui``: serve the read-only web page of the topologies in a store."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register"]


def _cmd_ui(args: argparse.Namespace) -> int:
    from weir.cli.state_cmd import load_conf, open_backend_for
    from weir.ui import StoreReader, UiServer

    conf = load_conf(args.conf_file, args.conf or [], args.url)
    backend, _ = open_backend_for(conf, must_exist=True)
    try:
        reader = StoreReader(backend, window=args.window)
        server = UiServer(
            reader,
            host=args.host,
            port=args.port,
            topology=args.topology,
            refresh_s=args.refresh,
            extra_hosts=args.allowed_host or (),
        )
        where = f"/t/{args.topology}" if args.topology else "/"
        print(
            f"weir ui: http://{args.host}:{args.port}{where} (store {reader.where}; read-only; Ctrl-C stops it)",
            file=sys.stderr,
        )
        server.run()
    finally:
        backend.close()
    return 0


def register(subparsers: Any) -> None:
    """Add ``weir ui``."""
    from weir.cli.state_cmd import _store_options

    p = subparsers.add_parser(
        "ui",
        parents=[_store_options()],
        help="a read-only web page of the topologies in a store (graph, timeline, state, errors)",
        description=(
            "Serve a web page of a topology, read from its store: live while it runs (the page refreshes), "
            "or after the fact. It never writes to the store."
        ),
    )
    p.add_argument("topology", nargs="?", help="open this topology's page directly")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        help="also accept requests whose Host header is NAME (repeatable; e.g. a reverse proxy's name); "
        "other names are refused against DNS rebinding",
    )
    p.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765)")
    p.add_argument("--refresh", type=float, default=2.0, help="page refresh in seconds (0 = never)")
    p.add_argument("--window", type=int, default=60, help="batches the throughput is computed over (default 60)")
    p.set_defaults(func=_cmd_ui)
