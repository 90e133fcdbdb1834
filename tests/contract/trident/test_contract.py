"""The Trident store contract, one suite for every map-state store (sqlite, redis, redis-cluster,
memcached, postgres, hbase): multi-get / multi-put round trips of opaque, transactional and plain
cells, seed 004's replay sequences, snapshots, the cache, pickling into a fresh process, large
batches, processes and a forked child writing at once, and fencing of a stale driver.

The Storm store contract is the ``tests/contract/test_*.py`` beside this folder."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import IntegerType, LongType, StringType

from tests.contract.trident._support import dump_factory, run_child, spawn_child
from tests.contract.trident.conftest import KINDS, StoreKit, Sum
from weir.errors import FencedError, SerializationError
from weir.runtime.spark.trident.state_tasks import JournalSpec, PersistAggStage
from weir.state import StateFactory as KVStateFactory
from weir.state.factory import close_backends
from weir.trident import Count
from weir.trident.backing import (
    MapStateFactory,
    SnapshottableNonTransactionalMap,
    SnapshottableOpaqueMap,
    SnapshottableTransactionalMap,
)
from weir.trident.fields import FieldSpec
from weir.trident.state import (
    BackingMap,
    CachedMap,
    CombinerValueUpdater,
    MapState,
    NonTransactionalMap,
    OpaqueMap,
    OpaqueValue,
    Snapshottable,
    StateType,
    TransactionalMap,
    TransactionalValue,
)

pytestmark = [pytest.mark.services, pytest.mark.parametrize("kit", KINDS, indirect=True)]

KEYS = [("man", 1), ("naïve ✓ 🍺", -2), ("", 0), ('with space and "quotes"', 2**40)]
CELLS: dict[StateType, list[Any]] = {
    StateType.OPAQUE: [
        OpaqueValue(3, 5, 2),
        OpaqueValue(None, None, None),
        OpaqueValue(7, {"a": [1, 2.5], "é": None}, "x"),
        OpaqueValue(1, None, 4),
    ],
    StateType.TRANSACTIONAL: [
        TransactionalValue(1, "v"),
        TransactionalValue(None, None),
        TransactionalValue(9, [1, "ü", False]),
        TransactionalValue(2, b"\x00\xff"),
    ],
    StateType.NON_TRANSACTIONAL: [5, None, {"k": ["é", 1.5, True]}, "text"],
}


def _add(summer: Sum, n: int) -> CombinerValueUpdater[int]:
    return CombinerValueUpdater(summer, n)


def _batch(
    factory: MapStateFactory, txid: int, adds: dict[tuple[Any, ...], int], summer: Sum, *, commit: bool = True
) -> list[Any]:
    """One batch of a new state (as a new task would run it): begin, one multi_update, commit."""
    state = factory.make_state({}, 0, 1)
    state.begin_commit(txid)
    out = state.multi_update(list(adds), [_add(summer, n) for n in adds.values()])
    if commit:
        state.commit(txid)
    return out


# ---- the backing map itself ------------------------------------------------------------------
@pytest.mark.parametrize("state_type", list(StateType))
def test_round_trip_of_cells_with_composite_unicode_keys(kit: StoreKit, state_type: StateType) -> None:
    backing = kit.make(state_type).backing_map()
    assert isinstance(backing, BackingMap)
    cells = CELLS[state_type]
    backing.multi_put(KEYS, cells)
    assert backing.multi_get(KEYS) == cells
    # another backing map (as another task would make) reads the same cells, in any order
    again = kit.make(state_type).backing_map()
    assert again.multi_get([KEYS[2], ("absent", 5), KEYS[0], KEYS[2]]) == [cells[2], None, cells[0], cells[2]]
    assert again.multi_get([]) == []
    again.multi_put([], [])


def test_later_value_wins_and_overwrites(kit: StoreKit) -> None:
    backing = kit.make(StateType.NON_TRANSACTIONAL).backing_map()
    backing.multi_put([("a", 1), ("a", 1), ("b", 2)], [1, 2, 3])
    assert backing.multi_get([("a", 1), ("b", 2)]) == [2, 3]
    backing.multi_put([("b", 2)], [None])
    assert backing.multi_get([("a", 1), ("b", 2)]) == [2, None]


def test_cells_in_list_form_are_accepted_and_other_values_refused(kit: StoreKit) -> None:
    opaque = kit.make(StateType.OPAQUE).backing_map()
    opaque.multi_put([("l", 1)], [[4, 10, 6]])
    assert opaque.multi_get([("l", 1)]) == [OpaqueValue(4, 10, 6)]
    with pytest.raises(SerializationError, match=r"opaque backing map.*OpaqueMap"):
        opaque.multi_put([("x", 1)], [42])
    transactional = kit.make(StateType.TRANSACTIONAL).backing_map()
    with pytest.raises(SerializationError, match="transactional"):
        transactional.multi_put([("x", 1)], [OpaqueValue(1, 2, 3)])


def test_unserializable_value_names_the_key(kit: StoreKit) -> None:
    backing = kit.make(StateType.NON_TRANSACTIONAL).backing_map()
    with pytest.raises(SerializationError, match=r"'bad'"):
        backing.multi_put([("bad", 1)], [{1, 2}])


# ---- seed 004's sequences on the map states built by the factories -----------------------------
def test_factory_builds_the_matching_map_state(kit: StoreKit) -> None:
    expected = {
        StateType.OPAQUE: (OpaqueMap, SnapshottableOpaqueMap),
        StateType.TRANSACTIONAL: (TransactionalMap, SnapshottableTransactionalMap),
        StateType.NON_TRANSACTIONAL: (NonTransactionalMap, SnapshottableNonTransactionalMap),
    }
    for state_type, (base, cls) in expected.items():
        factory = kit.make(state_type)
        assert factory.state_type is state_type
        state = factory.make_state({}, 2, 4)
        assert type(state) is cls
        assert isinstance(state, base) and isinstance(state, MapState) and isinstance(state, Snapshottable)
        assert state.state_type is state_type
        assert not isinstance(state.backing, CachedMap)


def test_transactional_seed_example(kit: StoreKit, summer: Sum) -> None:
    """Seed 004: man=[3, txid 1], dog=[4, txid 3], apple=[10, txid 2]; batch 3 = man, man, dog."""
    factory = kit.make(StateType.TRANSACTIONAL)
    man, dog, apple = ("man", 0), ("dog", 0), ("apple", 0)
    factory.backing_map().multi_put(
        [man, dog, apple], [TransactionalValue(1, 3), TransactionalValue(3, 4), TransactionalValue(2, 10)]
    )
    assert _batch(factory, 3, {man: 2, dog: 1}, summer) == [5, 4]
    assert factory.backing_map().multi_get([man, dog, apple]) == [
        TransactionalValue(3, 5),
        TransactionalValue(3, 4),
        TransactionalValue(2, 10),
    ]


def test_opaque_seed_example(kit: StoreKit, summer: Sum) -> None:
    """Seed 004: {value 4, prev 1, txid 2} + 2 is 6 for batch 3, and 3 for a replay of batch 2."""
    factory = kit.make(StateType.OPAQUE)
    newer, replayed = ("newer", 0), ("replayed", 0)
    factory.backing_map().multi_put([newer, replayed], [OpaqueValue(2, 4, 1), OpaqueValue(2, 4, 1)])
    assert _batch(factory, 2, {replayed: 2}, summer) == [3]
    assert _batch(factory, 3, {newer: 2}, summer) == [6]
    assert factory.backing_map().multi_get([newer, replayed]) == [OpaqueValue(3, 6, 4), OpaqueValue(2, 3, 1)]


def test_opaque_replays_with_changed_batches_end_exact(kit: StoreKit, summer: Sum) -> None:
    factory = kit.make(StateType.OPAQUE)
    a, b, c = ("a", 1), ("b", 2), ("c", 3)
    assert _batch(factory, 1, {a: 1, b: 2}, summer) == [1, 2]
    assert _batch(factory, 2, {a: 3}, summer, commit=False) == [4]  # attempt fails after writing
    assert _batch(factory, 2, {a: 5, c: 1}, summer) == [6, 1]  # replay with other tuples
    assert _batch(factory, 3, {b: 1, a: 1}, summer) == [3, 7]
    assert _batch(factory, 3, {b: 1, a: 1}, summer) == [3, 7]  # replay of a committed write
    state = factory.make_state({}, 0, 1)
    assert state.multi_get([a, b, c, ("d", 4)]) == [7, 3, 1, None]


def test_transactional_replays_end_exact(kit: StoreKit, summer: Sum) -> None:
    factory = kit.make(StateType.TRANSACTIONAL)
    a, b, c = ("a", 1), ("b", 2), ("c", 3)
    assert _batch(factory, 1, {a: 1, b: 2}, summer) == [1, 2]
    assert _batch(factory, 2, {a: 3, c: 1}, summer, commit=False) == [4, 1]
    assert _batch(factory, 2, {a: 3, c: 1}, summer) == [4, 1]  # same batch again: skipped
    assert _batch(factory, 3, {b: 1}, summer) == [3]
    assert factory.make_state({}, 0, 1).multi_get([a, b, c]) == [4, 3, 1]


def test_non_transactional_applies_replays_again(kit: StoreKit, summer: Sum) -> None:
    factory = kit.make(StateType.NON_TRANSACTIONAL)
    a = ("a", 1)
    _batch(factory, 1, {a: 1}, summer)
    _batch(factory, 2, {a: 3}, summer, commit=False)
    _batch(factory, 2, {a: 3}, summer)
    assert factory.make_state({}, 0, 1).multi_get([a]) == [7]  # at-least-once, as documented


@pytest.mark.parametrize("state_type", [StateType.OPAQUE, StateType.TRANSACTIONAL])
def test_global_value_of_a_snapshottable_state(kit: StoreKit, state_type: StateType, summer: Sum) -> None:
    extra = {"global_key": ("$total", 0)} if kit.kind == "postgres" else {}
    factory = kit.make(state_type, **extra)
    state = factory.make_state({}, 0, 1)
    state.begin_commit(1)
    assert state.update(_add(summer, 5)) == 5
    state.commit(1)
    state = factory.make_state({}, 0, 1)
    state.begin_commit(2)
    state.update(_add(summer, 2))  # the attempt fails before commit
    state = factory.make_state({}, 0, 1)
    state.begin_commit(2)
    assert state.update(_add(summer, 2)) == 7  # same batch again: exact for both types
    state.commit(2)
    fresh = factory.make_state({}, 0, 1)
    assert fresh.get() == 7
    fresh.begin_commit(3)
    fresh.set(100)
    fresh.commit(3)
    assert factory.make_state({}, 0, 1).get() == 100


# ---- cache and pickling ----------------------------------------------------------------------
def test_cache_size_wraps_a_cached_map_per_state(kit: StoreKit) -> None:
    factory = kit.make(StateType.OPAQUE, cache_size=16)
    assert factory.cache_size == 16
    state = factory.make_state({}, 0, 1)
    assert isinstance(state.backing, CachedMap) and state.backing.cache_size == 16
    cached = state.backing
    key = ("cached", 1)
    assert cached.multi_get([key]) == [None]  # remembered as absent
    other = kit.make(StateType.OPAQUE).backing_map()
    other.multi_put([key], [OpaqueValue(1, 9, None)])
    assert cached.multi_get([key]) == [None]  # served from this state's cache
    assert factory.make_state({}, 0, 1).multi_get([key]) == [9]  # a new state has a new cache
    assert kit.make(StateType.OPAQUE, cache_size=0).cache_size is None


def test_factory_survives_pickling_into_a_fresh_process(kit: StoreKit, tmp_path: Path) -> None:
    factory = kit.make(StateType.OPAQUE, cache_size=8)
    path = dump_factory(factory, tmp_path / "factory.pickle")
    results = run_child(path, 1, 2, [[1, [["a", 0, 2], ["b", 0, 1]]], [2, [["a", 0, 3]]]])
    assert results == [[2, 1], [5]]
    # the parent reads what the child wrote, and can replay the child's last batch
    state = factory.make_state({}, 1, 2)
    assert state.multi_get([("a", 0), ("b", 0)]) == [5, 1]
    state.begin_commit(2)
    assert state.multi_update([("a", 0)], [CombinerValueUpdater(Sum(), 10)]) == [12]
    state.commit(2)
    assert factory.backing_map().multi_get([("a", 0)]) == [OpaqueValue(2, 12, 2)]


# ---- large batches -------------------------------------------------------------------------------
LARGE = 12_000
"""Keys in one multi_get / multi_put: past SQLite's variable limit, PostgreSQL's and HBase's chunks,
Redis' pipelines and Memcached's get_multi batches."""


@pytest.mark.parametrize("state_type", [StateType.OPAQUE, StateType.TRANSACTIONAL])
def test_large_batches_round_trip_and_update_exactly(kit: StoreKit, state_type: StateType, summer: Sum) -> None:
    factory = kit.make(state_type)
    keys = [(f"w{i}", i % 7) for i in range(LARGE)]
    adds = dict.fromkeys(keys, 1)
    assert _batch(factory, 1, adds, summer) == [1] * LARGE
    some = {k: 2 for k in keys[::12]}
    assert _batch(factory, 2, some, summer, commit=False) == [3] * len(some)  # an attempt that fails
    assert _batch(factory, 2, some, summer) == [3] * len(some)  # its replay is applied once
    cells = factory.backing_map().multi_get(list(reversed(keys)))
    if state_type is StateType.OPAQUE:
        got = [(c.curr_txid, c.curr, c.prev) for c in cells]
        expected = [(2, 3, 1) if i % 12 == 0 else (1, 1, None) for i in reversed(range(LARGE))]
    else:
        got = [(c.txid, c.val) for c in cells]
        expected = [(2, 3) if i % 12 == 0 else (1, 1) for i in reversed(range(LARGE))]
    mismatches = [i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b]
    assert not mismatches, f"{len(mismatches)} cells differ, first: {got[mismatches[0]]} != {expected[mismatches[0]]}"


# ---- processes, fork, fencing --------------------------------------------------------------------
def test_processes_write_different_partitions_at_once(kit: StoreKit, tmp_path: Path) -> None:
    factory = kit.make(StateType.OPAQUE, **({"timeout": 60} if kit.kind == "sqlite" else {}))
    path = dump_factory(factory, tmp_path / "f.pickle")
    partitions, batches = 3, 15
    procs = []
    for p in range(partitions):
        script = [[txid, [[f"w{p}-{i}", p, 1] for i in range(40)]] for txid in range(1, batches + 1)]
        procs.append(spawn_child(path, p, partitions, script))
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert json.loads(out)[-1] == [batches] * 40
    state = factory.make_state({}, 0, 1)
    keys = [[f"w{p}-{i}", p] for p in range(partitions) for i in range(40)]
    assert state.multi_get(keys) == [batches] * len(keys)


def _forked_batch(factory: MapStateFactory, queue: Any) -> None:
    state = factory.make_state({}, 1, 2)
    state.begin_commit(2)
    queue.put(state.multi_update([["child", 0]], [CombinerValueUpdater(Sum(), 5)]))
    state.commit(2)


def test_a_forked_child_uses_its_own_connection(kit: StoreKit) -> None:
    factory = kit.make(StateType.OPAQUE)
    parent = factory.make_state({}, 0, 2)
    parent.begin_commit(1)
    parent.multi_put([["parent", 0]], [1])  # the parent's connection is open now
    parent.commit(1)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_forked_batch, args=(factory, queue))
    child.start()
    child.join(120)
    assert child.exitcode == 0
    assert queue.get(timeout=5) == [5]
    parent.begin_commit(3)  # the parent's connection still works
    parent.multi_put([["parent", 0]], [2])
    parent.commit(3)
    assert factory.make_state({}, 0, 1).multi_get([["parent", 0], ["child", 0]]) == [2, 5]


_IN = [
    FieldSpec("word", StringType()),
    FieldSpec("n", LongType()),
    FieldSpec("_weir_v", LongType()),
    FieldSpec("_weir_p", IntegerType()),
]
_OUT = [FieldSpec("word", StringType()), FieldSpec("n", LongType()), FieldSpec("count", LongType())]


def _persist(factory: MapStateFactory, txid: int, adds: dict[tuple[str, int], int], journal: JournalSpec) -> None:
    """The executor's per-partition step of an opaque persistent_aggregate (journal, then the map)."""
    from weir.runtime.spark.trident._arrow import arrow_schema, build_array

    schema = arrow_schema(_IN)
    rows = [(w, n, v, 0) for (w, n), v in adds.items()]
    cols = list(zip(*rows, strict=True))
    batch = pa.RecordBatch.from_arrays(
        [build_array(list(c), f, schema.field(i).type, "test") for i, (f, c) in enumerate(zip(_IN, cols, strict=True))],
        schema=schema,
    )
    stage = PersistAggStage(
        topology="contract", component="counts", txid=txid, conf={}, in_fields=_IN, out_fields=_OUT,
        factory=factory, n=1, state_id="counts", p_idx=3, mode="combiner", agg=Count(), key_idx=[0, 1],
        value_idx=2, journal=journal,
    )  # fmt: skip
    list(stage(iter([batch])))


