"""Bootstrap: initial keys loaded into a new topology's task namespaces by the grouping hash.

On SQLite, Redis and PostgreSQL through the Backend SPI, and through ``weir state load`` killed with
SIGKILL at each step of the load (a subprocess), then run again: all rows or none, never a part.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.cli._support import run_subprocess
from tests.contract._support import provider_of, provider_params
from tests.crash._harness import run_driver
from weir._util import stable_hash
from weir.checkpoint.bootstrap import load_initial_state
from weir.checkpoint.coordinator import CheckpointPhase, CheckPointState, CheckpointStore
from weir.checkpoint.rescale import hash_route
from weir.errors import StateError
from weir.state.factory import open_backend
from weir.state.serializers import JsonSerializer

STORES = pytest.mark.parametrize("provider_url", provider_params(("sqlite", "redis", "postgres")), indirect=True)
J = JsonSerializer()
SEED = {f"w{i}": {"n": i, "tags": ["x"] * (i % 3)} for i in range(300)}


def _rows(seed: dict[str, Any]) -> list[tuple[bytes, bytes]]:
    return [(J.serialize(k), J.serialize(v)) for k, v in seed.items()]


def _load(url: str, topo: str, n: int, seed: dict[str, Any]) -> Any:
    backend = open_backend(provider_of(url).config)
    epoch = CheckpointStore(backend, topo).acquire_epoch()
    return load_initial_state(backend, topo, "count", n, _rows(seed), hash_route(J)(n), epoch)


def _tasks(url: str, topo: str, n: int) -> list[dict[str, Any]]:
    provider = provider_of(url)
    return [dict(provider.new_state(f"{topo}-count-{t}")) for t in range(n)]


@STORES
def test_rows_land_in_the_task_of_their_key_and_the_record_names_the_layout(provider_url: str) -> None:
    res = _load(provider_url, "boot", 3, SEED)
    assert res.rows == 300 and not res.already_loaded
    tasks = _tasks(provider_url, "boot", 3)
    assert [len(t) for t in tasks] == list(res.rows_per_task)
    for t, rows in enumerate(tasks):
        assert all(stable_hash(k) % 3 == t for k in rows)
    assert {k: v for rows in tasks for k, v in rows.items()} == SEED
    backend = open_backend(provider_of(provider_url).config)
    rec = CheckpointStore(backend, "boot").load()
    assert rec is not None and rec.parallelism == {"count": 3} and rec.last_committed == 0
    assert not [ns for ns in backend.namespaces() if ns.startswith("$bootstrap-")]
    assert _load(provider_url, "boot", 3, SEED).already_loaded  # the same rows again: nothing to do
    with pytest.raises(StateError, match=r"'boot'.*'count'.*namespace 'boot-count-\d' already holds state"):
        _load(provider_url, "boot", 3, {"other": 1})
    with pytest.raises(StateError, match=r"laid out for 3 tasks, not 2"):
        _load(provider_url, "boot", 2, SEED)


@STORES
def test_refused_once_the_topology_has_committed(provider_url: str) -> None:
    backend = open_backend(provider_of(provider_url).config)
    store = CheckpointStore(backend, "ran")
    epoch = store.acquire_epoch()
    store.save(CheckPointState(txid=4, phase=CheckpointPhase.COMMITTED, parallelism={"count": 2}), epoch)
    with pytest.raises(StateError, match=r"topology 'ran', component 'count': .*committed state \(txid 4\)"):
        _load(provider_url, "ran", 2, SEED)
    assert _tasks(provider_url, "ran", 2) == [{}, {}]


@pytest.mark.parametrize("provider_url", provider_params(("sqlite", "redis", "postgres")), indirect=True)
@pytest.mark.parametrize("point", ["bootstrap_staged@0", "bootstrap_switching@0", "bootstrap_between_tasks@0"])
def test_weir_state_load_killed_then_run_again_loads_all_or_nothing(
    provider_url: str, point: str, tmp_path: Path
) -> None:
    seed = tmp_path / "seed.jsonl"
    seed.write_text("".join(json.dumps({"key": k, "value": v}) + "\n" for k, v in SEED.items()))
    argv = ("state", "load", "--url", provider_url, "--topology", "kill", "--component", "count")
    # its own process group: the crash point kills the whole group
    killed = run_driver(["-m", "weir", *argv, "--parallelism", "2", str(seed)], point, 120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    tasks = _tasks(provider_url, "kill", 2)
    if point == "bootstrap_staged@0":
        assert tasks == [{}, {}]  # nothing loaded yet: the task namespaces are untouched
    else:  # a marker says "switching": the next load (or start) rolls it forward
        backend = open_backend(provider_of(provider_url).config, fresh=True)
        assert backend.get("$checkpointspout-kill", b"__bootstrap") is not None
        backend.close()
    again = run_subprocess(*argv, str(seed))  # the parallelism is in the record now (or given again)
    if point == "bootstrap_staged@0":
        assert again.code != 0 and "--parallelism" in again.err  # no record was written: say what is missing
        again = run_subprocess(*argv, "--parallelism", "2", str(seed))
    assert again.code == 0, again.err
    assert {k: v for rows in _tasks(provider_url, "kill", 2) for k, v in rows.items()} == SEED
    backend = open_backend(provider_of(provider_url).config, fresh=True)
    assert backend.get("$checkpointspout-kill", b"__bootstrap") is None
    assert not [ns for ns in backend.namespaces() if ns.startswith("$bootstrap-")]
    backend.close()
