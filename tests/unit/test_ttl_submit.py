"""``weir.state.ttl.ms`` / ``weir.state.value.type`` are checked at submit, before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import weir
from tests.trident._support import Split
from weir.demo import wordcount_topology
from weir.errors import ConfigError, TopologyError
from weir.sources import FileSpout
from weir.trident import Count, MemoryMapState, TridentTopology
from weir.trident.backing import SqliteMapState


def _conf(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"weir.state.dir": str(tmp_path / "state"), "weir.spark.master": "local[1]", **extra}


def test_a_ttl_on_a_bolt_without_state_is_refused_naming_it(tmp_path: Path) -> None:
    topo = wordcount_topology(str(tmp_path), parallelism=1)
    topo.components["split"].conf["weir.state.ttl.ms"] = 1000
    with pytest.raises(
        TopologyError, match=r"topology 'ttlbad', component 'split': weir.state.ttl.ms .*keeps no state"
    ):
        weir.submit("ttlbad", _conf(tmp_path), topo)


def test_a_bad_ttl_is_refused(tmp_path: Path) -> None:
    topo = wordcount_topology(str(tmp_path), parallelism=1)
    with pytest.raises(ConfigError, match=r"component 'count': weir.state.ttl.ms: a TTL must be positive"):
        weir.submit("ttlzero", _conf(tmp_path, **{"weir.state.ttl.ms": 0}), topo)


def _trident(factory: Any) -> TridentTopology:
    topo = TridentTopology()
    (
        topo.new_stream("lines", FileSpout("/nonexistent-ttl-lines"))
        .each(["line"], Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(factory, Count(), "count")
        .name("counts")
    )
    return topo


def test_trident_ttl_on_a_memory_map_state_is_refused_before_spark(tmp_path: Path) -> None:
    conf = _conf(tmp_path, **{"weir.state.ttl.ms": {"counts": 1000}})
    with pytest.raises(
        ConfigError, match=r"topology 'tri', state 'counts': weir.state.ttl.ms: TTL is supported .*MemoryMapState"
    ):
        weir.submit("tri", conf, _trident(MemoryMapState.Factory()))


def test_trident_ttl_refusals_at_submit_name_the_state_and_the_reason(tmp_path: Path) -> None:
    conf = _conf(tmp_path)
    topo = _trident(SqliteMapState.opaque(str(tmp_path / "maps.db"), table="ttlbad"))
    with pytest.raises(ConfigError, match=r"topology 'ttlbad': weir.state.ttl.ms of a Trident topology names its"):
        weir.submit("ttlbad", {**conf, "weir.state.ttl.ms": 1000}, topo)
    with pytest.raises(ConfigError, match=r"names 'words', which is no state .*'counts'"):
        weir.submit("ttlbad", {**conf, "weir.state.ttl.ms": {"words": 1000}}, topo)
    with pytest.raises(ConfigError, match=r"state 'counts': weir.state.ttl.ms: a TTL must be positive"):
        weir.submit("ttlbad", {**conf, "weir.state.ttl.ms": {"trident:counts": 0}}, topo)
    plain = _trident(SqliteMapState.non_transactional(str(tmp_path / "maps.db"), table="ttlnt"))
    inexact = {**conf, "weir.trident.allow.inexact": True, "weir.state.ttl.ms": {"counts": 1000}}
    with pytest.raises(ConfigError, match=r"state 'counts': weir.state.ttl.ms: a non-transactional map state"):
        weir.submit("ttlbad", inexact, plain)
