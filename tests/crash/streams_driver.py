"""The Streams crash driver: a windowed operator and stateful bolts in one region (the whole topology).

Every run ends with the final mark (``process_available(final=True)``): one more transaction that
flushes each window task's open window.

The crash tests run it as a separate process and SIGKILL it (``WEIR_CRASH_AT``).

Usage: python streams_driver.py STATE_DIR INPUT_DIR PROVIDER_URL CALL_LOG LABEL
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.streams

from pyspark import cloudpickle  # noqa: E402

import weir  # noqa: E402
from tests.streams import _topology  # noqa: E402

NAME = "crashsw"
WINDOW = 5


def main() -> int:
    state_dir, input_dir, url, log, label = sys.argv[1:6]
    cloudpickle.register_pickle_by_value(_topology)  # the workers cannot import tests/
    conf = {
        "weir.state.dir": state_dir,
        "weir.spark.master": "local[2]",
        "topology.state.provider.config": {"url": url},
        "weir.batch.max.retries": 1,
    }
    topology = _topology.build(input_dir, size=WINDOW, log_path=log, label=label, non_blocking=True)
    run = weir.submit(NAME, conf, topology)
    st = run.process_available(final=True)  # the input is finite: a final mark flushes the open windows
    print(f"DONE txid={st.last_txid} batches={st.batches} skipped={st.skipped}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
