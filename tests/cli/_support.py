"""Helpers of the CLI tests: run ``weir`` in-process or as a subprocess, fill stores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from weir.cli.main import main
from weir.state.backend import Backend
from weir.state.config import parse_provider_config, provider_from_url
from weir.state.factory import open_backend
from weir.state.kv import TransactionalKeyValueState
from weir.state.serializers import Serializer

SRC = Path(__file__).resolve().parents[2] / "src"


@dataclass
class Result:
    """Exit code and captured output of one ``weir`` run."""

    code: int
    out: str
    err: str

    def lines(self) -> list[str]:
        """Non-empty stdout lines."""
        return [ln for ln in self.out.splitlines() if ln.strip()]

    def json_lines(self) -> list[Any]:
        """Stdout parsed as JSON lines."""
        return [json.loads(ln) for ln in self.lines()]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    """``weir ARGV...`` in this process."""
    capsys.readouterr()
    code = main(list(argv))
    got = capsys.readouterr()
    return Result(code, got.out, got.err)


def run_subprocess(*argv: str, cwd: str | Path | None = None, env: dict[str, str | None] | None = None) -> Result:
    """``python -m weir ARGV...`` in a child process (``env`` entries set to None are removed)."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join([str(SRC), full_env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    for k, v in (env or {}).items():
        if v is None:
            full_env.pop(k, None)
        else:
            full_env[k] = v
    done = subprocess.run(
        [sys.executable, "-m", "weir", *argv],
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=cwd,
        env=full_env,
        timeout=120,
        check=False,
    )
    return Result(done.returncode, done.stdout, done.stderr)


def backend(url: str) -> Backend:
    """A fresh (unshared) backend of ``url``; close it after use."""
    cfg = parse_provider_config(
        {"topology.state.provider": provider_from_url(url), "topology.state.provider.config": {"url": url}}
    )
    return open_backend(cfg, fresh=True)


def commit_rows(
    b: Backend,
    namespace: str,
    rows: dict[Any, Any],
    txid: int,
    *,
    deletes: Sequence[Any] = (),
    key_serializer: Serializer | None = None,
    value_serializer: Serializer | None = None,
    epoch: int | None = None,
) -> TransactionalKeyValueState:
    """Write ``rows`` (and ``deletes``) to ``namespace`` as transaction ``txid``, committed."""
    s = TransactionalKeyValueState(b, namespace, key_serializer, value_serializer, epoch=epoch)
    for k, v in rows.items():
        s.put(k, v)
    for k in deletes:
        s.delete(k)
    s.prepare_commit(txid)
    s.commit(txid)
    return s


def tables(out: str) -> list[list[dict[str, str]]]:
    """Every table printed by :func:`weir.cli._table.format_table` in ``out``, as lists of row dicts.

    A table is a header line, a rule of dashes (which gives the column spans) and rows up to the
    next empty line.
    """
    lines = out.splitlines()
    found = []
    for i in range(1, len(lines)):
        rule = lines[i]
        if not rule.strip() or set(rule.replace(" ", "")) != {"-"}:
            continue
        spans = []
        pos = 0
        while pos < len(rule):
            start = rule.find("-", pos)
            if start < 0:
                break
            end = rule.find(" ", start)
            end = len(rule) if end < 0 else end
            spans.append((start, end))
            pos = end
        names = [lines[i - 1][a:b].strip() for a, b in spans]
        rows = []
        for ln in lines[i + 1 :]:
            if not ln.strip():
                break
            rows.append({n: ln[a:b].strip() for n, (a, b) in zip(names, spans, strict=True)})
        found.append(rows)
    return found


def table(out: str) -> list[dict[str, str]]:
    """The only (or first) table in ``out``."""
    got = tables(out)
    assert got, f"no table in:\n{out}"
    return got[0]


def trident_factories(url: str) -> dict[str, Any]:
    """Opaque, transactional and non-transactional map-state factories in the store of ``url``.

    SQLite: tables ``wc_opaque`` / ``wc_tx`` / ``plain``; Redis: key prefixes of the same names.
    """
    from weir.trident.backing import RedisMapState, SqliteMapState

    family: Any = SqliteMapState if url.startswith("sqlite") else RedisMapState
    names = {"opaque": "wc_opaque", "transactional": "wc_tx", "non_transactional": "plain"}
    if family is SqliteMapState:
        return {kind: getattr(family, kind)(url, table=name) for kind, name in names.items()}
    return {kind: getattr(family, kind)(url, key_prefix=name) for kind, name in names.items()}


def fill_trident(url: str) -> None:
    """Two batches into each map state of :func:`trident_factories` (txid 1, then 2)."""
    for kind, factory in trident_factories(url).items():
        state = factory.make_state({}, 0, 1)
        state.begin_commit(1)
        state.multi_put([["man"], ["dog", 2]], [3, 1])
        state.commit(1)
        state.begin_commit(2)
        state.multi_put([["man"]], [5])
        state.commit(2)
        assert state.multi_get([["man"], ["dog", 2]]) == [5, 1], kind
