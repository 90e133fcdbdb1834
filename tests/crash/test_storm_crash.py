"""SIGKILL the driver (its whole process group: JVM and Python workers too) at every step of the
checkpoint protocol, restart it, and check the committed counts equal a Python Counter exactly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from weir.demo import generate_corpus
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("storm_driver.py")
N_FILES = 4  # one file per batch: txids 1..4
CRASH_TXID = 2

# (crash spec for the first run, expected txid state after the crash is recovered)
POINTS = [
    f"during_processing@{CRASH_TXID}@1",
    f"after_preparing@{CRASH_TXID}",
    f"between_prepares@{CRASH_TXID}@0",
    f"after_prepared@{CRASH_TXID}",
    f"after_committing@{CRASH_TXID}",
    f"between_commits@{CRASH_TXID}",
    f"after_committed@{CRASH_TXID}",
]


def _run(state_dir: Path, corpus: Path, url: str, crash: str | None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("WEIR_CRASH_AT", None)
    if crash:
        env["WEIR_CRASH_AT"] = crash
    env["PYSPARK_PYTHON"] = sys.executable
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), str(state_dir), str(corpus), url],
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


def _counts(url: str) -> Counter[str]:
    provider = StateFactory.from_url(url)
    got: Counter[str] = Counter()
    for i in range(2):
        for k, v in provider.new_state(f"crashwc-count-{i}"):
            got[k] += v
    return got


def _check_final(url: str, expected: Counter[str]) -> None:
    provider = StateFactory.from_url(url)
    backend = provider.backend
    assert _counts(url) == expected
    for i in range(2):
        rec = backend.txids(f"crashwc-count-{i}")
        assert rec.prepared is None, f"namespace crashwc-count-{i} still has prepared txid {rec.prepared}"
        assert rec.committed == N_FILES
    record = json.loads(backend.get("$checkpointspout-crashwc", b"__state"))
    assert record["phase"] == "COMMITTED"
    assert record["txid"] == N_FILES


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[Path, Counter[str]]:
    d = tmp_path / "corpus"
    expected = generate_corpus(str(d), n_words=8_000, n_distinct=300, n_files=N_FILES, seed=3)
    return d, expected


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    server = request.getfixturevalue("redis_server")
    server.flushall()
    return str(server.url)


@pytest.mark.parametrize("crash", POINTS)
def test_sigkill_then_restart_gives_exact_counts(crash: str, corpus: tuple[Path, Counter[str]], store_url: str, tmp_path: Path) -> None:
    input_dir, expected = corpus
    state_dir = tmp_path / "state"
    first = _run(state_dir, input_dir, store_url, crash)
    assert first.returncode == -signal.SIGKILL, (
        f"the driver should have been killed at {crash}; rc={first.returncode}\n{first.stderr[-3000:]}"
    )
    assert "DONE" not in first.stdout
    second = _run(state_dir, input_dir, store_url, None)
    assert second.returncode == 0, second.stderr[-4000:]
    assert f"DONE txid={N_FILES}" in second.stdout
    _check_final(store_url, expected)


def test_sigkill_during_recovery_then_restart(corpus: tuple[Path, Counter[str]], tmp_path: Path) -> None:
    """A crash after COMMITTING leaves a roll-forward to do; crash again inside that recovery."""
    input_dir, expected = corpus
    url = f"sqlite:///{tmp_path / 'state.db'}"
    state_dir = tmp_path / "state"
    assert _run(state_dir, input_dir, url, f"after_committing@{CRASH_TXID}").returncode == -signal.SIGKILL
    backend = StateFactory.from_url(url).backend
    record = json.loads(backend.get("$checkpointspout-crashwc", b"__state"))
    assert (record["phase"], record["txid"]) == ("COMMITTING", CRASH_TXID)
    assert _run(state_dir, input_dir, url, f"during_recovery@{CRASH_TXID}").returncode == -signal.SIGKILL
    third = _run(state_dir, input_dir, url, None)
    assert third.returncode == 0, third.stderr[-4000:]
    _check_final(url, expected)
