"""The provider contract: epoch fencing — a writer with an older epoch fails and changes nothing."""

from __future__ import annotations

import pytest

from tests.contract._support import ALL_LAYOUTS, committed, new_ns, provider_of, txids
from weir.errors import FencedError, StateError, StateLossError
from weir.state.factory import open_backend


@ALL_LAYOUTS
def test_acquire_epoch_strictly_increases_across_connections(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns("fence")
    first = provider.backend.acquire_epoch(ns)
    other = open_backend(provider.config, fresh=True)
    try:
        second = other.acquire_epoch(ns)
        third = provider.backend.acquire_epoch(ns)
    finally:
        other.close()
    assert first < second < third
    assert txids(provider, ns).epoch == third
    # epochs are per namespace
    assert txids(provider, new_ns("fence")).epoch == 0


@ALL_LAYOUTS
def test_fenced_writer_changes_nothing(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns("fence")
    old = provider.new_state(ns)
    old.fence(provider.backend.acquire_epoch(ns))
    old.put("a", 1)
    old.prepare_commit(1)
    old.commit(1)
    old.put("a", 2)
    old.put("b", 2)
    old.prepare_commit(2)
    prepared_before = provider.backend.load_prepared(ns)

    # a new driver takes over (on its own connection)
    takeover = open_backend(provider.config, fresh=True)
    try:
        new_epoch = takeover.acquire_epoch(ns)
    finally:
        takeover.close()
    assert new_epoch > (old.epoch or 0)

    def unchanged() -> None:
        rec = txids(provider, ns)
        assert (rec.committed, rec.prepared, rec.epoch) == (1, 2, new_epoch)
        assert committed(provider, ns) == {"a": 1}
        assert provider.backend.load_prepared(ns) == prepared_before

    with pytest.raises(FencedError) as info:
        old.commit(2)
    assert ns in str(info.value)
    assert isinstance(info.value, StateError)
    unchanged()
    with pytest.raises(FencedError):
        old.rollback()
    unchanged()
    old.put("c", 3)
    with pytest.raises(FencedError):
        old.prepare_commit(3)
    unchanged()
    old.put("d", 4)
    with pytest.raises(FencedError):
        old.commit()  # a direct write is fenced too
    unchanged()

    # the new driver recovers (rolls 2 back) and carries on
    new = provider.new_state(ns)
    new.fence(new_epoch)
    new.rollback()
    new.put("c", 3)
    new.prepare_commit(2)
    new.commit(2)
    assert committed(provider, ns) == {"a": 1, "c": 3}
    assert txids(provider, ns).epoch == new_epoch


@ALL_LAYOUTS
def test_a_newer_epoch_is_stored_by_its_first_write(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns = new_ns("fence")
    newer = provider.new_state(ns)
    newer.fence(40)
    newer.put("k", "newer")
    newer.prepare_commit(1)
    assert txids(provider, ns).epoch == 40
    older = provider.new_state(ns)
    older.fence(39)
    older.put("k", "older")
    with pytest.raises(FencedError):
        older.prepare_commit(1)
    with pytest.raises(FencedError):
        older.commit(1)
    newer.commit(1)
    assert committed(provider, ns) == {"k": "newer"}
    rec = txids(provider, ns)
    assert (rec.committed, rec.prepared, rec.epoch) == (1, None, 40)
    # an unfenced (admin) writer is never refused
    admin = provider.new_state(ns)
    admin.put("k", "admin")
    admin.commit()
    assert committed(provider, ns) == {"k": "admin"}


@ALL_LAYOUTS
def test_fencing_is_per_namespace(provider_url: str) -> None:
    provider = provider_of(provider_url)
    ns1, ns2 = new_ns("fence"), new_ns("fence")
    provider.backend.acquire_epoch(ns1)
    provider.backend.acquire_epoch(ns1)
    state = provider.new_state(ns2)
    state.fence(1)
    state.put("x", 1)
    state.prepare_commit(1)
    state.commit(1)
    assert committed(provider, ns2) == {"x": 1}


@ALL_LAYOUTS
def test_an_owned_write_refuses_a_store_that_lost_the_epoch(provider_url: str) -> None:
    """``write_owned`` (the coordinator record's write) never reads a missing or older epoch as "go on"."""
    provider = provider_of(provider_url)
    backend = provider.backend
    ns = new_ns("owned")
    epoch = backend.acquire_epoch(ns)
    backend.write_owned(ns, {b"r": b"1"}, epoch)
    assert backend.get(ns, b"r") == b"1"
    with pytest.raises(FencedError):
        backend.write_owned(ns, {b"r": b"old"}, epoch - 1)
    backend.drop(ns)  # the store lost the namespace (emptied, restarted without persistence)
    with pytest.raises(StateLossError) as info:
        backend.write_owned(ns, {b"r": b"2"}, epoch)
    text = str(info.value)
    assert f"namespace {ns!r}" in text and f"took epoch {epoch}" in text and "no epoch" in text
    assert backend.get(ns, b"r") is None and ns not in backend.namespaces()  # nothing was written
    # a store rolled back to an older epoch (a snapshot, a lagging replica) is refused the same way
    backend.acquire_epoch(ns)
    newer = backend.acquire_epoch(ns)
    backend.write_owned(ns, {b"r": b"3"}, newer)
    with pytest.raises(StateLossError, match="now holds epoch 2"):
        backend.write_owned(ns, {b"r": b"4"}, newer + 1)
    assert backend.get(ns, b"r") == b"3"
    # the plain write keeps its meaning: a newer epoch is stored by its first write
    backend.write_direct(ns, {b"r": b"5"}, newer + 1)
    assert txids(provider, ns).epoch == newer + 1


@ALL_LAYOUTS
def test_a_task_prepare_requires_exactly_the_epoch_its_driver_claimed(provider_url: str) -> None:
    """A task's prepare (``fence(epoch, owned=True)``) is refused by a store that lost the driver's epoch.

    The driver stamps its epoch on every task namespace at start (``Backend.claim``); a namespace
    emptied, restarted without persistence or rolled back while the batch ran then refuses the
    prepare with :class:`StateLossError` and nothing is written (no uncommitted change set is left).
    """
    provider = provider_of(provider_url)
    backend = provider.backend
    ns = new_ns("claim")
    epoch = backend.acquire_epoch(new_ns("coordinator"))  # the driver's epoch, taken on its own record
    backend.claim(ns, epoch)
    assert txids(provider, ns).epoch == epoch
    state = provider.new_state(ns)
    state.fence(epoch, owned=True)
    state.put("a", 1)
    state.prepare_commit(1)
    state.commit(1)
    state.put("a", 2)
    backend.drop(ns)  # the store lost the namespace while the batch ran
    with pytest.raises(StateLossError) as info:
        state.prepare_commit(2)
    text = str(info.value)
    assert f"namespace {ns!r}" in text and f"took epoch {epoch}" in text and "nothing was written" in text, text
    assert ns not in backend.namespaces() and backend.load_prepared(ns) is None  # no change set was left
    # a store rolled back to an older epoch than the driver's refuses the same way
    backend.claim(ns, epoch)
    later = provider.new_state(ns)
    later.fence(epoch + 1, owned=True)  # a driver whose claim the store no longer holds
    later.put("a", 3)
    with pytest.raises(StateLossError, match=f"now holds epoch {epoch}"):
        later.prepare_commit(1)
    assert backend.load_prepared(ns) is None and txids(provider, ns).prepared is None
    # a newer driver claimed the namespace: the older one is fenced, and cannot claim it back
    backend.claim(ns, epoch + 2)
    with pytest.raises(FencedError):
        later.prepare_commit(1)
    with pytest.raises(FencedError):
        backend.claim(ns, epoch + 1)
    assert backend.load_prepared(ns) is None and txids(provider, ns).epoch == epoch + 2
    # without owned the old meaning stays: a missing epoch is stored by the first write
    plain = provider.new_state(ns)
    plain.fence(epoch + 3)
    plain.put("a", 4)
    plain.prepare_commit(1)
    assert txids(provider, ns).epoch == epoch + 3 and txids(provider, ns).prepared == 1
