"""The checkpoint coordinator state machine (Storm's CheckpointSpout) without Spark.

The store is a :class:`MemoryBackend` (or a SQLite file for the crash tests); the participants and
the batch job are fakes that really prepare, commit and roll back :class:`TransactionalKeyValueState`
namespaces in the same store, so every test checks the final committed data, not only the calls.

Data model of the fake job: transaction *t* counts the words ``["common", f"w{t}"]``; each word goes
to one of the two task namespaces of component ``count``. After transactions 1..n are committed
exactly once, ``common`` is n and every ``w<t>`` is 1.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from weir.checkpoint import (
    CheckpointPhase,
    CheckPointState,
    CheckpointStore,
    Coordinator,
    JobOutcome,
    TaskFailure,
    checkpoint_namespace,
)
from weir.checkpoint.coordinator import RECORD_KEY, Participants
from weir.checkpoint.faults import POINTS
from weir.errors import CheckpointError, ConfigError, FencedError, StateError, TopologyError
from weir.state.backend import Backend
from weir.state.kv import TransactionalKeyValueState
from weir.state.memory import MemoryBackend

TOPO = "wc"
COMPONENT = "count"
NAMESPACES = [f"{TOPO}-{COMPONENT}-0", f"{TOPO}-{COMPONENT}-1"]
PARALLELISM = {COMPONENT: 2}
REPO = Path(__file__).resolve().parents[2]


class Crash(BaseException):
    """Stands for the death of the driver process at some point (nothing after it runs)."""


# ---- fakes -------------------------------------------------------------------------------------
class RecordingStore(CheckpointStore):
    """A checkpoint store that logs every successful save as ``("save", phase, txid)``."""

    def __init__(self, backend: Backend, topology: str, log: list[tuple[Any, ...]]) -> None:
        super().__init__(backend, topology)
        self.log = log
        self.saved: list[CheckPointState] = []

    def save(self, rec: CheckPointState, epoch: int) -> None:
        super().save(rec, epoch)
        self.saved.append(rec)
        self.log.append(("save", rec.phase, rec.txid))


class FakeParticipants(Participants):
    """Commits / rolls back the task namespaces for real and logs each call.

    ``crash_commit`` = ``(txid, n)``: die (raise :class:`Crash`) in ``commit_all(txid)`` once ``n``
    namespaces are committed.
    """

    def __init__(self, backend: Backend, log: list[tuple[Any, ...]], namespaces: list[str] = NAMESPACES) -> None:
        self.backend = backend
        self.log = log
        self.namespaces = namespaces
        self.crash_commit: tuple[int, int] | None = None

    def _state(self, ns: str, epoch: int) -> TransactionalKeyValueState:
        return TransactionalKeyValueState(self.backend, ns, epoch=epoch)

    def commit_all(self, txid: int, epoch: int, after_first: Callable[[], None] | None = None) -> None:
        self.log.append(("commit_all", txid, epoch))
        for i, ns in enumerate(self.namespaces):
            if self.crash_commit == (txid, i):
                raise Crash
            self._state(ns, epoch).commit(txid)
            if i == 0 and after_first is not None:
                after_first()

    def rollback_all(self, epoch: int, after_first: Callable[[], None] | None = None) -> None:
        self.log.append(("rollback_all", epoch))
        for i, ns in enumerate(self.namespaces):
            self._state(ns, epoch).rollback()
            if i == 0 and after_first is not None:
                after_first()


def shard(word: str) -> int:
    return sum(map(ord, word)) % len(NAMESPACES)


def words_of(txid: int) -> list[str]:
    return ["common", f"w{txid}"]


class WordJob:
    """The batch's Spark job: each task counts its words and prepares its namespace.

    ``fail`` = set of ``(txid, attempt)`` whose task 1 fails after task 0 prepared; ``crash`` = txid
    whose job dies (:class:`Crash`) after every task prepared; ``on_run`` runs at the start of a job.
    """

    def __init__(self, backend: Backend, log: list[tuple[Any, ...]]) -> None:
        self.backend = backend
        self.log = log
        self.fail: set[tuple[int, int]] = set()
        self.fail_always = False
        self.crash: int | None = None
        self.on_run: Callable[[], None] | None = None

    def __call__(self, txid: int, epoch: int, attempt: int) -> JobOutcome:
        self.log.append(("job", txid, attempt))
        if self.on_run is not None:
            self.on_run()
        for task, ns in enumerate(NAMESPACES):
            state = TransactionalKeyValueState(self.backend, ns, epoch=epoch)
            for w in words_of(txid):
                if shard(w) == task:
                    state.put(w, state.get(w, 0) + 1)
            if task == 1 and (self.fail_always or (txid, attempt) in self.fail):
                tb = f'Traceback (most recent call last):\n  File "bolt.py", line 7\nValueError: bad word (txid {txid})'
                return JobOutcome(failures=[TaskFailure(COMPONENT, 1, "ValueError: bad word", tb)])
            state.prepare_commit(txid)
        if self.crash == txid:
            raise Crash
        return JobOutcome(stats={"tuples_in": len(words_of(txid))})


def committed_counts(backend: Backend) -> dict[str, int]:
    """Every committed row of the task namespaces (a fresh reader sees only committed data)."""
    out: dict[str, int] = {}
    for ns in NAMESPACES:
        out.update(dict(TransactionalKeyValueState(backend, ns)))
    return out


def expected_counts(txids: range | list[int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in txids:
        for w in words_of(t):
            out[w] = out.get(w, 0) + 1
    return out


class Driver:
    """One driver process: a store, participants, a job and a coordinator over a shared backend."""

    def __init__(self, backend: Backend, *, max_retries: int = 3, parallelism: dict[str, int] | None = None) -> None:
        self.backend = backend
        self.log: list[tuple[Any, ...]] = []
        self.store = RecordingStore(backend, TOPO, self.log)
        self.participants = FakeParticipants(backend, self.log)
        self.job = WordJob(backend, self.log)
        self.coord = Coordinator(
            TOPO, self.store, self.participants, parallelism or PARALLELISM, max_retries=max_retries
        )

    def start(self) -> Driver:
        self.coord.start()
        return self

    def batch(self, batch_id: int, query_id: str = "q1") -> Any:
        return self.coord.run_batch(query_id, batch_id, self.job)

    def saves(self) -> list[tuple[CheckpointPhase, int]]:
        return [(e[1], e[2]) for e in self.log if e[0] == "save"]


@pytest.fixture
def backend() -> Iterator[MemoryBackend]:
    yield MemoryBackend("coordinator-test")


def stored(backend: Backend) -> CheckPointState:
    rec = CheckpointStore(backend, TOPO).load()
    assert rec is not None
    return rec


# ---- the record ------------------------------------------------------------------------------
def test_record_round_trips_as_json_and_knows_the_last_committed_txid() -> None:
    rec = CheckPointState(7, CheckpointPhase.PREPARING, 3, "q", 2, {"count": 4}, 123)
    again = CheckPointState.from_bytes(rec.to_bytes(), "ns")
    assert again == rec
    assert rec.last_committed == 6
    assert replace(rec, phase=CheckpointPhase.COMMITTING).last_committed == 7
    assert replace(rec, phase=CheckpointPhase.COMMITTED).last_committed == 7
    assert checkpoint_namespace("wc") == "$checkpointspout-wc"


def test_fresh_store_has_no_record(backend: MemoryBackend) -> None:
    assert CheckpointStore(backend, TOPO).load() is None


# ---- the normal sequence ---------------------------------------------------------------------
def test_fresh_start_runs_batch_0_as_txid_1_with_every_phase_in_order(backend: MemoryBackend) -> None:
    d = Driver(backend)
    epoch = d.coord.start()
    assert epoch == 1
    report = d.batch(0)
    assert (report.txid, report.skipped, report.attempts) == (1, False, 1)
    assert report.stats == {"tuples_in": 2}
    assert d.log == [
        ("save", CheckpointPhase.COMMITTED, 0),  # recovery claims the (empty) record with its epoch
        ("save", CheckpointPhase.COMMITTED, 0),  # the Spark query id and txid_base are recorded
        ("save", CheckpointPhase.PREPARING, 1),
        ("job", 1, 0),
        ("save", CheckpointPhase.COMMITTING, 1),
        ("commit_all", 1, epoch),
        ("save", CheckpointPhase.COMMITTED, 1),
    ]
    rec = stored(backend)
    assert (rec.txid, rec.phase, rec.epoch) == (1, CheckpointPhase.COMMITTED, epoch)
    assert (rec.query_id, rec.txid_base) == ("q1", 1)
    assert dict(rec.parallelism) == PARALLELISM
    assert rec.updated_ms > 0
    assert committed_counts(backend) == expected_counts([1])
    for ns in NAMESPACES:
        assert backend.txids(ns).committed == 1
        assert backend.load_prepared(ns) is None


def test_consecutive_batches_get_consecutive_txids_and_commit_once(backend: MemoryBackend) -> None:
    d = Driver(backend).start()
    reports = [d.batch(b) for b in range(4)]
    assert [r.txid for r in reports] == [1, 2, 3, 4]
    assert d.saves()[2:] == [
        (phase, t)
        for t in (1, 2, 3, 4)
        for phase in (CheckpointPhase.PREPARING, CheckpointPhase.COMMITTING, CheckpointPhase.COMMITTED)
    ]
    assert [e for e in d.log if e[0] == "commit_all"] == [("commit_all", t, 1) for t in (1, 2, 3, 4)]
    assert not [e for e in d.log if e[0] == "rollback_all"]
    assert committed_counts(backend) == expected_counts(range(1, 5))


def test_run_before_start_is_refused(backend: MemoryBackend) -> None:
    d = Driver(backend)
    with pytest.raises(CheckpointError, match="before start"):
        d.batch(0)


# ---- recovery ----------------------------------------------------------------------------------
def crash_while_preparing(backend: MemoryBackend) -> None:
    """Driver 1 commits txids 1 and 2, then dies with PREPARING(3) stored and both tasks prepared."""
    d = Driver(backend).start()
    d.batch(0)
    d.batch(1)
    d.job.crash = 3
    with pytest.raises(Crash):
        d.batch(2)
    assert (stored(backend).phase, stored(backend).txid) == (CheckpointPhase.PREPARING, 3)
    assert all(backend.txids(ns).prepared == 3 for ns in NAMESPACES)


def test_recovery_of_preparing_rolls_back_every_namespace_and_stores_committed_n_minus_1(
    backend: MemoryBackend,
) -> None:
    crash_while_preparing(backend)
    d2 = Driver(backend).start()
    d2.coord.recover()
    assert d2.log == [("rollback_all", 2), ("save", CheckpointPhase.COMMITTED, 2)]
    assert (stored(backend).phase, stored(backend).txid, stored(backend).epoch) == (CheckpointPhase.COMMITTED, 2, 2)
    for ns in NAMESPACES:
        assert backend.load_prepared(ns) is None
        assert backend.txids(ns).committed == 2
    # Spark re-runs the failed batch 2 with the same offsets: it becomes txid 3 again, counted once
    report = d2.batch(2)
    assert (report.txid, report.skipped) == (3, False)
    assert committed_counts(backend) == expected_counts(range(1, 4))


def test_recovery_of_committing_rolls_forward_and_the_replayed_batch_is_skipped(
    backend: MemoryBackend,
) -> None:
    d = Driver(backend).start()
    d.batch(0)
    d.participants.crash_commit = (2, 1)
    with pytest.raises(Crash):
        d.batch(1)
    assert (stored(backend).phase, stored(backend).txid) == (CheckpointPhase.COMMITTING, 2)
    # the crash left one namespace committed and the other only prepared
    assert sorted(backend.txids(ns).committed for ns in NAMESPACES) == [1, 2]

    d2 = Driver(backend).start()
    d2.coord.recover()
    assert d2.log == [("commit_all", 2, 2), ("save", CheckpointPhase.COMMITTED, 2)]
    assert all(backend.txids(ns).committed == 2 and backend.load_prepared(ns) is None for ns in NAMESPACES)
    assert committed_counts(backend) == expected_counts([1, 2])
    report = d2.batch(1)  # Spark never saw batch 1 finish: it replays it
    assert (report.txid, report.skipped, report.attempts) == (2, True, 0)
    assert not [e for e in d2.log[2:] if e[0] in ("job", "commit_all")]
    assert d2.batch(2).txid == 3
    assert committed_counts(backend) == expected_counts([1, 2, 3])


def test_recovery_of_committing_before_any_namespace_committed(backend: MemoryBackend) -> None:
    d = Driver(backend).start()
    d.batch(0)
    d.participants.crash_commit = (2, 0)
    with pytest.raises(Crash):
        d.batch(1)
    assert all(backend.txids(ns).committed == 1 and backend.txids(ns).prepared == 2 for ns in NAMESPACES)
    d2 = Driver(backend).start()
    assert d2.batch(1).skipped
    assert d2.log[0] == ("commit_all", 2, 2)
    assert committed_counts(backend) == expected_counts([1, 2])


def test_recovery_of_committed_does_nothing_but_claim_the_record(backend: MemoryBackend) -> None:
    d = Driver(backend).start()
    d.batch(0)
    before = stored(backend)
    d2 = Driver(backend).start()
    d2.coord.recover()
    assert d2.log == [("save", CheckpointPhase.COMMITTED, 1)]
    after = stored(backend)
    assert replace(after, epoch=0, updated_ms=0) == replace(before, epoch=0, updated_ms=0)
    assert after.epoch == 2
    assert committed_counts(backend) == expected_counts([1])


def test_recovery_runs_once_per_start(backend: MemoryBackend) -> None:
    crash_while_preparing(backend)
    d2 = Driver(backend).start()
    d2.batch(2)
    d2.batch(3)
    assert [e for e in d2.log if e[0] == "rollback_all"] == [("rollback_all", 2)]


# ---- replays and txid_base -----------------------------------------------------------------------
def test_replay_of_a_committed_batch_is_skipped_without_running_the_job(backend: MemoryBackend) -> None:
    d = Driver(backend).start()
    d.batch(0)
    d.batch(1)
    n = len(d.log)
    report = d.batch(1)
    assert (report.txid, report.skipped) == (2, True)
    assert d.log[n:] == []  # no save, no job, no commit
    assert committed_counts(backend) == expected_counts([1, 2])


def test_same_query_id_keeps_txid_base_across_restarts(backend: MemoryBackend) -> None:
    d = Driver(backend).start()
    assert [d.batch(b).txid for b in range(3)] == [1, 2, 3]
    d2 = Driver(backend).start()
    assert d2.batch(2).skipped  # Spark replays its last batch after a restart: already committed
    assert d2.batch(3).txid == 4
    rec = stored(backend)
    assert (rec.query_id, rec.txid_base) == ("q1", 1)
    assert committed_counts(backend) == expected_counts(range(1, 5))


def test_new_query_id_continues_after_the_last_committed_txid(backend: MemoryBackend) -> None:
    d = Driver(backend).start()
    for b in range(3):
        d.batch(b)
    # a fresh Spark checkpoint directory: new query id, batch ids start at 0 again
    d2 = Driver(backend).start()
    r = d2.batch(0, query_id="q2")
    assert (r.txid, r.skipped) == (4, False)
    assert d2.batch(1, query_id="q2").txid == 5
    rec = stored(backend)
    assert (rec.query_id, rec.txid_base, rec.txid) == ("q2", 4, 5)
    # and the old query's ids, if that checkpoint came back, are mapped after the last commit too
    d3 = Driver(backend).start()
    assert d3.batch(3, query_id="q1").txid == 6
    assert committed_counts(backend) == expected_counts(range(1, 7))


def test_new_query_id_after_a_rolled_back_transaction_never_reuses_a_committed_txid(
    backend: MemoryBackend,
) -> None:
    crash_while_preparing(backend)  # txids 1, 2 committed; 3 was prepared and dies
    d2 = Driver(backend).start()
    r = d2.batch(0, query_id="fresh")
    assert r.txid == 3
    assert committed_counts(backend) == expected_counts([1, 2, 3])


# ---- failures and retries --------------------------------------------------------------------
def test_failed_attempts_roll_back_and_the_batch_is_retried(backend: MemoryBackend) -> None:
    d = Driver(backend, max_retries=3).start()
    d.batch(0)
    d.job.fail = {(2, 0), (2, 1)}
    n = len(d.log)
    report = d.batch(1)
    assert (report.txid, report.attempts) == (2, 3)
    assert d.log[n:] == [
        ("save", CheckpointPhase.PREPARING, 2),
        ("job", 2, 0),
        ("rollback_all", 1),
        ("save", CheckpointPhase.COMMITTED, 1),
        ("save", CheckpointPhase.PREPARING, 2),
        ("job", 2, 1),
        ("rollback_all", 1),
        ("save", CheckpointPhase.COMMITTED, 1),
        ("save", CheckpointPhase.PREPARING, 2),
        ("job", 2, 2),
        ("save", CheckpointPhase.COMMITTING, 2),
        ("commit_all", 2, 1),
        ("save", CheckpointPhase.COMMITTED, 2),
    ]
    assert committed_counts(backend) == expected_counts([1, 2])  # the failed attempts left nothing


def test_rollback_discards_what_a_failed_attempt_prepared(backend: MemoryBackend) -> None:
    d = Driver(backend, max_retries=1).start()
    d.job.fail = {(1, 0)}
    seen: list[Any] = []
    original = d.participants.rollback_all

    def rollback_and_look(epoch: int, after_first: Callable[[], None] | None = None) -> None:
        seen.append(backend.txids(NAMESPACES[0]).prepared)  # task 0 had prepared txid 1
        original(epoch, after_first)
        seen.append(backend.txids(NAMESPACES[0]).prepared)

    d.participants.rollback_all = rollback_and_look  # type: ignore[method-assign]
    d.batch(0)
    assert seen == [1, None]
    assert committed_counts(backend) == expected_counts([1])


def test_too_many_failures_stop_with_a_topology_error_naming_component_task_and_txid(
    backend: MemoryBackend,
) -> None:
    d = Driver(backend, max_retries=2).start()
    d.batch(0)
    d.job.fail_always = True
    with pytest.raises(TopologyError) as info:
        d.batch(1)
    err = info.value
    assert (err.topology, err.component, err.task, err.txid) == (TOPO, COMPONENT, 1, 2)
    assert err.remote_traceback is not None and "ValueError: bad word (txid 2)" in err.remote_traceback
    text = str(err)
    for part in (
        "'wc'",
        "component 'count' task 1",
        "txid 2",
        "3 times",
        "weir.batch.max.retries=2",
        "ValueError: bad word",
        "original traceback",
        'File "bolt.py"',
    ):
        assert part in text
    assert [e for e in d.log if e[0] == "job"] == [("job", 1, 0), ("job", 2, 0), ("job", 2, 1), ("job", 2, 2)]
    rec = stored(backend)
    assert (rec.phase, rec.txid) == (CheckpointPhase.COMMITTED, 1)
    assert all(backend.load_prepared(ns) is None for ns in NAMESPACES)
    assert committed_counts(backend) == expected_counts([1])


def test_max_retries_zero_means_one_attempt_and_other_failures_are_counted(backend: MemoryBackend) -> None:
    d = Driver(backend, max_retries=0).start()

    def job(txid: int, epoch: int, attempt: int) -> JobOutcome:
        d.log.append(("job", txid, attempt))
        return JobOutcome(failures=[TaskFailure("split", 0, "KeyError: 'x'"), TaskFailure("count", 1, "E")])

    with pytest.raises(TopologyError, match=r"component 'split' task 0 failed txid 1 1 times") as info:
        d.coord.run_batch("q1", 0, job)
    assert "(1 other task(s) failed too)" in str(info.value)
    assert info.value.remote_traceback is None
    assert [e for e in d.log if e[0] == "job"] == [("job", 1, 0)]


def test_a_later_start_recovers_after_a_failed_run(backend: MemoryBackend) -> None:
    d = Driver(backend, max_retries=0).start()
    d.job.fail_always = True
    with pytest.raises(TopologyError):
        d.batch(0)
    d2 = Driver(backend).start()
    assert d2.batch(0).txid == 1
    assert committed_counts(backend) == expected_counts([1])


# ---- fencing -----------------------------------------------------------------------------------
def test_second_start_fences_the_first_driver_before_it_runs_anything(backend: MemoryBackend) -> None:
    d1 = Driver(backend).start()
    d1.batch(0)
    d2 = Driver(backend)
    assert d2.coord.start() == 2
    n = len(d1.log)
    with pytest.raises(FencedError, match=r"another driver .*\(epoch 1\) stops and commits nothing"):
        d1.batch(1)
    assert d1.log[n:] == []  # no save, no job, no commit
    assert (stored(backend).txid, stored(backend).epoch) == (1, 1)
    assert d2.batch(1).txid == 2
    assert committed_counts(backend) == expected_counts([1, 2])


def test_driver_fenced_during_its_job_commits_nothing(backend: MemoryBackend) -> None:
    d1 = Driver(backend).start()
    d1.batch(0)
    d2 = Driver(backend)
    d1.job.on_run = d2.start  # the new driver takes over while the old one's tasks run
    with pytest.raises(FencedError):
        d1.batch(1)
    assert ("save", CheckpointPhase.COMMITTING, 2) not in d1.log
    assert not [e for e in d1.log if e == ("commit_all", 2, 1)]
    assert committed_counts(backend) == expected_counts([1])
    assert all(backend.txids(ns).prepared == 2 for ns in NAMESPACES)  # left for recovery

    assert d2.batch(1).txid == 2  # recovery rolls the stale PREPARING(2) back, then redoes it
    assert d2.log[:2] == [("rollback_all", 2), ("save", CheckpointPhase.COMMITTED, 1)]
    assert committed_counts(backend) == expected_counts([1, 2])
    # a late task of the fenced driver cannot overwrite the new driver's namespaces
    late = TransactionalKeyValueState(backend, NAMESPACES[0], epoch=1)
    late.put("late", 1)
    with pytest.raises(FencedError):
        late.prepare_commit(3)


# ---- parallelism and corrupt records ---------------------------------------------------------------
def test_changed_parallelism_of_a_stateful_component_is_refused_with_a_way_out(
    backend: MemoryBackend,
) -> None:
    d1 = Driver(backend).start()
    d1.batch(0)
    d2 = Driver(backend, parallelism={COMPONENT: 3})
    with pytest.raises(ConfigError) as info:
        d2.coord.start()
    text = str(info.value)
    for part in (
        "'wc'",
        "'count'",
        "parallelism 3",
        "written by 2 tasks",
        "wc-count-0..1",
        "Run it with parallelism 2",
        "weir state rescale --topology wc --component count --to 3",
        "new topology name",
    ):
        assert part in text
    # the refused start took no epoch: the running driver is not fenced
    assert d1.batch(1).txid == 2


def test_added_stateful_component_is_recorded_with_its_parallelism(backend: MemoryBackend) -> None:
    Driver(backend).start().batch(0)
    d2 = Driver(backend, parallelism={COMPONENT: 2, "totals": 1}).start()
    d2.batch(1)
    assert dict(stored(backend).parallelism) == {COMPONENT: 2, "totals": 1}
    with pytest.raises(ConfigError, match="'totals' has parallelism 4"):
        Driver(backend, parallelism={"totals": 4}).start()


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"\xff\xfe",
        b'{"phase": "COMMITTED"}',
        b'{"txid": 1, "phase": "DONE"}',
        b'{"txid": "one", "phase": "COMMITTED"}',
        b"[1, 2]",
        b'{"txid": 1, "phase": "COMMITTED", "parallelism": [1]}',
        b'{"txid": 1, "phase": "COMMITTED", "parallelism": {"count": "x"}}',
        b'{"txid": 1, "phase": "COMMITTED", "txid_base": "x"}',
    ],
)
def test_corrupt_record_raises_checkpoint_error_naming_the_namespace(backend: MemoryBackend, data: bytes) -> None:
    backend.write_direct(checkpoint_namespace(TOPO), {RECORD_KEY: data}, None)
    with pytest.raises(CheckpointError, match=r"'\$checkpointspout-wc'.*corrupt.*weir state inspect"):
        Driver(backend).start()


# ---- crash points ------------------------------------------------------------------------------
CRASH_SCRIPT = textwrap.dedent(
    """
    import sys
    from weir.checkpoint.faults import crash_point
    point, txid, task = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    crash_point(point, txid, task=None if task == "-" else int(task))
    print("alive")
    """
)


def _clean_env(crash_at: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_CRASH")}
    if crash_at is not None:
        env["WEIR_CRASH_AT"] = crash_at
    return env


@pytest.mark.crash
@pytest.mark.parametrize(
    ("crash_at", "point", "txid", "task", "dies"),
    [
        ("after_preparing@3", "after_preparing", 3, None, True),
        ("after_preparing@3", "after_preparing", 4, None, False),
        ("after_preparing@3", "after_committing", 3, None, False),
        ("between_prepares@5@1", "between_prepares", 5, 1, True),
        ("between_prepares@5@1", "between_prepares", 5, 0, False),
        ("during_processing@2", "during_processing", 2, 0, True),
        (None, "after_committed", 1, None, False),
        ("", "after_committed", 1, None, False),
    ],
)
def test_crash_point_kills_its_own_process_group_only_when_point_txid_and_task_match(
    crash_at: str | None, point: str, txid: int, task: int | None, dies: bool
) -> None:
    assert point in POINTS
    proc = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, point, str(txid), "-" if task is None else str(task)],
        env=_clean_env(crash_at),
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,  # killpg must not reach pytest
    )
    if dies:
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        assert "alive" not in proc.stdout
    else:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "alive"


DRIVER_SCRIPT = textwrap.dedent(
    """
    import sys
    from weir.state.config import parse_provider_config
    from weir.state.factory import open_backend
    from tests.unit.test_coordinator import Driver

    db, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    cfg = parse_provider_config(
        {"topology.state.provider": "sqlite", "topology.state.provider.config": {"url": "sqlite:///" + db}}
    )
    backend = open_backend(cfg, fresh=True)
    d = Driver(backend).start()
    for batch_id in range(first, last + 1):
        d.batch(batch_id)
    backend.close()
    print("done")
    """
)


def run_driver(db: Path, first: int, last: int, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    """One driver process over the SQLite store: runs Spark batches ``first..last`` of query q1."""
    return subprocess.run(
        [sys.executable, "-c", DRIVER_SCRIPT, str(db), str(first), str(last)],
        env=_clean_env(crash_at),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )


def read_sqlite(db: Path) -> tuple[dict[str, int], CheckPointState]:
    from weir.state.config import parse_provider_config
    from weir.state.factory import open_backend

    cfg = parse_provider_config(
        {"topology.state.provider": "sqlite", "topology.state.provider.config": {"url": f"sqlite:///{db}"}}
    )
    backend = open_backend(cfg, fresh=True)
    try:
        for ns in NAMESPACES:
            assert backend.load_prepared(ns) is None, ns
        return committed_counts(backend), stored(backend)
    finally:
        backend.close()


# the driver-side points, and where Spark restarts: the batch of txid 2 (batch 1) was not committed
# by Spark, so it is replayed (and skipped when weir had already committed it)
DRIVER_POINTS = [
    "after_preparing",
    "after_prepared",
    "after_committing",
    "between_commits",
    "after_committed",
]


@pytest.mark.crash
@pytest.mark.parametrize("point", DRIVER_POINTS)
def test_driver_killed_at_each_step_resumes_to_the_exact_counts(tmp_path: Path, point: str) -> None:
    db = tmp_path / "state.db"
    first = run_driver(db, 0, 3, crash_at=f"{point}@2")
    assert first.returncode == -signal.SIGKILL, first.stderr
    assert "done" not in first.stdout
    again = run_driver(db, 1, 3)
    assert again.returncode == 0, again.stderr
    counts, rec = read_sqlite(db)
    assert counts == expected_counts(range(1, 5))
    assert (rec.phase, rec.txid, rec.epoch) == (CheckpointPhase.COMMITTED, 4, 2)


@pytest.mark.crash
@pytest.mark.parametrize("left_by", ["after_prepared", "after_committing", "between_commits"])
def test_driver_killed_during_recovery_resumes_to_the_exact_counts(tmp_path: Path, left_by: str) -> None:
    db = tmp_path / "state.db"
    assert run_driver(db, 0, 3, crash_at=f"{left_by}@2").returncode == -signal.SIGKILL
    second = run_driver(db, 1, 3, crash_at="during_recovery@2")
    assert second.returncode == -signal.SIGKILL, second.stderr
    third = run_driver(db, 1, 3)
    assert third.returncode == 0, third.stderr
    counts, rec = read_sqlite(db)
    assert counts == expected_counts(range(1, 5))
    assert (rec.phase, rec.txid, rec.epoch) == (CheckpointPhase.COMMITTED, 4, 3)


def test_state_error_is_not_swallowed_by_the_coordinator(backend: MemoryBackend) -> None:
    """A namespace that refuses a commit (misuse) surfaces; the record stays COMMITTING for recovery."""
    d = Driver(backend).start()

    def job(txid: int, epoch: int, attempt: int) -> JobOutcome:
        return JobOutcome()  # claims success but prepared nothing

    with pytest.raises(StateError, match="cannot commit txid 1"):
        d.coord.run_batch("q1", 0, job)
    assert (stored(backend).phase, stored(backend).txid) == (CheckpointPhase.COMMITTING, 1)
