"""The ``weir`` command line; :class:`Progress` also gives scripts its live status line."""

from weir.cli._progress import Progress, status_line

__all__ = ["Progress", "status_line"]
