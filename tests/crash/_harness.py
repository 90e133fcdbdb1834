"""Running a driver as its own process group, so a crash point (or the test) can SIGKILL all of it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from weir._faults import BARRIER_ENV


def run_driver(
    cmd: list[str],
    crash: str | Mapping[str, str] | None,
    timeout: float = 300,
    *,
    barrier: Sequence[str] = (),
    barrier_timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python cmd...`` with ``WEIR_CRASH_AT=crash`` (if any); kill its whole group afterwards.

    ``barrier``: the names of the topologies the driver runs side by side, every one armed at
    ``crash``; the process is killed once all have reached it (``WEIR_CRASH_BARRIER``, see
    :mod:`weir._faults`). A topology that never reached it fails the test, naming it; the barrier
    gives up after ``barrier_timeout`` seconds (default: a minute before ``timeout``).

    ``crash`` as a mapping arms each topology at its own point (``{topology: "point@txid[@task]"}``,
    see :mod:`weir._faults`): the barrier is then its topologies, killed once each reached its point.
    """
    if isinstance(crash, Mapping):
        if barrier:
            msg = "run_driver: a per-topology crash names its barrier (its keys); pass no barrier"
            raise ValueError(msg)
        barrier = sorted(crash)
        crash = ",".join(f"{name}={at}" for name, at in sorted(crash.items())) or None
    env = dict(os.environ)
    for key in ("WEIR_CRASH_AT", "WEIR_CRASH_PGID", BARRIER_ENV, f"{BARRIER_ENV}_TIMEOUT"):
        env.pop(key, None)
    if crash:
        env["WEIR_CRASH_AT"] = crash
    env["PYSPARK_PYTHON"] = sys.executable
    with tempfile.TemporaryDirectory(prefix="weir-barrier-") as arrivals:
        if crash and barrier:
            env[BARRIER_ENV] = f"{arrivals}:{len(barrier)}"
            wait = barrier_timeout if barrier_timeout is not None else max(timeout - 60, timeout / 2)
            env[f"{BARRIER_ENV}_TIMEOUT"] = str(wait)  # the barrier gives up before the harness does
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
            pytest.fail(f"driver hung (crash={crash}, {_arrived(arrivals, barrier)}); stderr tail:\n{err[-3000:]}")
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # leave no JVM or worker behind
            except ProcessLookupError:
                pass
        if crash and barrier:
            arrived = sorted(p.name for p in Path(arrivals).iterdir())
            if arrived != sorted(barrier):
                pytest.fail(
                    f"crash barrier at {crash}: {_arrived(arrivals, barrier)} (rc={proc.returncode}); "
                    f"stderr tail:\n{err[-3000:]}"
                )
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _arrived(arrivals: str, barrier: Sequence[str]) -> str:
    """Which topologies of the barrier reached the crash point, which did not, and any marker left."""
    if not barrier:
        return "no barrier"
    names = {p.name: p.read_text(encoding="utf-8") for p in Path(arrivals).iterdir()}
    missing = sorted(set(barrier) - set(names))
    markers = {n: t for n, t in names.items() if n.startswith("!")}
    return f"never reached: {missing}, arrived: {sorted(set(names) - set(markers))}, markers: {markers}"


def storm_counts(url: str, name: str, tasks: int = 2) -> Counter[str]:
    """The word counts of topology ``name``'s ``count`` bolt (``tasks`` tasks) in the store at ``url``."""
    from weir.state import StateFactory

    provider = StateFactory.from_url(url)
    got: Counter[str] = Counter()
    for i in range(tasks):
        for k, v in provider.new_state(f"{name}-count-{i}"):
            got[k] += v
    return got
