"""The change feed (``weir.state.changelog.retain``): read back with ``weir.state.read_changes`` and
``weir.state.read(..., txid=older)``, pruned with each commit; SQLite, PostgreSQL, Redis and Redis
Cluster keep it, a store that cannot is refused at submit."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

import weir
import weir.state
from tests.statedata.test_read import TASKS, build
from weir._util import stable_hash
from weir.errors import ConfigError
from weir.state import StateFactory
from weir.state.changelog import check_supported

pytestmark = pytest.mark.services

RETAIN = {"weir.state.changelog.retain": 3}
# txid 1..5; "-w" deletes w
FEED = [["the", "cow", "the"], ["the", "moon"], ["cow", "-the"], ["dog", "moon"], ["the"]]


def snapshots() -> dict[int, Counter[str]]:
    """The expected state after each txid."""
    out: dict[int, Counter[str]] = {}
    counts: Counter[str] = Counter()
    for txid, words in enumerate(FEED, 1):
        for w in words:
            if w.startswith("-"):
                del counts[w[1:]]
            else:
                counts[w] += 1
        out[txid] = Counter(counts)
    return out


def expected_changes(first: int, last: int) -> list[tuple[Any, ...]]:
    snaps = {0: Counter[str](), **snapshots()}
    rows = []
    for txid in range(first, last + 1):
        touched = {w.lstrip("-") for w in FEED[txid - 1]}
        for w in touched:
            change = ("put", snaps[txid][w]) if w in snaps[txid] else ("delete", None)
            rows.append((txid, "count", stable_hash(w) % TASKS, w, *change))
    return sorted(rows, key=repr)


def _state(df: Any) -> dict[str, int]:
    return {json.loads(r.key): json.loads(r.value) for r in df.collect()}


@pytest.mark.parametrize("provider_url", ["sqlite", "postgres", "redis", "redis-cluster"], indirect=True)
def test_feed_holds_the_last_n_txids_and_rewinds_reads(spark: Any, provider_url: str) -> None:
    build(provider_url, batches=FEED, conf=RETAIN)
    snaps = snapshots()
    got = weir.state.read_changes(spark, provider_url, "wc", 3, 5)
    assert got.columns == ["txid", "component", "task", "key", "change_type", "value"]
    rows = [
        (
            r.txid,
            r.component,
            r.task,
            json.loads(r.key),
            r.change_type,
            None if r.value is None else json.loads(r.value),
        )
        for r in got.collect()
    ]
    assert sorted(rows, key=repr) == expected_changes(3, 5)
    # retain 3 at txid 5: txids 3..5 are kept, 1..2 pruned (the commits pruned them)
    with pytest.raises(ConfigError, match=r"txids 2\.\.5 are not all in the change feed, which holds txids 3\.\.5"):
        weir.state.read_changes(spark, provider_url, "wc", 2, 5)
    # time travel: the state at txid 2 is rebuilt from txids 3..5's before-images
    for txid in (2, 3, 4, 5):
        assert _state(weir.state.read(spark, provider_url, "wc", txid=txid)) == dict(snaps[txid]), txid
    df = weir.state.read(spark, provider_url, "wc", txid=2)
    assert {r.txid for r in df.collect()} == {2}
    with pytest.raises(ConfigError, match=r"txids 2\.\.5 are not all in the change feed, which holds txids 3\.\.5"):
        weir.state.read(spark, provider_url, "wc", txid=1)
    with pytest.raises(ConfigError, match=r"cannot read at txid 6: the last committed txid is 5"):
        weir.state.read(spark, provider_url, "wc", txid=6)
    # the feed is bounded: only txids 3..5 are stored
    backend: Any = StateFactory.from_url(provider_url).backend
    for t in range(TASKS):
        txids = {c.txid for c in backend.log_changes(f"wc-count-{t}", 0, 100)}
        assert txids <= {3, 4, 5}


@pytest.mark.parametrize("provider_url", ["sqlite"], indirect=True)
def test_without_a_feed_older_txids_are_refused(spark: Any, provider_url: str) -> None:
    build(provider_url)
    with pytest.raises(ConfigError, match=r"no change feed was kept; submit the topology with weir.state.changelog"):
        weir.state.read(spark, provider_url, "wc", txid=2)
    with pytest.raises(ConfigError, match=r"no change feed was kept"):
        weir.state.read_changes(spark, provider_url, "wc", 1, 3)


@pytest.mark.parametrize("provider_url", ["memory"], indirect=True)
def test_a_store_without_a_feed_is_refused(provider_url: str) -> None:
    # the memory provider's own backend keeps no feed (a submitted topology runs it on a run-scoped
    # SQLite file, which does); HBase's refusal at submit is in tests/statedata/test_hbase_memcached.py
    backend = StateFactory.from_url(provider_url).backend
    with pytest.raises(ConfigError, match=r"topology 'fx': weir.state.changelog.retain = 3 asks for a change feed, "):
        check_supported(backend, RETAIN, "fx")
    with pytest.raises(ConfigError, match=r"must be 0 \(off\) or more, got -1"):
        check_supported(backend, {"weir.state.changelog.retain": -1})
