"""``HBaseMapState`` on a real HBase: the three state types, ``cache_size``, the row layout, the
round trips per batch (one multi-get, one batched put) and a missing table."""

from __future__ import annotations

import json
import pickle
import uuid
from typing import Any

import pytest

from tests.servers import HBaseServer
from weir.errors import ConfigError
from weir.trident.backing import HBaseMapState, close_connections
from weir.trident.state import CombinerValueUpdater, OpaqueValue

pytestmark = pytest.mark.services


class Sum:
    def combine(self, a: int, b: int) -> int:
        return a + b


def _calls(state: Any) -> list[str]:
    """Record the Thrift methods the state's HBase client calls (the client is shared per process)."""
    backing = state.backing
    while not hasattr(backing, "store"):  # behind a CachedMap
        backing = backing.delegate
    client = backing.store.client()
    seen: list[str] = []
    real = client.call

    def call(method: str, *args: Any, **kw: Any) -> Any:
        seen.append(method)
        return real(method, *args, **kw)

    client.call = call  # type: ignore[method-assign]
    return seen


@pytest.fixture
def url(hbase_server: HBaseServer) -> Any:
    close_connections()
    yield hbase_server.url("trident")
    close_connections()


@pytest.mark.parametrize("state_type", ["opaque", "transactional", "non_transactional"])
def test_one_multi_get_and_one_batched_put_per_batch(url: str, state_type: str) -> None:
    prefix = f"wc{uuid.uuid4().hex[:6]}:"
    factory = HBaseMapState.factory(state_type, url, key_prefix=prefix)
    factory = pickle.loads(pickle.dumps(factory))  # what Spark ships to executors
    state = factory.make_state({}, 0, 1)
    calls = _calls(state)
    words = [[f"w{i}"] for i in range(500)]
    state.begin_commit(1)
    assert state.multi_update(words, [CombinerValueUpdater(Sum(), i) for i in range(500)]) == list(range(500))
    state.commit(1)
    assert calls == ["getRowsWithColumns", "mutateRows"]
    state.begin_commit(2)
    assert state.multi_update(words[:3], [CombinerValueUpdater(Sum(), 10)] * 3) == [10, 11, 12]
    state.commit(2)
    assert calls[2:] == ["getRowsWithColumns", "mutateRows"]
    # a new state (another process, after a restart) reads what was committed
    assert factory.make_state({}, 0, 1).multi_get([["w0"], ["w499"], ["nope"]]) == [10, 499, None]
    # replaying batch 2 (same txid) does not count twice for opaque / transactional maps
    if state_type != "non_transactional":
        again = factory.make_state({}, 0, 1)
        again.begin_commit(2)
        assert again.multi_update(words[:3], [CombinerValueUpdater(Sum(), 10)] * 3) == [10, 11, 12]
        again.commit(2)


def test_cells_are_json_in_one_row_per_key(url: str, hbase_server: HBaseServer) -> None:
    prefix = f"op{uuid.uuid4().hex[:6]}:"
    state = HBaseMapState.opaque(url, key_prefix=prefix).make_state({}, 0, 1)
    state.begin_commit(7)
    state.multi_put([["man", 1]], [3])
    state.commit(7)
    conn = hbase_server.connection()
    try:
        row = conn.table("trident").row(f'{prefix}["man",1]'.encode())
    finally:
        conn.close()
    assert json.loads(row[b"cf:c"]) == [7, 3, None]
    assert state.backing.multi_get([["man", 1]]) == [OpaqueValue(7, 3, None)]


def test_cache_size_serves_repeated_reads_from_the_cache(url: str) -> None:
    factory = HBaseMapState.transactional(url, key_prefix=f"c{uuid.uuid4().hex[:6]}:", cache_size=100)
    state = factory.make_state({}, 0, 1)
    state.begin_commit(1)
    state.multi_update([["a"], ["b"]], [CombinerValueUpdater(Sum(), 1)] * 2)
    state.commit(1)
    calls = _calls(state)
    assert state.multi_get([["a"], ["b"]]) == [1, 1]
    assert "getRowsWithColumns" not in calls


def test_a_missing_table_is_named_with_the_create_command(hbase_server: HBaseServer) -> None:
    with pytest.raises(ConfigError, match=r"table 'nosuch' does not exist.*create 'nosuch', 'cf'"):
        HBaseMapState.opaque(hbase_server.url("nosuch")).validate()


def test_the_bucketed_layout_is_refused_for_map_states() -> None:
    """Map states keep a row per key; the provider's layout options are refused, not ignored."""
    with pytest.raises(ConfigError, match=r"HBaseMapState keeps a row per Trident key.*layout=buckets"):
        HBaseMapState.opaque("hbase://127.0.0.1:9090/trident?family=cf&layout=buckets")
    with pytest.raises(ConfigError, match="HBaseMapState keeps a row per Trident key"):
        HBaseMapState.store({"tableName": "trident", "columnFamily": "cf", "buckets": 64})
    assert HBaseMapState.store("hbase://127.0.0.1:9090/trident?family=cf&layout=rows").settings.layout == "rows"
