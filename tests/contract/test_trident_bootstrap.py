"""``initial_state`` for Trident map states: rows loaded as committed cells before the first batch.

On SQLite, Redis and PostgreSQL (the coordinator's store and the map state's store the same server),
for opaque, transactional and non-transactional map states; and killed with SIGKILL at each step of
the load (a subprocess), then started again: the map state holds every row or none, never a part.
"""

from __future__ import annotations

import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.cli._support import run
from tests.contract._support import provider_of, provider_params
from tests.crash._harness import run_driver
from tests.trident._support import Store
from weir.checkpoint.coordinator import CheckpointPhase, CheckPointState, CheckpointStore
from weir.errors import StateError
from weir.runtime.spark.trident.bootstrap import (
    MARKER_KEY,
    finish_trident_bootstrap,
    load_trident_state,
    staging_namespace,
)
from weir.state.factory import open_backend
from weir.trident.state import CombinerValueUpdater, OpaqueValue, TransactionalValue

STORES = pytest.mark.parametrize("provider_url", provider_params(("sqlite", "redis", "postgres")), indirect=True)
SEED = {f"w{i}": i for i in range(1, 301)}
KINDS = ("opaque", "transactional", "non_transactional")


class Add:
    def combine(self, a: Any, b: Any) -> Any:
        return a + b


def _store(url: str) -> Store:
    kind = "sqlite" if url.startswith("sqlite") else "redis" if url.startswith("redis") else "postgres"
    return Store(kind, url, uuid.uuid4().hex[:8])


def _load(url: str, topo: str, factory: Any, seed: Any) -> Any:
    backend = open_backend(provider_of(url).config)
    epoch = CheckpointStore(backend, topo).acquire_epoch()
    return load_trident_state(backend, topo, "counts", factory, seed, epoch)


def _cells(factory: Any, keys: list[str]) -> list[Any]:
    return list(factory.store.backing_map(factory.state_type).multi_get([[k] for k in keys]))


@STORES
@pytest.mark.parametrize("kind", KINDS)
def test_rows_become_committed_cells_the_first_batch_builds_on(provider_url: str, kind: str) -> None:
    store = _store(provider_url)
    factory = store.factory(kind, "seeded")
    res = _load(provider_url, "tboot", factory, SEED.items())
    assert res.rows == 300 and not res.already_loaded
    cell = {"opaque": OpaqueValue(0, 7, None), "transactional": TransactionalValue(0, 7), "non_transactional": 7}
    assert _cells(factory, ["w7", "nope"]) == [cell[kind], None]
    assert store.counts("seeded") == SEED
    backend = open_backend(provider_of(provider_url).config)
    assert not [ns for ns in backend.namespaces() if ns.startswith("$bootstrap-")]
    assert backend.get("$checkpointspout-tboot", MARKER_KEY) is None
    # the first batch (txid 1) adds to the loaded values; its replay does not add twice (opaque/transactional)
    for _ in range(1 if kind == "non_transactional" else 2):
        state = factory.make_state({}, 0, 1)
        state.begin_commit(1)
        got = state.multi_update([["w7"], ["new"]], [CombinerValueUpdater(Add(), 2), CombinerValueUpdater(Add(), 1)])
        state.commit(1)
        assert got == [9, 1]
    assert store.counts("seeded") == {**SEED, "w7": 9, "new": 1}
    # the same rows again (a restarted program): nothing to do; other rows: refused
    assert _load(provider_url, "tboot", factory, SEED.items()).already_loaded
    with pytest.raises(StateError, match=r"topology 'tboot', state 'counts'.*loaded before with other rows"):
        _load(provider_url, "tboot", factory, [("other", 1)])


@STORES
def test_refused_once_committed_or_when_the_map_holds_a_key(provider_url: str) -> None:
    store = _store(provider_url)
    factory = store.factory("opaque", "ran")
    backend = open_backend(provider_of(provider_url).config)
    cs = CheckpointStore(backend, "tran")
    cs.save(CheckPointState(txid=4, phase=CheckpointPhase.COMMITTED), cs.acquire_epoch())
    with pytest.raises(StateError, match=r"topology 'tran', state 'counts'.*committed state \(txid 4\)"):
        _load(provider_url, "tran", factory, SEED.items())
    assert store.counts("ran") == {}
    state = factory.make_state({}, 0, 1)
    state.begin_commit(1)
    state.multi_put([["w3"]], [30])
    state.commit(1)
    with pytest.raises(StateError, match=r"topology 'tfresh', state 'counts'.*already holds key \['w3'\]"):
        _load(provider_url, "tfresh", factory, SEED.items())
    assert store.counts("ran") == {"w3": 30}
    assert not [ns for ns in backend.namespaces() if ns.startswith("$bootstrap-")]


CHILD = """
import sys
from tests.contract.test_trident_bootstrap import _load
from tests.trident._support import Store
url, kind, tag, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
_load(url, "tkill", Store(kind, url, tag).factory("opaque", "killed"), [(f"w{i}", i) for i in range(n)])
"""


