"""Every ``>>>`` example in ``src/weir`` runs as a doctest (one test per module that has examples).

Examples run in a scratch working directory. An example that needs a server reads its address from
an environment variable, with the default a reader would use, e.g.
``os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")``; the variables a module's examples name
(:data:`SERVERS`) point at this session's test servers. No example is skipped: there is no
``+SKIP`` in ``src/weir`` (checked below).
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import weir

SRC = Path(weir.__file__).parent

SERVERS: dict[str, Callable[[pytest.FixtureRequest], str]] = {
    "REDIS_URL": lambda r: r.getfixturevalue("redis_server").url,
    "REDIS_CLUSTER_URL": lambda r: r.getfixturevalue("redis_cluster").url,
    "PG_URL": lambda r: r.getfixturevalue("postgres_url"),
    "MEMCACHED_URL": lambda r: r.getfixturevalue("memcached_server").url,
    "HBASE_URL": lambda r: r.getfixturevalue("hbase_server").url("state"),
}
"""Environment variables the examples may read → the session server that provides them."""


def _modules_with_examples() -> list[str]:
    names = ["weir"] + [m.name for m in pkgutil.walk_packages([str(SRC)], "weir.")]
    out = []
    for name in names:
        path = SRC.joinpath(*name.split(".")[1:])
        source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        if source.exists() and ">>>" in source.read_text(encoding="utf-8"):
            out.append(name)
    return out


MODULES = _modules_with_examples()


def test_examples_are_found_and_none_is_skipped() -> None:
    assert len(MODULES) >= 20, MODULES
    skipped = [p for p in SRC.rglob("*.py") if "+SKIP" in p.read_text(encoding="utf-8")]
    assert not skipped, f"examples marked +SKIP (make them run): {skipped}"


@pytest.mark.parametrize("name", MODULES)
def test_module_examples(
    name: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = importlib.import_module(name)
    tests = [t for t in doctest.DocTestFinder().find(module) if t.examples]
    assert tests, f"{name} has '>>>' in its source but doctest finds no example"
    text = "\n".join(ex.source for t in tests for ex in t.examples)
    for var, server in SERVERS.items():
        if var in text:
            monkeypatch.setenv(var, server(request))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WEIR_STATE_DIR", raising=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    for t in tests:
        runner.run(t, out=report.append)
    result: Any = runner.summarize(verbose=False)
    assert result.failed == 0, "".join(report)
    assert result.attempted > 0
