"""SIGKILL a Spark Connect client driving the Streams crash topology (a windowed operator and stateful
bolts in one consistent region) at steps of the checkpoint protocol, restart it, and check the store
holds exactly what a failure-free run commits.

The coordinator and the Streams participants run in the client (the process killed); the operators'
tasks run in the Connect server's Python workers, which live on with their operator instances. A
restarted client takes a new epoch: a worker's live instance continues only when it wrote the head
the store committed, otherwise the task is reset to its latest complete checkpoint, never to another.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.crash._harness import run_driver
from tests.crash.test_streams_crash import _first_restore
from tests.streams._topology import committed, model, write_inputs
from weir.state import StateFactory
from weir.streams.store import TaskCheckpoints

pytestmark = [pytest.mark.crash, pytest.mark.slow, pytest.mark.spark]

DRIVER = Path(__file__).with_name("streams_connect_driver.py")
NAME = "crashswcx"
WINDOW = 5  # as in the driver
N_FILES = 4  # one file per batch: txids 1..4, then the final mark's transaction, txid 5

# (crash point, phase left in the coordinator record, its txid, the checkpoint a window task restored
# from the store must be: the one after the last committed batch)
CHAIN = [
    ("after_preparing@2", "PREPARING", 2, 1),  # rolled back by recovery
    ("between_commits@3", "COMMITTING", 3, 3),  # rolled forward by recovery
    ("during_recovery@3", "COMMITTING", 3, 3),  # killed while rolling txid 3 forward
    ("after_committed@4", "COMMITTED", 4, 4),  # the restarted driver replays batch 4: skipped
]


@pytest.mark.timeout(900)
def test_sigkill_a_connect_client_of_a_streams_topology_then_restart_is_exact(
    spark_connect_url: str, tmp_path: Path
) -> None:
    batches = write_inputs(tmp_path / "in", N_FILES, 20)
    url = f"sqlite:///{tmp_path / 'state.db'}"
    log = tmp_path / "calls.log"
    args = [str(DRIVER), str(tmp_path / "state"), str(tmp_path / "in"), url, str(log)]
    backend = StateFactory.from_url(url).backend

    def record() -> dict[str, Any]:
        data = backend.get(f"$checkpointspout-{NAME}", b"__state")
        assert data is not None
        return dict(json.loads(data))

    for i, (crash, phase, txid, _) in enumerate(CHAIN):
        res = run_driver([*args, f"run{i}", spark_connect_url], crash)
        assert res.returncode == -signal.SIGKILL, f"not killed at {crash}: rc={res.returncode}\n{res.stderr[-3000:]}"
        rec = record()
        assert (rec["phase"], rec["txid"]) == (phase, txid), f"after the crash at {crash}: {rec}"
    final = run_driver([*args, "final", spark_connect_url], None)
    assert final.returncode == 0, final.stderr[-4000:]
    last = N_FILES + 1
    assert f"DONE txid={last} skipped=False" in final.stdout

    # exactly what a failure-free run commits, the open windows flushed once by the final mark
    expected = model(batches, WINDOW, final=True)
    assert committed(url, NAME) == expected

    # a restarted client's window task either went on with the server worker's live instance (it
    # wrote the committed head) or was reset to the checkpoint of the last committed batch
    restores = _first_restore(log)
    labels = [f"run{i}" for i in range(1, len(CHAIN))] + ["final"]
    for (crash, _, _, expect), label in zip(CHAIN, labels, strict=True):
        for task in range(2):
            got = restores.get((label, task))
            assert got in (None, ("reset", str(expect))), f"{label} task {task} after {crash}: {got}"
    assert not any(got == ("reset_to_initial_state", "") for got in restores.values())

    for task in range(2):
        ns = f"{NAME}-window-{task}"
        txids = backend.txids(ns)
        assert txids.prepared is None and txids.committed == last, (ns, txids)
        head = TaskCheckpoints(backend, ns, f"window task {task}").head()
        assert head is not None and [m.id for m in head.retained] == [N_FILES, last]
        chunks = {k for k, _ in backend.scan(ns) if k.startswith(b"c/")}
        assert chunks == {k for m in head.retained for k in m.keys()}
    rec = record()
    assert (rec["phase"], rec["txid"]) == ("COMMITTED", last)
    assert int(rec["epoch"]) == len(CHAIN) + 1
