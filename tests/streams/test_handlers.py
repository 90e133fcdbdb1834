"""Built-in handlers: DelegateStateHandler, OrderedStateHandlers, SortedTupleWindow, TumblingWindowSort."""

from __future__ import annotations

from typing import Any

import pytest

from tests.streams._ops import Recorded, calls
from weir.errors import TopologyError
from weir.streams import (
    Checkpoint,
    DelegateStateHandler,
    OrderedStateHandlers,
    SortedTupleWindow,
    StateHandler,
    TumblingWindowSort,
)
from weir.testing import OperatorTester


def _round_trip(handler: StateHandler, into: StateHandler, cid: int = 1) -> Checkpoint:
    ck = Checkpoint(cid)
    handler.checkpoint(ck)
    back = Checkpoint.from_bytes(ck.to_bytes(), cid)
    into.reset(back)
    return back


def test_delegate_passes_every_call_through_and_can_intercept() -> None:
    inner = Recorded("inner")

    class Counting(DelegateStateHandler):
        checkpoints = 0

        def checkpoint(self, checkpoint: Checkpoint) -> None:
            self.checkpoints += 1
            super().checkpoint(checkpoint)

    d = Counting(inner)
    assert d.handler is inner
    inner.seen = [1, 2]
    d.drain()
    d.prepare_for_non_blocking_checkpoint(4)
    ck = Checkpoint(4)
    d.checkpoint(ck)
    d.region_checkpointed(4)
    d.retire_checkpoint(3)
    d.reset_to_initial_state()
    d.reset(Checkpoint.from_bytes(ck.to_bytes(), 4))
    d.close()
    assert d.checkpoints == 1 and inner.seen == [1, 2]
    assert [c[1:] for c in calls("task")] == [
        ("drain",), ("prepare_for_non_blocking_checkpoint", 4), ("checkpoint", 4), ("region_checkpointed", 4),
        ("retire_checkpoint", 3), ("reset_to_initial_state",), ("reset", 4), ("close",),
    ]  # fmt: skip
    with pytest.raises(TypeError, match="wraps a StateHandler"):
        DelegateStateHandler(object())  # type: ignore[arg-type]


def test_ordered_handlers_write_and_read_in_order_and_close_in_reverse() -> None:
    a, b = Recorded("a"), Recorded("b")
    a.seen, b.seen = ["x"], ["y", "z"]
    group = OrderedStateHandlers([a, b])
    assert group.handlers == (a, b)
    a2, b2 = Recorded("a2"), Recorded("b2")
    _round_trip(group, OrderedStateHandlers([a2, b2]))
    assert (a2.seen, b2.seen) == (["x"], ["y", "z"])  # each read back its own part
    group.drain()
    group.prepare_for_non_blocking_checkpoint(2)
    group.region_checkpointed(2)
    group.retire_checkpoint(1)
    group.reset_to_initial_state()
    group.close()
    names = [(c[0], c[1]) for c in calls("task")]
    assert names[:4] == [("a", "checkpoint"), ("b", "checkpoint"), ("a2", "reset"), ("b2", "reset")]
    assert names[4:] == [
        ("a", "drain"), ("b", "drain"),
        ("a", "prepare_for_non_blocking_checkpoint"), ("b", "prepare_for_non_blocking_checkpoint"),
        ("a", "region_checkpointed"), ("b", "region_checkpointed"),
        ("a", "retire_checkpoint"), ("b", "retire_checkpoint"),
        ("a", "reset_to_initial_state"), ("b", "reset_to_initial_state"),
        ("b", "close"), ("a", "close"),
    ]  # fmt: skip
    assert a.seen == [] and b.seen == []


def test_ordered_close_closes_all_even_when_one_fails() -> None:
    class Bad(Recorded):
        def close(self) -> None:
            super().close()
            raise OSError("cannot close")

    a, bad, c = Recorded("a"), Bad("bad"), Recorded("c")
    with pytest.raises(OSError, match="cannot close"):
        OrderedStateHandlers([a, bad, c]).close()
    assert [x[0] for x in calls("task")] == ["c", "bad", "a"]


