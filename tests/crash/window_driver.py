"""The windowing crash driver (see ``_window_topology``); the crash tests SIGKILL it (``WEIR_CRASH_AT``).

Usage: python window_driver.py STATE_DIR INPUT_DIR PROVIDER_URL
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.crash

from pyspark import cloudpickle  # noqa: E402

import weir  # noqa: E402
from tests.crash import _window_topology  # noqa: E402


def main() -> int:
    state_dir, input_dir, url = sys.argv[1:4]
    cloudpickle.register_pickle_by_value(_window_topology)  # the workers cannot import tests/
    conf = {
        "weir.state.dir": state_dir,
        "weir.spark.master": "local[2]",
        "topology.state.provider.config": {"url": url},
        "weir.batch.max.retries": 1,
    }
    run = weir.submit(_window_topology.NAME, conf, _window_topology.build(input_dir))
    st = run.process_available()
    print(f"DONE txid={st.last_txid} batches={st.batches} skipped={st.skipped}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
