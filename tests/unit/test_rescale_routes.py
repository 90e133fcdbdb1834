"""Which stateful components a parallelism change re-partitions, and the clear refusals of the others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from weir._util import stable_hash
from weir.checkpoint.coordinator import CheckPointState, CheckpointStore
from weir.checkpoint.rescale import Rescaler, task_namespace
from weir.demo import WordCount
from weir.errors import ConfigError
from weir.runtime.spark.storm.submit import rescale_routes
from weir.sources import RateSpout
from weir.state import StateFactory
from weir.streams import Operator, StateHandler
from weir.topology import Fields, TopologyBuilder
from weir.topology.windowing import Count, StatefulWindowedBolt


class ShuffledCount(WordCount):
    """A word count fed by a shuffle grouping: its keys say nothing about tasks."""


class HookedCount(WordCount):
    """Fed by a shuffle grouping, but says where a key goes: by its length."""

    def rescale_state(self, key: Any, parallelism: int) -> int | None:
        return len(key) % parallelism


class Windowed(StatefulWindowedBolt):
    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, window: Any) -> None:
        pass


class Counter(Operator, StateHandler):
    def process(self, tup: Any) -> None:
        pass

    def drain(self) -> None:
        pass

    def checkpoint(self, ckpt: Any) -> None:
        pass

    def reset(self, ckpt: Any) -> None:
        pass

    def reset_to_initial_state(self) -> None:
        pass

    def retire_checkpoint(self, id: int) -> None:  # noqa: A002 - the Streams name
        pass


def _topology() -> Any:
    b = TopologyBuilder()
    b.set_spout("src", RateSpout())
    b.set_bolt("fields", WordCount(), 2).fields_grouping("src", Fields("value"))
    b.set_bolt("shuffled", ShuffledCount(), 2).shuffle_grouping("src")
    b.set_bolt("hooked", HookedCount(), 2).shuffle_grouping("src")
    b.set_bolt("windowed", Windowed().with_tumbling_window(Count.of(3)), 2).fields_grouping("src", Fields("value"))
    b.set_bolt("op", Counter(), 2).fields_grouping("src", Fields("value"))
    return b.create_topology()


def test_each_kind_of_component_is_routed_or_refused_by_name(tmp_path: Path) -> None:
    provider = StateFactory.from_url(f"sqlite:///{tmp_path / 's.db'}")
    routes = rescale_routes(_topology(), provider)
    assert routes["fields"].route is not None and routes["hooked"].route is not None
    rec = CheckPointState(parallelism={c: 2 for c in routes})
    rescaler = Rescaler("t", routes)
    rescaler.check(rec, {"fields": 5, "hooked": 3})  # both re-partitionable
    for comp, words in (
        ("shuffled", ["'shuffled'", "shuffle do not say", "rescale_state"]),
        ("windowed", ["'windowed'", "windowed bolt"]),
        ("op", ["'op'", "Streams operator"]),
    ):
        with pytest.raises(ConfigError) as info:
            rescaler.check(rec, {comp: 3})
        for w in words:
            assert w in str(info.value), (comp, str(info.value))
        assert "t-" + comp + "-0..1" in str(info.value)
    with pytest.raises(ConfigError, match="weir.rescale=refuse"):
        Rescaler("t", routes, enabled=False).check(rec, {"fields": 5})


def test_a_rescale_state_hook_places_every_key(tmp_path: Path) -> None:
    provider = StateFactory.from_url(f"sqlite:///{tmp_path / 's.db'}")
    words = {"a": 1, "bb": 2, "ccc": 3, "dddd": 4, "eeeee": 5, "ffffff": 6}
    for t in range(2):
        state = provider.new_state(task_namespace("t", "hooked", t))
        for w, c in words.items():
            if stable_hash(w) % 2 == t:  # anywhere: a shuffle grouping put them there
                state.put(w, c)
        state.prepare_commit(1)
        state.commit(1)
    store = CheckpointStore(provider.backend, "t")
    epoch = store.acquire_epoch()
    store.save(CheckPointState(txid=1, parallelism={"hooked": 2}), epoch)
    rec = Rescaler("t", rescale_routes(_topology(), provider)).run(store, store.acquire_epoch(), {"hooked": 4})
    assert rec is not None and rec.parallelism == {"hooked": 4}
    for t in range(4):
        got = dict(provider.new_state(task_namespace("t", "hooked", t)))
        assert got == {w: c for w, c in words.items() if len(w) % 4 == t}
