"""Which spout task each partition of the Storm spout stage's input is, over Spark Connect (no Spark needed).

The input is the batch coalesced to at most *n* partitions (*k* of them), then one partition of
presence rows, one per task (:meth:`~weir.runtime.spark.storm.connect.ConnectGraph._spread`); the
stage reads its partition's index. The end-to-end test with a real server is
``tests/spark/test_storm_connect.py::test_the_spout_stage_reads_the_batch_partitions_without_an_exchange``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from weir.runtime.spark.storm.connect import _batch_rows, _plain_rows, _spout_tasks

WHERE = "topology 't', stage of component 'lines', txid 4"


def _rows(values: list[str | None], tasks: list[int | None], real: list[bool]) -> Any:
    row = pa.array([None if v is None else {"value": v} for v in values], pa.struct([("value", pa.string())]))
    return pa.RecordBatch.from_arrays([row, pa.array(tasks, pa.int32()), pa.array(real)], names=["r", "t", "x"])


def _presence(*tasks: int) -> Any:
    return _rows([None] * len(tasks), list(tasks), [False] * len(tasks))


def _batch(*values: str) -> Any:
    return _rows(list(values), [None] * len(values), [True] * len(values))


def _tasks(partitions: list[list[Any]], n: int) -> list[list[tuple[int, int]]]:
    """For each partition: the tasks it runs, each with its number of input rows."""
    return [[(t, sum(rb.num_rows for rb in rest)) for t, rest in _spout_tasks(iter(part), n, WHERE, p)]
            for p, part in enumerate(partitions)]  # fmt: skip


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_every_task_runs_once_whatever_the_batch_partitions(k: int) -> None:
    n = 3
    partitions = [[_batch("a", "b")] for _ in range(k)] + [[_presence(0, 1), _presence(2)]]
    got = _tasks(partitions, n)
    assert sorted(t for runs in got for t, _ in runs) == [0, 1, 2]  # each task exactly once
    assert got[:k] == [[(p, 2)] for p in range(k)]  # batch partition p is task p, with its rows
    assert got[k] == [(j, 0) for j in range(k, n)]  # the presence partition runs the others, without rows


def test_an_empty_partition_of_the_batch_is_its_task_without_rows() -> None:
    got = _tasks([[], [_batch("a")], [_presence(0, 1, 2)]], 3)
    assert got == [[(0, 0)], [(1, 1)], [(2, 0)]]


def test_one_task_reads_its_one_partition_whole() -> None:
    ((task, rest),) = _spout_tasks(iter([_batch("a"), _presence(0), _batch("b")]), 1, WHERE, 0)
    assert task == 0 and sum(rb.num_rows for rb in rest) == 3  # the rows' reader drops the presence row


def test_presence_rows_among_rows_of_the_batch_are_refused_with_the_stage_named() -> None:
    with pytest.raises(RuntimeError, match=r"txid 4: .*\(partition 2 holds presence rows and rows of the batch\)"):
        _tasks([[], [], [_presence(0, 1, 2), _batch("a")]], 3)
    with pytest.raises(RuntimeError, match=r"\(partition 1 holds the presence rows of tasks \[0, 2\]\)"):
        _tasks([[], [_presence(0, 2)]], 3)


def test_a_batch_partition_past_the_spout_tasks_is_refused() -> None:
    with pytest.raises(RuntimeError, match=r"stage of component 'lines'.*partition 3 of the batch, with 3 spout"):
        _tasks([[_batch("a")]] * 4, 3)


def test_a_presence_row_after_the_rows_of_a_batch_partition_is_refused() -> None:
    assert [r.value for r in _batch_rows(iter([_batch("a"), _presence(0), _batch("b")]), True, WHERE)] == ["a", "b"]
    with pytest.raises(RuntimeError, match=r"txid 4: .*\(a presence row among the batch's rows\)"):
        list(_batch_rows(iter([_batch("a"), _presence(0)]), False, WHERE))


# ---- the sparse layout: a chain that does nothing without input (ConnectGraph._spread(sparse=True)) ----


def _plain(*values: str) -> Any:
    """A record batch of the batch DataFrame itself (the sparse layout adds no column)."""
    return pa.RecordBatch.from_arrays([pa.array(list(values), pa.string())], names=["value"])


def _sparse(partitions: list[list[Any]], n: int) -> list[list[tuple[int, list[str]]]]:
    """For each partition in the sparse layout: the tasks it runs, each with the values of its rows."""
    return [
        [(t, [r.value for r in _plain_rows(rest)]) for t, rest in _spout_tasks(iter(part), n, WHERE, p, True)]
        for p, part in enumerate(partitions)
    ]


def test_sparse_partition_p_is_task_p_whatever_it_holds() -> None:
    # k = n = 3: the batch's partitions, no partition of presence rows
    got = _sparse([[_plain("a")], [_plain("b", "c")], [_plain("d")]], 3)
    assert got == [[(0, ["a"])], [(1, ["b", "c"])], [(2, ["d"])]]
    # k = 2 < n: tasks 0 and 1 (task 2 is idle), an empty partition of the batch is its task without rows
    assert _sparse([[], [_plain("a")]], 3) == [[(0, [])], [(1, ["a"])]]
    # one task: its one partition, whole
    assert _sparse([[_plain("a"), _plain(), _plain("b")]], 1) == [[(0, ["a", "b"])]]


def test_sparse_rows_are_the_batchs_own_columns_as_a_classic_spout_reads_them() -> None:
    import datetime

    at = datetime.datetime(2026, 11, 26, 12, 30, tzinfo=datetime.timezone.utc)
    rb = pa.RecordBatch.from_arrays(
        [pa.array(["x", None]), pa.array([1, 2], pa.int64()), pa.array([at, None], pa.timestamp("us", tz="UTC"))],
        names=["key", "n", "ts"],
    )
    first, second = _plain_rows(iter([rb]))
    assert first.asDict() == {"key": "x", "n": 1, "ts": at.astimezone().replace(tzinfo=None)}  # naive local time
    assert (second.key, second.n, second.ts) == (None, 2, None)
    assert first[0] == "x" and list(first.__fields__) == ["key", "n", "ts"]  # by position and by name


def test_sparse_partition_past_the_tasks_is_refused() -> None:
    with pytest.raises(RuntimeError, match=r"stage of component 'lines'.*partition 3 of the spout stage, with 3 spout"):
        _sparse([[_plain("a")]] * 4, 3)


def _graph(sparse: list[tuple[tuple[str, ...], int]]) -> Any:
    from weir.runtime.spark.storm.connect import ConnectGraph

    graph = object.__new__(ConnectGraph)  # _idle reads only what a batch's graph knows after its job
    graph.txid, graph.sparse = 7, sparse
    return graph


def test_tasks_past_a_sparse_stages_partitions_report_idle() -> None:
    from weir.runtime.spark.executor import TaskReport

    sent = [TaskReport("lines", 0, 7, n_in=4), TaskReport("split", 0, 7, n_in=4, n_out=9)]
    idle = _graph([(("lines", "split"), 3)])._idle(sent)
    assert sorted((r.component, r.task) for r in idle) == [("lines", 1), ("lines", 2), ("split", 1), ("split", 2)]
    assert all(r.ok and r.txid == 7 and r.n_in == 0 and r.extra == {"idle": True} for r in idle)


def test_no_idle_report_when_the_spouts_reports_are_not_the_layouts() -> None:
    from weir.runtime.spark.executor import TaskReport

    graph = _graph([(("lines", "split"), 3)])
    # tasks 0 and 2 ran, 1 did not: not a prefix of the tasks, so a lost task, left to the check of missing reports
    assert graph._idle([TaskReport("lines", 0, 7), TaskReport("lines", 2, 7)]) == []
    assert graph._idle([]) == []  # no spout task reported: the job lost its output
    # every task ran: nothing to add
    assert graph._idle([TaskReport(c, t, 7) for c in ("lines", "split") for t in range(3)]) == []
