"""The ``weir`` command line: argument parsing, subcommand registration and error reporting.

Subcommands live in their own modules, listed in :data:`COMMAND_MODULES`. Each module exposes
``register(subparsers)``, which adds one or more parsers with ``subparsers.add_parser(...)`` and sets
``parser.set_defaults(func=handler)``, where ``handler(args) -> int`` returns the exit code. A listed
module that does not exist (yet) is skipped; any other import failure is a bug and propagates.

Exit codes: ``0`` success, ``1`` a negative result the command reports itself (a missing key, a
verification mismatch), ``2`` a usage or :class:`~weir.errors.WeirError` error (one line on stderr; the
traceback only with ``--debug`` or ``WEIR_DEBUG=1``), ``130`` interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from types import ModuleType

from weir import __version__
from weir.errors import WeirError

__all__ = ["COMMAND_MODULES", "build_parser", "main"]

#: modules that contribute subcommands, in the order they appear in ``weir --help``
COMMAND_MODULES: list[str] = [
    "weir.cli.state_cmd",
    "weir.cli.run_cmd",
    "weir.cli.demo_cmd",
    "weir.cli.history_cmd",
    "weir.cli.ui_cmd",
    "weir.cli.drpc_cmd",
]

Handler = Callable[[argparse.Namespace], int]


def _load(name: str) -> ModuleType | None:
    """Import a command module; None when that exact module does not exist."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise


def build_parser(modules: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The top-level parser with every available subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="weir",
        description="Storm / Trident / IBM Streams state management on Spark Structured Streaming.",
    )
    parser.add_argument("--version", action="version", version=f"weir {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        default=os.environ.get("WEIR_DEBUG", "") not in ("", "0"),
        help="show the full traceback of an error (also WEIR_DEBUG=1)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show Spark's and the JVM's own warnings and logs (also WEIR_VERBOSE=1)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES if modules is None else modules:
        module = _load(name)
        if module is not None:
            module.register(subparsers)
    return parser


def _report(exc: BaseException, debug: bool) -> None:
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    text = str(exc).strip() or type(exc).__name__
    print(f"weir: error: {text}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``weir`` command line and return its exit code.

    Parameters
    ----------
    argv:
        Arguments without the program name; ``sys.argv[1:]`` when None.

    Examples
    --------
    >>> main(["--version"])
    weir ...
    0
    """
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if args.verbose:
        os.environ["WEIR_VERBOSE"] = "1"
    func: Handler | None = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(func(args) or 0)
    except WeirError as exc:
        _report(exc, args.debug)
        return 2
    except KeyboardInterrupt:
        print("weir: interrupted", file=sys.stderr)
        if "pyspark" in sys.modules:  # interrupted while Spark started: leave no JVM behind
            from weir.runtime.spark.session import stop_spark

            stop_spark()
        return 130
    except BrokenPipeError:
        # the reader went away (``weir state dump | head``): stop quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # swallow the interpreter's final flush
        except (OSError, ValueError, AttributeError):
            pass
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
