"""Bad input and misuse: failing handlers, damaged checkpoints, wrong configuration."""

from __future__ import annotations

from typing import Any

import pytest

from tests.streams._ops import BadReader, Summer, calls
from weir.errors import CheckpointError, ConfigError, TopologyError
from weir.runtime.spark.config import RuntimeConfig
from weir.runtime.spark.streams.operators import StreamsParticipants
from weir.sources import RateSpout
from weir.streams import Operator, OperatorContext, StateHandler
from weir.streams.context import ConsistentRegionContext, ContextHandle
from weir.streams.regions import placements
from weir.streams.store import chunk_key
from weir.testing import OperatorTester
from weir.topology import Fields, TopologyBuilder, TopologyContext, Tuple


def test_a_handler_that_raises_in_checkpoint_fails_the_batch_naming_operator_task_and_id() -> None:
    t = OperatorTester(Summer(raise_in="checkpoint"), input_fields=["v"])
    r = t.run_batch([[1]])
    assert not r.committed and isinstance(r.error, TopologyError)
    text = str(r.error)
    assert "component 'op' task 0 failed txid 1" in text
    assert "CheckpointError in checkpoint (operator 'op' task 0, txid 1)" in text
    assert "Summer.checkpoint(checkpoint 1) failed: ValueError: disk on fire" in text
    assert r.error.component == "op" and r.error.task == 0 and r.error.txid == 1
    assert t.head() is None  # nothing was committed
    assert r.reports[0].error_type == "CheckpointError"


def test_a_handler_that_raises_in_drain_fails_the_batch() -> None:
    t = OperatorTester(Summer(raise_in="drain"), input_fields=["v"])
    r = t.run_batch([[1]])
    assert r.error is not None
    assert "Summer.drain() failed while draining for checkpoint 1: RuntimeError: drain exploded" in str(r.error)
    assert calls("task", methods=("checkpoint",)) == []  # no checkpoint after a failed drain


def _chunk(t: OperatorTester, cid: int) -> bytes:
    head = t.head()
    assert head is not None
    meta = next(m for m in head.retained if m.id == cid)
    return chunk_key(meta.id, meta.token, 0)


def test_corrupted_checkpoint_data_gives_a_clear_checkpoint_error() -> None:
    t = OperatorTester(Summer(), input_fields=["v"])
    t.run_batch([[1]])
    key = _chunk(t, 1)
    data = t.provider.backend.get("tester-op-0", key)
    assert data is not None
    damaged = data[:-3] + bytes(b ^ 0xFF for b in data[-3:])
    t.provider.backend.write_direct("tester-op-0", {key: damaged}, None)
    t.crash()
    r = t.run_batch([[2]])
    assert r.error is not None
    err = r.reports[0].error
    assert r.reports[0].error_type == "CheckpointError"
    assert "checkpoint 1 of operator 'op' task 0 (namespace 'tester-op-0') is corrupt" in err
    assert "CRC-32" in err and "pickl" not in err.lower()
    # a retry meets the same damage: the batch keeps failing rather than silently losing state
    assert t.run_batch([[2]]).error is not None


def test_missing_checkpoint_chunks_are_reported() -> None:
    t = OperatorTester(Summer(), input_fields=["v"])
    t.run_batch([[1]])
    t.provider.backend.write_direct("tester-op-0", {_chunk(t, 1): None}, None)
    t.crash()
    r = t.run_batch([[2]])
    assert "checkpoint 1 of operator 'op' task 0 (namespace 'tester-op-0') is incomplete" in r.reports[0].error


def test_a_corrupt_checkpoint_record_is_reported() -> None:
    t = OperatorTester(Summer(), input_fields=["v"])
    t.run_batch([[1]])
    t.provider.backend.write_direct("tester-op-0", {b"head": b"{not json"}, None)
    r = t.run_batch([[2]])
    assert "the checkpoint record (key 'head') is corrupt" in r.reports[0].error


