"""The windowing crash driver (see ``_window_topology``); the crash tests SIGKILL it (``WEIR_CRASH_AT``).

Usage: python window_driver.py STATE_DIR INPUT_DIR PROVIDER_URL [STATE_DIR INPUT_DIR PROVIDER_URL NAME]...

With several groups of four, that many copies of the topology (each its own name, store and state
directory) run side by side in one SparkSession on ``local[2 * N]`` (a copy may hold both its
windowed tasks' slots while it waits at an executor-side crash point of the crash barrier,
``WEIR_CRASH_BARRIER``); each prints ``NAME DONE txid=...``, a single one ``DONE txid=...``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.crash

from pyspark import cloudpickle  # noqa: E402

import weir  # noqa: E402
from tests.crash import _side_by_side as side_by_side  # noqa: E402
from tests.crash import _window_topology  # noqa: E402


def submit(state_dir: str, input_dir: str, url: str, name: str, n: int) -> Any:
    """The windowed topology of ``input_dir`` with its state in ``url``, submitted (not started)."""
    conf = {
        "weir.state.dir": state_dir,
        "weir.spark.master": f"local[{2 * n}]",
        "topology.state.provider.config": {"url": url},
        "weir.batch.max.retries": 1,
    }
    return weir.submit(name, conf, _window_topology.build(input_dir))


def main() -> int:
    args = sys.argv[1:]
    cloudpickle.register_pickle_by_value(_window_topology)  # the workers cannot import tests/
    if len(args) == 3:
        st = submit(*args, _window_topology.NAME, 1).process_available()
        print(f"DONE txid={st.last_txid} batches={st.batches} skipped={st.skipped}", flush=True)
        return 0
    groups = side_by_side.groups(args, 4)
    runs = [(g[3], submit(*g, len(groups)).start(available_now=True)) for g in groups]
    return side_by_side.await_each(runs)


if __name__ == "__main__":
    sys.exit(main())
