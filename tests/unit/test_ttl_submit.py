"""``weir.state.ttl.ms`` / ``weir.state.value.type`` are checked at submit, before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import weir
from weir.demo import wordcount_topology
from weir.errors import ConfigError, TopologyError
from weir.trident import TridentTopology


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


@pytest.mark.parametrize("key", ["weir.state.ttl.ms"])  # weir.state.value.type: tests/contract/test_trident_encoding.py
def test_trident_refuses_the_storm_only_keys(tmp_path: Path, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"topology 'tri': {key} applies to .*Storm.*TridentTopology"):
        weir.submit("tri", _conf(tmp_path, **{key: 1000 if key.endswith("ms") else "int"}), TridentTopology())
