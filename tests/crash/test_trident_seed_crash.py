"""A Trident word count seeded with ``initial_state``, SIGKILLed inside the load at submit, then restarted.

The first run dies after the first chunk of seeded cells was written (the marker stored); the restart
(the same program, the same ``initial_state``) finishes the load from the staged rows before its
first batch, finds the identical rows loaded, and counts on: the final counts are exactly seed +
words, never a half-loaded seed.
"""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path

import pytest

from tests.crash._harness import run_driver
from tests.trident._support import Store, write_lines
from weir.runtime.spark.trident.bootstrap import MARKER_KEY
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("trident_seed_driver.py")


def test_sigkill_inside_the_initial_state_load_then_restart_is_exact(tmp_path: Path) -> None:
    from tests.crash.trident_seed_driver import SEED

    state_dir, lines, map_db = tmp_path / "state", tmp_path / "lines", tmp_path / "maps.db"
    write_lines(lines, "f000.txt", ["w1 w1 new", "w1499 new"])
    argv = [str(DRIVER), str(state_dir), str(lines), str(map_db)]
    killed = run_driver(argv, "trident_bootstrap_between_chunks@0", 400)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    store = Store("sqlite", f"sqlite:///{map_db}", "")
    assert len(store.read_all_table("seeded")) == 1000  # the first chunk only
    backend = StateFactory.from_url(f"sqlite:///{state_dir / 'state.db'}").backend
    assert backend.get("$checkpointspout-seedcrash", MARKER_KEY) is not None
    done = run_driver(argv, None, 400)
    assert done.returncode == 0 and "DONE txid=1 batches=1" in done.stdout, done.stderr[-3000:]
    got = Counter({k[0]: v for k, v in store.read_all_table("seeded").items()})
    assert got == Counter(SEED) + Counter({"w1": 2, "new": 2, "w1499": 1})
    assert backend.get("$checkpointspout-seedcrash", MARKER_KEY) is None
