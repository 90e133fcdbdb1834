"""The streamparse word count (tests/streamparse_compat/_topology.py) through SIGKILLs of the driver, exact.

The driver (tests/crash/streamparse_driver.py) runs the topology on Spark with its spout reading and
acking in a real Redis, its counts in weir state on Redis and a bolt writing the running counts into
a Redis hash. Each run but the last is SIGKILLed at a crash point (inside a bolt task while a batch
is processed; between two spout acks after a commit); the last runs to the end. Then every line is
acked once, the hash and the committed state hold the exact counts.
"""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.crash._harness import run_driver
from tests.streamparse_compat._topology import acked, lines_for, load_lines, redis_counts

DRIVER = str(Path(__file__).resolve().parent / "streamparse_driver.py")


def _committed(url: str, name: str, component: str, parallelism: int) -> dict[str, int]:
    from weir.state.factory import StateFactory

    provider = StateFactory.from_url(url)
    out: dict[str, int] = {}
    for i in range(parallelism):
        for k, v in provider.new_state(f"{name}-{component}-{i}"):
            out[k] = out.get(k, 0) + int(v)
    return out


@pytest.mark.crash
@pytest.mark.timeout(1800)  # three Spark driver starts on a loaded machine
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.services
def test_the_streamparse_word_count_is_exact_through_sigkills(redis_server: Any, tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    lines = lines_for(30)
    load_lines(url, "crash", lines)
    args = [DRIVER, url, str(tmp_path / "state"), "sp_crash", "crash", str(len(lines))]
    for crash in ("during_processing@2", "between_spout_acks@3"):
        res = run_driver(args, crash, 600)
        assert res.returncode == -signal.SIGKILL, f"{crash}: not killed (rc {res.returncode}):\n{res.stderr[-4000:]}"
    res = run_driver(args, None, 600)
    assert "DONE" in res.stdout, f"the last run did not finish:\n{res.stdout}\n{res.stderr[-4000:]}"
    expected = dict(Counter(w for line in lines for w in line.split()))
    assert redis_counts(url, "crash") == expected
    assert _committed(url, "sp_crash", "count_bolt", 2) == expected
    assert acked(url, "crash") == len(lines)
