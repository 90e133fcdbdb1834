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
import inspect
import textwrap
from collections.abc import Iterator

__all__ = ["literal_emit_streams"]


def literal_emit_streams(cls: type) -> Iterator[tuple[str, str, int]]:
    """``(stream, method, line)`` of every emit with a literal stream id in ``cls``'s own methods (and its bases')."""
    for klass in cls.__mro__:
        if klass.__module__.startswith("weir.") or klass is object:
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
            first = inspect.getsourcelines(klass)[1]
            tree = ast.parse(source)
        except (OSError, TypeError, SyntaxError, IndentationError):
            continue
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                stream = _literal_stream(node)
                if stream is not None and isinstance(node, ast.Call):
                    yield stream, fn.name, first + node.lineno - 1


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
