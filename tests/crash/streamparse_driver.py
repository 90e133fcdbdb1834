"""A driver the streamparse crash test runs as a separate process and SIGKILLs.

Usage: python streamparse_driver.py REDIS_URL STATE_DIR NAME PREFIX N

Runs the streamparse word count of tests/streamparse_compat/_topology.py (lines from the Redis list
``PREFIX:lines``, counts in weir state on Redis, running counts written to the hash
``PREFIX:counts``) continuously until all N lines are acked and the hash holds the exact counts;
then stops and prints ``DONE``. Progress lines: ``BATCH <txid> <tuples>``; exits 1 if the run fails.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.streamparse_compat

import redis  # noqa: E402

import weir  # noqa: E402
from tests.streamparse_compat._topology import WordCount, acked, redis_counts  # noqa: E402


def submit(url: str, state_dir: str, name: str, prefix: str, master: str = "local[2]") -> Any:
    """The streamparse word count of ``PREFIX:lines`` (spout, state and hash in ``url``), submitted (not started)."""
    conf = {
        "weir.state.dir": state_dir,
        "weir.spark.master": master,
        "topology.state.provider": "redis",
        "topology.state.provider.config": {"url": url},
        "weir.spout.batch.max.tuples": 4,
        "weir.batch.max.retries": 3,
        "wordcount.redis.url": url,
        "wordcount.prefix": prefix,
    }
    return weir.submit(name, conf, WordCount)


def finish(run: Any, url: str, prefix: str, n: int, label: str = "") -> int:
    """Wait (the run started) until all ``n`` lines are acked and the hash is exact, then stop: 0; 1 if it failed."""
    lines = redis.Redis.from_url(url, decode_responses=True).lrange(f"{prefix}:lines", 0, -1)
    expected = dict(Counter(w for line in lines for w in line.split()))
    last = None
    while True:
        st = run.status()
        if st.last_txid != last:
            last = st.last_txid
            print(f"{label}BATCH {st.last_txid} {st.tuples_in}", flush=True)
        if acked(url, prefix) >= n and redis_counts(url, prefix) == expected:
            run.stop()
            print(f"{label}DONE", flush=True)
            return 0
        if not run.query.isActive and st.state != "restarting":
            try:
                run.await_termination(1)
            except Exception as exc:
                print(f"{label}STOPPED {exc}", flush=True)
                return 1
        time.sleep(0.3)


def main() -> int:
    url, state_dir, name, prefix, n = sys.argv[1:6]
    run = submit(url, state_dir, name, prefix)
    run.start()
    return finish(run, url, prefix, int(n))


if __name__ == "__main__":
    sys.exit(main())
