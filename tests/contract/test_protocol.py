"""The provider contract: Storm's KeyValueState protocol, visibility rules and misuse errors.

Every test runs against every provider set-up (memory, sqlite, redis, redis cluster, postgres)
through the public API: ``StateFactory.from_url(url).new_state(namespace)``.
"""

from __future__ import annotations

import re

import pytest

from tests.contract._support import ALL_LAYOUTS, committed, independent_reader, new_ns, provider_of, txids, view
from weir.errors import StateError


def _values(state: object, keys: str = "abcd") -> list[object]:
    return [state.get(k) for k in keys]  # type: ignore[attr-defined]


def _names(message: str, namespace: str, *numbers: int) -> None:
    assert repr(namespace) in message or namespace in message, f"{namespace!r} not named in: {message}"
    for n in numbers:
        assert re.search(rf"(?<!\d){n}(?!\d)", message), f"txid {n} not named in: {message}"


# ---- Storm's put / delete / prepare / commit / rollback sequences ----------------------------
@ALL_LAYOUTS
def test_put_get_delete(provider_url: str) -> None:
    state = provider_of(provider_url).new_state(new_ns())
    assert state.get("a") is None
    assert state.get("a", "fallback") == "fallback"
    state.put("a", "1")
    state.put("b", "2")
    assert _values(state) == ["1", "2", None, None]
    assert state.delete("a") == "1"
    assert state.get("a") is None
    assert state.get("a", 7) == 7
    assert state.delete("a") is None
    assert state.delete("never-written") is None
    state.put("a", "3")
    assert state.get("a") == "3"
    assert view(state) == {"a": "3", "b": "2"}


