"""The tick-flush topology (``_tick_topology.py``) as a process the crash tests SIGKILL (see WEIR_CRASH_AT).

Usage: python tick_driver.py STATE_DIR INPUT_DIR PROVIDER_URL
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import weir  # noqa: E402
from tests.crash._tick_topology import tick_topology  # noqa: E402


def main() -> int:
    state_dir, input_dir, url = sys.argv[1:4]
    conf: dict[str, object] = {
        "weir.state.dir": state_dir,
        "weir.spark.master": "local[2]",
        "topology.state.provider.config": {"url": url},
        "weir.batch.max.retries": 2,
    }
    run = weir.submit("tickwc", conf, tick_topology(input_dir))
    st = run.process_available()
    print(f"DONE txid={st.last_txid} batches={st.batches}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
