"""Crash points of the SIGKILL tests: see :mod:`weir._faults` (shared by the coordinator and the stores)."""

from weir._faults import POINTS, crash_point

__all__ = ["POINTS", "crash_point"]
