"""The tick-flush topology (``_tick_topology.py``) as a process the crash tests SIGKILL (see WEIR_CRASH_AT).

Usage: python tick_driver.py STATE_DIR INPUT_DIR PROVIDER_URL
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import weir  # noqa: E402
from tests.crash._tick_topology import tick_topology  # noqa: E402


def submit(state_dir: str, input_dir: str, url: str, master: str = "local[2]") -> Any:
    """The tick-flush topology ``tickwc`` of ``input_dir`` with its state in ``url``, submitted (not started)."""
    conf: dict[str, object] = {
        "weir.state.dir": state_dir,
        "weir.spark.master": master,
        "topology.state.provider.config": {"url": url},
        "weir.batch.max.retries": 2,
    }
    return weir.submit("tickwc", conf, tick_topology(input_dir))


def main() -> int:
    st = submit(*sys.argv[1:4]).process_available()
    print(f"DONE txid={st.last_txid} batches={st.batches}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
