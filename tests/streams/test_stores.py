"""Checkpoints in every durable store: chunking, restore, garbage collection, retention, fencing."""

from __future__ import annotations

import pytest

from tests.servers import DURABLE_PROVIDERS
from tests.streams._ops import Blob, Summer, calls
from weir.errors import FencedError
from weir.runtime.spark.streams.operators import live_instance, run_operator_task
from weir.streams import store as store_mod
from weir.streams.store import TaskCheckpoints
from weir.testing import OperatorTester

pytestmark = pytest.mark.services

NS = "tester-op-0"


def _chunk_keys(t: OperatorTester) -> set[bytes]:
    return {k for k, _ in t.provider.backend.scan(NS) if k.startswith(b"c/")}


def _retained_keys(t: OperatorTester) -> set[bytes]:
    head = t.head()
    assert head is not None
    return {k for m in head.retained for k in m.keys()}


@pytest.mark.parametrize("provider_url", DURABLE_PROVIDERS, indirect=True)
def test_multi_chunk_checkpoints_restore_exactly_and_garbage_is_collected(
    provider_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_mod, "CHUNK_BYTES", 1000)
    t = OperatorTester(Blob(4500, non_blocking=True), input_fields=["v"], store_url=provider_url)
    t.run_batch([[1], [2], [2]])
    head = t.head()
    assert head is not None and head.latest is not None
    assert head.latest.chunks == 5 and head.latest.size > 4500  # 4500 bytes + header, in 1000-byte chunks
    t.run_batch([[7]], fail=True)  # chunks written by the failed attempt become garbage
    t.run_batch([[7]])
    t.run_batch([[9]], crash=True)  # chunks written, head prepared, then the driver dies
    t.crash()
    t.run_batch([[9]])  # recovery rolls txid 3 back; the retry restores from checkpoint 2
    t.run_batch([[4503]])
    op = live_instance(t.provider.backend.describe(), "tester", "op", 0)
    assert isinstance(op, Blob)
    expected = bytearray(4500)
    for v in (1, 2, 2, 7, 9, 4503):
        expected[v % 4500] += 1
    assert op.data == expected
    ck = t.checkpoint()
    assert ck is not None and ck.sequence_id == 4 and ck.input_stream.read() == expected
    # only the retained checkpoints' chunks are left: failed attempts and retired ones are gone
    assert _chunk_keys(t) == _retained_keys(t)
    assert len(_chunk_keys(t)) == 10
    rec = t.provider.backend.txids(NS)
    assert rec.committed == 4 and rec.prepared is None


@pytest.mark.parametrize("provider_url", ["sqlite", "redis", "postgres"], indirect=True)
def test_a_fenced_task_cannot_write_checkpoints(provider_url: str) -> None:
    t = OperatorTester(Summer(), input_fields=["v"], store_url=provider_url)
    t.run_batch([[1]])
    old_epoch = t.coordinator.epoch
    t.crash()  # a new driver takes a newer epoch ...
    t.run_batch([[2]])  # ... and writes the namespace with it
    out = list(run_operator_task(t.spec, 0, 3, old_epoch, [("src", "default", (5,), 0)]))
    report = out[-1][1]
    assert not report.ok and report.fenced and report.error_type == "FencedError"
    assert t.provider.backend.txids(NS).prepared is None  # the late task of the old driver wrote nothing
    store = TaskCheckpoints(t.provider.backend, NS, "operator 'op' task 0", old_epoch)
    with pytest.raises(FencedError):
        store.mark_started()


@pytest.mark.parametrize("provider_url", ["sqlite", "postgres"], indirect=True)
def test_call_order_is_the_same_on_a_real_store(provider_url: str) -> None:
    t = OperatorTester(Summer(), input_fields=["v"], store_url=provider_url)
    t.run_batch([[1]])
    t.run_batch([[2]], fail=True)
    t.run_batch([[2]])
    t.crash()
    t.run_batch([[3]])
    resets = calls("task", methods=("reset", "reset_to_initial_state"))
    assert resets == [("op", "reset", 1), ("a", "reset", 1), ("op", "reset", 2), ("a", "reset", 2)]
    ck = t.checkpoint()
    assert ck is not None and ck.read_object() == 6
