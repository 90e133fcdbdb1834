"""One task of one micro-batch without Spark: ``run_task`` / ``run_spout_task`` are plain generators.

Stateful tasks use a real SQLite store (``StateFactory.from_url("sqlite:///...")``), so "prepared",
"committed" and "unchanged" are read back from the file, not from the bolt.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from weir._util import stable_hash
from weir.runtime.spark.storm.participants import StatefulParticipants
from weir.runtime.spark.storm.task import TaskSpec, run_spout_task, run_task
from weir.state.factory import KeyValueStateProvider, StateFactory, close_backends
from weir.state.kv import TransactionalKeyValueState
from weir.topology import (
    BasicBolt,
    BasicOutputCollector,
    Bolt,
    FailedTuple,
    Fields,
    OutputCollector,
    Spout,
    StatefulBolt,
    TopologyContext,
    Tuple,
    Values,
)

TOPO = "wc"
TXID = 5
REPO = Path(__file__).resolve().parents[2]
#: what the hooks of components saw, across instances (StatefulParticipants builds fresh ones)
CALLS: list[tuple[Any, ...]] = []


# ---- components ------------------------------------------------------------------------------
class Lengths(Bolt):
    """Emits (word, len) for each word; ``fail_on`` words are failed, ``raise_on`` words raise."""

    def __init__(self, fail_on: str = "", raise_on: str = "") -> None:
        self.fail_on = fail_on
        self.raise_on = raise_on

    def execute(self, tup: Tuple) -> None:
        word = tup.get_string_by_field("word")
        if word == self.raise_on:
            raise ValueError(f"cannot measure {word!r}")
        if word == self.fail_on:
            self.collector.fail(tup, f"{word!r} is too short")
            return
        self.collector.emit(Values(word, len(word)), anchors=[tup])
        if len(word) > 3:
            self.collector.emit_direct(1, Values(word), stream="long")
        self.collector.ack(tup)


class Upper(BasicBolt):
    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        if tup[0] == "bad":
            raise FailedTuple("no bad words")
        if tup[0] == "silent":
            raise FailedTuple()
        collector.emit([tup[0].upper()])


class WordCount(StatefulBolt):
    """Storm's word count; records its lifecycle in :data:`CALLS` with the state's prepared txid."""

    def __init__(self, raise_on: str = "", emit_lock: bool = False) -> None:
        self.raise_on = raise_on
        self.emit_lock = emit_lock

    def prepare(self, conf: Mapping[str, Any], context: TopologyContext, collector: OutputCollector) -> None:
        super().prepare(conf, context, collector)
        self.task = context.task_index
        CALLS.append(("prepare", self.task))

    def init_state(self, state: Any) -> None:
        self.counts = state
        CALLS.append(("init_state", self.task))

    def execute(self, tup: Tuple) -> None:
        word = tup.get_string(0)
        if word == self.raise_on:
            raise KeyError(word)
        count = self.counts.get(word, 0) + 1
        self.counts.put(word, count)
        self.collector.emit(Values(word, threading.Lock() if self.emit_lock else count), anchors=[tup])
        self.collector.ack(tup)
        CALLS.append(("execute", self.task, word))

    def pre_prepare(self, txid: int) -> None:
        CALLS.append(("pre_prepare", self.task, txid, self.counts.prepared_txid))

    def pre_commit(self, txid: int) -> None:
        CALLS.append(("pre_commit", self.task, txid))

    def pre_rollback(self) -> None:
        CALLS.append(("pre_rollback", self.task))

    def cleanup(self) -> None:
        CALLS.append(("cleanup", self.task, self.counts.prepared_txid))


class PlainCount(StatefulBolt):
    """A stateful bolt without hooks, in seed 000's basic shape (inputs acked automatically)."""

    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute(self, tup: Tuple, collector: Any) -> None:
        self.counts.put(tup[0], self.counts.get(tup[0], 0) + 1)


class IntSpout(Spout):
    """Rows ``(name, number-as-text)``; ``to_values`` parses the number."""

    def create_stream(self, spark: Any, context: Any) -> Any:
        raise NotImplementedError

    def to_values(self, row: Any) -> tuple[Any, ...]:
        name, number = row
        return (name, int(number))


