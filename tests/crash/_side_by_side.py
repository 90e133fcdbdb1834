"""The end of a crash driver that runs several topologies side by side (the crash barrier's drivers).

Runs only in the driver process (nothing here is pickled to Spark's workers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def groups(args: Sequence[str], width: int) -> list[list[str]]:
    """``args`` cut into the driver's groups of ``width`` arguments, one group per topology."""
    return [list(args[i : i + width]) for i in range(0, len(args), width)]


def await_each(runs: Sequence[tuple[str, Any]]) -> int:
    """Wait for every ``(name, run)`` started with ``available_now`` and print its ``NAME DONE ...`` line."""
    for name, run in runs:
        run.await_termination()
        st = run.status()
        print(f"{name} DONE txid={st.last_txid} batches={st.batches} skipped={st.skipped}", flush=True)
    return 0