@pytest.mark.parametrize("provider_url", provider_params(("sqlite", "redis", "postgres")), indirect=True)
@pytest.mark.parametrize(
    "point", ["trident_bootstrap_staged@0", "trident_bootstrap_switching@0", "trident_bootstrap_between_chunks@0"]
)
def test_load_killed_then_started_again_loads_all_or_nothing(provider_url: str, point: str, tmp_path: Path) -> None:
    store = _store(provider_url)
    seed = {f"w{i}": i for i in range(1500)}  # two chunks of cells
    killed = run_driver(["-c", CHILD, provider_url, store.kind, store.tag, "1500"], point, 120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    factory = store.factory("opaque", "killed")
    backend = open_backend(provider_of(provider_url).config, fresh=True)
    marker = backend.get("$checkpointspout-tkill", MARKER_KEY)
    written = store.counts("killed")
    if point == "trident_bootstrap_staged@0":
        assert marker is None and written == {}  # nothing loaded: the next load starts over
    elif point == "trident_bootstrap_switching@0":
        assert marker is not None and written == {}
    else:
        assert marker is not None and len(written) == 1000  # the first chunk only
    # the next start: finish what the marker says, then the same initial_state again
    epoch = CheckpointStore(backend, "tkill").acquire_epoch()
    finish_trident_bootstrap(backend, "tkill", epoch, {"counts": factory})
    res = load_trident_state(backend, "tkill", "counts", factory, seed.items(), epoch)
    assert res.already_loaded == (point != "trident_bootstrap_staged@0")
    assert store.counts("killed") == seed
    assert _cells(factory, ["w5"]) == [OpaqueValue(0, 5, None)]
    assert backend.get("$checkpointspout-tkill", MARKER_KEY) is None
    assert staging_namespace("tkill", "counts") not in backend.namespaces()
    backend.close()


@STORES
def test_weir_state_load_seeds_a_map_state_by_its_trident_name(
    provider_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(provider_url)
    factory = store.factory("transactional", "cli")  # made (and registered in the store) by the program
    ns = f"trident:cli_{store.tag}" + (":" if store.kind == "redis" else "")  # a table, or a key prefix
    seed = tmp_path / "seed.jsonl"
    seed.write_text('{"key": ["the"], "value": 100}\n{"key": "zebra", "value": 5}\n')
    argv = ("state", "load", "--url", provider_url, "--topology", "tcli", "--component", ns, str(seed))
    loaded = run(capsys, *argv)
    assert loaded.code == 0, loaded.err
    assert "loaded 2 keys as committed transactional cells" in loaded.out
    assert _cells(factory, ["the", "zebra"]) == [TransactionalValue(0, 100), TransactionalValue(0, 5)]
    assert "loaded before; nothing to do" in run(capsys, *argv).out
    missing = run(capsys, *argv[:-2], "trident:nope", str(seed))
    assert missing.code != 0 and "no Trident map state 'trident:nope'" in missing.err


@STORES
def test_dump_then_load_round_trips_a_map_state(
    provider_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``weir state dump --values | weir state load`` and ``dump | load --cells`` copy the current values."""
    store = _store(provider_url)

    def ns(factory_name: str) -> str:
        return f"trident:{factory_name}_{store.tag}" + (":" if store.kind == "redis" else "")

    cells = {
        "opaque": [OpaqueValue(7, 12, 10), OpaqueValue(3, 4, None)],
        "transactional": [TransactionalValue(7, 12), TransactionalValue(3, 4)],
    }
    for kind, written in cells.items():
        src = store.factory(kind, f"src{kind[0]}")
        src.store.backing_map(src.state_type).multi_put([["man"], ["dog"]], written)
        dumped = run(capsys, "state", "dump", "--url", provider_url, ns(f"src{kind[0]}"))
        values = run(capsys, "state", "dump", "--url", provider_url, "--values", ns(f"src{kind[0]}"))
        assert dumped.code == 0 and values.code == 0, dumped.err + values.err
        assert sorted(values.json_lines(), key=str) == sorted(
            [{"ns": ns(f"src{kind[0]}"), "key": ["man"], "value": 12},
             {"ns": ns(f"src{kind[0]}"), "key": ["dog"], "value": 4}], key=str,
        )  # fmt: skip
        (tmp_path / f"{kind}.cells").write_text(dumped.out)
        (tmp_path / f"{kind}.values").write_text(values.out)
        for how, flags in (("values", ()), ("cells", ("--cells",))):
            dst = store.factory(kind, f"dst{kind[0]}{how}")
            topo = f"rt{kind[0]}{how}"
            argv = ("state", "load", "--url", provider_url, "--topology", topo, "--component", ns(f"dst{kind[0]}{how}"))
            res = run(capsys, *argv, *flags, str(tmp_path / f"{kind}.{how}"))
            assert res.code == 0, res.err
            assert f"loaded 2 keys as committed {kind} cells" in res.out
            want = [OpaqueValue(0, 12, None), OpaqueValue(0, 4, None)] if kind == "opaque" else [
                TransactionalValue(0, 12), TransactionalValue(0, 4)]  # fmt: skip
            assert _cells(dst, ["man", "dog"]) == want
        # the dumped cells given as values: refused, naming the line and both ways out
        wrong = store.factory(kind, f"wr{kind[0]}")
        argv = ("state", "load", "--url", provider_url, "--topology", f"wr{kind[0]}", "--component", ns(f"wr{kind[0]}"))
        res = run(capsys, *argv, str(tmp_path / f"{kind}.cells"))
        assert res.code != 0 and f"{kind}.cells, line 1: the value is a dumped {kind} cell" in res.err
        assert "--cells" in res.err and "weir state dump --values" in res.err
        assert _cells(wrong, ["man", "dog"]) == [None, None]
        res = run(capsys, *argv, "--cells", str(tmp_path / f"{kind}.values"))  # values given as cells: refused
        assert res.code != 0 and "--cells expects a dumped" in res.err