@ALL_LAYOUTS
def test_storm_prepare_commit_rollback_sequence(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    state = provider.new_state(ns)

    state.put("a", "1")
    state.put("b", "2")
    state.prepare_commit(1)
    state.put("c", "3")
    assert _values(state) == ["1", "2", "3", None]
    state.rollback()
    assert _values(state) == [None, None, None, None]
    assert committed(provider, ns) == {}

    state.put("a", "1")
    state.put("b", "2")
    state.prepare_commit(1)
    state.commit(1)
    state.put("c", "3")
    state.prepare_commit(2)
    state.rollback()
    assert _values(state) == ["1", "2", None, None]
    assert committed(provider, ns) == {"a": "1", "b": "2"}

    state.put("c", "3")
    assert state.delete("b") == "2"
    state.prepare_commit(2)
    state.commit(2)
    assert _values(state) == ["1", None, "3", None]
    assert committed(provider, ns) == {"a": "1", "c": "3"}

    state.put("d", "4")
    state.prepare_commit(3)
    state.put("a", "x")  # after the prepare: belongs to the next transaction
    state.commit(3)
    assert committed(provider, ns) == {"a": "1", "c": "3", "d": "4"}
    assert _values(state) == ["x", None, "3", "4"]
    state.rollback()
    assert _values(state) == ["1", None, "3", "4"]

    rec = txids(provider, ns)
    assert (rec.committed, rec.prepared) == (3, None)
    # a new instance (a restarted task) loads exactly the committed data
    assert view(provider.new_state(ns)) == {"a": "1", "c": "3", "d": "4"}


@ALL_LAYOUTS
def test_writes_after_prepare_belong_to_the_next_transaction(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    state = provider.new_state(ns)
    state.put("k1", 1)
    state.prepare_commit(5)
    state.put("k2", 2)
    state.delete("k1")
    assert view(state) == {"k2": 2}
    state.commit(5)
    assert committed(provider, ns) == {"k1": 1}
    state.prepare_commit(6)
    state.commit(6)
    assert committed(provider, ns) == {"k2": 2}
    assert txids(provider, ns).committed == 6


@ALL_LAYOUTS
def test_prepare_again_with_the_same_txid_merges(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    state = provider.new_state(ns)
    state.put("a", 1)
    state.prepare_commit(1)
    state.put("b", 2)
    state.prepare_commit(1)
    loaded = provider.backend.load_prepared(ns)
    assert loaded is not None and loaded[0] == 1 and len(loaded[1]) == 2
    state.commit(1)
    assert committed(provider, ns) == {"a": 1, "b": 2}


@ALL_LAYOUTS
def test_commit_without_txid_saves_pending_directly(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    state = provider.new_state(ns)
    state.put("__state", {"txid": 4, "phase": "COMMITTED"})
    state.commit()
    assert committed(provider, ns) == {"__state": {"txid": 4, "phase": "COMMITTED"}}
    rec = txids(provider, ns)
    assert (rec.committed, rec.prepared) == (None, None)
    state.delete("__state")
    state.commit()
    assert committed(provider, ns) == {}


# ---- visibility ------------------------------------------------------------------------------
@ALL_LAYOUTS
def test_read_own_writes_others_see_only_committed(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    writer = provider.new_state(ns)
    other = provider.new_state(ns)  # same process, same backend
    writer.put("w", 1)
    assert writer.get("w") == 1
    assert other.get("w") is None
    with independent_reader(provider, ns) as reader:
        assert reader.get("w") is None
        writer.prepare_commit(1)
        assert writer.get("w") == 1
        assert other.get("w") is None
        assert reader.get("w") is None
        assert view(reader) == {}
        assert reader.get_many(["w", "x"], 0) == [0, 0]
        writer.commit(1)
        assert other.get("w") == 1
        assert reader.get("w") == 1
        assert view(reader) == {"w": 1}
        writer.delete("w")
        writer.put("v", 2)
        assert writer.get("w") is None
        assert reader.get("w") == 1
        assert reader.get("v") is None
        assert reader.get_many(["w", "v"], "-") == [1, "-"]
        assert writer.get_many(["w", "v"], "-") == ["-", 2]


@ALL_LAYOUTS
def test_a_new_instance_does_not_see_a_stale_prepared_set(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    first = provider.new_state(ns)
    first.put("a", 1)
    first.prepare_commit(1)
    first.commit(1)
    first.put("a", 2)
    first.put("b", 3)
    first.prepare_commit(2)
    second = provider.new_state(ns)  # e.g. a restarted task
    assert view(second) == {"a": 1}
    assert second.get("b") is None
    assert second.prepared_txid == 2
    # recovery from the new instance commits the stored change set
    second.commit(2)
    assert view(second) == {"a": 2, "b": 3}
    assert committed(provider, ns) == {"a": 2, "b": 3}


@ALL_LAYOUTS
def test_iteration_over_pending_prepared_and_committed_with_tombstones(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    state = provider.new_state(ns)
    model = {f"k{i}": i for i in range(10)}
    for k, v in model.items():
        state.put(k, v)
    state.prepare_commit(1)
    state.commit(1)
    # prepared layer: delete k1, update k2, add k10 and k11, delete a missing key
    state.delete("k1")
    state.put("k2", 20)
    state.put("k10", 10)
    state.put("k11", 11)
    state.delete("nope")
    state.prepare_commit(2)
    # pending layer on top: re-add k1, delete k3, delete prepared-only k10, update k2 and k11 again
    state.put("k1", 100)
    state.delete("k3")
    assert state.delete("k10") == 10
    state.put("k2", 200)
    state.put("k11", 111)
    state.put("k12", 12)
    expected = dict(model)
    expected.update({"k1": 100, "k2": 200, "k11": 111, "k12": 12})
    del expected["k3"]
    assert view(state) == expected
    assert len(state) == len(expected)
    assert sorted(k for k, _ in state) == sorted(expected)
    # another reader still sees txid 1 only
    assert committed(provider, ns) == model
    state.commit(2)
    after_2 = dict(model)
    after_2.update({"k2": 20, "k10": 10, "k11": 11})
    del after_2["k1"]
    assert committed(provider, ns) == after_2
    assert view(state) == expected
    state.prepare_commit(3)
    state.commit(3)
    assert committed(provider, ns) == expected
    assert provider.backend.count(ns) == len(expected)


@ALL_LAYOUTS
def test_namespaces_are_isolated(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns1, ns2 = new_ns("iso"), new_ns("iso")
    s1, s2 = provider.new_state(ns1), provider.new_state(ns2)
    s1.put("k", "one")
    s2.put("k", "two")
    s1.prepare_commit(1)
    s2.prepare_commit(7)
    s1.commit(1)
    assert committed(provider, ns1) == {"k": "one"}
    assert committed(provider, ns2) == {}
    s2.rollback()
    assert committed(provider, ns1) == {"k": "one"}
    assert (txids(provider, ns1).committed, txids(provider, ns2).committed) == (1, None)
    backend = provider.backend
    assert ns1 in backend.namespaces()
    backend.drop(ns1)
    assert committed(provider, ns1) == {}
    assert txids(provider, ns1).committed is None
    assert ns1 not in backend.namespaces()


@ALL_LAYOUTS
def test_namespace_with_unusual_characters(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = "wörd count:{tag}/x y-bolt.1-0"
    other = "wörd count:{tag}/x y-bolt.1-1"
    state, state2 = provider.new_state(ns), provider.new_state(other)
    state.put("k", 1)
    state2.put("k", 2)
    state.prepare_commit(1)
    state2.prepare_commit(1)
    state.commit(1)
    state2.commit(1)
    assert committed(provider, ns) == {"k": 1}
    assert committed(provider, other) == {"k": 2}
    assert {ns, other} <= set(provider.backend.namespaces())


@ALL_LAYOUTS
def test_load_prepared_carries_tombstones(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    state = provider.new_state(ns)
    state.put("a", 1)
    state.put("b", 2)
    state.prepare_commit(1)
    state.commit(1)
    assert provider.backend.load_prepared(ns) is None
    state.delete("a")
    state.put("c", 3)
    state.prepare_commit(2)
    loaded = provider.backend.load_prepared(ns)
    assert loaded is not None
    txid, changes = loaded
    ser = state.key_serializer
    assert txid == 2
    assert changes == {ser.serialize("a"): None, ser.serialize("c"): state.value_serializer.serialize(3)}
    state.rollback()
    assert provider.backend.load_prepared(ns) is None
    assert txids(provider, ns).prepared is None


# ---- misuse ----------------------------------------------------------------------------------
@ALL_LAYOUTS
def test_commit_of_an_unprepared_txid_raises(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    state = provider.new_state(ns)
    state.put("a", 1)
    state.prepare_commit(17)
    state.commit(17)
    with pytest.raises(StateError) as info:
        state.commit(23)  # nothing prepared
    _names(str(info.value), ns, 23, 17)
    state.put("b", 2)
    state.prepare_commit(20)
    with pytest.raises(StateError) as info:
        state.commit(23)  # 20 is prepared, not 23
    _names(str(info.value), ns, 23, 20)
    assert committed(provider, ns) == {"a": 1}
    state.commit(20)
    assert committed(provider, ns) == {"a": 1, "b": 2}


@ALL_LAYOUTS
def test_commit_of_an_unprepared_txid_on_a_new_namespace_raises(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    with pytest.raises(StateError) as info:
        provider.new_state(ns).commit(31)
    _names(str(info.value), ns, 31)
    assert committed(provider, ns) == {}


@ALL_LAYOUTS
def test_prepare_of_a_txid_not_after_the_committed_one_raises(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    state = provider.new_state(ns)
    state.put("a", 1)
    state.prepare_commit(17)
    state.commit(17)
    state.put("a", 2)
    for bad in (17, 9):
        with pytest.raises(StateError) as info:
            state.prepare_commit(bad)
        _names(str(info.value), ns, bad, 17)
    rec = txids(provider, ns)
    assert (rec.committed, rec.prepared) == (17, None)
    assert committed(provider, ns) == {"a": 1}
    # the pending write survived the refused prepare
    state.prepare_commit(18)
    state.commit(18)
    assert committed(provider, ns) == {"a": 2}


@ALL_LAYOUTS
def test_prepare_of_an_older_txid_than_prepared_raises(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    state = provider.new_state(ns)
    state.put("a", 1)
    state.prepare_commit(12)
    with pytest.raises(StateError) as info:
        state.prepare_commit(11)
    _names(str(info.value), ns, 11, 12)
    assert txids(provider, ns).prepared == 12


@ALL_LAYOUTS
def test_commit_is_idempotent(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    state = provider.new_state(ns)
    state.put("a", 1)
    state.prepare_commit(1)
    state.commit(1)
    state.commit(1)
    assert committed(provider, ns) == {"a": 1}
    # another instance (recovery in another process) commits the same txid again: no-op
    provider.new_state(ns).commit(1)
    state.put("a", 2)
    state.prepare_commit(2)
    # re-committing the old txid while 2 is prepared changes nothing either
    state.commit(1)
    assert committed(provider, ns) == {"a": 1}
    assert txids(provider, ns).prepared == 2
    state.commit(2)
    state.commit(2)
    provider.new_state(ns).commit(2)
    assert committed(provider, ns) == {"a": 2}
    rec = txids(provider, ns)
    assert (rec.committed, rec.prepared) == (2, None)


@ALL_LAYOUTS
def test_rollback_without_anything_prepared_is_harmless(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns()
    state = provider.new_state(ns)
    state.rollback()
    state.put("a", 1)
    state.prepare_commit(1)
    state.commit(1)
    state.rollback()
    state.rollback()
    assert committed(provider, ns) == {"a": 1}
    assert txids(provider, ns).committed == 1
