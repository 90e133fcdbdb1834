"""The word count over Spark Connect, as a process the crash tests SIGKILL (see WEIR_CRASH_AT).

Usage: python storm_connect_driver.py STATE_DIR INPUT_DIR PROVIDER_URL CONNECT_URL

A Connect client: the batch job's DataFrame stages run on the server, the coordinator here. Each
input file is one batch (batch id = its index), driven through the coordinator as the streaming
query's ``foreachBatch`` would: a restarted driver replays from batch 0, and the batches already
committed are skipped. There is no Spark checkpoint (no streaming query) to match the store's
record against, hence ``weir.accept.state.loss``: reading the input again from its start is what
this driver does on purpose, and the coordinator skips every txid the store holds as committed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import weir
from weir.demo import wordcount_topology


def main() -> int:
    state_dir, input_dir, url, remote = sys.argv[1:5]
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(remote).create()
    conf: dict[str, object] = {
        "weir.state.dir": state_dir,
        "weir.accept.state.loss": True,
        "topology.state.provider": "redis",
        "topology.state.provider.config": {"url": url},
        "weir.batch.max.retries": 2,
    }
    run = weir.submit("crashcx", conf, wordcount_topology(input_dir, parallelism=2, files_per_batch=1), spark=spark)
    last = None
    for bid, f in enumerate(sorted(Path(input_dir).iterdir())):
        df = spark.read.text(str(f))

        def job(txid: int, epoch: int | None, attempt: int, _df: Any = df) -> Any:
            return run.runner.run(_df, "lines", txid, epoch)

        last = run.coordinator.run_batch("connect-query", bid, job)
        run.runner.after_batch(last.txid, last.skipped)
    assert last is not None
    print(f"DONE txid={last.txid}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
