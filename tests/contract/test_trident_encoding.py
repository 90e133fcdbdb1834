"""Schema evolution for Trident map states: the recorded encoding, its rules, and ``weir state convert``.

The encoding of each map state is recorded as ``trident:<table or prefix>`` beside the coordinator
record and checked by Storm's written rules; ``weir state convert --component trident:<name>``
rewrites every value (an opaque cell's ``curr`` and ``prev`` alike), on SQLite, Redis and PostgreSQL,
and killed with SIGKILL after its marker it is finished by the next start, never applied twice.
"""

from __future__ import annotations

import re
import signal
import uuid
from typing import Any

import pytest

from tests.cli._support import run, run_subprocess
from tests.contract._support import provider_of, provider_params
from tests.crash._harness import run_driver
from tests.trident._support import Split, Store
from weir.checkpoint.coordinator import RECORD_KEY, CheckpointPhase, CheckPointState, CheckpointStore
from weir.checkpoint.encoding import check_encodings, load_encodings, record_encodings
from weir.errors import ConfigError
from weir.runtime.spark.trident.convert import CONVERT_KEY, finish_trident_convert, staging_namespace
from weir.runtime.spark.trident.encoding import check_map_encodings, trident_encodings
from weir.sources import RateSpout
from weir.state.evolution import EvolutionError
from weir.state.factory import open_backend
from weir.trident import Count, TridentTopology
from weir.trident.backing import PostgresMapState, RedisMapState, SqliteMapState
from weir.trident.state import CombinerValueUpdater, OpaqueValue, TransactionalValue

STORES = pytest.mark.parametrize("provider_url", provider_params(("sqlite", "redis", "postgres")), indirect=True)
Cap = pytest.CaptureFixture[str]


def times_ten(value: Any) -> Any:
    """The conversion the tests run (``module:function`` for ``weir state convert``)."""
    return value * 10


def to_text(value: Any) -> Any:
    return f"n={value}"


class Add:
    def combine(self, a: Any, b: Any) -> Any:
        return a + b


def _store(url: str) -> Store:
    kind = "sqlite" if url.startswith("sqlite") else "redis" if url.startswith("redis") else "postgres"
    return Store(kind, url, uuid.uuid4().hex[:8])


def _map_name(store: Store, name: str) -> str:
    return f"{name}_{store.tag}" + (":" if store.kind == "redis" else "")


def _topology(factory: Any) -> TridentTopology:
    topo = TridentTopology()
    (
        topo.new_stream("s", RateSpout(rows_per_batch=1))
        .each(["value"], Split(), ["word:str"])
        .group_by(["word"])
        .persistent_aggregate(factory, Count(), "count")
        .name("counts")
    )
    return topo


@STORES
def test_encodings_of_map_states_follow_the_written_rules(provider_url: str) -> None:
    store = _store(provider_url)
    name = _map_name(store, "wc")
    backend = open_backend(provider_of(provider_url).config)
    opaque = _topology(store.factory("opaque", "wc"))
    first = trident_encodings("enc", {"weir.state.value.type": {"counts": "int"}}, opaque)
    assert {k: v.to_json() for k, v in first.items()} == {
        f"trident:{name}": {
            "key_serializer": "json",
            "value_serializer": "trident-opaque",
            "key_type": "any",
            "value_type": "int",
        }
    }
    record_encodings(backend, "enc", first, CheckpointStore(backend, "enc").acquire_epoch())
    check_encodings(backend, "enc", trident_encodings("enc", {"weir.state.value.type": "float"}, opaque))  # V2
    check_encodings(backend, "enc", trident_encodings("enc", {}, opaque))  # any (V1)
    shown = re.escape(name)
    with pytest.raises(EvolutionError, match=rf"topology 'enc', Trident map state '{shown}'.*rule V2.*int to str"):
        check_encodings(backend, "enc", trident_encodings("enc", {"weir.state.value.type": "str"}, opaque))
    # (a store may refuse the other type at validation too; unchecked, the recorded encoding refuses it)
    with pytest.raises(
        EvolutionError, match=rf"topology 'enc', state 'counts' \(Trident map state trident:{shown}\).*V2"
    ):
        check_map_encodings(backend, "enc", opaque, trident_encodings("enc", {"weir.state.value.type": "str"}, opaque))
    table = f"wc_{store.tag}"
    if store.kind == "sqlite":
        other = SqliteMapState.factory("transactional", provider_url, table=table, check=False)
    elif store.kind == "redis":
        other = RedisMapState.factory("transactional", provider_url, key_prefix=f"{table}:", check=False)
    else:
        other = PostgresMapState.factory(
            "transactional", provider_url, table=table, key_columns={"word": "TEXT"}, value_type="BIGINT", check=False
        )
    with pytest.raises(EvolutionError, match=r"rule S1.*trident-opaque -> trident-transactional"):
        check_encodings(backend, "enc", trident_encodings("enc", {"weir.state.value.type": "int"}, _topology(other)))
    with pytest.raises(ConfigError, match=r"names state 'words', which is no map state.*\['counts'\]"):
        trident_encodings("enc", {"weir.state.value.type": {"words": "int"}}, opaque)
    backend.close()