# ---- helpers ---------------------------------------------------------------------------------
def spec_for(
    comp: Any,
    *,
    cid: str = "count",
    outputs: dict[str, Fields] | None = None,
    provider: Any = None,
    deadletter: bool = False,
    parallelism: int = 2,
    consumed: frozenset[str] | None = None,
) -> TaskSpec:
    outputs = outputs if outputs is not None else {"default": Fields("word", "count")}
    return TaskSpec(
        topology=TOPO,
        component_id=cid,
        component=comp,
        parallelism=parallelism,
        outputs=outputs,
        input_fields={("split", "default"): Fields("word")},
        component_tasks={"split": 1, cid: parallelism},
        provider=provider,
        deadletter=deadletter,
        stateful=isinstance(comp, StatefulBolt),
        consumed_streams=frozenset(outputs) if consumed is None else consumed,
    )


def words(*ws: str) -> list[tuple[str, str, tuple[str], int]]:
    return [("split", "default", (w,), 0) for w in ws]


def run(
    spec: TaskSpec,
    recs: Iterable[tuple[Any, ...]],
    *,
    task: int = 0,
    txid: int = TXID,
    epoch: int | None = None,
) -> tuple[list[tuple[Any, ...]], dict[str, Any], list[dict[str, Any]]]:
    """(emitted "T" records, the report, dead letters) of one task; the report comes last."""
    out = list(run_task(spec, task, txid, epoch, recs))
    assert out[-1][0] == "R", out
    assert [r for r in out if r[0] == "R"] == [out[-1]]
    return [r for r in out if r[0] == "T"], out[-1][1], [r[1] for r in out if r[0] == "D"]


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    CALLS.clear()
    yield
    CALLS.clear()
    close_backends()


@pytest.fixture
def provider(tmp_path: Path) -> KeyValueStateProvider:
    return StateFactory.from_url("sqlite:///" + str(tmp_path / "state.db"))


def committed(provider: KeyValueStateProvider, ns: str) -> dict[Any, Any]:
    return dict(TransactionalKeyValueState(provider.backend, ns))


# ---- plain bolts -------------------------------------------------------------------------------
def test_bolt_emits_records_and_reports_counts() -> None:
    spec = spec_for(Lengths(), cid="len", outputs={"default": Fields("word", "n"), "long": Fields("word")})
    tuples, rep, dead = run(spec, words("a", "storm", "bb"), task=1)
    assert tuples == [
        ("T", "default", ("a", 1), 1, None),
        ("T", "default", ("storm", 5), 1, None),
        ("T", "long", ("storm",), 1, 1),
        ("T", "default", ("bb", 2), 1, None),
    ]
    assert dead == []
    assert rep.ok is True
    assert (rep.component, rep.task, rep.txid, rep.pid) == ("len", 1, TXID, os.getpid())
    assert (rep.n_in, rep.n_out, rep.failed, rep.acked, rep.errors) == (3, 4, 0, 3, [])
    assert rep.ms >= 0


def test_a_task_emits_runs_of_tuples_as_blocks_with_direct_emits_in_their_place() -> None:
    from weir.runtime.spark.storm.task import _BLOCK, run_task_blocks

    spec = spec_for(Lengths(), cid="len", outputs={"default": Fields("word", "n"), "long": Fields("word")})
    ws = ["a", "bb", "storm", "c"] + [str(i % 100) for i in range(_BLOCK + 5)]  # only "storm" is long
    blocks = [("split", "default", [(w,) for w in ws[:3]], 0), ("split", "default", [(w,) for w in ws[3:]], 1)]
    out = list(run_task_blocks(spec, 1, TXID, None, blocks))
    assert out[-1][0] == "R" and out[-1][1].ok and out[-1][1].n_in == len(ws)
    recs = out[:-1]
    # the run before the direct emit ends where it was made; the direct emit follows it
    assert recs[0] == ("B", "default", [("a", 1), ("bb", 2), ("storm", 5)], 1)
    assert recs[1] == ("T", "long", ("storm",), 1, 1)
    assert {r[0] for r in recs[2:]} == {"B"} and all(len(r[2]) <= _BLOCK for r in recs)
    flat = [v for r in recs for v in (r[2] if r[0] == "B" else [r[2]])]
    expected = [(w, len(w)) for w in ws]
    expected.insert(3, ("storm",))
    assert flat == expected  # every tuple once, in emit order
    # the record-at-a-time form gives the same tuples, one record each
    tuples, rep, _ = run(spec, words(*ws), task=1)
    assert [t[2] for t in tuples] == flat and rep.n_out == len(flat)


