"""A word count that runs until its Spark JVM is killed (the JVM-death test runs it as its own process).

Usage: python jvm_driver.py STATE_DIR INPUT_DIR

Prints ``JVM <pid>`` once the first batch has committed, then waits for the run to end and prints
``ERROR <type>: <message>`` (exit 3) or ``DONE`` (exit 0).
"""

from __future__ import annotations

import sys
import time

import weir
from weir.demo import wordcount_topology


def main() -> int:
    state_dir, input_dir = sys.argv[1:3]
    conf = {
        "weir.state.dir": state_dir,
        "weir.spark.master": "local[2]",
        "topology.state.checkpoint.interval.ms": 200,
        "weir.restart.backoff.ms": 100,
    }
    run = weir.submit("jvmwc", conf, wordcount_topology(input_dir, parallelism=2, files_per_batch=1))
    run.start()
    while run.status().batches < 1:
        time.sleep(0.2)
    from pyspark import SparkContext

    print(f"JVM {SparkContext._gateway.proc.pid}", flush=True)  # type: ignore[union-attr]
    killed_at = time.monotonic()
    try:
        run.await_termination()
    except Exception as exc:  # noqa: BLE001 - reported to the test
        print(f"ERROR {type(exc).__name__}: {exc}".splitlines()[0], flush=True)
        # status() asks the (dead) JVM for the query's progress: the count is read from the record
        print(f"RESTARTS {run._status.restarts} after {time.monotonic() - killed_at:.0f} s", flush=True)
        return 3
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
