"""``bench/weir_timeline.py`` runs as docs/moving-from-storm.md says, on a tiny input, and reads its event log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_timeline_verifies_the_count_and_places_the_job_and_its_tasks_in_the_run(tmp_path: Path) -> None:
    out = tmp_path / "timeline.json"
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
    args = ["--words", "3000", "--keys", "200", "--files", "2", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, str(BENCH / "weir_timeline.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["verified"] is True
    events = [row["event"] for row in data["timeline"]]
    assert any(e.startswith("job ") and e.endswith("start (2 stages)") for e in events), events
    assert "query started" in events
    assert any(e.startswith("trigger start, batch 0 rows ") for e in events), events
    # spout + split, then the fields-grouped count: 2 tasks each, inside the run
    assert len(data["tasks"]) == 4
    assert all(0 <= t["launch_ms"] <= t["finish_ms"] <= data["wall_ms"] + 500 for t in data["tasks"])
    assert 0 < data["task_busy_ms"] <= data["wall_ms"]
    assert data["idle_ms"] == data["wall_ms"] - data["task_busy_ms"]
