"""Running a driver as its own process group, so a crash point (or the test) can SIGKILL all of it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest


def run_driver(cmd: list[str], crash: str | None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``python cmd...`` with ``WEIR_CRASH_AT=crash`` (if any); kill its whole group afterwards."""
    env = dict(os.environ)
    env.pop("WEIR_CRASH_AT", None)
    env.pop("WEIR_CRASH_PGID", None)
    if crash:
        env["WEIR_CRASH_AT"] = crash
    env["PYSPARK_PYTHON"] = sys.executable
    proc = subprocess.Popen(
        [sys.executable, *cmd],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, killed whole by the crash point
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"driver hung (crash={crash}); stderr tail:\n{err[-3000:]}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # leave no JVM or worker behind
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
