"""Find, in a bolt's source, emits on a stream named by a string literal that the bolt never declares.

Only calls on a collector (a receiver whose name contains ``collector``) are read. Storm's dispatch
makes a ``str`` argument before the values a stream id: ``emit("counts", values)``,
``emit("counts", anchor, values)``, ``emit_direct(task, "counts", values)``, or ``stream="counts"``.
Such a literal is known when the topology is created, so an emit on an undeclared stream is refused
then instead of failing the first batch that reaches it. Streams chosen at run time (a variable) are
checked at the call, as before. Source that cannot be read (a REPL class, a C extension) is skipped.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import tokenize
from collections.abc import Iterator
from types import CodeType
from typing import Any

__all__ = ["literal_emit_streams"]


def literal_emit_streams(cls: type) -> Iterator[tuple[str, str, int]]:
    """``(stream, method, line)`` of every emit with a literal stream id in ``cls``'s own methods (and its bases').

    Each method is read from its own code object (``co_firstlineno``), not by locating the class in
    its module, which makes :mod:`inspect` parse the whole module file for every class; the result
    of a method is cached per code object, so a topology built again (a restart, a benchmark round,
    classes defined inside a function) costs no parsing.
    """
    for klass in cls.__mro__:
        if klass.__module__.startswith("weir.") or klass is object:
            continue
        for name, code in _methods(klass):
            for stream, line in _emits_of(code):
                yield stream, name, line


def _methods(klass: type) -> Iterator[tuple[str, CodeType]]:
    """``(name, code)`` of the functions defined in ``klass``'s body (nested classes included), in order."""
    prefix = f"{klass.__qualname__}."
    for name, attr in vars(klass).items():
        funcs: list[Any] = []
        if isinstance(attr, (staticmethod, classmethod)):
            funcs.append(attr.__func__)
        elif isinstance(attr, property):
            funcs.extend(f for f in (attr.fget, attr.fset, attr.fdel) if f is not None)
        elif isinstance(attr, functools.cached_property):
            funcs.append(attr.func)
        elif isinstance(attr, type):
            if attr.__qualname__.startswith(prefix):
                yield from _methods(attr)
            continue
        else:
            funcs.append(attr)
        for f in funcs:
            try:
                f = inspect.unwrap(f) if callable(f) else f
            except ValueError:  # a __wrapped__ cycle: read the wrapper itself
                pass
            code = getattr(f, "__code__", None)
            if isinstance(code, CodeType) and getattr(f, "__qualname__", "").startswith(prefix):
                yield name, code


@functools.lru_cache(maxsize=4096)
def _emits_of(code: CodeType) -> tuple[tuple[str, int], ...]:
    """``(stream, line)`` of the emits on a literal stream in the function of ``code`` (nested ones included)."""
    try:
        lines, first = inspect.getsourcelines(code)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, IndentationError, tokenize.TokenError):
        # no source (a REPL, a C extension), a fragment that does not parse alone, or code whose
        # file is not Python (exec'd with another file's name: its lines cannot be tokenized)
        return ()
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        stream = _literal_stream(node)
        if stream is not None and isinstance(node, ast.Call):
            found.append((stream, first + node.lineno - 1))
    return tuple(sorted(found, key=lambda f: f[1]))


def _literal_stream(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return None
    name = node.func.attr
    if name not in ("emit", "emit_direct") or "collector" not in _receiver(node.func.value).lower():
        return None  # only a collector's emits (``collector.emit``, ``self.collector.emit``, ...)
    for kw in node.keywords:
        if kw.arg == "stream":
            return _str(kw.value)
    if any(isinstance(a, ast.Starred) for a in node.args):
        return None
    args = node.args[1:] if name == "emit_direct" else node.args
    if len(args) >= 2:  # [stream,] [anchors,] values: a str before the values is a stream id
        return _str(args[0])
    return None


def _receiver(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _str(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
