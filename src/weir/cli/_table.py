"""Plain-text tables and human-readable numbers for the command line.

A table has a header row, a dashed underline and aligned columns; numeric columns are right-aligned
so digits line up. ``None`` is shown as ``-``. Example::

    >>> print(format_table(["namespace", "keys"], [["wc-count-0", 1200], ["wc-count-1", 87]]))
    namespace   keys
    ----------  ----
    wc-count-0  1200
    wc-count-1    87
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

__all__ = [
    "format_table",
    "human_count",
    "human_duration",
    "human_rate",
    "human_size",
    "print_table",
]

_NUMERIC = re.compile(r"^[-+]?(\d[\d,]*(\.\d+)?|\.\d+)(e[-+]?\d+)?\s?([A-Za-zµ%/]+(/s)?)?$")
_GAP = "  "


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cell(value: Any, max_width: int | None) -> str:
    if value is None:
        text = "-"
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, float):
        text = f"{value:.6g}" if abs(value) < 1e15 else f"{value:.3e}"
    else:
        text = str(value)
    text = text.replace("\r", " ").replace("\n", " ").replace("\t", " ")
    if max_width is not None and len(text) > max_width:
        text = text[: max(1, max_width - 1)] + "…"
    return text


def _right_aligned(column: Sequence[Any]) -> bool:
    """A column is numeric when every non-empty cell is a number or a number with a unit.

    A column with no value at all (every cell ``-``) is right-aligned too: it is nearly always a
    number that is not set yet (a txid).
    """
    for v in column:
        if v is None or v == "" or v == "-":
            continue
        if _is_number(v):
            continue
        if isinstance(v, str) and _NUMERIC.match(v.strip()):
            continue
        return False
    return True


def format_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    align: str | None = None,
    max_width: int | None = 60,
) -> str:
    """Render ``rows`` under ``headers`` as aligned plain text (no trailing newline).

    Parameters
    ----------
    headers:
        Column titles.
    rows:
        Cells; numbers are right-aligned, ``None`` shows as ``-``, long text is cut to ``max_width``.
    align:
        One letter per column, ``l`` or ``r``, to override the automatic alignment.
    max_width:
        Longest cell shown (None: no limit).
    """
    raw = [list(r) for r in rows]
    ncol = len(headers)
    for r in raw:
        if len(r) != ncol:
            msg = f"table row has {len(r)} cells, the header has {ncol}: {r!r}"
            raise ValueError(msg)
    if align is not None and len(align) != ncol:
        msg = f"align {align!r} must have one letter per column ({ncol})"
        raise ValueError(msg)
    sides = align or "".join("r" if _right_aligned([r[i] for r in raw]) else "l" for i in range(ncol))
    cells = [[_cell(v, max_width) for v in r] for r in raw]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(parts: Sequence[str]) -> str:
        out = [p.rjust(w) if s == "r" else p.ljust(w) for p, w, s in zip(parts, widths, sides, strict=True)]
        return _GAP.join(out).rstrip()

    lines = [line(list(headers)), _GAP.join("-" * w for w in widths)]
    lines.extend(line(r) for r in cells)
    return "\n".join(lines)


def print_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    file: TextIO | None = None,
    **options: Any,
) -> None:
    """Print :func:`format_table` to ``file`` (stdout by default)."""
    print(format_table(headers, rows, **options), file=file or sys.stdout)


def human_size(nbytes: float) -> str:
    """``1536`` → ``"1.5 KiB"``."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover


def human_duration(seconds: float) -> str:
    """``0.0000123`` → ``"12.3 µs"``, ``0.0042`` → ``"4.20 ms"``, ``75`` → ``"1m 15s"``."""
    s = float(seconds)
    if s < 0:
        return "-" + human_duration(-s)
    if s < 0.9995e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 0.9995:
        return f"{s * 1e3:.3g} ms"
    if s < 59.5:
        return f"{s:.3g} s"
    minutes, sec = divmod(int(round(s)), 60)
    if minutes < 60:
        return f"{minutes}m {sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def human_count(n: float) -> str:
    """``12345`` → ``"12.3k"``, ``2500000`` → ``"2.5M"``; small numbers unchanged."""
    v = float(n)
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale * 0.9995:
            return f"{v / scale:.3g}{unit}"
    return str(int(v)) if v == int(v) else f"{v:.3g}"


def human_rate(per_second: float) -> str:
    """``12345.6`` → ``"12.3k/s"``."""
    return human_count(per_second) + "/s"
