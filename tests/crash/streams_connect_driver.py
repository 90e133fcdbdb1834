"""The Streams crash topology over Spark Connect, as a process the crash tests SIGKILL (``WEIR_CRASH_AT``).

Usage: python streams_connect_driver.py STATE_DIR INPUT_DIR PROVIDER_URL CALL_LOG LABEL CONNECT_URL

A Connect client: the operators' tasks run in the server's Python workers (``mapInArrow`` stages),
the coordinator, the Streams participants (commit, rollback, ``region_checkpointed``) here. Each
input file is one batch (batch id = its index), driven through the coordinator as the streaming
query's ``foreachBatch`` would, then the final mark's transaction (batch id = the number of files)
flushes each window task's open window. A restarted driver replays from batch 0 and the batches
already committed are skipped. There is no Spark checkpoint (no streaming query) to match the
store's record against, hence ``weir.accept.state.loss``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.streams

import weir  # noqa: E402
from tests.streams import _topology  # noqa: E402

NAME = "crashswcx"
WINDOW = 5


def main() -> int:
    state_dir, input_dir, url, log, label, remote = sys.argv[1:7]
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(remote).create()
    conf: dict[str, object] = {
        "weir.state.dir": state_dir,
        "weir.accept.state.loss": True,
        "topology.state.provider.config": {"url": url},
        "weir.batch.max.retries": 1,
    }
    topology = _topology.build(input_dir, size=WINDOW, log_path=log, label=label, non_blocking=True)
    run = weir.submit(NAME, conf, topology, spark=spark)
    files = sorted(Path(input_dir).glob("part-*.txt"))
    last: Any = None
    for bid, f in enumerate(files):
        df = spark.read.text(str(f))

        def job(txid: int, epoch: int | None, attempt: int, _df: Any = df) -> Any:
            return run.runner.run(_df, "lines", txid, epoch)

        last = run.coordinator.run_batch("connect-query", bid, job)
        run.runner.after_batch(last.txid, last.skipped)
    empty = spark.range(0)  # the final mark's batch: no rows, as TopologyRun's final transaction

    def final(txid: int, epoch: int | None, attempt: int) -> Any:
        return run.runner.run_final(empty, "lines", txid, epoch)

    last = run.coordinator.run_batch("connect-query", len(files), final)
    run.runner.after_batch(last.txid, last.skipped)
    print(f"DONE txid={last.txid} skipped={last.skipped}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