def test_data_the_handler_cannot_read_back_is_a_checkpoint_error_not_a_pickle_trace() -> None:
    t = OperatorTester(BadReader(), input_fields=["v"])
    t.run_batch([[1]])
    t.crash()
    r = t.run_batch([[2]])
    rep = r.reports[0]
    assert rep.error_type == "CheckpointError"
    assert "BadReader.reset(checkpoint 1) failed: CheckpointError: checkpoint 1 of operator 'op' task 0" in rep.error
    assert "cannot be read at byte 0" in rep.error
    assert "corrupt or was written by a different version" in rep.error


def test_checkpoint_period_inside_a_region_is_refused() -> None:
    with pytest.raises(ConfigError, match="is in consistent region 0, which checkpoints at every micro-batch"):
        OperatorTester(Summer(), input_fields=["v"], component_conf={"checkpoint.period.ms": 100})


def test_a_bad_checkpoint_period_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"checkpoint.period.ms must be an integer ≥ 0 \(ms\), got 'soon'"):
        OperatorTester(Summer(), input_fields=["v"], region=False, component_conf={"checkpoint.period.ms": "soon"})


def test_a_component_in_two_regions_is_refused() -> None:
    b = TopologyBuilder()
    b.set_spout("src", RateSpout())
    b.set_bolt("op", Summer()).shuffle_grouping("src")
    b.set_bolt("op2", Summer()).shuffle_grouping("op")
    b.consistent_region("src", "op").consistent_region("op", "op2")
    with pytest.raises(TopologyError, match="component 'op' is in consistent regions 0 and 1"):
        placements("t", b.create_topology(), {}, 2)


def test_placements_of_regions() -> None:
    b = TopologyBuilder()
    b.set_spout("src", RateSpout())
    b.set_bolt("first", Summer()).shuffle_grouping("src")
    b.set_bolt("second", Summer()).shuffle_grouping("first")
    b.set_bolt("outside", Summer()).shuffle_grouping("second")
    topo = b.create_topology()
    default = placements("t", topo, {}, 2)  # no region declared: the whole topology is one region
    assert default["first"].is_start and not default["second"].is_start
    assert default["outside"].region == 0 and default["outside"].is_end
    b2 = TopologyBuilder()
    b2.set_spout("src", RateSpout())
    b2.set_bolt("first", Summer()).shuffle_grouping("src")
    b2.set_bolt("second", Summer()).shuffle_grouping("first")
    b2.set_bolt("outside", Summer()).add_configuration("checkpoint.period.ms", 50).shuffle_grouping("second")
    b2.consistent_region("second")
    p = placements("t", b2.create_topology(), {}, 3)
    assert p["first"].region is None and p["first"].period_ms is None
    assert p["second"].region == 0 and p["second"].is_start and p["second"].is_end
    assert p["outside"].region is None and p["outside"].period_ms == 50 and p["outside"].retain == 3


def test_streams_operators_refuse_a_custom_state_provider() -> None:
    from weir.state.base import StateProvider

    class Custom(StateProvider):
        def new_state(self, namespace: str, conf: Any, context: Any = None) -> Any:
            raise NotImplementedError

    t = OperatorTester(Summer(), input_fields=["v"])
    with pytest.raises(ConfigError, match="Custom is a custom provider"):
        StreamsParticipants([t.spec], Custom(), RuntimeConfig(topology="x"), t.topology)


def test_register_state_handler_refuses_other_objects_and_duplicates() -> None:
    ctx = OperatorContext(TopologyContext("t", "op", 0, 1))
    with pytest.raises(TopologyError, match="expects a weir.streams.StateHandler, got str"):
        ctx.register_state_handler("nope")  # type: ignore[arg-type]
    h = BadReader()
    ctx.register_state_handler(h)
    with pytest.raises(TopologyError, match="registered twice"):
        ctx.register_state_handler(h)
    with pytest.raises(CheckpointError, match="only be called while the task processes tuples"):
        ctx.create_checkpoint()
    stateless = OperatorContext(TopologyContext("t", "op", 0, 1), checkpointed=False)
    with pytest.raises(CheckpointError, match="checkpointed = False"):
        stateless.create_checkpoint()


