"""The reader on HBase (both row layouts) and on memcached, which it refuses, saying why.

HBase: ``weir.state.read`` and ``weir state get --topology`` read the committed rows, never a
prepared change set; the change feed is refused at submit. Memcached holds Trident map states only
and cannot enumerate its keys, and weir keeps no key index there: the reader refuses it by name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import weir
import weir.state
from tests.cli._support import run
from tests.servers import Memcached
from tests.statedata.test_read import TASKS, _rows, build
from weir._util import stable_hash
from weir.checkpoint.coordinator import CheckpointPhase, CheckPointState, CheckpointStore
from weir.demo import wordcount_topology
from weir.errors import ConfigError
from weir.state import StateFactory

pytestmark = [pytest.mark.services]


@pytest.mark.xdist_group("hbase")
@pytest.mark.parametrize("provider_url", ["hbase", "hbase-rows"], indirect=True)
def test_hbase_read_and_state_get(
    spark: Any, provider_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    counts = build(provider_url)
    # txid 4 prepared, not committed: invisible to the reader and to `weir state get`
    provider = StateFactory.from_url(provider_url)
    CheckpointStore(provider.backend, "wc").save(
        CheckPointState(txid=4, phase=CheckpointPhase.PREPARING, parallelism={"count": TASKS}), 1
    )
    half = provider.new_state(f"wc-count-{stable_hash('the') % TASKS}")
    half.put("the", 1000)
    half.prepare_commit(4)

    df = weir.state.read(spark, provider_url, "wc")
    assert df.rdd.getNumPartitions() == TASKS
    assert _rows(df) == sorted(("count", stable_hash(w) % TASKS, w, n, 3) for w, n in counts.items())

    get = ["state", "get", "--url", provider_url, "--topology", "wc", "--component", "count"]
    r = run(capsys, *get, "the")
    task = stable_hash("the") % TASKS
    assert (r.code, json.loads(r.out)) == (0, counts["the"])
    assert f"component 'count', task {task}, namespace 'wc-count-{task}', txid 3" in r.err
    r = run(capsys, *get, "unicorn")
    assert r.code == 1 and 'key "unicorn" not found' in r.err

    # no change feed on HBase: refused at submit, naming the store and what to use
    (tmp_path / "in").mkdir()
    conf = {
        "weir.state.dir": str(tmp_path / "s"),
        "topology.state.provider.config": {"url": provider_url},
        "weir.state.changelog.retain": 3,
    }
    with pytest.raises(ConfigError, match=r"retain = 3 asks for a change feed, which the hbase store .* does not keep"):
        weir.submit("fx", conf, wordcount_topology(str(tmp_path / "in")), spark=spark)
    with pytest.raises(ConfigError, match=r"the hbase store .* keeps no change feed"):
        weir.state.read(spark, provider_url, "wc", txid=2)


def test_memcached_is_refused_by_the_reader(spark: Any, memcached_server: Memcached) -> None:
    url = memcached_server.url
    why = r"the memcached store .* cannot be read into a DataFrame: memcached cannot enumerate its keys"
    with pytest.raises(ConfigError, match=r"weir\.state\.read: " + why):
        weir.state.read(spark, url, "wc", "trident:words")
    with pytest.raises(ConfigError, match=r"weir\.state\.read_changes: " + why):
        weir.state.read_changes(spark, url, "wc", 1, 2)
