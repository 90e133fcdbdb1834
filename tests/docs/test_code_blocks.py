"""Every code block of README.md and docs/*.md runs as written.

Convention (for everyone writing docs):

- A fenced ```python block is **executed**, top to bottom, in a fresh namespace, with a scratch
  directory as the working directory, this test session's SparkSession active, and these
  environment variables pointing at real test servers: ``REDIS_URL``, ``PG_URL``. Write blocks that
  run: define what they use, create their input, read server addresses from those variables (with
  the default a reader would use, e.g. ``os.environ.get("REDIS_URL", "redis://localhost:6379/0")``).
- In a ```console / ```bash / ```sh block, every ``weir ...`` command (after ``$ `` in console
  blocks) must parse with weir's real argument parser (so no documented option or subcommand
  is missing or renamed); other commands (pip, bash .ci/run, psql) are not run.
- Blocks without a language, or in ``text``/``sql``, are not code and are not run.
- A block that is a deliberate fragment (a signature, an excerpt, a snippet that needs a running
  cluster) is marked by the line ``<!-- fragment -->`` (optionally ``<!-- fragment: why -->``)
  directly before its opening fence. It is then skipped, and listed as such in this test's ids.

The test picks up every ``docs/*.md`` file by itself: a new page is checked without editing it.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FRAGMENT = re.compile(r"^\s*<!--\s*fragment\b.*-->\s*$")
FENCE = re.compile(r"^```([\w+-]*)\s*$")
SHELL = {"console", "bash", "sh", "shell"}


@dataclass
class Block:
    """One fenced code block of a Markdown file."""

    path: Path
    line: int
    lang: str
    code: str
    fragment: bool

    @property
    def id(self) -> str:
        """``docs/state.md:175``."""
        tag = "-fragment" if self.fragment else ""
        return f"{self.path.relative_to(ROOT)}:{self.line}{tag}"


def blocks_of(path: Path) -> list[Block]:
    """The fenced code blocks of ``path``, with their fragment marks."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        prev = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        code = "\n".join(lines[start + 1 : j]) + "\n"
        out.append(Block(path, start + 1, m.group(1).lower(), code, bool(FRAGMENT.match(prev))))
        i = j + 1
    return out


def all_blocks() -> list[Block]:
    """The blocks of README.md and every docs/*.md."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [b for f in files for b in blocks_of(f)]


BLOCKS = all_blocks()
PYTHON = [b for b in BLOCKS if b.lang == "python"]
SHELL_BLOCKS = [b for b in BLOCKS if b.lang in SHELL]


def test_blocks_are_found_and_fragments_are_few() -> None:
    """The scanner sees the README's blocks, and at least a quarter of the Python blocks run.

    Blocks that need a server at a fixed address (Kafka, HBase, TLS) are fragments.
    """
    assert any(b.path.name == "README.md" and b.lang == "python" for b in BLOCKS)
    assert {b.path.name for b in BLOCKS} >= {"README.md", "cli.md", "state.md"}
    runnable = [b for b in PYTHON if not b.fragment]
    assert len(runnable) >= len(PYTHON) // 4, [b.id for b in PYTHON if b.fragment]


def _python_env(request: pytest.FixtureRequest, code: str) -> dict[str, str]:
    env: dict[str, str] = {}
    if "REDIS_URL" in code:
        env["REDIS_URL"] = request.getfixturevalue("redis_server").url
    if "PG_URL" in code:
        env["PG_URL"] = request.getfixturevalue("postgres_url")
    return env


RUNNABLE = [b for b in PYTHON if not b.fragment]
SHELL_RUNNABLE = [b for b in SHELL_BLOCKS if not b.fragment]


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_python_block_runs(
    block: Block, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ```python block runs as written (fragments are not collected; see the module docstring)."""
    request.getfixturevalue("spark")  # the session's SparkSession: weir.submit uses it
    for k, v in _python_env(request, block.code).items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WEIR_STATE_DIR", raising=False)
    from weir.state.factory import close_backends

    code = compile(block.code, str(block.path), "exec")
    namespace: dict[str, Any] = {"__name__": "__doc_block__"}
    try:
        exec(code, namespace)  # noqa: S102 - the documentation's own code, run as a reader would
    finally:
        close_backends()


def weir_commands(block: Block) -> list[list[str]]:
    """The ``weir`` commands of a shell block, as argument lists (after ``weir``)."""
    lines = block.code.replace("\\\n", " ").splitlines()  # join shell line continuations
    if block.lang == "console":
        lines = [ln[2:] for ln in lines if ln.startswith("$ ")]
    out = []
    for ln in lines:
        ln = ln.split(" #", 1)[0]
        lexer = shlex.shlex(ln, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
        cmd: list[str] = []
        for w in [*words, ";"]:
            if w in ("&&", "||", "|", ";", ">", ">>", "<"):
                if cmd:
                    prog = os.path.basename(cmd[0])
                    if prog == "weir":
                        out.append(cmd[1:])
                    elif cmd[:3] in (["python", "-m", "weir"], ["python3", "-m", "weir"]):
                        out.append(cmd[3:])
                cmd = []
                if w in (">", ">>", "<"):
                    cmd = ["<redirect>"]
            elif cmd[:1] == ["<redirect>"]:
                cmd = []
            else:
                cmd.append(w)
    return out


@pytest.mark.parametrize("block", SHELL_RUNNABLE, ids=[b.id for b in SHELL_RUNNABLE])
def test_weir_commands_in_shell_blocks_parse(block: Block) -> None:
    """Every ``weir`` command of a console/bash block parses with the real parser."""
    from weir.cli.main import build_parser

    for argv in weir_commands(block):
        parser = build_parser()
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            try:
                parser.parse_args(argv)
            except SystemExit as exc:
                assert exc.code in (0, None), f"{block.id}: `weir {shlex.join(argv)}` does not parse: {err.getvalue()}"
