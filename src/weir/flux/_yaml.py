"""Reading a Flux file: property and environment substitution, YAML with line numbers, ``includes``.

As in Apache Storm's Flux, substitution is done on the file's text before it is parsed: with
``--filter props.properties`` every ``${name}`` whose ``name`` the properties file defines is
replaced by its value, and with ``--env-filter`` every ``${ENV-NAME}`` by the environment variable
``NAME`` (an unset one is an error naming the file and line). YAML is read with ruamel's round-trip
loader, which builds only plain mappings, lists and scalars (a ``!!python/...`` tag constructs
nothing) and keeps every node's line for the error messages.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weir.errors import ConfigError

__all__ = ["FluxError", "Where", "line_of", "read_flux", "read_properties"]

_PROP = re.compile(r"\$\{([^}\s]+)\}")


class FluxError(ConfigError):
    """A Flux file that cannot become a topology: names the file, the line and the component."""


@dataclass(frozen=True)
class Where:
    """A place in a Flux file: ``file:line`` and the component (or section) concerned."""

    file: str
    line: int | None = None
    component: str | None = None

    def __str__(self) -> str:
        at = f"{self.file}:{self.line}" if self.line else self.file
        return f"{at} ({self.component})" if self.component else at

    def error(self, text: str) -> FluxError:
        """A :class:`FluxError` that starts with this place."""
        return FluxError(f"Flux {self}: {text}")


def line_of(node: Any, key: Any = None) -> int | None:
    """The 1-based line of ``node`` (or of ``node[key]``), when the YAML loader recorded it."""
    lc = getattr(node, "lc", None)
    if lc is None:
        return None
    try:
        if key is None:
            return int(lc.line) + 1
        if isinstance(key, int):
            return int(lc.item(key)[0]) + 1
        return int(lc.key(key)[0]) + 1
    except (KeyError, IndexError, TypeError, AttributeError):
        return int(lc.line) + 1


def read_properties(path: str) -> dict[str, str]:
    """A Java ``.properties`` file's ``key=value`` (or ``key: value``) pairs; ``#``/``!`` comments."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        msg = f"Flux --filter {path!r} cannot be read: {exc.strerror}"
        raise FluxError(msg) from exc
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
        else:
            out[line] = ""
    return out


def _substitute(text: str, path: str, props: Mapping[str, str], env_filter: bool) -> str:
    lines = text.split("\n")
    for i, line in enumerate(lines):

        def sub(m: re.Match[str], i: int = i) -> str:
            name = m.group(1)
            if env_filter and name.startswith("ENV-"):
                var = name[4:]
                if var not in os.environ:
                    msg = f"${{{name}}} names the environment variable {var}, which is not set"
                    raise Where(path, i + 1).error(msg)
                return os.environ[var]
            if name in props:
                return props[name]
            return m.group(0)  # left as written, as Flux does

        lines[i] = _PROP.sub(sub, line)
    return "\n".join(lines)


def _parse(text: str, path: str) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    try:
        return YAML(typ="rt").load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        msg = f"not valid YAML: {exc.problem or exc.context}"
        raise Where(path, line).error(msg) from None
    except YAMLError as exc:
        msg = f"not valid YAML: {exc}"
        raise Where(path).error(msg) from None


def read_flux(
    path: str, props: Mapping[str, str] | None = None, env_filter: bool = False, _seen: tuple[str, ...] = ()
) -> tuple[dict[str, Any], dict[int, str]]:
    """The definition in ``path`` with its ``includes`` merged; and, per node id, the file it came from.

    An include (``- file: other.yaml``, ``override: false``) is read relative to the including file;
    its ``config`` keys and its components, spouts and bolts (by ``id``) are added where the
    including file does not define them (``override: true``: the included ones win); its streams
    are added. ``resource: true`` (a Java classpath resource) is refused.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        msg = f"Flux file {path!r} cannot be read: {exc.strerror}"
        raise FluxError(msg) from exc
    doc = _parse(_substitute(text, path, props or {}, env_filter), path)
    if not isinstance(doc, Mapping):
        msg = "a Flux file is a YAML mapping (name, config, spouts, bolts, streams)"
        raise Where(path, line_of(doc)).error(msg)
    files: dict[int, str] = {}
    _mark(doc, path, files)
    includes = doc.get("includes") or []
    if not isinstance(includes, list):
        msg = "includes must be a list of {file: ..., override: ...}"
        raise Where(path, line_of(doc, "includes")).error(msg)
    merged: dict[str, Any] = {k: v for k, v in doc.items() if k != "includes"}
    for i, inc in enumerate(includes):
        where = Where(path, line_of(includes, i), "includes")
        if not isinstance(inc, Mapping) or not isinstance(inc.get("file"), str):
            msg = "an include is {file: PATH, resource: false, override: false}"
            raise where.error(msg)
        if inc.get("resource"):
            msg = f"resource: true names a Java classpath resource ({inc['file']!r}); use a file path"
            raise where.error(msg)
        target = str(Path(path).parent / inc["file"]) if not os.path.isabs(inc["file"]) else inc["file"]
        if os.path.abspath(target) in _seen or os.path.abspath(target) == os.path.abspath(path):
            msg = f"{inc['file']!r} is included in a cycle"
            raise where.error(msg)
        sub, sub_files = read_flux(target, props, env_filter, (*_seen, os.path.abspath(path)))
        files.update(sub_files)
        _merge(merged, sub, bool(inc.get("override", False)))
    return merged, files


def _mark(node: Any, path: str, files: dict[int, str]) -> None:
    """Remember the file of every mapping and list (for messages about included definitions)."""
    if isinstance(node, Mapping):
        files[id(node)] = path
        for v in node.values():
            _mark(v, path, files)
    elif isinstance(node, list):
        files[id(node)] = path
        for v in node:
            _mark(v, path, files)


def _merge(into: dict[str, Any], inc: Mapping[str, Any], override: bool) -> None:
    for key, value in inc.items():
        if key == "name":
            if "name" not in into or override:
                into["name"] = value
        elif key == "config" and isinstance(value, Mapping):
            base = dict(into.get("config") or {})
            into["config"] = {**base, **value} if override else {**value, **base}
        elif key in ("components", "spouts", "bolts") and isinstance(value, list):
            mine = list(into.get(key) or [])
            ids = {d.get("id"): n for n, d in enumerate(mine) if isinstance(d, Mapping)}
            for d in value:
                n = ids.get(d.get("id")) if isinstance(d, Mapping) else None
                if n is None:
                    mine.append(d)
                elif override:
                    mine[n] = d
            into[key] = mine
        elif key == "streams" and isinstance(value, list):
            into["streams"] = [*(into.get("streams") or []), *value]
        elif key not in into or override:
            into[key] = value