def test_routing_a_block_keeps_each_consumer_tasks_tuples_in_order_with_their_source_task() -> None:
    from weir.runtime.spark.storm.batch import key_for_grouping
    from weir.runtime.spark.storm.task import records_of
    from weir.topology import TopologyBuilder

    class Src(Spout):
        def declare_output_fields(self, declarer: Any) -> None:
            declarer.declare(Fields("word"))

        def create_stream(self, spark: Any, context: Any) -> Any:  # pragma: no cover - never called
            raise NotImplementedError

    b = TopologyBuilder()
    b.set_spout("split", Src())
    b.set_bolt("count", PlainCount(), 3).fields_grouping("split", Fields("word"))
    b.set_bolt("all", PlainCount(), 2).all_grouping("split")
    topo = b.create_topology()
    ws = [f"w{i % 40}" for i in range(5000)]
    produced = [("B", "default", [(w,) for w in ws[:3000]], 4), ("B", "other", [("x",)], 4),
                ("T", "default", (ws[3000],), 4, None), ("B", "default", [(w,) for w in ws[3001:]], 4)]  # fmt: skip
    fields = key_for_grouping(topo.components["count"].inputs[0], [0], 3)
    routed: dict[int, list[Any]] = {}
    for task, chunk in fields(4, iter(produced)):
        assert sum(len(b[2]) for b in chunk) <= 2048  # a chunk is at most _SHUFFLE_CHUNK tuples
        routed.setdefault(task, []).extend(records_of(chunk))
    assert sum(len(v) for v in routed.values()) == len(ws)
    for task, recs in routed.items():
        assert {(r[0], r[1], r[3]) for r in recs} == {("split", "default", 4)}
        mine = [w for w in ws if stable_hash(w) % 3 == task]
        assert [r[2][0] for r in recs] == mine
    every = key_for_grouping(topo.components["all"].inputs[0], [], 2)
    for_all: dict[int, list[Any]] = {}
    for task, chunk in every(0, iter(produced)):
        for_all.setdefault(task, []).extend(r[2][0] for r in records_of(chunk))
    assert for_all == {0: ws, 1: ws}


def test_tuples_on_streams_nobody_consumes_are_counted_not_shipped() -> None:
    spec = spec_for(
        Lengths(),
        cid="len",
        outputs={"default": Fields("word", "n"), "long": Fields("word")},
        consumed=frozenset({"long"}),
    )
    tuples, rep, _ = run(spec, words("a", "storm"))
    assert tuples == [("T", "long", ("storm",), 0, 1)]
    assert (rep.ok, rep.n_out) == (True, 3)


def test_bolt_with_no_input_still_reports() -> None:
    _, rep, _ = run(spec_for(Lengths(), cid="len"), [])
    assert (rep.ok, rep.n_in, rep.n_out) == (True, 0, 0)


def test_raising_bolt_reports_component_task_error_and_traceback() -> None:
    spec = spec_for(Lengths(raise_on="boom"), cid="len", outputs={"default": Fields("w", "n"), "long": Fields("w")})
    tuples, rep, dead = run(spec, words("ok", "boom", "never"), task=1)
    assert tuples == [("T", "default", ("ok", 2), 1, None)]  # emitted before the failure
    assert dead == []
    assert rep.ok is False
    assert (rep.component, rep.task, rep.txid) == ("len", 1, TXID)
    assert rep.error == "ValueError in execute of tuple ['boom']: cannot measure 'boom'"
    assert rep.error_type == "ValueError"
    assert "Traceback" in rep.traceback and "raise ValueError" in rep.traceback
    assert (rep.n_in, rep.fenced) == (2, False)


@pytest.mark.parametrize("stage", ["prepare", "init_state"])
def test_failure_before_execute_names_the_stage(provider: KeyValueStateProvider, stage: str) -> None:
    class Bad(WordCount):
        def prepare(self, conf: Any, context: Any, collector: Any) -> None:
            super().prepare(conf, context, collector)
            if stage == "prepare":
                raise RuntimeError("no config")

        def init_state(self, state: Any) -> None:
            raise RuntimeError("no state")

    _, rep, _ = run(spec_for(Bad(), provider=provider), words("a"))
    assert rep.ok is False
    assert rep.error.startswith(f"RuntimeError in {stage}: ")
    assert rep.n_in == 0


