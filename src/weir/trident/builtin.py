"""Storm's ``org.apache.storm.trident.operation.builtin`` filters that ported code (seed 004, storm-starter) uses.

Examples
--------
>>> from weir.trident.builtin import Debug, FilterNull
>>> from weir.trident.tuple import make_tuple
>>> FilterNull().is_keep(make_tuple(("word", "n"), ("a", None)))
False
>>> Debug("words").is_keep(make_tuple(("word",), ("a",)))
DEBUG(words): [a]
True
"""

from __future__ import annotations

import sys
from typing import Any

from weir.trident.operation import Filter
from weir.trident.tuple import TridentTuple

__all__ = ["Debug", "FilterNull"]


class FilterNull(Filter):
    """Keep only the tuples none of whose input fields is ``None`` (Storm's ``FilterNull``).

    ``stream.each(Fields("word", "count"), FilterNull())`` drops a tuple whose word or count is null.
    """

    def is_keep(self, tup: TridentTuple) -> bool:
        """Whether every value of ``tup`` is set."""
        return all(v is not None for v in tup)


class Debug(Filter):
    """Print every tuple and keep it (Storm's ``Debug``): ``DEBUG: [v1, v2]`` or ``DEBUG(name): [...]``.

    The line goes to the standard output of the process that runs the task (a Spark executor's
    Python worker; on ``local[...]`` masters the driver's terminal shows it).
    """

    def __init__(self, name: str | None = None) -> None:
        self.name = name

    def is_keep(self, tup: TridentTuple) -> bool:
        """Print ``tup``'s values; keep it."""
        prefix = "DEBUG: " if self.name is None else f"DEBUG({self.name}): "
        print(prefix + "[" + ", ".join(_text(v) for v in tup) + "]", file=sys.stdout, flush=True)
        return True


def _text(v: Any) -> str:
    return "null" if v is None else str(v)
