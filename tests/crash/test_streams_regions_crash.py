"""Independent consistent regions on Spark: a failure in region ``b`` resets only ``b``; region ``a``
keeps its prepared checkpoint and is not run again. The driver is SIGKILLed right after such a
region-scoped rollback, restarted, and a later batch fails in ``b`` again without a crash; the
committed totals of both regions must equal the input exactly."""

from __future__ import annotations

import json
import os
import signal
from collections import defaultdict
from pathlib import Path

import pytest

from tests.crash._harness import run_driver
from weir.state import StateFactory
from weir.streams import load_checkpoint

pytestmark = [pytest.mark.crash, pytest.mark.slow]

DRIVER = Path(__file__).with_name("streams_regions_driver.py")
BATCHES = [[1, 2, 3], [10, 11, 12], [20, 21, 22]]


def _calls(log: Path) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for line in log.read_text().splitlines():
        name, _pid, method, *arg = line.split()
        out[name].append((method, arg[0] if arg else ""))
    return out


def test_sigkill_after_one_region_failed_then_exact(tmp_path: Path) -> None:
    inputs, markers, log = tmp_path / "in", tmp_path / "markers", tmp_path / "calls.log"
    inputs.mkdir()
    markers.mkdir()
    for i, batch in enumerate(BATCHES):
        f = inputs / f"f{i}.txt"
        f.write_text("".join(f"{v}\n" for v in batch))
        os.utime(f, (1_700_000_000 + i, 1_700_000_000 + i))
    url = f"sqlite:///{tmp_path / 'state.db'}"
    args = [str(DRIVER), str(tmp_path / "state"), str(inputs), url, str(log), str(markers)]
    backend = StateFactory.from_url(url).backend

    # run 1: b fails on 11 (batch 2); a's cut of batch 2 is kept; the driver dies right after
    (markers / "fail-11").write_text("")
    res = run_driver(args, "after_region_rollback@2")
    assert res.returncode == -signal.SIGKILL, res.stderr[-3000:]
    rec = json.loads(backend.get("$checkpointspout-regions", b"__state"))
    assert (rec["phase"], rec["txid"]) == ("PREPARING", 2)
    assert backend.txids("regions-a-0").prepared == 2  # region a: prepared, kept
    assert backend.txids("regions-b-0").prepared is None  # region b: rolled back
    calls = _calls(log)
    processed = [int(v) for m, v in calls["a"] if m == "process"]
    assert processed == [1, 2, 3, 10, 11, 12]  # a ran batch 2 once and prepared it

    # run 2: recovery rolls back both (the kept cut was prepared under the dead driver's epoch) and
    # batch 2 runs again in both regions; then b fails on 21 once: only b is reset
    log.write_text("")
    (markers / "fail-21").write_text("")
    final = run_driver(args, None)
    assert final.returncode == 0, final.stderr[-4000:]
    assert "DONE txid=3" in final.stdout
    calls = _calls(log)
    a_batch3 = [c for c in calls["a"] if c in {("process", "20"), ("process", "21"), ("process", "22")}]
    # a ran batch 3 once: its cut was kept on the retry (it may have been reset to 2 *before* batch 3,
    # when Spark gave the task to another Python worker — never because b failed)
    assert sorted(a_batch3) == [("process", "20"), ("process", "21"), ("process", "22")]
    first_21 = calls["b"].index(("process", "21"))
    after = calls["b"][first_21 + 1 :]
    # b failed on 21 and ran batch 3 again from checkpoint 2: reset to it by the worker that failed,
    # or restored from another Python worker's live instance still at checkpoint 2 (Spark chooses the
    # worker; no reset() call is needed then) — either way each tuple of batch 3 exactly once more
    assert ("reset", "2") in after or ("reset", "3") not in after
    assert sorted(c for c in after if c[0] == "process") == [("process", "20"), ("process", "21"), ("process", "22")]
    total = sum(sum(b) for b in BATCHES)
    for cid in ("a", "b"):
        ck = load_checkpoint(url, "regions", cid, 0)
        assert ck is not None and ck.sequence_id == 3 and ck.get("total") == total, cid