def test_fail_without_dead_letter_fails_the_task() -> None:
    spec = spec_for(Lengths(fail_on="x"), cid="len", outputs={"default": Fields("w", "n"), "long": Fields("w")})
    tuples, rep, dead = run(spec, words("ab", "x", "cd"))
    assert tuples == [("T", "default", ("ab", 2), 0, None)]
    assert dead == []
    assert rep.ok is False
    assert rep.error_type == "TopologyError"
    assert "tuple ['x'] failed: 'x' is too short" in rep.error
    assert rep.n_in == 2


def test_fail_with_dead_letter_routes_the_tuple_and_continues() -> None:
    spec = spec_for(
        Lengths(fail_on="x", raise_on="boom"),
        cid="len",
        outputs={"default": Fields("w", "n"), "long": Fields("w")},
        deadletter=True,
    )
    tuples, rep, dead = run(spec, words("ab", "x", "boom", "cd"), task=1)
    assert [t[2] for t in tuples] == [("ab", 2), ("cd", 2)]
    assert rep.ok is True
    assert (rep.n_in, rep.n_out, rep.failed, rep.acked) == (4, 2, 2, 2)
    assert dead[0] == {
        "topology": TOPO,
        "component": "len",
        "task": 1,
        "txid": TXID,
        "source_component": "split",
        "source_stream": "default",
        "source_task": 0,
        "values": ["x"],
        "error": "'x' is too short",
    }
    assert dead[1]["values"] == ["boom"]
    assert dead[1]["error"].startswith("ValueError: cannot measure 'boom'\nTraceback")


def test_dead_letter_values_that_are_not_json_become_text() -> None:
    spec = spec_for(
        Lengths(fail_on="x"),
        cid="len",
        deadletter=True,
        outputs={"default": Fields("w", "n"), "long": Fields("w")},
    )
    spec.input_fields[("split", "default")] = Fields("word", "tags")
    _, rep, dead = run(spec, [("split", "default", ("x", {1}), 0)])
    assert dead[0]["values"] == ["x", "{1}"]
    assert rep.ok is True


# ---- basic bolts -------------------------------------------------------------------------------
def test_basic_bolt_emits_and_acks_automatically() -> None:
    spec = spec_for(Upper(), cid="upper", outputs={"default": Fields("word")})
    tuples, rep, _ = run(spec, words("a", "b"))
    assert [t[2] for t in tuples] == [("A",), ("B",)]
    assert (rep.ok, rep.acked, rep.n_out) == (True, 2, 2)


def test_basic_bolt_failed_tuple_fails_the_task() -> None:
    spec = spec_for(Upper(), cid="upper", outputs={"default": Fields("word")})
    tuples, rep, _ = run(spec, words("a", "bad", "c"))
    assert [t[2] for t in tuples] == [("A",)]
    assert rep.ok is False
    assert "tuple ['bad'] failed: no bad words" in rep.error


def test_basic_bolt_failed_tuple_with_dead_letter() -> None:
    spec = spec_for(Upper(), cid="upper", outputs={"default": Fields("word")}, deadletter=True)
    tuples, rep, dead = run(spec, words("a", "bad", "silent", "c"))
    assert [t[2] for t in tuples] == [("A",), ("C",)]
    assert [(d["values"], d["error"]) for d in dead] == [
        (["bad"], "no bad words"),
        (["silent"], "FailedTuple"),
    ]
    assert (rep.ok, rep.failed, rep.acked) == (True, 2, 2)


# ---- stateful bolts ----------------------------------------------------------------------------
def test_stateful_task_prepares_its_namespace_and_leaves_committed_data_alone(
    provider: KeyValueStateProvider,
) -> None:
    ns = f"{TOPO}-count-1"
    seed = provider.new_state(ns)
    seed.put("a", 10)
    seed.prepare_commit(4)
    seed.commit(4)

    tuples, rep, _ = run(spec_for(WordCount(), provider=provider), words("a", "b", "a"), task=1)
    assert rep.ok is True
    assert [t[2] for t in tuples] == [("a", 11), ("b", 1), ("a", 12)]
    txids = provider.backend.txids(ns)
    assert (txids.prepared, txids.committed) == (TXID, 4)
    assert committed(provider, ns) == {"a": 10}  # nothing visible before the coordinator commits
    assert provider.backend.count(f"{TOPO}-count-0") == 0  # other tasks' namespaces untouched

    provider.new_state(ns).commit(TXID)
    assert committed(provider, ns) == {"a": 12, "b": 1}
    # the next batch's task starts from the committed state
    tuples, rep, _ = run(spec_for(WordCount(), provider=provider), words("b"), task=1, txid=TXID + 1)
    assert tuples == [("T", "default", ("b", 2), 1, None)]
    assert provider.backend.txids(ns).prepared == TXID + 1


