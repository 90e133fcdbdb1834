"""``weir state get --topology T --component C KEY``: a key's task, namespace, txid and committed value.

The task is found by the fields grouping's hash (:func:`weir.checkpoint.rescale.hash_route`, the
one routing rescale uses), from the parallelism in the topology's coordinator record, so a user
need not know which namespace holds the key.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from weir.errors import ConfigError

__all__ = ["cmd_get_by_topology"]


def cmd_get_by_topology(args: argparse.Namespace, open_store: Any, parse_arg: Any, dumps: Any) -> int:
    """Print the value (stdout) and where it is (stderr); 1 when the key is not there."""
    from weir.statedata import find_key

    if args.topology is None or args.component is None:
        msg = "weir state get: give both --topology and --component (then one KEY), or NAMESPACE KEY"
        raise ConfigError(msg)
    if args.key is not None:
        msg = f"weir state get --topology/--component takes one KEY, got two ({args.namespace!r} {args.key!r})"
        raise ConfigError(msg)
    with open_store(args) as store:
        store.refuse_key_value(f"{args.topology}-{args.component}-0")
        key = parse_arg(args.namespace, store.key_serializer, "key")
        loc = find_key(store.backend, args.topology, args.component, key, store.key_serializer, store.value_serializer)
        where = (
            f"topology {loc.topology!r}, component {loc.component!r}, task {loc.task}, "
            f"namespace {loc.namespace!r}, txid {loc.txid}"
        )
        if not loc.found:
            print(f"weir: key {dumps(key)} not found ({where})", file=sys.stderr)
            return 1
        print(dumps(loc.value))
        print(where, file=sys.stderr)
    return 0
