"""A driver without Spark for the crash barrier's own tests: topologies that reach a crash point.

Usage: python barrier_driver.py ARRIVAL...

Each ``ARRIVAL`` is ``TOPOLOGY:DELAY`` (a thread sleeps ``DELAY`` seconds, then reaches
``after_committed@1`` as ``TOPOLOGY``; ``-`` for a call site that names no topology). Prints
``SURVIVED`` when every thread returned (nothing killed the process).
"""

from __future__ import annotations

import sys
import threading
import time

from weir._faults import crash_point


def arrive(topology: str, delay: float) -> None:
    time.sleep(delay)
    crash_point("after_committed", 1, topology=None if topology == "-" else topology)


def main() -> int:
    threads = []
    for arg in sys.argv[1:]:
        name, _, delay = arg.rpartition(":")
        threads.append(threading.Thread(target=arrive, args=(name, float(delay))))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("SURVIVED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
