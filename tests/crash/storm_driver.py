"""A word-count driver the crash tests run as a separate process and SIGKILL (see WEIR_CRASH_AT).

Usage: python storm_driver.py STATE_DIR INPUT_DIR PROVIDER_URL [NAME] [STATE_DIR INPUT_DIR PROVIDER_URL NAME]...

Several groups of four run that many word counts side by side in one SparkSession (each its own
name, store and state directory; the crash barrier of ``WEIR_CRASH_BARRIER``) on ``local[2 * N]``
(a topology may hold both its count tasks' slots while it waits at an executor-side crash point)
and print ``NAME DONE txid=...`` per topology; one topology prints ``DONE txid=...``.

``WEIR_TEST_PROVIDER`` names a custom ``StateProvider`` by dotted path (its config gets PROVIDER_URL),
``WEIR_TEST_COORDINATOR_URL`` sets ``weir.coordinator.url``; ``WEIR_TEST_MASTER`` the Spark master
(executors of a cluster master get this checkout on their ``PYTHONPATH`` to import the provider).
``WEIR_TEST_PROVIDER_FOR`` limits the first two to the topology it names (the others keep the
provider of their URL and their record beside their state).
``WEIR_TEST_GROW`` sets ``weir.batch.grow.max`` (adaptive batch sizing).
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # tests.crash

import weir  # noqa: E402
from tests.crash import _side_by_side as side_by_side  # noqa: E402
from weir.demo import wordcount_topology  # noqa: E402


def submit(state_dir: str, input_dir: str, url: str, name: str, n: int = 1) -> Any:
    """The word count of ``input_dir`` with its state in ``url``, submitted (not started)."""
    master = os.environ.get("WEIR_TEST_MASTER", f"local[{2 * n}]")
    custom = os.environ.get("WEIR_TEST_PROVIDER_FOR", name) == name
    conf: dict[str, object] = {
        "weir.state.dir": state_dir,
        "weir.spark.master": master,
        "topology.state.provider.config": {"url": url},
        "weir.batch.max.retries": 2,
    }
    if os.environ.get("WEIR_TEST_GROW"):
        conf["weir.batch.grow.max"] = int(os.environ["WEIR_TEST_GROW"])
    if custom and os.environ.get("WEIR_TEST_PROVIDER"):
        conf["topology.state.provider"] = os.environ["WEIR_TEST_PROVIDER"]
    if custom and os.environ.get("WEIR_TEST_COORDINATOR_URL"):
        conf["weir.coordinator.url"] = os.environ["WEIR_TEST_COORDINATOR_URL"]
    if not master.startswith("local"):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        conf["weir.spark.conf"] = {"spark.executorEnv.PYTHONPATH": root}
    return weir.submit(name, conf, wordcount_topology(input_dir, parallelism=2, files_per_batch=1))


def main() -> int:
    args = sys.argv[1:]
    if len(args) <= 4:
        st = submit(*args[:3], args[3] if len(args) > 3 else "crashwc").process_available()
        print(f"DONE txid={st.last_txid} batches={st.batches} skipped={st.skipped}", flush=True)
        return 0
    groups = side_by_side.groups(args, 4)
    runs = [(g[3], submit(*g, n=len(groups)).start(available_now=True)) for g in groups]
    return side_by_side.await_each(runs)


if __name__ == "__main__":
    sys.exit(main())
