"""Two drivers of one topology started at the same moment: exactly one runs, the other is fenced.

The drivers race for the store's epoch and for Spark's checkpoint (its offset log). The older
epoch stops with a :class:`~weir.errors.FencedError` message (never a raw ``Py4JJavaError``), the
newer one finishes the work exactly once — starting its query again if the older one won the race
for the checkpoint.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from weir.demo import generate_corpus, read_counts

DRIVER = Path(__file__).resolve().parents[1] / "crash" / "storm_driver.py"

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _driver(state_dir: Path, corpus: Path, url: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, WEIR_TEST_MASTER="local[1]")
    env.pop("WEIR_CRASH_AT", None)
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), str(state_dir), str(corpus), url, "twins"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=400)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"driver hung; stderr tail:\n{err[-3000:]}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_two_drivers_started_together_exactly_one_runs(tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    expected = generate_corpus(str(corpus), n_words=2000, n_distinct=30, n_files=3, seed=11)
    state_dir = tmp_path / "state"
    url = f"sqlite:///{state_dir / 'state.db'}"
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: _driver(state_dir, corpus, url), range(2)))
    done = [r for r in results if r.returncode == 0 and "DONE" in r.stdout]
    fenced = [r for r in results if r.returncode != 0]
    details = "\n---\n".join(r.stderr[-2500:] for r in results)
    assert len(done) == 1 and len(fenced) == 1, details
    err = fenced[0].stderr
    assert "FencedError" in err and "another driver" in err, err[-3000:]
    assert "Py4JJavaError" not in err.splitlines()[-1]
    conf = {"weir.state.dir": str(state_dir), "topology.state.provider.config": {"url": url}}
    assert read_counts(conf, "twins") == expected  # exactly once, nothing from the fenced driver twice
