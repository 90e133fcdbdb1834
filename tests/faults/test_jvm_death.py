"""A SIGKILLed Spark JVM is named as such and not retried as a transient failure (issue 25, item 8)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from weir.demo import generate_corpus

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("jvm_driver.py")


def test_a_killed_spark_jvm_stops_the_run_with_a_named_error_and_no_restart(tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    generate_corpus(str(corpus), n_words=600, n_distinct=50, n_files=3, seed=1)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), str(tmp_path / "state"), str(corpus)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("JVM "), (line, proc.stderr.read() if proc.stderr else "")
        os.kill(int(line.split()[1]), signal.SIGKILL)
        out, err = proc.communicate(timeout=240)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == 3, (out, err[-3000:])
    assert "ERROR SparkDiedError: topology 'jvmwc': Spark's JVM died" in out, (out, err[-3000:])
    assert "killed by signal SIGKILL" in out and "last committed txid" in out
    assert "RESTARTS 0" in out, out
    assert "transient failure" not in err, err[-3000:]
