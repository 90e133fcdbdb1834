"""Several crash-test topologies side by side in one driver process the crash tests SIGKILL.

Usage: python chains_driver.py KIND STATE_DIR INPUT_DIR STORE [KIND STATE_DIR INPUT_DIR STORE]...

KIND is ``tick`` (``tick_driver.py``'s ``tickwc``, STORE a provider URL), ``lifetime``
(``lifetime_driver.py``'s ``lifecrash``, STORE a provider URL) or ``trident_ttl``
(``trident_ttl_driver.py``'s opaque ``tridentttl``, STORE the map's SQLite file) or ``ttl:NAME``
(``ttl_driver.py``'s expiring word count named NAME, STORE a provider URL) or ``regions``
(``streams_regions_driver.py``'s two consistent regions, STORE a provider URL, its call log
``STATE_DIR.calls.log`` and its failure markers in ``STATE_DIR.markers/``) or ``seed``
(``trident_seed_driver.py``'s ``seedcrash``, STORE the map's SQLite file; its ``initial_state`` is
loaded at submit, on the main thread: give it last, so every other topology has started before it
may wait at the barrier) or ``streamparse`` (``streamparse_driver.py``'s word count ``sp_crash``,
INPUT_DIR ``PREFIX:N``: its N lines in the Redis list ``PREFIX:lines`` of STORE, a Redis URL; it
runs until they are all acked and counted, then stops). Every topology runs
in one SparkSession on ``local[2 * N]`` (each may hold two task slots while it waits at an
executor-side point of the crash barrier, ``WEIR_CRASH_BARRIER``, each armed at its own point with
``WEIR_CRASH_AT=TOPOLOGY=point@txid,...``) and prints ``NAME DONE txid=<last txid> batches=<n>``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tests.crash import (  # noqa: E402
    lifetime_driver,
    streamparse_driver,
    streams_regions_driver,
    tick_driver,
    trident_seed_driver,
    trident_ttl_driver,
    ttl_driver,
)

KINDS = ("tick", "lifetime", "trident_ttl", "ttl:NAME", "regions", "seed", "streamparse")


def submit(kind: str, state_dir: str, input_dir: str, store: str, master: str) -> tuple[str, Any]:
    """(topology name, the submitted topology) of one group of arguments."""
    if kind == "tick":
        return "tickwc", tick_driver.submit(state_dir, input_dir, store, master)
    if kind == "lifetime":
        return "lifecrash", lifetime_driver.submit(state_dir, input_dir, store, master)
    if kind == "trident_ttl":
        return trident_ttl_driver.NAME, trident_ttl_driver.submit(state_dir, input_dir, store, "opaque", master)
    if kind == "seed":
        return "seedcrash", trident_seed_driver.submit(state_dir, input_dir, store, master)
    if kind == "regions":
        log, markers = f"{state_dir}.calls.log", f"{state_dir}.markers"
        return streams_regions_driver.NAME, streams_regions_driver.submit(
            state_dir, input_dir, store, log, markers, master
        )
    if kind.startswith("ttl:"):
        name = kind.partition(":")[2]
        return name, ttl_driver.submit(state_dir, input_dir, store, name, master)
    msg = f"chains_driver.py: unknown kind {kind!r}; use one of {', '.join(KINDS)}"
    raise SystemExit(msg)


def main() -> int:
    args = sys.argv[1:]
    groups = [args[i : i + 4] for i in range(0, len(args), 4)]
    if not groups or any(len(g) != 4 for g in groups):
        msg = "usage: chains_driver.py KIND STATE_DIR INPUT_DIR STORE [KIND STATE_DIR INPUT_DIR STORE]..."
        raise SystemExit(msg)
    master = f"local[{2 * len(groups)}]"
    runs = []
    for kind, state_dir, input_dir, store in groups:
        if kind == "streamparse":  # a continuous run, stopped once every line is acked and counted
            name = "sp_crash"
            run = streamparse_driver.submit(store, state_dir, name, input_dir.rpartition(":")[0], master)
            runs.append((name, run.start(), input_dir, store))
        else:
            name, topology = submit(kind, state_dir, input_dir, store, master)
            runs.append((name, topology.start(available_now=True), None, None))
    rc = 0
    for name, run, lines, url in runs:
        if lines is not None:
            prefix, _, n = lines.rpartition(":")
            rc |= streamparse_driver.finish(run, url, prefix, int(n), label=f"{name} ")
            continue
        run.await_termination()
        st = run.status()
        print(f"{name} DONE txid={st.last_txid} batches={st.batches}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