def test_the_runtime_sets_what_the_contexts_report_through_their_handle() -> None:
    """The runtime keeps a ContextHandle; it never writes the contexts' private fields."""
    handle = ContextHandle()
    ctx = OperatorContext(TopologyContext("t", "op", 0, 1), handle=handle)
    with pytest.raises(CheckpointError, match="only be called while the task processes tuples"):
        ctx.create_checkpoint()
    handle.checkpointer = lambda: 42
    assert ctx.create_checkpoint() == 42
    handle.checkpointer = None
    with pytest.raises(CheckpointError, match="only be called while the task processes tuples"):
        ctx.create_checkpoint()
    region = ConsistentRegionContext(0, is_start_of_region=True, handle=handle)
    assert region.sequence_id == 0
    handle.sequence_id = 7
    assert region.sequence_id == 7 and "sequence_id=7" in repr(region)


class Failing(Operator):
    """Fails tuples with a negative value."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("v"))

    def process(self, tup: Tuple) -> None:
        if tup[0] < 0:
            self.collector.fail(tup, "negative")
        else:
            self.submit([tup[0]])


def test_a_failed_tuple_fails_the_batch_or_goes_to_the_dead_letters() -> None:
    t = OperatorTester(Failing(), input_fields=["v"])
    r = t.run_batch([[1], [-1]])
    assert r.error is not None and "tuple [-1] failed: negative" in str(r.error)
    t2 = OperatorTester(Failing(), input_fields=["v"], deadletter=True, topology="dl")
    r2 = t2.run_batch([[1], [-1], [2]])
    assert r2.committed and r2.values() == [[1], [2]]
    assert [(d["values"], d["error"], d["component"]) for d in r2.dead_letters] == [([-1], "negative", "op")]


class Stateless(Operator, StateHandler):
    """checkpointed = False: fresh each batch, still drained."""

    checkpointed = False

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("n"))

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.n = 0

    def process(self, tup: Tuple) -> None:
        self.n += 1

    def drain(self) -> None:
        self.submit([self.n])

    def checkpoint(self, checkpoint: Any) -> None:
        raise AssertionError("never checkpointed")

    def reset(self, checkpoint: Any) -> None:
        raise AssertionError("never reset")

    def reset_to_initial_state(self) -> None:
        raise AssertionError("never reset")

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002
        raise AssertionError("never retired")


def test_a_stateless_operator_is_drained_but_never_checkpointed() -> None:
    from weir.runtime.spark.storm.task import TaskSpec
    from weir.runtime.spark.streams.operators import run_operator_task

    spec = TaskSpec(
        topology="sl", component_id="op", component=Stateless(), parallelism=1,
        outputs={"default": Fields("n")}, input_fields={("src", "default"): Fields("v")},
        consumed_streams=frozenset({"default"}),
    )  # fmt: skip
    for batch in (1, 2):
        out = list(run_operator_task(spec, 0, batch, None, [("src", "default", (i,), 0) for i in range(3)]))
        assert out[0] == ("T", "default", (3,), 0, None)  # a fresh instance: 3, not 6
        assert out[1][0] == "R" and out[1][1].ok


class LoudHook(Summer):
    """Its region_checkpointed raises (e.g. acknowledging an external source failed)."""

    def region_checkpointed(self, id: int) -> None:  # noqa: A002
        super().region_checkpointed(id)
        raise RuntimeError("ack failed")


def test_an_error_in_a_driver_hook_is_logged_and_the_batch_stays_committed(caplog: pytest.LogCaptureFixture) -> None:
    t = OperatorTester(LoudHook(), input_fields=["v"])
    r = t.run_batch([[1]])
    assert r.committed and r.error is None
    assert t.participants.hook_errors == [
        "operator 'op' task 0: LoudHook.region_checkpointed(1) failed: RuntimeError('ack failed')"
    ]
    assert "ack failed" in caplog.text and "the hook is not retried" in caplog.text
    assert ("a", "region_checkpointed", 1) in calls("hook")  # the other handlers still got the call
    assert t.run_batch([[2]]).committed
