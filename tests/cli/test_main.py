"""The ``weir`` entry point: parsing, subcommand discovery, error reporting, ``python -m weir``."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import weir
from tests.cli._support import run, run_subprocess
from weir.cli import main as main_mod


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    r = run(capsys, "--version")
    assert r.code == 0
    assert r.out.strip() == f"weir {weir.__version__}"


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    r = run(
        capsys,
    )
    assert r.code == 2
    assert "usage: weir" in r.err
    assert "state" in r.err


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    r = run(capsys, "no-such-command")
    assert r.code == 2
    assert "invalid choice" in r.err


def test_state_without_subcommand_shows_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    r = run(capsys, "state")
    assert r.code == 2
    for sub in ("ls", "get", "dump", "put", "delete", "inspect", "migrate"):
        assert sub in r.err


def test_missing_command_module_is_skipped() -> None:
    parser = main_mod.build_parser(["weir.cli.state_cmd", "weir.cli.not_written_yet"])
    args = parser.parse_args(["state", "ls"])
    assert args.func is not None


def test_broken_command_module_is_not_hidden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the module exists but one of *its* imports is missing: that is a bug to show, not to skip
    (tmp_path / "weir_broken_cmd.py").write_text("import weir_module_that_does_not_exist\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="weir_module_that_does_not_exist"):
        main_mod.build_parser(["weir_broken_cmd"])


def test_extra_command_module_is_registered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "weir_hello_cmd.py").write_text(
        textwrap.dedent(
            """
            def register(subparsers):
                p = subparsers.add_parser("hello")
                p.add_argument("name")
                p.set_defaults(func=lambda args: print("hello " + args.name) or 3)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(main_mod, "COMMAND_MODULES", ["weir_hello_cmd"])
    r = run(capsys, "hello", "storm")
    assert (r.code, r.out) == (3, "hello storm\n")


def test_weir_error_is_one_line_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    r = run(capsys, "state", "ls", "--url", "nosuch://x")
    assert r.code == 2
    assert r.out == ""
    assert r.err.startswith("weir: error: ")
    assert "unknown scheme 'nosuch'" in r.err
    assert "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    r = run(capsys, "--debug", "state", "ls", "--url", "nosuch://x")
    assert r.code == 2
    assert "Traceback" in r.err
    assert "ConfigError" in r.err
    assert r.err.rstrip().splitlines()[-1].startswith("weir: error: ")


def test_python_m_weir(tmp_path: Path) -> None:
    r = run_subprocess("--version")
    assert (r.code, r.out.strip()) == (0, f"weir {weir.__version__}")
    url = f"sqlite:///{tmp_path / 's.db'}"
    r = run_subprocess("state", "put", "--url", url, "wc-count-0", "héllo", "3")
    assert r.code == 0, r.err
    r = run_subprocess("state", "get", "--url", url, "wc-count-0", "héllo")
    assert (r.code, r.out) == (0, "3\n")
    r = run_subprocess("state", "ls", "--url", "nosuch://x")
    assert r.code == 2
    assert r.err.startswith("weir: error: state URL 'nosuch://x' has an unknown scheme")
    assert "Traceback" not in r.err


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).with_name("weir")
    if not script.exists():
        pytest.skip(f"no console script next to {sys.executable}")
    import subprocess

    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=False, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, f"weir {weir.__version__}")
