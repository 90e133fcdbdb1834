"""ReplayableSpout on Spark: bounded batches under Trigger.AvailableNow, resume, pinned initial offsets."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir
from tests.sources._spouts import Numbers, count_topology
from weir.demo import read_counts
from weir.sources.replayable import pin_initial_offset

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _expected(n: int, keys: int = 7) -> Counter[str]:
    return Counter(f"k{i % keys}" for i in range(n))


def test_available_now_runs_bounded_batches_then_resumes_where_it_stopped(spark: Any, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "available").write_text("500")
    conf = {"weir.state.dir": str(tmp_path / "state")}
    spout = Numbers(1000, max_records=300, log_dir=str(logs))

    first = weir.submit("nums", conf, count_topology({"nums": spout}), spark=spark).process_available(timeout=600)
    assert (first.batches, first.last_txid, first.tuples_in) == (2, 2, 500)  # 300 + 200
    assert read_counts(conf, "nums") == _expected(500)

    (logs / "available").write_text("1000")
    again = weir.submit("nums", conf, count_topology({"nums": spout}), spark=spark).process_available(timeout=600)
    assert (again.batches, again.last_txid, again.tuples_in) == (2, 4, 500)  # 800, 1000
    assert read_counts(conf, "nums") == _expected(1000)

    # Spark's offset log holds the spout's offsets as JSON; the initial offset was computed once
    offsets = tmp_path / "state" / "spark" / "nums" / "offsets"
    ends = [json.loads((offsets / str(i)).read_text().splitlines()[-1]) for i in range(4)]
    assert ends == [{"n": 300}, {"n": 500}, {"n": 800}, {"n": 1000}]
    assert len((logs / "initial.jsonl").read_text().splitlines()) == 1
    pinned = tmp_path / "state" / "spark" / "nums" / "weir" / "initial-offset" / "nums.json"
    assert json.loads(pinned.read_text()) == {"n": 0}
    # Spark told the spout which ranges are done (commit lags a batch and is advisory)
    commits = [json.loads(line) for line in (logs / "commit.jsonl").read_text().splitlines()]
    assert commits and all(c["n"] in (300, 500, 800, 1000) for c in commits)


def test_pinned_initial_offset_is_computed_once(spark: Any, tmp_path: Path) -> None:
    calls = []

    def compute() -> dict[str, Any]:
        calls.append(1)
        return {"z": 1, "a": {"y": 2, "b": 3}}

    path = str(tmp_path / "ckpt" / "weir" / "initial-offset" / "s.json")
    assert pin_initial_offset(spark, path, compute) == {"z": 1, "a": {"y": 2, "b": 3}}
    assert pin_initial_offset(spark, path, lambda: {"other": 0}) == {"a": {"b": 3, "y": 2}, "z": 1}
    assert len(calls) == 1
    assert Path(path).read_text() == '{"a": {"b": 3, "y": 2}, "z": 1}'
    Path(path).write_text("not json")
    with pytest.raises(weir.SourceError, match="delete the file to start afresh"):
        pin_initial_offset(spark, path, compute)
