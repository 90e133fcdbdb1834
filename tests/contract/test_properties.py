"""The provider contract as a property: random put/delete/prepare/commit/rollback sequences against
a plain-dict model, on every provider.

The model tracks what the writing instance sees (pending over its own prepared set over committed
rows), what is stored as prepared in the backend, and what any other reader sees (committed rows).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.contract._support import ALL, independent_reader, provider_of, view
from weir.errors import StateError

KEYS = st.sampled_from(["a", "b", "c", "ключ", "🔑", 7, ""])
VALUES = st.one_of(
    st.integers(-(2**63), 2**63),
    st.text(max_size=8),
    st.lists(st.integers(0, 9), max_size=3),
    st.binary(max_size=6),
)
# op kinds, repeated by weight: writes weigh more, so change sets are not trivially small
_KINDS = ["put"] * 6 + ["delete"] * 3 + ["get", "prepare", "prepare", "commit", "commit"]
_KINDS += ["rollback", "reopen", "stale_prepare", "check"]


def _op(kind: str) -> st.SearchStrategy[tuple[Any, ...]]:
    if kind == "put":
        return st.tuples(st.just(kind), KEYS, VALUES)
    if kind in ("delete", "get"):
        return st.tuples(st.just(kind), KEYS)
    return st.just((kind,))


OPS = st.sampled_from(_KINDS).flatmap(_op)


@dataclass
class Model:
    """What the contract says each layer holds."""

    committed: dict[Any, Any] = field(default_factory=dict)
    committed_txid: int | None = None
    stored: tuple[int, dict[Any, Any]] | None = None  # the backend's prepared set (None = tombstone)
    own: dict[Any, Any] | None = None  # the prepared set this instance sees
    pending: dict[Any, Any] = field(default_factory=dict)
    next_txid: int = 1

    def lookup(self, key: Any) -> Any:
        for layer in (self.pending, self.own or {}):
            if key in layer:
                return layer[key]
        return self.committed.get(key)

    def own_view(self) -> dict[Any, Any]:
        out = dict(self.committed)
        for layer in (self.own or {}, self.pending):
            for k, v in layer.items():
                if v is None:
                    out.pop(k, None)
                else:
                    out[k] = v
        return out


def _run(provider: Any, ops: list[tuple[Any, ...]]) -> None:
    ns = f"prop-{uuid.uuid4().hex[:12]}-0"
    state = provider.new_state(ns)
    m = Model()

    def check() -> None:
        assert view(state) == m.own_view()
        with independent_reader(provider, ns) as reader:
            assert view(reader) == m.committed
        rec = provider.backend.txids(ns)
        assert rec.committed == m.committed_txid
        assert rec.prepared == (m.stored[0] if m.stored else None)

    for op in ops:
        kind = op[0]
        if kind == "put":
            state.put(op[1], op[2])
            m.pending[op[1]] = op[2]
        elif kind == "delete":
            assert state.delete(op[1]) == m.lookup(op[1])
            m.pending[op[1]] = None
        elif kind == "get":
            assert state.get(op[1], "<none>") == (m.lookup(op[1]) if m.lookup(op[1]) is not None else "<none>")
        elif kind == "prepare":
            txid = m.next_txid
            m.next_txid += 1
            state.prepare_commit(txid)
            merged = {**(m.own or {}), **m.pending}
            m.stored, m.own, m.pending = (txid, merged), merged, {}
        elif kind == "commit":
            if m.stored is not None:
                txid, changes = m.stored
                state.commit(txid)
                for k, v in changes.items():
                    if v is None:
                        m.committed.pop(k, None)
                    else:
                        m.committed[k] = v
                m.committed_txid, m.stored, m.own = txid, None, None
            elif m.committed_txid is not None:
                state.commit(m.committed_txid)  # idempotent no-op
            else:
                with pytest.raises(StateError):
                    state.commit(m.next_txid)
        elif kind == "rollback":
            state.rollback()
            m.stored, m.own, m.pending = None, None, {}
        elif kind == "reopen":  # a restarted task: pending and its own view of the prepared set are gone
            state = provider.new_state(ns)
            m.own, m.pending = None, {}
        elif kind == "stale_prepare":
            if m.committed_txid is not None:
                with pytest.raises(StateError):
                    state.prepare_commit(m.committed_txid)
        elif kind == "check":
            check()
    check()


@ALL
@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(OPS, min_size=8, max_size=40))
def test_random_protocol_sequences_match_the_dict_model(provider_url: str, ops: list[tuple[Any, ...]]) -> None:
    _run(provider_of(provider_url), ops)
