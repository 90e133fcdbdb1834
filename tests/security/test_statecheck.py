"""The start-up cross-check of the coordinator record against a Spark checkpoint directory (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from weir.checkpoint.coordinator import CheckpointPhase, CheckPointState, CheckpointStore, Coordinator, Participants
from weir.connectors.sqlite import SqliteBackend, SqliteOptions
from weir.errors import StateLossError
from weir.runtime.spark.statecheck import check_store_against_spark, read_spark_log


class _NoParticipants(Participants):
    def commit_all(self, txid: int, epoch: int, after_first: Any = None) -> None:
        pass

    def rollback_all(self, epoch: int, after_first: Any = None) -> None:
        pass


def _spark_dir(root: Path, query_id: str, commits: int, offsets: int | None = None) -> str:
    root.mkdir(parents=True, exist_ok=True)
    (root / "metadata").write_text(json.dumps({"id": query_id}) + "\n")
    for sub, n in (("commits", commits), ("offsets", commits if offsets is None else offsets)):
        (root / sub).mkdir(exist_ok=True)
        for b in range(n):
            (root / sub / str(b)).write_text("v1\n")
        (root / sub / f".{n}.crc").write_text("")  # Spark's side files are ignored
    return str(root)


def _coordinator(tmp_path: Path, rec: CheckPointState | None) -> Coordinator:
    backend = SqliteBackend.open(SqliteOptions(str(tmp_path / "state.db")))
    store = CheckpointStore(backend, "t")
    if rec is not None:
        store.save(rec, 0)
    coord = Coordinator("t", store, _NoParticipants(), {})
    coord.start()
    return coord


def test_the_spark_log_is_read_from_the_directory(tmp_path: Path) -> None:
    loc = _spark_dir(tmp_path / "ck", "q1", commits=3, offsets=4)
    got = read_spark_log(loc)
    assert got is not None and (got.query_id, got.last_commit, got.last_offset) == ("q1", 2, 3)
    assert read_spark_log("file://" + loc) == got.__class__("file://" + loc, "q1", 3, 2)
    assert read_spark_log("hdfs://nn/ck") is None
    empty = read_spark_log(str(tmp_path / "none"))
    assert empty is not None and empty.last_commit is None


@pytest.mark.parametrize(
    ("rec", "commits"),
    [
        (None, 0),  # a first run: Spark never committed a batch
        (CheckPointState(txid=5, query_id="q1", txid_base=1), 4),  # batch 3 = txid 4 ≤ 5, batch 4 planned
        (CheckPointState(txid=5, phase=CheckpointPhase.PREPARING, query_id="q1", txid_base=1), 4),  # 4 committed
    ],
)
def test_a_store_that_kept_its_data_passes(tmp_path: Path, rec: CheckPointState | None, commits: int) -> None:
    coord = _coordinator(tmp_path, rec)
    assert check_store_against_spark(coord, _spark_dir(tmp_path / "ck", "q1", commits, offsets=commits + 1)) is None


@pytest.mark.parametrize(
    ("rec", "expected"),
    [
        (None, "has no coordinator record, but Spark's checkpoint"),
        (
            CheckPointState(txid=9, query_id="q0", txid_base=0),
            "was last written by Spark query q0 (last committed txid 9)",
        ),
        (CheckPointState(txid=2, query_id="q1", txid_base=1), "holds committed txid 2, but Spark's checkpoint"),
        (
            CheckPointState(txid=5, phase=CheckpointPhase.PREPARING, query_id="q1", txid_base=2),
            "txids 5..6 (Spark batches 3..4)",
        ),
    ],
)
def test_a_store_behind_sparks_commit_log_is_refused(
    tmp_path: Path, rec: CheckPointState | None, expected: str
) -> None:
    coord = _coordinator(tmp_path, rec)
    loc = _spark_dir(tmp_path / "ck", "q1", commits=5)
    with pytest.raises(StateLossError) as info:
        check_store_against_spark(coord, loc)
    text = str(info.value)
    assert expected in text and "topology 't': committed state was lost" in text
    assert "namespace '$checkpointspout-t'" in text and "--accept-state-loss" in text


def test_accepting_continues_after_every_txid_a_namespace_still_holds(tmp_path: Path) -> None:
    coord = _coordinator(tmp_path, None)
    backend = coord.store.backend
    backend.write_prepared("t-count-0", 7, {b"k": b"1"}, None)
    backend.commit_prepared("t-count-0", 7, None)  # a namespace that outlived the record
    loc = _spark_dir(tmp_path / "ck", "q1", commits=3)
    check_store_against_spark(coord, loc, accept=True)
    rec = coord.store.load()
    assert rec is not None and rec.query_id == "q1" and rec.last_committed == 7
    assert coord.txid_for("q1", 3) == 8  # the next Spark batch follows the namespace's txid
    check_store_against_spark(coord, loc)  # and the accepted loss is not reported again


def _committed(txid: int, offsets: dict[str, Any] | None = None) -> CheckPointState:
    return CheckPointState(txid=txid, query_id="q0", txid_base=1, offsets=offsets)


def test_a_missing_checkpoint_resumes_replayable_spouts_from_the_store(tmp_path: Path) -> None:
    from tests.sources._spouts import Numbers

    coord = _coordinator(tmp_path, _committed(4, {"numbers": {"n": 400}}))
    spouts = [("numbers", Numbers(1000))]
    missing = str(tmp_path / "ck")
    assert check_store_against_spark(coord, missing, spouts=spouts) == {"numbers": {"n": 400}}
    # a resumed query that has not finished its first batch: its pinned start is the store's
    loc = _spark_dir(tmp_path / "ck", "q1", commits=0, offsets=1)
    (tmp_path / "ck" / "weir" / "initial-offset").mkdir(parents=True)
    (tmp_path / "ck" / "weir" / "initial-offset" / "numbers.json").write_text('{"n": 400}')
    assert check_store_against_spark(coord, loc, spouts=spouts) is None
    (tmp_path / "ck" / "weir" / "initial-offset" / "numbers.json").write_text('{"n": 0}')
    with pytest.raises(StateLossError, match="already holds the start offsets of another run"):
        check_store_against_spark(coord, loc, spouts=spouts)


@pytest.mark.parametrize(
    ("offsets", "expected"),
    [
        (None, "the store keeps no end offsets for the spouts"),
        ({"numbers": {"n": 400}}, "spout(s) other (object) cannot start from offsets kept in the store"),
    ],
)
def test_a_missing_checkpoint_that_cannot_resume_is_refused_with_both_txids(
    tmp_path: Path, offsets: dict[str, Any] | None, expected: str
) -> None:
    from tests.sources._spouts import Numbers

    coord = _coordinator(tmp_path, _committed(4, offsets))
    spouts: list[tuple[str, Any]] = [("numbers", Numbers(1000))]
    if offsets is not None:
        spouts.append(("other", object()))
    with pytest.raises(StateLossError) as info:
        check_store_against_spark(coord, str(tmp_path / "ck"), spouts=spouts)
    text = str(info.value)
    assert "topology 't': committed state was lost" in text and "holds committed txid 4 (Spark query q0)" in text
    assert "is missing or new" in text and expected in text
    assert "--accept-state-loss" in text and "reset explicitly" in text
    # accepted: the state is kept and the sources start over; the next txid follows the store's
    assert check_store_against_spark(coord, str(tmp_path / "ck"), spouts=spouts, accept=True) is None
    assert coord.txid_for("q1", 0) == 5


def test_a_checkpoint_older_than_the_store_is_refused(tmp_path: Path) -> None:
    coord = _coordinator(tmp_path, CheckPointState(txid=9, query_id="q1", txid_base=1))
    loc = _spark_dir(tmp_path / "ck", "q1", commits=4, offsets=5)  # planned batch 4 = txid 5
    with pytest.raises(StateLossError) as info:
        check_store_against_spark(coord, loc)
    text = str(info.value)
    assert "holds committed txid 9" in text and "planned batches only up to 4 = txid 5" in text
    assert "older than the store" in text and "--accept-state-loss" in text