def test_lifecycle_and_pre_prepare_runs_before_prepare_commit(provider: KeyValueStateProvider) -> None:
    run(spec_for(WordCount(), provider=provider), words("x", "y"))
    assert CALLS == [
        ("prepare", 0),
        ("init_state", 0),
        ("execute", 0, "x"),
        ("execute", 0, "y"),
        ("pre_prepare", 0, TXID, None),  # the state is not prepared yet when the hook runs
        ("cleanup", 0, TXID),  # and is prepared right after it
    ]


def test_failing_stateful_task_prepares_nothing(provider: KeyValueStateProvider) -> None:
    _, rep, _ = run(spec_for(WordCount(raise_on="boom"), provider=provider), words("a", "boom"), task=1)
    assert rep.ok is False
    assert (rep.component, rep.task) == ("count", 1)
    assert rep.error == "KeyError in execute of tuple ['boom']: 'boom'"
    assert "raise KeyError" in rep.traceback
    assert provider.backend.txids(f"{TOPO}-count-1").prepared is None
    assert provider.backend.load_prepared(f"{TOPO}-count-1") is None
    assert not [c for c in CALLS if c[0] in ("pre_prepare", "cleanup")]


def test_stateful_task_with_dead_letters_still_prepares(provider: KeyValueStateProvider) -> None:
    _, rep, dead = run(spec_for(WordCount(raise_on="boom"), provider=provider, deadletter=True), words("a", "boom"))
    assert (rep.ok, rep.failed) == (True, 1)
    assert dead[0]["error"].startswith("KeyError: 'boom'")
    assert provider.backend.txids(f"{TOPO}-count-0").prepared == TXID
    provider.new_state(f"{TOPO}-count-0").commit(TXID)
    assert committed(provider, f"{TOPO}-count-0") == {"a": 1}


def test_stateful_task_of_a_fenced_driver_reports_fenced(provider: KeyValueStateProvider) -> None:
    ns = f"{TOPO}-count-0"
    provider.backend.discard_prepared(ns, 3)  # a newer driver (epoch 3) has written here
    _, rep, _ = run(spec_for(WordCount(), provider=provider), words("a"), epoch=2)
    assert (rep.ok, rep.fenced, rep.error_type) == (False, True, "FencedError")
    assert provider.backend.load_prepared(ns) is None


def test_unpicklable_emitted_value_fails_naming_component_and_task(provider: KeyValueStateProvider) -> None:
    tuples, rep, _ = run(spec_for(WordCount(emit_lock=True), provider=provider), words("a"), task=1)
    assert tuples == []
    assert rep.ok is False
    assert rep.error_type == "TopologyError"
    assert "topology 'wc', component 'count', task 1: emitted a value of type lock" in rep.error
    assert "cannot be serialized to the next component" in rep.error
    assert provider.backend.txids(f"{TOPO}-count-1").prepared is None


# ---- spouts ------------------------------------------------------------------------------------
def spout_spec(deadletter: bool = False) -> TaskSpec:
    return TaskSpec(TOPO, "numbers", IntSpout(), 1, {"default": Fields("name", "n")}, deadletter=deadletter)


def test_spout_task_turns_rows_into_tuples() -> None:
    out = list(run_spout_task(spout_spec(), 0, TXID, [("a", "1"), ("b", "22")]))
    assert out[:2] == [("T", "default", ("a", 1), 0, None), ("T", "default", ("b", 22), 0, None)]
    rep = out[-1][1]
    assert (out[-1][0], rep.ok, rep.component, rep.n_in, rep.n_out, rep.failed) == (
        "R",
        True,
        "numbers",
        2,
        2,
        0,
    )


def test_malformed_spout_record_fails_the_task() -> None:
    out = list(run_spout_task(spout_spec(), 0, TXID, [("a", "1"), ("b", "two"), ("c", "3")]))
    assert [r[0] for r in out] == ["T", "R"]
    rep = out[-1][1]
    assert rep.ok is False
    assert rep.error.startswith("malformed input record ('b', 'two'): ValueError: invalid literal")
    assert "int(number)" in rep.traceback


