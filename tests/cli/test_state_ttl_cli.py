"""``weir state get`` / ``dump`` / ``load`` with expiring keys: expired keys and TTL rows are never shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli._support import backend, run, table
from weir.checkpoint.coordinator import CheckpointPhase, CheckPointState, CheckpointStore
from weir.state.kv import TransactionalKeyValueState

Cap = pytest.CaptureFixture[str]


def _fill(url: str, batch_ms: int) -> None:
    """Topology ``tt``'s task namespace with two expiring keys and one permanent one; its record at ``batch_ms``."""
    b = backend(url)
    try:
        s = TransactionalKeyValueState(b, "tt-count-0")
        s.set_batch_time(0)
        s.put("soon", 1, ttl=1000)
        s.put("late", 2, ttl=9000)
        s.put("always", 3)
        s.prepare_commit(1)
        s.commit(1)
        store = CheckpointStore(b, "tt")
        epoch = store.acquire_epoch()
        store.save(CheckPointState(txid=1, phase=CheckpointPhase.COMMITTED, batch_ms=batch_ms, batch_txid=1), epoch)
    finally:
        b.close()


def test_get_and_dump_hide_expired_keys_and_ttl_rows(capsys: Cap, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    _fill(url, 5000)  # the topology's last batch time: "soon" has expired, "late" has not
    dump = run(capsys, "state", "dump", "--url", url, "tt-count-0")
    assert dump.code == 0, dump.err
    assert dump.json_lines() == [
        {"ns": "tt-count-0", "key": "always", "value": 3},
        {"ns": "tt-count-0", "key": "late", "value": 2},
    ]
    assert run(capsys, "state", "get", "--url", url, "tt-count-0", "late").out.strip() == "2"
    gone = run(capsys, "state", "get", "--url", url, "tt-count-0", "soon")
    assert gone.code == 1 and "not found" in gone.err


def test_dump_then_load_seeds_another_topology(capsys: Cap, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    _fill(url, 0)
    lines = run(capsys, "state", "dump", "--url", url, "tt-count-0").out
    seed = tmp_path / "seed.jsonl"
    seed.write_text(lines)
    argv = ("state", "load", "--url", url, "--topology", "copy", "--component", "count", "--parallelism", "2")
    loaded = run(capsys, *argv, str(seed))
    assert loaded.code == 0, loaded.err
    assert "loaded 3 keys" in loaded.out
    got = {}
    for t in range(2):
        for line in run(capsys, "state", "dump", "--url", url, f"copy-count-{t}").json_lines():
            got[line["key"]] = line["value"]
    assert got == {"always": 3, "late": 2, "soon": 1}
    again = run(capsys, *argv, str(seed))
    assert again.code == 0 and "loaded before; nothing to do" in again.out
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"key": "x", "value": 1}) + "\n")
    refused = run(capsys, *argv, str(other))
    assert refused.code != 0 and "namespace 'copy-count-" in refused.err and "already holds state" in refused.err


@pytest.mark.services
@pytest.mark.parametrize("provider_url", ["sqlite", "redis", "postgres"], indirect=True)
def test_ls_counts_user_keys_without_the_ttl_rows(capsys: Cap, provider_url: str) -> None:
    _fill(provider_url, 0)  # 3 user keys + weir's cursor and bucket rows
    b = backend(provider_url)
    try:
        assert b.count("tt-count-0") > 3  # the store does hold the reserved rows
    finally:
        b.close()
    r = run(capsys, "state", "ls", "--url", provider_url)
    assert r.code == 0, r.err
    rows = {row["namespace"]: row for row in table(r.out)}
    assert rows["tt-count-0"]["keys"] == "3", r.out


def test_inspect_counts_pending_changes_without_the_ttl_rows(capsys: Cap, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    b = backend(url)
    try:
        s = TransactionalKeyValueState(b, "tp-count-0")
        s.set_batch_time(0)
        s.put("soon", 1, ttl=1000)
        s.put("always", 3)
        s.prepare_commit(1)  # prepared, not committed: the change set also holds the cursor and a bucket row
        _, changes = b.load_prepared("tp-count-0") or (0, {})
        assert len(changes) > 2
    finally:
        b.close()
    r = run(capsys, "state", "inspect", "--url", url, "tp-count-0")
    assert r.code == 0, r.err
    row = {t["namespace"]: t for t in table(r.out.split("\n", 2)[2])}["tp-count-0"]
    assert (row["upserts"], row["tombstones"]) == ("2", "0"), r.out
