"""Nothing read from a store is executed: every record kind weir reads, poisoned with a pickle.

The payload's unpickling would create a marker file. For Storm, Trident and Streams records on
SQLite, Redis and PostgreSQL, each reader refuses the record with an error naming it, and the
marker never appears.
"""

from __future__ import annotations

import json
import os
import pickle
import zlib
from pathlib import Path
from typing import Any

import pytest

from weir import datacodec as _data
from weir.checkpoint.coordinator import CheckpointStore
from weir.errors import CheckpointError, SerializationError, WeirError
from weir.runtime.spark.trident.state_tasks import JOURNAL_V1, journal_key, read_touches
from weir.state.config import parse_provider_config, provider_from_url
from weir.state.factory import open_backend
from weir.state.kv import TransactionalKeyValueState
from weir.streams.checkpoint import MAGIC, MAGIC_V1
from weir.streams.store import HEAD, CheckpointMeta, Head, TaskCheckpoints, chunk_key
from weir.trident.backing.codec import decode_cell
from weir.trident.state import StateType


class _Boom:
    """Unpickling it runs ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


class _Provider:
    def __init__(self, backend: Any) -> None:
        self.backend = backend


def _backend(url: str) -> Any:
    return open_backend(
        parse_provider_config(
            {"topology.state.provider": provider_from_url(url), "topology.state.provider.config": {"url": url}}
        ),
        fresh=True,
    )


@pytest.mark.parametrize("provider_url", ["sqlite", "redis", "postgres"], indirect=True)
def test_every_record_kind_poisoned_runs_nothing(provider_url: str, tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    evil = pickle.dumps(_Boom(marker), protocol=pickle.HIGHEST_PROTOCOL)
    assert evil[:1] == b"\x80"
    backend = _backend(provider_url)
    errors: dict[str, str] = {}

    def expect(kind: str, fn: Any, *names: str) -> None:
        with pytest.raises(WeirError) as info:
            fn()
        text = str(info.value)
        for n in names:
            assert n in text, (kind, text)
        errors[kind] = text

    try:
        # ---- Storm: the coordinator record, a state value (JSON), a dead letter
        ck_ns = "$checkpointspout-t"
        backend.write_direct(ck_ns, {b"__state": evil}, None)
        expect("coordinator record", lambda: CheckpointStore(backend, "t").load(), ck_ns, "coordinator record")
        backend.write_direct("t-count-0", {b'"w"': evil}, None)
        state = TransactionalKeyValueState(backend, "t-count-0")
        expect("state value", lambda: state.get("w"), "t-count-0", "stored key b'\"w\"'")
        expect("state iteration", lambda: list(state), "t-count-0")
        backend.write_direct("t-$deadletter", {b'"000000000001:000000"': evil}, None)
        letters = TransactionalKeyValueState(backend, "t-$deadletter")
        expect("dead letter", lambda: letters.get("000000000001:000000"), "t-$deadletter")

        # ---- Trident: the opaque journal (raw pickle, pickle tag, versioned) and a map-state cell
        for i, row in enumerate(
            (evil, b"p" + evil, JOURNAL_V1 + b"p" + evil, JOURNAL_V1 + _data.encode((7, [("a",)]))[:1] + b"p" + evil)
        ):
            backend.write_direct(ck_ns, {journal_key("s", 0): row}, None)
            expect(
                f"trident journal {i}",
                lambda: read_touches(_Provider(backend), ck_ns, "s", 1, 7),
                ck_ns,
                "trident-journal/s/0",
            )
        assert "holds a pickle payload" in errors["trident journal 1"]
        expect(
            "trident cell", lambda: decode_cell(evil, StateType.OPAQUE, ("w",), where="map 'm' key ('w',)"), "map 'm'"
        )

        # ---- Streams: the head, and checkpoint chunks with valid size and CRC (a forger computes them)
        ns = "t-win-0"
        store = TaskCheckpoints(backend, ns, "operator 'win' task 0")
        backend.write_direct(ns, {HEAD: evil}, None)
        expect("streams head", store.head, "operator 'win' task 0", "key 'head'")
        stream_obj = b"D" + (len(evil) + 1).to_bytes(8, "big") + b"p" + evil
        forged = {
            "v1 pickled map": MAGIC_V1 + (0).to_bytes(8, "big") + len(evil).to_bytes(8, "big") + evil,
            "codec p": MAGIC + b"p" + (0).to_bytes(8, "big") + len(evil).to_bytes(8, "big") + evil,
            "data map": MAGIC + b"d" + (0).to_bytes(8, "big") + len(evil).to_bytes(8, "big") + evil,
            "data object": MAGIC + b"d" + len(stream_obj).to_bytes(8, "big") + stream_obj + (0).to_bytes(8, "big"),
        }
        for i, (kind, blob) in enumerate(forged.items()):
            meta = CheckpointMeta(i + 1, 0.0, "tok", 1, len(blob), zlib.crc32(blob))
            backend.write_direct(ns, {chunk_key(meta.id, "tok", 0): blob}, None)
            head = Head("tok", i + 1, retained=(meta,))
            backend.write_direct(ns, {HEAD: head.to_bytes()}, None)

            def restore(m: CheckpointMeta = meta) -> None:
                ck = store.load(m)
                ck.read_object()

            expect(f"streams checkpoint ({kind})", restore, f"checkpoint {i + 1} of operator 'win' task 0")
        assert "stored pickled" in errors["streams checkpoint (v1 pickled map)"]
        assert "holds a pickle payload" in errors["streams checkpoint (data object)"]
        # a dead-letter or intents record that is JSON never needs a decoder that runs code
        backend.write_direct(ns, {b"intents": evil}, None)
        assert store.collect_garbage(None) == 0
    finally:
        backend.close()
    assert not marker.exists(), "a poisoned record was unpickled"
    assert all(isinstance(e, str) and e for e in errors.values())
    json.dumps(errors)  # every message is plain text


def test_the_pickle_state_serializer_is_the_one_documented_exception(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    backend = _backend(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        backend.write_direct("t-count-0", {b'"w"': pickle.dumps(_Boom(marker))}, None)
        state = TransactionalKeyValueState(backend, "t-count-0")
        with pytest.raises(SerializationError):
            state.get("w")  # JSON, the default: not executed
        assert not marker.exists()
    finally:
        backend.close()


def test_a_checkpoint_of_an_untrusted_store_is_refused_before_any_unpickling(tmp_path: Path) -> None:
    evil = pickle.dumps(_Boom(tmp_path / "PWNED"))
    with pytest.raises(CheckpointError, match="weir never unpickles"):
        from weir.streams.checkpoint import Checkpoint

        Checkpoint.from_bytes(MAGIC_V1 + (0).to_bytes(8, "big") + len(evil).to_bytes(8, "big") + evil, 1)
    assert not (tmp_path / "PWNED").exists()
