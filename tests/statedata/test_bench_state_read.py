"""``bench/state_read.py`` runs, verifies its rows against the store and writes its JSON (a small N)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.services


def test_state_read_benchmark_verifies_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "state_read.json"
    cmd = [
        sys.executable,
        str(ROOT / "bench" / "state_read.py"),
        "--keys",
        "300",
        "--stores",
        "sqlite",
        "--out",
        str(out),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)  # noqa: S603
    assert done.returncode == 0, done.stderr[-2000:]
    assert "read rows/s" in done.stdout and "loop rows/s" in done.stdout
    data = json.loads(out.read_text())
    (row,) = data["rows"]
    assert row["store"] == "sqlite" and row["keys"] == 300 and row["read_rows_per_s"] > 0 and row["loop_rows_per_s"] > 0