def test_malformed_spout_record_goes_to_the_dead_letter_sink() -> None:
    out = list(run_spout_task(spout_spec(deadletter=True), 0, TXID, [("a", "1"), ("b", "two"), ("c", "3")]))
    assert [r[0] for r in out] == ["T", "D", "T", "R"]
    dead = out[1][1]
    assert (dead["component"], dead["txid"], dead["values"], dead["source_component"]) == (
        "numbers",
        TXID,
        ["b", "two"],
        None,
    )
    assert dead["error"].startswith("malformed input record: ValueError")
    assert (out[-1][1].ok, out[-1][1].failed, out[-1][1].n_in) == (True, 1, 2)


# ---- driver-side participants ------------------------------------------------------------------
def test_participants_run_hooks_on_fresh_instances_then_commit(provider: KeyValueStateProvider) -> None:
    spec = spec_for(WordCount(), provider=provider)
    for task in (0, 1):
        run(spec, words(f"w{task}"), task=task)
    CALLS.clear()
    parts = StatefulParticipants([spec], provider, parallel=False)
    assert parts.namespaces() == [f"{TOPO}-count-0", f"{TOPO}-count-1"]
    marks: list[str] = []
    parts.commit_all(TXID, 1, after_first=lambda: marks.append("first done"))
    assert marks == ["first done"]
    assert CALLS == [("prepare", 0), ("pre_commit", 0, TXID), ("prepare", 1), ("pre_commit", 1, TXID)]
    assert committed(provider, f"{TOPO}-count-0") == {"w0": 1}
    assert committed(provider, f"{TOPO}-count-1") == {"w1": 1}
    parts.commit_all(TXID, 1)  # idempotent (recovery may commit again)
    assert provider.backend.txids(f"{TOPO}-count-1").committed == TXID


def test_participants_roll_back_in_parallel(provider: KeyValueStateProvider) -> None:
    spec = spec_for(WordCount(), provider=provider, parallelism=3)
    for task in range(3):
        run(spec, words("a"), task=task)
    CALLS.clear()
    StatefulParticipants([spec], provider, parallel=True).rollback_all(2)
    assert sorted(c for c in CALLS if c[0] == "pre_rollback") == [("pre_rollback", t) for t in range(3)]
    for task in range(3):
        ns = f"{TOPO}-count-{task}"
        assert provider.backend.load_prepared(ns) is None
        assert provider.backend.txids(ns).epoch == 2
        assert committed(provider, ns) == {}


def test_participants_skip_building_instances_without_hooks(provider: KeyValueStateProvider) -> None:
    spec = spec_for(PlainCount(), provider=provider, parallelism=1)
    run(spec, words("a"))
    parts = StatefulParticipants([spec], provider, parallel=False)
    parts._blobs.clear()  # no hook is overridden, so no instance may be unpickled
    parts.commit_all(TXID, 1)
    assert committed(provider, f"{TOPO}-count-0") == {"a": 1}


# ---- executor-side crash points ------------------------------------------------------------------
TASK_SCRIPT = textwrap.dedent(
    """
    import sys
    from weir.runtime.spark.storm.task import run_task
    from weir.state.factory import StateFactory
    from tests.unit.test_task_runner import WordCount, spec_for, words

    provider = StateFactory.from_url("sqlite:///" + sys.argv[1])
    spec = spec_for(WordCount(), provider=provider)
    for task in (0, 1):
        out = list(run_task(spec, task, 5, 1, words("a", "b")))
        assert out[-1][1].ok, out[-1]
        print("task", task, "done", flush=True)
    """
)


@pytest.mark.crash
@pytest.mark.parametrize(
    ("crash_at", "done", "prepared"),
    [
        ("between_prepares@5@0", [], [5, None]),  # task 0 prepared, task 1 never ran
        ("between_prepares@5@1", ["task 0 done"], [5, 5]),
        ("during_processing@5@1", ["task 0 done"], [5, None]),
        ("during_processing@4", ["task 0 done", "task 1 done"], [5, 5]),  # another txid: no crash
    ],
)
def test_task_crash_points(tmp_path: Path, crash_at: str, done: list[str], prepared: list[int | None]) -> None:
    db = tmp_path / "state.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_CRASH")}
    env["WEIR_CRASH_AT"] = crash_at
    proc = subprocess.run(
        [sys.executable, "-c", TASK_SCRIPT, str(db)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )
    assert proc.returncode == (0 if len(done) == 2 else -signal.SIGKILL), proc.stderr
    assert proc.stdout.splitlines() == done
    provider = StateFactory.from_url("sqlite:///" + str(db))
    assert [provider.backend.txids(f"{TOPO}-count-{t}").prepared for t in (0, 1)] == prepared
