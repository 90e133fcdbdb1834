"""``weir.state.read`` and ``weir state get --topology``: a topology's committed state, on real stores.

A topology's state is written the way a run writes it (task namespaces prepared and committed per
txid, the coordinator record and topology shape stored, fenced by an epoch), then read into Spark:
the rows are exactly the committed ones, a prepared change set is never seen, a commit landing
during the read is named, and the CLI finds a key's task by the fields grouping's hash.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import weir.state
from tests.cli._support import run
from weir._util import stable_hash
from weir.checkpoint.coordinator import CheckpointPhase, CheckPointState, CheckpointStore
from weir.checkpoint.history import TOPOLOGY_KEY
from weir.errors import ConfigError, StateError
from weir.state import StateFactory
from weir.statedata import StateReadConflictError, read

pytestmark = pytest.mark.services

TASKS = 3
BATCHES = [["the", "cow", "the", "moon"], ["the", "man", "dog", "dog"], ["cow", "jumped"]]


def _shape(grouping: str) -> bytes:
    comp = {"id": "count", "kind": "bolt", "inputs": [{"source": "split", "grouping": grouping, "fields": ["word"]}]}
    return json.dumps({"components": [comp]}).encode()


def build(
    url: str,
    topology: str = "wc",
    grouping: str = "fields",
    batches: list[list[str]] | None = None,
    conf: dict[str, Any] | None = None,
) -> Counter[str]:
    """Commit ``batches`` (BATCHES) as txids 1.. of a word count with TASKS tasks; the expected counts.

    A word ``-w`` deletes ``w``.
    """
    provider = StateFactory.from_url(url)
    cstore = CheckpointStore(provider.backend, topology)
    epoch = cstore.acquire_epoch()
    counts: Counter[str] = Counter()
    for txid, words in enumerate(batches or BATCHES, 1):
        cstore.save(CheckPointState(txid=txid, phase=CheckpointPhase.PREPARING, parallelism={"count": TASKS}), epoch)
        states = [provider.new_state(f"{topology}-count-{t}", conf) for t in range(TASKS)]
        for s in states:
            s.fence(epoch)
        for w in words:
            if w.startswith("-"):
                states[stable_hash(w[1:]) % TASKS].delete(w[1:])
                del counts[w[1:]]
                continue
            s = states[stable_hash(w) % TASKS]
            s.put(w, s.get(w, 0) + 1)
            counts[w] += 1
        for s in states:
            s.prepare_commit(txid)
        for s in states:
            s.commit(txid)
        rec = CheckPointState(txid=txid, phase=CheckpointPhase.COMMITTED, parallelism={"count": TASKS})
        cstore.save(rec, epoch, extra={TOPOLOGY_KEY: _shape(grouping)})
    return counts


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted((r.component, r.task, json.loads(r.key), json.loads(r.value), r.txid) for r in df.collect())


@pytest.mark.parametrize("provider_url", ["sqlite", "redis", "postgres"], indirect=True)
def test_read_is_the_committed_state_at_one_txid(spark: Any, provider_url: str) -> None:
    counts = build(provider_url)
    # txid 4 is prepared (a running topology between its prepare and commit): invisible to the reader
    provider = StateFactory.from_url(provider_url)
    cstore = CheckpointStore(provider.backend, "wc")
    cstore.save(CheckPointState(txid=4, phase=CheckpointPhase.PREPARING, parallelism={"count": TASKS}), 1)
    half = provider.new_state(f"wc-count-{stable_hash('the') % TASKS}")
    half.put("the", 1000)
    half.put("new", 1)
    half.prepare_commit(4)

    df = weir.state.read(spark, provider_url, "wc")
    assert df.columns == ["component", "task", "key", "value", "txid"]
    assert df.rdd.getNumPartitions() == TASKS  # one partition per task namespace, read on the executors
    expected = sorted(("count", stable_hash(w) % TASKS, w, n, 3) for w, n in counts.items())
    assert _rows(df) == expected
    assert _rows(read(spark, provider_url, "wc", "count", txid=3)) == expected
    # the values are JSON text: Spark's own functions make them typed
    from pyspark.sql import functions as F

    total = df.select(F.sum(F.parse_json("value").cast("long")).alias("n")).first()
    assert total is not None and total.n == sum(counts.values())


@pytest.mark.parametrize("provider_url", ["sqlite", "redis", "postgres"], indirect=True)
def test_a_commit_during_the_read_is_named(spark: Any, provider_url: str) -> None:
    build(provider_url)
    df = read(spark, provider_url, "wc")  # consistent at txid 3; computed lazily
    provider = StateFactory.from_url(provider_url)
    late = provider.new_state("wc-count-1")
    late.put("late", 1)
    late.prepare_commit(4)
    late.commit(4)
    with pytest.raises(Exception, match=r"StateReadConflictError.*'wc-count-1'.*committed txid 4.*txid 3"):
        df.collect()
    # read again: consistent at txid 3 still (the record was not moved), so the newer namespace is named
    with pytest.raises(Exception, match=r"StateReadConflictError.*after the read began"):
        read(spark, provider_url, "wc").collect()


@pytest.mark.parametrize("provider_url", ["sqlite"], indirect=True)
def test_read_refuses_what_it_cannot_read(spark: Any, provider_url: str) -> None:
    build(provider_url)
    with pytest.raises(StateError, match=r"topology 'nope' has no coordinator record"):
        read(spark, provider_url, "nope")
    with pytest.raises(ConfigError, match=r"no stateful component 'split' \(its stateful components: count"):
        read(spark, provider_url, "wc", "split")
    with pytest.raises(ConfigError, match=r"'wc-count-0': no change feed was kept; submit the topology with"):
        read(spark, provider_url, "wc", txid=2)
    with pytest.raises(ConfigError, match=r"value_class: 'pickle' values are never unpickled"):
        read(spark, provider_url, "wc", value_class="pickle")
    # a record left COMMITTING (namespaces between two txids) is waited for, then named
    cstore = CheckpointStore(StateFactory.from_url(provider_url).backend, "wc")
    cstore.save(CheckPointState(txid=4, phase=CheckpointPhase.COMMITTING, parallelism={"count": TASKS}), 1)
    with pytest.raises(StateReadConflictError, match=r"committing txid 4 for over 0.2 s"):
        read(spark, provider_url, "wc", wait=0.2)


@pytest.mark.parametrize("provider_url", ["sqlite", "redis", "postgres", "hbase"], indirect=True)
def test_trident_map_state_at_the_committed_txid(spark: Any, provider_url: str, tmp_path: Path) -> None:
    from tests.trident._support import Store

    build(provider_url)
    scheme = provider_url.split(":", 1)[0]
    store = Store({"postgresql": "postgres"}.get(scheme, scheme), provider_url, "t")
    name = "trident:words_t" + (":" if store.kind in ("redis", "hbase") else "")  # a table, or a key prefix
    state = store.factory("opaque", "words").make_state({}, 0, 1)
    for txid, values in ((2, [3, 1]), (3, [5, 2]), (4, [9, 4])):  # txid 4: written, not committed
        state.begin_commit(txid)
        state.multi_put([["man"], ["dog"]], values)
        state.commit(txid)
    rows = sorted(  # PostgreSQL's BIGINT value column is read as a typed column, the others as JSON text
        (r.component, r.task, json.loads(r.key), json.loads(r.value) if isinstance(r.value, str) else r.value, r.txid)
        for r in read(spark, provider_url, "wc", name).collect()
    )
    assert rows == [(name, None, ["dog"], 2, 3), (name, None, ["man"], 5, 3)]


@pytest.mark.parametrize("provider_url", ["sqlite", "redis", "postgres"], indirect=True)
def test_state_get_finds_the_task_of_a_key(capsys: pytest.CaptureFixture[str], provider_url: str) -> None:
    counts = build(provider_url)
    get = ["state", "get", "--url", provider_url, "--topology", "wc", "--component", "count"]
    for word in ("the", "dog", "jumped"):
        r = run(capsys, *get, word)
        task = stable_hash(word) % TASKS
        assert (r.code, json.loads(r.out)) == (0, counts[word])
        assert f"component 'count', task {task}, namespace 'wc-count-{task}', txid 3" in r.err
    r = run(capsys, *get, "unicorn")
    assert r.code == 1 and 'key "unicorn" not found' in r.err
    r = run(capsys, "state", "get", "--url", provider_url, "--topology", "wc", "--component", "split", "x")
    assert r.code == 2 and "no stateful component 'split'" in r.err
    r = run(capsys, "state", "get", "--url", provider_url, "--topology", "nope", "--component", "count", "x")
    assert r.code == 2 and "topology 'nope' has no coordinator record" in r.err


@pytest.mark.parametrize("provider_url", ["sqlite"], indirect=True)
def test_state_get_refuses_a_component_not_fields_grouped(
    capsys: pytest.CaptureFixture[str], provider_url: str
) -> None:
    build(provider_url, "sh", grouping="shuffle")
    r = run(capsys, "state", "get", "--url", provider_url, "--topology", "sh", "--component", "count", "the")
    assert r.code == 2 and "fed by grouping(s) shuffle, so no hash says which task holds a key" in r.err
    r = run(capsys, "state", "get", "--url", provider_url, "sh-count-0")
    assert r.code == 2 and "needs NAMESPACE KEY, or --topology T --component C KEY" in r.err


def _streams_task(
    url: str, topology: str, task: int, txid: int, data: dict[str, Any], serializer: str = "data"
) -> None:
    """Commit a checkpoint of operator ``op`` task ``task`` holding ``data`` in its key-value map."""
    from weir.streams.checkpoint import Checkpoint
    from weir.streams.store import Head, TaskCheckpoints

    store = TaskCheckpoints(StateFactory.from_url(url).backend, f"{topology}-op-{task}", f"op task {task}")
    store.serializer = serializer
    store.mark_started()
    ckpt = Checkpoint(txid, serializer=serializer)
    for k, v in data.items():
        ckpt.put(k, v)
    ckpt.write_object({"not": "a row"})  # the stream part is not split into rows
    meta = store.write(ckpt, f"tok{txid}")
    store.prepare(txid, Head(f"tok{txid}", txid, retained=(meta,)))
    store.commit(txid)


@pytest.mark.parametrize("provider_url", ["sqlite", "redis", "postgres"], indirect=True)
def test_streams_operator_rows_are_its_latest_checkpoint_map(spark: Any, provider_url: str) -> None:
    cstore = CheckpointStore(StateFactory.from_url(provider_url).backend, "st")
    _streams_task(provider_url, "st", 0, 1, {"a": 1, "b": [1, 2]})
    _streams_task(provider_url, "st", 1, 1, {"c": {"x": 1}})
    cstore.save(CheckPointState(txid=1, parallelism={"op": 2}), cstore.acquire_epoch())
    assert _rows(read(spark, provider_url, "st")) == [
        ("op", 0, "a", 1, 1),
        ("op", 0, "b", [1, 2], 1),
        ("op", 1, "c", {"x": 1}, 1),
    ]
    # a checkpoint written with the pickle serializer is never unpickled by the reader
    _streams_task(provider_url, "sp", 0, 1, {"a": 1}, serializer="pickle")
    cs = CheckpointStore(StateFactory.from_url(provider_url).backend, "sp")
    cs.save(CheckPointState(txid=1, parallelism={"op": 1}), cs.acquire_epoch())
    with pytest.raises(Exception, match=r"pickle"):
        read(spark, provider_url, "sp").collect()


@pytest.mark.parametrize("provider_url", ["sqlite", "redis", "postgres"], indirect=True)
def test_windowed_bolt_rows_are_its_key_value_state(spark: Any, provider_url: str) -> None:
    from weir.statedata import resolve

    counts = build(provider_url)
    backend = StateFactory.from_url(provider_url).backend
    for t in range(TASKS):  # the window's stored tuples live beside the bolt's state
        backend.write_direct(f"wc-count-{t}-window", {b'["stored", "window", "tuple"]': b"1"}, None)
    assert resolve(backend, "wc").components["count"].kind == "windowed"
    assert _rows(read(spark, provider_url, "wc")) == sorted(
        ("count", stable_hash(w) % TASKS, w, n, 3) for w, n in counts.items()
    )


@pytest.mark.parametrize("provider_url", ["sqlite", "redis", "postgres", "hbase"], indirect=True)
def test_expiring_keys_read_as_every_reader_sees_them(
    spark: Any, provider_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """TTL and the readers: weir's reserved TTL rows are not user rows, an expiring value is read without its
    envelope, an expired key is gone from ``read``, ``read_changes`` and ``weir state get``."""
    provider = StateFactory.from_url(provider_url)
    cstore = CheckpointStore(provider.backend, "ttlr")
    epoch = cstore.acquire_epoch()
    feed = not provider_url.startswith("hbase")  # HBase keeps no change feed (refused at submit)
    conf = {"weir.state.changelog.retain": 5} if feed else {}
    for txid, now, puts in ((1, 10_000, [("old", 1, 500), ("kept", 2, None)]), (2, 20_000, [("new", 3, 60_000)])):
        rec = CheckPointState(
            txid=txid, phase=CheckpointPhase.PREPARING, parallelism={"count": 1}, batch_ms=now, batch_txid=txid
        )
        cstore.save(rec, epoch)
        state = provider.new_state("ttlr-count-0", conf)
        state.fence(epoch)
        state.set_batch_time(now)
        for k, v, ttl_ms in puts:
            state.put(k, v, ttl=ttl_ms)
        state.prepare_commit(txid)
        state.commit(txid)
        done = CheckPointState(
            txid=txid, phase=CheckpointPhase.COMMITTED, parallelism={"count": 1}, batch_ms=now, batch_txid=txid
        )
        cstore.save(done, epoch, extra={TOPOLOGY_KEY: _shape("fields")})
    assert any(k.startswith(b"\x00\xff") for k, _ in provider.backend.scan("ttlr-count-0"))  # the TTL index is there
    assert _rows(weir.state.read(spark, provider_url, "ttlr")) == [
        ("count", 0, "kept", 2, 2),
        ("count", 0, "new", 3, 2),
    ]
    if feed:
        changes = sorted(
            (r.txid, json.loads(r.key), r.change_type, None if r.value is None else json.loads(r.value))
            for r in weir.state.read_changes(spark, provider_url, "ttlr", 1, 2).collect()
        )
        assert changes == [
            (1, "kept", "put", 2), (1, "old", "put", 1), (2, "new", "put", 3), (2, "old", "delete", None)
        ]  # fmt: skip
    get = ["state", "get", "--url", provider_url, "--topology", "ttlr", "--component", "count"]
    r = run(capsys, *get, "new")
    assert (r.code, json.loads(r.out)) == (0, 3), r
    r = run(capsys, *get, "old")
    assert r.code == 1 and 'key "old" not found' in r.err, r
