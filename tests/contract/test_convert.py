"""``weir state convert``: every stored value rewritten by a function, verified, fenced, all or nothing.

On SQLite, Redis and PostgreSQL; killed with SIGKILL between two task namespaces and run again, the
function is applied exactly once to every value (the roll-forward copies what was staged).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.cli._support import run_subprocess
from tests.contract._support import provider_of, provider_params
from tests.crash._harness import run_driver
from weir.checkpoint.bootstrap import load_initial_state
from weir.checkpoint.coordinator import CheckpointStore
from weir.checkpoint.encoding import ENCODING_KEY, load_encodings
from weir.checkpoint.rescale import hash_route
from weir.state.evolution import parse_type
from weir.state.factory import open_backend
from weir.state.serializers import JsonSerializer

STORES = pytest.mark.parametrize("provider_url", provider_params(("sqlite", "redis", "postgres")), indirect=True)
J = JsonSerializer()
SEED = {f"k{i}": i for i in range(200)}


def to_record(v: int) -> dict[str, Any]:
    """The conversion the tests run: a count becomes a record."""
    return {"n": v, "unit": "words"}


def not_a_record(v: int) -> int:
    return v


def _seed(url: str, topo: str) -> None:
    backend = open_backend(provider_of(url).config)
    epoch = CheckpointStore(backend, topo).acquire_epoch()
    rows = [(J.serialize(k), J.serialize(v)) for k, v in SEED.items()]
    load_initial_state(backend, topo, "count", 2, rows, hash_route(J)(2), epoch)


def _values(url: str, topo: str) -> dict[str, Any]:
    provider = provider_of(url)
    out: dict[str, Any] = {}
    for t in range(2):
        out.update(dict(provider.new_state(f"{topo}-count-{t}")))
    return out


RECORD = '{"record": {"n": "int", "unit": "str"}}'


def _argv(url: str, topo: str, fn: str) -> tuple[str, ...]:
    return ("state", "convert", "--url", url, "--topology", topo, "--component", "count", "--function", fn)


@STORES
def test_convert_rewrites_every_value_and_records_the_new_type(provider_url: str) -> None:
    _seed(provider_url, "conv")
    bad = run_subprocess(
        *_argv(provider_url, "conv", "tests.contract.test_convert:not_a_record"), "--value-type", RECORD
    )
    assert bad.code != 0 and "does not conform to the new value type" in bad.err and "'conv'" in bad.err
    assert _values(provider_url, "conv") == SEED  # verified before anything was written
    ok = run_subprocess(*_argv(provider_url, "conv", "tests.contract.test_convert:to_record"), "--value-type", RECORD)
    assert ok.code == 0, ok.err
    assert "converted 200 values" in ok.out
    assert _values(provider_url, "conv") == {k: to_record(v) for k, v in SEED.items()}
    enc = load_encodings(open_backend(provider_of(provider_url).config), "conv")["count"]
    assert enc.value_type == parse_type(RECORD, "t")


@pytest.mark.parametrize("provider_url", provider_params(("sqlite", "redis", "postgres")), indirect=True)
@pytest.mark.parametrize("point", ["convert_staged@0", "convert_between_tasks@0"])
def test_convert_killed_then_run_again_converts_each_value_once(provider_url: str, point: str, tmp_path: Path) -> None:
    _seed(provider_url, "kconv")
    argv = [*_argv(provider_url, "kconv", "tests.contract.test_convert:to_record"), "--value-type", RECORD]
    killed = run_driver(["-m", "weir", *argv], point, 120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    backend = open_backend(provider_of(provider_url).config, fresh=True)
    marker = backend.get("$checkpointspout-kconv", b"__convert")
    backend.close()
    if point == "convert_staged@0":  # before the marker: the old values, run it again
        assert marker is None and _values(provider_url, "kconv") == SEED
        again = run_subprocess(*argv)
    else:  # after it: the next convert (of an identity, here) first rolls the interrupted one forward
        assert marker is not None
        again = run_subprocess(*_argv(provider_url, "kconv", "tests.contract.test_convert:not_a_record"))
    assert again.code == 0, again.err
    assert _values(provider_url, "kconv") == {k: to_record(v) for k, v in SEED.items()}
    backend = open_backend(provider_of(provider_url).config, fresh=True)
    assert backend.get("$checkpointspout-kconv", b"__convert") is None
    assert backend.get("$checkpointspout-kconv", ENCODING_KEY) is not None
    assert not [ns for ns in backend.namespaces() if ns.startswith("$convert-")]
    backend.close()