def _fenced(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, FencedError):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def test_a_fenced_driver_changes_no_cell(kit: StoreKit) -> None:
    """A driver whose epoch is older than the stored one is refused at its journal write, before
    the map is touched; the newer driver's batch then applies on the cells as they were."""
    factory = kit.make(StateType.OPAQUE)
    coordinator = KVStateFactory.from_url(kit.journal_url)
    ns = f"$checkpointspout-{kit.name}"
    try:
        old = coordinator.backend.acquire_epoch(ns)
        _persist(factory, 1, {("cat", 0): 2, ("dog", 1): 1}, JournalSpec(coordinator, ns, "counts", old))
        new = coordinator.backend.acquire_epoch(ns)
        assert new > old
        with pytest.raises(Exception) as info:  # noqa: PT011 - the stage wraps the FencedError
            _persist(factory, 2, {("cat", 0): 5, ("emu", 2): 1}, JournalSpec(coordinator, ns, "counts", old))
        assert _fenced(info.value), info.value
        backing = factory.backing_map()
        assert backing.multi_get([("cat", 0), ("dog", 1), ("emu", 2)]) == [
            OpaqueValue(1, 2, None),
            OpaqueValue(1, 1, None),
            None,
        ]
        _persist(factory, 2, {("cat", 0): 1}, JournalSpec(coordinator, ns, "counts", new))
        assert backing.multi_get([("cat", 0), ("emu", 2)]) == [OpaqueValue(2, 3, 2), None]
    finally:
        close_backends()


def test_a_lone_surrogate_key_is_stored_or_named(kit: StoreKit) -> None:
    """A key holding a lone surrogate (not UTF-8) is stored and read back, or refused naming state and key."""
    backing = kit.make(StateType.NON_TRANSACTIONAL).backing_map()
    keys = [("bad\udcff", 1), ("fine", 2)]
    try:
        backing.multi_put(keys, [1, 2])
    except SerializationError as exc:
        text = str(exc)
        assert kit.kind == "postgres", text  # only a TEXT key column cannot hold it
        assert kit.name in text and "bad\\udcff" in text, text
        return
    assert backing.multi_get(keys) == [1, 2]
    assert kit.make(StateType.NON_TRANSACTIONAL).backing_map().multi_get([keys[0]]) == [1]