def _two_batches(factory: Any) -> None:
    """Batch 1 writes man=3, dog=1; batch 2 writes man=5."""
    state = factory.make_state({}, 0, 1)
    state.begin_commit(1)
    state.multi_put([["man"], ["dog"]], [3, 1])
    state.commit(1)
    state.begin_commit(2)
    state.multi_put([["man"]], [5])
    state.commit(2)


def _committed(url: str, topology: str, txid: int) -> None:
    backend = open_backend(provider_of(url).config)
    cs = CheckpointStore(backend, topology)
    epoch = cs.acquire_epoch()
    rec = CheckPointState(txid=txid, phase=CheckpointPhase.COMMITTED, epoch=epoch, updated_ms=1)  # stopped long ago
    backend.write_direct(cs.namespace, {RECORD_KEY: rec.to_bytes()}, epoch)


def _cells(factory: Any, keys: list[str]) -> list[Any]:
    return list(factory.store.backing_map(factory.state_type).multi_get([[k] for k in keys]))


@STORES
@pytest.mark.parametrize("kind", ["opaque", "transactional"])
def test_weir_state_convert_rewrites_every_value_of_a_map_state(provider_url: str, kind: str, capsys: Cap) -> None:
    store = _store(provider_url)
    factory = store.factory(kind, "conv")
    _two_batches(factory)
    _committed(provider_url, "tconv", 2)
    ns = f"trident:{_map_name(store, 'conv')}"
    argv = ("state", "convert", "--url", provider_url, "--topology", "tconv", "--component", ns)
    bad = run(capsys, *argv, "--function", "tests.contract.test_trident_encoding:to_text", "--value-type", "int")
    assert bad.code != 0 and f"Trident map state {ns[len('trident:') :]!r}" in bad.err and "does not conform" in bad.err
    done = run(capsys, *argv, "--function", "tests.contract.test_trident_encoding:times_ten", "--value-type", "int")
    assert done.code == 0, done.err
    assert "converted 2 cells to value type int" in done.out
    if kind == "opaque":  # curr and prev alike: a replay of batch 2 builds on the converted prev
        assert _cells(factory, ["man", "dog"]) == [OpaqueValue(2, 50, 30), OpaqueValue(1, 10, None)]
        state = factory.make_state({}, 0, 1)
        state.begin_commit(2)
        assert state.multi_update([["man"]], [CombinerValueUpdater(Add(), 1)]) == [31]
        state.commit(2)
    else:
        assert _cells(factory, ["man", "dog"]) == [TransactionalValue(2, 50), TransactionalValue(1, 10)]
    backend = open_backend(provider_of(provider_url).config)
    assert load_encodings(backend, "tconv")[ns].value_type == "int"
    assert backend.get("$checkpointspout-tconv", CONVERT_KEY) is None


@pytest.mark.parametrize("provider_url", provider_params(("sqlite", "redis", "postgres")), indirect=True)
@pytest.mark.parametrize(
    "point", ["trident_convert_staged@0", "trident_convert_switching@0", "trident_convert_between_chunks@0"]
)
def test_convert_killed_then_started_again_applies_the_function_once(provider_url: str, point: str) -> None:
    store = _store(provider_url)
    factory = store.factory("opaque", "kc")
    state = factory.make_state({}, 0, 1)
    state.begin_commit(1)
    state.multi_put([[f"w{i}"] for i in range(1500)], list(range(1500)))  # two chunks of cells
    state.commit(1)
    _committed(provider_url, "tkc", 1)
    name = _map_name(store, "kc")
    argv = ("state", "convert", "--url", provider_url, "--topology", "tkc", "--component", f"trident:{name}",
            "--function", "tests.contract.test_trident_encoding:times_ten", "--value-type", "int")  # fmt: skip
    killed = run_driver(["-m", "weir", *argv], point, 120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    backend = open_backend(provider_of(provider_url).config, fresh=True)
    marker = backend.get("$checkpointspout-tkc", CONVERT_KEY)
    assert (marker is None) == (point == "trident_convert_staged@0")
    if marker is None:  # killed before its marker: nothing changed; the convert is run again
        assert store.counts("kc") == {f"w{i}": i for i in range(1500)}
        again = run_subprocess(*argv)
        assert again.code == 0, again.err
    else:  # the next start finishes the recorded convert from the staged cells
        finish_trident_convert(backend, "tkc", CheckpointStore(backend, "tkc").acquire_epoch(), {name: factory})
    assert store.counts("kc") == {f"w{i}": i * 10 for i in range(1500)}  # the function ran once per value
    assert backend.get("$checkpointspout-tkc", CONVERT_KEY) is None
    assert staging_namespace("tkc", name) not in backend.namespaces()
    backend.close()
