"""SIGKILL a topology with a stateful windowed bolt at protocol steps, restart it, and compare the window
outputs, the bolt's state and the stored window with what a run without failures produces.

The expected values come from an independent model of Storm's event-time sliding windows (below),
not from weir's window engine: per task, tuples older than the watermark are late, the watermark is
the largest timestamp seen minus the lag (advanced at the end of each batch), and every window
``(end - 4000, end]`` with an end at or before the watermark and at least one tuple fires once.
"""

from __future__ import annotations

import json
import math
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.crash import _window_topology as topo
from tests.crash._harness import run_driver
from weir._util import stable_hash
from weir.state import StateFactory

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("window_driver.py")
N_FILES = 6
LENGTH, SLIDE, LAG = 4000, 2000, 1000

# (crash point, phase the coordinator record is left in, its txid), per store: together they cover an
# executor-side kill in a windowed task, one between the tasks' prepares, and both sides of COMMITTING
CHAINS = {
    "sqlite": [("during_processing@2@1", "PREPARING", 2), ("between_commits@4", "COMMITTING", 4)],
    "redis": [("between_prepares@3@0", "PREPARING", 3), ("after_committing@5", "COMMITTING", 5)],
}


def model(input_dir: Path) -> tuple[dict[str, Any], dict[int, dict[str, Any]], dict[int, list[list[int]]]]:
    """Sink state, each windowed task's state, and each task's retained window tuples ([ts, value])."""
    sink: dict[str, Any] = {}
    tasks: dict[int, dict[str, Any]] = {
        t: {"events": [], "wm": None, "max": None, "last_end": None, "windows": 0, "sum": 0} for t in (0, 1)
    }
    for f in range(N_FILES):
        lines = (input_dir / f"r-{f:03d}.txt").read_text().split()
        batch = [(lines[i], int(lines[i + 1]), int(lines[i + 2])) for i in range(0, len(lines), 3)]
        for t, st in tasks.items():
            mine = [r for r in batch if stable_hash(r[0]) % 2 == t]
            if not mine:
                continue
            for key, ts, value in mine:
                st["max"] = ts if st["max"] is None else max(st["max"], ts)
                if st["wm"] is not None and ts < st["wm"]:
                    sink[f"late:{key}:{ts}:{value}"] = 1
                else:
                    st["events"].append((ts, value))
            wm = st["max"] - LAG
            st["wm"] = wm if st["wm"] is None else max(st["wm"], wm)
            first = math.ceil(min(ts for ts, _ in st["events"]) / SLIDE) * SLIDE if st["events"] else None
            if first is None:
                continue
            end = first if st["last_end"] is None else max(first, st["last_end"] + SLIDE)
            while end <= st["wm"]:
                inside = [v for ts, v in st["events"] if end - LENGTH < ts <= end]
                if inside:
                    sink[f"w{t}:{end}"] = [len(inside), sum(inside)]
                    st["windows"] += 1
                    st["sum"] += sum(inside)
                    st["last_end"] = end
                end += SLIDE
    retained = {
        t: sorted([ts, v] for ts, v in st["events"] if math.ceil(ts / SLIDE) * SLIDE > st["last_end"] - LENGTH)
        for t, st in tasks.items()
    }
    return sink, {t: {"windows": st["windows"], "sum": st["sum"]} for t, st in tasks.items()}, retained


def _record(url: str, name: str) -> dict[str, Any]:
    data = StateFactory.from_url(url).backend.get(f"$checkpointspout-{name}", b"__state")
    assert data is not None, name
    return dict(json.loads(data))


def _rows(url: str, ns: str) -> dict[Any, Any]:
    return {json.dumps(k): v for k, v in StateFactory.from_url(url).new_state(ns)}


# SQLite's and Redis's copies of the topology run side by side in one driver per step, each armed at
# its own point of the step (the crash barrier kills the driver once both reached theirs): 3 driver
# starts, not 6
@pytest.fixture
def stores(tmp_path: Path, redis_server: Any) -> dict[str, tuple[str, str]]:
    """Per topology name: its store kind and its empty store."""
    redis_server.flushall()
    return {
        topo.NAME: ("sqlite", f"sqlite:///{tmp_path / 'state.db'}"),
        f"{topo.NAME}_redis": ("redis", str(redis_server.url)),
    }


@pytest.mark.timeout(1800)  # 3 driver runs: about a minute on an idle machine, far more on a loaded one
def test_sigkill_chain_gives_the_window_outputs_and_state_of_a_run_without_failures(
    stores: dict[str, tuple[str, str]], tmp_path: Path
) -> None:
    input_dir = tmp_path / "readings"
    topo.write_readings(str(input_dir), n_files=N_FILES)
    argv = [str(DRIVER)]
    for name, (_, url) in stores.items():
        argv += [str(tmp_path / f"state-{name}"), str(input_dir), url, name]
    steps = len(next(iter(CHAINS.values())))
    assert all(len(chain) == steps for chain in CHAINS.values())
    for step in range(steps):
        crash = {name: CHAINS[kind][step][0] for name, (kind, _) in stores.items()}
        res = run_driver(argv, crash, 600)
        assert res.returncode == -signal.SIGKILL, f"not killed at {crash}: rc={res.returncode}\n{res.stderr[-3000:]}"
        for name, (kind, url) in stores.items():
            at, phase, txid = CHAINS[kind][step]
            rec = _record(url, name)
            assert (rec["phase"], rec["txid"]) == (phase, txid), f"{name}: after the crash at {at}: {rec}"
    final = run_driver(argv, None, 600)
    assert final.returncode == 0, final.stderr[-4000:]

    sink, states, retained = model(input_dir)
    assert any(k.startswith("late:") for k in sink) and sum(k.startswith("w") for k in sink) >= 12
    for name, (_, url) in stores.items():
        assert f"{name} DONE txid={N_FILES}" in final.stdout
        assert {json.loads(k): v for k, v in _rows(url, f"{name}-sink-0").items()} == sink, name
        backend = StateFactory.from_url(url).backend
        for t in (0, 1):
            assert {json.loads(k): v for k, v in _rows(url, f"{name}-avg-{t}").items()} == states[t], name
            window = StateFactory.from_url(url).new_state(f"{name}-avg-{t}-window")
            rows = dict((json.dumps(k), v) for k, v in window)
            meta = rows.pop('"meta"')
            stored = sorted([ev[0], ev[5][2]] for chunk in rows.values() for ev in chunk)
            assert [[int(ts), v] for ts, v in stored] == retained[t], name
            assert meta["last_end"] == max(int(k.split(":")[1]) for k in sink if k.startswith(f"w{t}:")), name
            for ns in (f"{name}-avg-{t}", f"{name}-avg-{t}-window"):
                rec = backend.txids(ns)
                assert (rec.prepared, rec.committed) == (None, N_FILES), ns
        final_rec = _record(url, name)
        assert (final_rec["phase"], final_rec["txid"]) == ("COMMITTED", N_FILES), name
