"""Which spout task each partition of the Storm spout stage's input is, over Spark Connect (no Spark needed).

The input is the batch coalesced to at most *n* partitions (*k* of them), then one presence row per
task in *n* more partitions (:meth:`~weir.runtime.spark.storm.connect.ConnectGraph._spread`); the
stage reads its partition's index. The end-to-end test with a real server is
``tests/spark/test_storm_connect.py::test_the_spout_stage_reads_the_batch_partitions_without_an_exchange``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from weir.runtime.spark.storm.connect import _batch_rows, _spout_task

WHERE = "topology 't', stage of component 'lines', txid 4"


def _rows(values: list[str | None], tasks: list[int | None], real: list[bool]) -> Any:
    row = pa.array([None if v is None else {"value": v} for v in values], pa.struct([("value", pa.string())]))
    return pa.RecordBatch.from_arrays([row, pa.array(tasks, pa.int32()), pa.array(real)], names=["r", "t", "x"])


def _presence(j: int) -> Any:
    return _rows([None], [j], [False])


def _batch(*values: str) -> Any:
    return _rows(list(values), [None] * len(values), [True] * len(values))


def _tasks(partitions: list[list[Any]], n: int) -> list[tuple[int | None, int]]:
    out = []
    for p, part in enumerate(partitions):
        task, rest = _spout_task(iter(part), n, WHERE, p)
        out.append((task, sum(rb.num_rows for rb in rest)))
    return out


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_every_task_runs_once_whatever_the_batch_partitions(k: int) -> None:
    n = 3
    partitions = [[_batch("a", "b")] for _ in range(k)] + [[_presence(j)] for j in range(n)]
    got = _tasks(partitions, n)
    ran = [t for t, _ in got if t is not None]
    assert sorted(ran) == [0, 1, 2]  # each task exactly once
    assert got[:k] == [(p, 2) for p in range(k)]  # batch partition p is task p, with its rows
    assert [t for t, _ in got[k:]] == [j if j >= k else None for j in range(n)]


def test_an_empty_partition_of_the_batch_is_its_task_without_rows() -> None:
    got = _tasks([[], [_batch("a")], [_presence(0)], [_presence(1)], [_presence(2)]], 3)
    assert got == [(0, 0), (1, 1), (None, 0), (None, 0), (2, 0)]


def test_one_task_reads_its_one_partition_whole() -> None:
    task, rest = _spout_task(iter([_batch("a"), _presence(0), _batch("b")]), 1, WHERE, 0)
    assert task == 0 and sum(rb.num_rows for rb in rest) == 3  # the rows' reader drops the presence row


def test_a_presence_row_among_other_rows_is_refused_with_the_stage_named() -> None:
    with pytest.raises(RuntimeError, match=r"txid 4: .*\(partition 3 holds task 1's presence row and other rows\)"):
        _tasks([[], [], [], [_presence(1), _batch("a")]], 3)


def test_a_batch_partition_past_the_spout_tasks_is_refused() -> None:
    with pytest.raises(RuntimeError, match=r"stage of component 'lines'.*partition 3 of the batch, with 3 spout"):
        _tasks([[_batch("a")]] * 4, 3)


def test_a_presence_row_after_the_rows_of_a_batch_partition_is_refused() -> None:
    assert [r.value for r in _batch_rows(iter([_batch("a"), _presence(0), _batch("b")]), True, WHERE)] == ["a", "b"]
    with pytest.raises(RuntimeError, match=r"txid 4: .*\(a presence row among the batch's rows\)"):
        list(_batch_rows(iter([_batch("a"), _presence(0)]), False, WHERE))