def test_sorted_tuple_window_keeps_order_stably_and_round_trips() -> None:
    w = SortedTupleWindow(key=lambda v: v[1])
    for values in [("a", 3), ("b", 1), ("c", 3), ("d", 2)]:
        w.insert(values)
    assert w.tuples() == [("b", 1), ("d", 2), ("a", 3), ("c", 3)]  # equal keys keep arrival order
    desc = SortedTupleWindow(key=lambda v: v[1], reverse=True)
    for values in [("a", 3), ("b", 1), ("c", 3)]:
        desc.insert(values)
    assert list(desc) == [("a", 3), ("c", 3), ("b", 1)]
    copy = SortedTupleWindow(key=lambda v: v[1])
    _round_trip(w, copy)
    assert copy.tuples() == w.tuples() and len(copy) == 4
    w.prepare_for_non_blocking_checkpoint(2)
    w.insert(("e", 0))  # after the snapshot: not in checkpoint 2
    later = SortedTupleWindow(key=lambda v: v[1])
    _round_trip(w, later, 2)
    assert len(later) == 4 and len(w) == 5
    assert w.evict()[0] == ("e", 0) and len(w) == 0
    later.reset_to_initial_state()
    assert len(later) == 0
    bad = SortedTupleWindow()
    bad.insert((1,))
    with pytest.raises(TopologyError, match="cannot order"):
        bad.insert(("a",))


def test_sorted_tuple_window_refuses_a_checkpoint_of_something_else() -> None:
    from weir.errors import CheckpointError

    ck = Checkpoint(1)
    ck.write_object({"not": "a list"})
    with pytest.raises(CheckpointError, match="SortedTupleWindow expected a list of tuples"):
        SortedTupleWindow().reset(Checkpoint.from_bytes(ck.to_bytes(), 1))


def _model(sizes: list[list[tuple[str, int]]], size: int) -> tuple[list[list[Any]], list[tuple[str, int]]]:
    """What TumblingWindowSort(size) submits for these batches, and the open window at the end."""
    out, window, number = [], [], 0
    for batch in sizes:
        for t in batch:
            window.append(t)
            if len(window) == size:
                out.extend([*v, number] for v in sorted(window, key=lambda v: v[1]))
                window, number = [], number + 1
    return out, window


def test_tumbling_window_sort_across_batches_failures_and_crashes() -> None:
    batches = [[("a", 5), ("b", 3)], [("c", 9), ("d", 1), ("e", 4)], [("f", 2)], [("g", 8), ("h", 7), ("i", 6)]]
    t = OperatorTester(TumblingWindowSort(4, ["k", "v"], sort_by=["v"]), input_fields=["k", "v"])
    got: list[list[Any]] = []
    got += t.run_batch(batches[0]).values()
    assert t.run_batch(batches[1], fail=True).error is not None  # rolled back; the window is restored
    got += t.run_batch(batches[1]).values()
    t.run_batch(batches[2], crash=True)
    t.crash()
    got += t.run_batch(batches[2]).values()
    got += t.run_batch(batches[3]).values()
    expected, open_window = _model(batches, 4)
    assert got == expected == [["d", 1, 0], ["b", 3, 0], ["a", 5, 0], ["c", 9, 0],
                               ["f", 2, 1], ["e", 4, 1], ["h", 7, 1], ["g", 8, 1]]  # fmt: skip
    ck = t.checkpoint()
    assert ck is not None and ck.sequence_id == 4
    assert ck.read_object() == {"window": 2} and ck.read_object() == open_window == [("i", 6)]


def test_tumbling_window_sort_non_blocking_and_its_output_fields() -> None:
    op = TumblingWindowSort(2, ["k", "v"], sort_by=["v"], reverse=True, non_blocking=True)
    t = OperatorTester(op, input_fields=["k", "v"])
    assert t.topology.components["op"].outputs["default"].to_list() == ["k", "v", "window"]
    r = t.run_batch([("a", 1), ("b", 2), ("c", 3)])
    assert r.values() == [["b", 2, 0], ["a", 1, 0]]
    plain = TumblingWindowSort(2, ["k", "v"], window_field=None)
    assert OperatorTester(plain, input_fields=["k", "v"], topology="p").run_batch([("b", 1), ("a", 1)]).values() == [
        ["a", 1], ["b", 1],
    ]  # fmt: skip
    with pytest.raises(TopologyError, match="size must be a positive int"):
        TumblingWindowSort(0, ["k"])
    with pytest.raises(TopologyError, match=r"sort_by fields \['x'\] are not among fields \['k'\]"):
        TumblingWindowSort(2, ["k"], sort_by=["x"])
