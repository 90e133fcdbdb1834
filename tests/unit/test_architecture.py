"""The import rules of ``docs/architecture.md``, checked on the source of every module under ``src/weir``.

Imports are read with :mod:`ast` (nothing is imported), including the ones inside functions;
imports under ``if TYPE_CHECKING:`` are annotations, not dependencies, and are left out of the
cycle rule only.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

#: the root package's own private helpers, shared by every package of weir
ROOT_PRIVATE = frozenset({"weir._util", "weir._redact", "weir._faults"})
#: private modules another package may still import (none: every store has one public plumbing folder)
PRIVATE_PENDING: frozenset[str] = frozenset()

USER_APIS = frozenset({"topology", "trident", "streams"})
DIALECT_RUNTIMES = frozenset({"runtime.spark.storm", "runtime.spark.trident", "runtime.spark.streams"})
#: what each dialect runtime may import of the other dialects (Streams operators run in Storm topologies)
DIALECT_RUNTIME_MAY_IMPORT = {
    "runtime.spark.storm": {"runtime.spark.streams", "streams"},
    "runtime.spark.trident": set(),
    "runtime.spark.streams": set(),
}
FOUNDATION = frozenset({"errors", "_util", "datacodec", "_redact", "_faults"})
#: the lower layers: what they may import (besides themselves)
LOWER = {
    "state": FOUNDATION,
    "checkpoint": FOUNDATION | {"state"},
}


@dataclass(frozen=True)
class Import:
    """One imported module (and name) of one module."""

    module: str
    target: str
    name: str | None
    line: int
    type_only: bool

    def __str__(self) -> str:
        what = f"{self.target}:{self.name}" if self.name else self.target
        return f"{self.module} (line {self.line}) imports {what}"


def unit(module: str) -> str:
    """The package a module belongs to for these rules.

    ``weir.runtime.spark``'s dialect sub-packages are units of their own; its ``__init__`` (which
    registers the built-in dialects) and ``weir.runtime`` are the composition root ``runtime``.
    """
    parts = module.split(".")
    if module in ("weir.runtime", "weir.runtime.spark"):
        return "runtime"
    if parts[:3] == ["weir", "runtime", "spark"]:
        if parts[3] in ("storm", "trident", "streams"):
            return "runtime.spark." + parts[3]
        return "runtime.spark"
    if len(parts) == 1:
        return "weir"
    return parts[1]


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in sorted((SRC / "weir").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_pkg)
    return out


MODULES = _modules()


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                for n in ast.walk(sub):
                    if hasattr(n, "lineno"):
                        lines.add(n.lineno)
    return lines


def _imports() -> list[Import]:
    out = []
    for module, (path, is_pkg) in MODULES.items():
        package = module if is_pkg else module.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = _type_checking_lines(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    if node.level > 1:
                        base = base[: -(node.level - 1)]
                    source = ".".join(base) + (f".{node.module}" if node.module else "")
                else:
                    source = node.module or ""
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    target, name = (full, None) if full in MODULES else (source, alias.name)
                    out.append(Import(module, target, name, node.lineno, node.lineno in typing_only))
            elif isinstance(node, ast.Import):
                out.extend(Import(module, a.name, None, node.lineno, node.lineno in typing_only) for a in node.names)
    return [i for i in out if i.target == "weir" or i.target.startswith("weir.")]


IMPORTS = _imports()


def test_every_module_is_read() -> None:
    assert "weir.runtime.spark.dialect" in MODULES and "weir.topology.builder" in MODULES
    assert any(
        i.module == "weir.runtime.spark.storm.submit" and i.target == "weir.runtime.spark.dialect" for i in IMPORTS
    )


def test_no_import_cycles_between_packages() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    why: dict[tuple[str, str], Import] = {}
    for imp in IMPORTS:
        a, b = unit(imp.module), unit(imp.target)
        if a != b and not imp.type_only:
            graph[a].add(b)
            why.setdefault((a, b), imp)
    cycles = []
    for a in sorted(graph):
        for b in sorted(graph[a]):
            seen, stack = {b}, [b]
            while stack:
                x = stack.pop()
                if x == a:
                    cycles.append(f"{a} -> {b}: {why[(a, b)]}")
                    break
                for y in graph.get(x, ()):
                    if y not in seen:
                        seen.add(y)
                        stack.append(y)
    assert not cycles, "import cycles between packages:\n" + "\n".join(cycles)


def test_user_apis_import_nothing_of_the_runtime_or_the_tools() -> None:
    bad = [
        str(i)
        for i in IMPORTS
        if unit(i.module) in USER_APIS
        and (unit(i.target).startswith("runtime") or unit(i.target) in ("cli", "ui", "testing", "weir", "demo"))
    ]
    assert not bad, "topology/, trident/ and streams/ hold user APIs only:\n" + "\n".join(bad)


def test_the_engine_core_imports_no_dialect() -> None:
    bad = [
        str(i)
        for i in IMPORTS
        if unit(i.module) == "runtime.spark"
        and (unit(i.target) in DIALECT_RUNTIMES or unit(i.target) in {"trident", "streams"})
    ]
    assert not bad, "runtime/spark/*.py reaches dialects only through the Dialect registry:\n" + "\n".join(bad)


@pytest.mark.parametrize("dialect", sorted(DIALECT_RUNTIMES))
def test_a_dialect_runtime_imports_only_its_own_dialect(dialect: str) -> None:
    others = (DIALECT_RUNTIMES | {"trident", "streams"}) - {dialect, dialect.rsplit(".", 1)[1]}
    allowed = DIALECT_RUNTIME_MAY_IMPORT[dialect]
    bad = [
        str(i)
        for i in IMPORTS
        if unit(i.module) == dialect and unit(i.target) in others and unit(i.target) not in allowed
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("layer", sorted(LOWER))
def test_lower_layers_import_nothing_above_them(layer: str) -> None:
    allowed = LOWER[layer] | {layer}
    bad = [str(i) for i in IMPORTS if unit(i.module) == layer and not i.type_only and unit(i.target) not in allowed]
    assert not bad, "\n".join(bad)


def _private(imp: Import) -> str | None:
    """The private module or name ``imp`` reaches into, if any (``_x``, not ``__x__``)."""
    parts = imp.target.split(".")
    for i, p in enumerate(parts):
        if p.startswith("_") and not p.startswith("__"):
            return ".".join(parts[: i + 1])
    if imp.name and imp.name.startswith("_") and not imp.name.startswith("__"):
        return f"{imp.target}.{imp.name}"
    return None


def _owner(private: str) -> str:
    """The package a private module or name belongs to."""
    parent = private.rsplit(".", 1)[0]
    if parent in MODULES and not MODULES[parent][1]:  # a private name of a module: its package
        parent = parent.rsplit(".", 1)[0]
    return parent


def test_no_package_imports_another_packages_private_names() -> None:
    bad = []
    for imp in IMPORTS:
        private = _private(imp)
        if private is None or private in ROOT_PRIVATE or private in PRIVATE_PENDING:
            continue
        owner = _owner(private)
        if not imp.module.startswith(owner + ".") and imp.module != owner:
            bad.append(f"{imp} (private to {owner})")
    assert not bad, "\n".join(bad)


def test_the_rules_catch_a_violation() -> None:
    """The checks above fail on the imports they forbid (so a passing run means something)."""
    assert unit("weir.runtime.spark.storm.task") == "runtime.spark.storm"
    assert unit("weir.runtime.spark.runner") == "runtime.spark"
    assert unit("weir.runtime.spark") == "runtime"
    assert unit("weir.trident.backing.redis") == "trident"
    assert _private(Import("weir.streams.x", "weir.runtime.spark.storm.task", "_dead_letter", 1, False))
    assert _private(Import("weir.sources.x", "weir.state._redis_client", "redis_client", 1, False))
    assert _private(Import("weir.sources.x", "weir.state.kv", "TransactionalKeyValueState", 1, False)) is None
    assert _owner("weir.runtime.spark.storm.task._dead_letter") == "weir.runtime.spark.storm"
    assert _owner("weir.state._redis_client") == "weir.state"


#: the packages below the connectors: none of them imports ``weir.connectors`` (the connectors
#: register with ``weir.state.registry``, and these packages look them up there)
BELOW_CONNECTORS = frozenset({"state", "trident", "sources", "sinks", "topology", "streams", "checkpoint"})


def test_nothing_below_the_connectors_imports_them() -> None:
    bad = [
        str(i)
        for i in IMPORTS
        if unit(i.module) in BELOW_CONNECTORS
        and (i.target == "weir.connectors" or i.target.startswith("weir.connectors."))
    ]
    assert not bad, "state/, trident/, sources/, sinks/, topology/, streams/ and checkpoint/ import no connector:\n" + (
        "\n".join(bad)
    )


def _module_cycles(imports: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in imports:
        if not imp.type_only and imp.target in MODULES and imp.target != imp.module:
            graph[imp.module].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


#: module cycles still to break, each with the change that breaks it (the list only shrinks)
PENDING_MODULE_CYCLES: list[list[str]] = []


def test_no_import_cycles_between_modules() -> None:
    """No module imports (directly or through others) a module that imports it back.

    Imports inside functions count (they run, later); ``if TYPE_CHECKING:`` imports do not.
    """
    cycles = [c for c in _module_cycles(IMPORTS) if c not in PENDING_MODULE_CYCLES]
    assert not cycles, "import cycles between modules:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_new_rules_catch_a_violation() -> None:
    fake = [
        Import("weir.state.config", "weir.state.serializers", None, 1, False),
        Import("weir.state.serializers", "weir.state.config", "ProviderConfig", 2, False),
        Import("weir.state.kv", "weir.state.backend", None, 3, True),
        Import("weir.state.backend", "weir.state.kv", None, 4, False),
    ]
    assert _module_cycles(fake) == [["weir.state.config", "weir.state.serializers"]]
    assert unit("weir.connectors.redis.kv") == "connectors"
