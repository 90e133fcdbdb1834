"""End to end on Spark: a windowed Streams operator and stateful bolts commit exactly the model.

Run on classic PySpark and over a real Spark Connect server (``weir.spark.remote``: the query's
``foreachBatch`` relayed to this process's coordinator, the operators' tasks in ``mapInArrow``
stages of the server), with the same assertions.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.streams import _topology
from tests.streams._topology import build, committed, model, write_inputs
from weir.streams import load_checkpoint

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def by_value() -> Iterator[None]:
    """Ship the test topology's classes to the Python workers by value (tests/ is not on their path)."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(_topology)
    try:
        yield
    finally:
        cloudpickle.unregister_pickle_by_value(_topology)


def _log(path: Path) -> dict[tuple[str, int], list[tuple[str, str]]]:
    per: dict[tuple[str, int], list[tuple[str, str]]] = defaultdict(list)
    for line in path.read_text().splitlines():
        _label, _pid, role, task, method, *arg = line.split()
        per[(role, int(task))].append((method, arg[0] if arg else ""))
    return per


@pytest.mark.parametrize("dialect", ["classic", "connect"])
def test_window_operator_and_stateful_bolts_on_spark(
    dialect: str, request: pytest.FixtureRequest, tmp_path: Path, by_value: None
) -> None:
    spark: Any = request.getfixturevalue("spark" if dialect == "classic" else "spark_connect")
    n_batches, size = 4, 4
    batches = write_inputs(tmp_path / "in", n_batches, 15)
    log = tmp_path / "calls.log"
    url = f"sqlite:///{tmp_path / 'state.db'}"
    conf = {
        "weir.state.dir": str(tmp_path / "state"),
        "topology.state.provider.config": {"url": url},
        "weir.batch.max.retries": 0,
    }
    gauge_log = tmp_path / "gauge.log"
    topo = build(
        str(tmp_path / "in"),
        size=size,
        log_path=str(log),
        label="e2e",
        non_blocking=True,
        audit=True,
        gauge_log=str(gauge_log),
    )
    run = weir.submit("swin", conf, topo, spark=spark)
    status = run.process_available(timeout=600)
    assert status.last_txid == n_batches and status.batches == n_batches
    expected = model(batches, size)
    got = committed(url, "swin")
    assert got == expected
    assert len(expected["sink"]) >= 10  # several windows per task, some spanning batches

    calls = _log(log)
    for task in range(2):
        seq = [c for c in calls[("task", task)] if c[0] in ("checkpoint", "reset", "reset_to_initial_state")]
        # every batch is checkpointed once per task; a restore (another worker got the task) reads
        # back exactly the checkpoint written just before
        assert [int(a) for m, a in seq if m == "checkpoint"] == [1, 2, 3, 4]
        assert ("reset_to_initial_state", "") not in seq
        for i, (method, arg) in enumerate(seq):
            if method == "reset":
                assert seq[i - 1] == ("checkpoint", arg), seq
        # the window reads from "parse", outside its explicit region: a start operator, told when
        # the region has checkpointed; checkpoints past weir.checkpoint.retain (2) are retired
        hooks = [c for c in calls[("hook", task)] if c[0] != "prepare"]
        assert hooks == [
            ("region_checkpointed", "1"), ("region_checkpointed", "2"),
            ("region_checkpointed", "3"), ("retire_checkpoint", "1"),
            ("region_checkpointed", "4"), ("retire_checkpoint", "2"),
        ]  # fmt: skip
    # the audit operator, outside the region, checkpoints every batch (checkpoint.period.ms = 0):
    # it saw every parsed tuple by its last checkpoint
    audit = load_checkpoint(url, "swin", "audit", 0)
    assert audit is not None and audit.sequence_id == n_batches
    assert audit.get("n") == sum(len(b) for b in batches)
    n_tuples = sum(len(b) for b in batches)
    # checkpoint.period.ms longer than the run: never checkpointed after its first start
    assert load_checkpoint(url, "swin", "audit_slow", 0) is None
    # operator-driven: create_checkpoint() after every 10th tuple counted (the operator asserts the id it
    # gets back). A task that moves to another Python worker restarts from the latest checkpoint and
    # forgets the tuples after it (the state of an operator outside regions is not replayed), so the
    # latest checkpoint is one of those taken, not always the sixth
    driven = load_checkpoint(url, "swin", "driven", 0)
    assert driven is not None and 1 <= driven.sequence_id <= n_tuples // 10
    assert driven.get("n") == 10 * driven.sequence_id
    # the window's StatefulWindowListener state is checkpointed with the window, exact per task
    for t in range(2):
        ck = load_checkpoint(url, "swin", "window", t)
        assert ck is not None
        number, open_tuples = ck.read_object()["window"], ck.read_object()
        [[partition, stats]] = ck.read_object()
        assert partition is None and stats["windows"] == number
        assert stats["inserted"] == number * size + len(open_tuples)
        evicted = [v for k, vs in expected["sink"].items() if k.startswith(f"{t}:") for _, v in vs]
        assert stats["evicted_sum"] == sum(evicted)
    # the gauge's region: per cut, data tuples → drain → control tuples, and checkpoint() only after
    # every background thread released its permit (its count caught up with the data tuples)
    cuts = [line.split() for line in gauge_log.read_text().splitlines()]
    assert [int(c[2]) for c in cuts] == [1, 2, 3, 4]
    for _name, _task, _cid, trace, data, background in cuts:
        assert re.fullmatch(r"d*Dc*", trace), trace
        assert data == background
    gauge = load_checkpoint(url, "swin", "gauge", 0)
    assert gauge is not None and gauge.get("counts") == {
        "data": n_tuples,
        "background": n_tuples,
        "control": sum(len(w) for w in expected["sink"].values()),
    }
