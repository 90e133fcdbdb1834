"""What the Storm bolt task loops share: the report of a failed task and the forwarding of aligned marks.

Both :mod:`weir.runtime.spark.storm.task` (bolts) and :mod:`weir.runtime.spark.storm.windowed`
(windowed bolts) use them; neither imports the other's loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from weir.runtime.spark.executor import TaskReport, TaskSpec, failure_report
from weir.topology.punctuation import Aligner, Punctuation

__all__ = ["failure_report_at", "forwarding_marks"]


def failure_report_at(
    spec: TaskSpec, task: int, txid: int, exc: BaseException, stage: str, current: Any, n_in: int, n_out: int
) -> tuple[str, TaskReport]:
    """The report of a task that failed at ``stage`` (on tuple ``current``, if any); call it in ``except``."""
    where = stage + (f" of tuple {list(current.values)!r:.200}" if current is not None else "")
    return failure_report(spec, task, txid, exc, where, n_in, n_out)


def forwarding_marks(spec: TaskSpec, task: int, records: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    """Input tuples of a Storm bolt, with each aligned mark as ``(None, None, ("P", ...), None)`` records.

    A window mark is forwarded on every consumed output stream once its port has it from every
    upstream task; a final mark once every input port has one.
    """
    aligner = Aligner()
    ports = set(spec.input_fields)
    outs = [s for s in spec.outputs if s in spec.consumed_streams]
    final_sent = False
    it = aligner.feed(records)
    for phase in (it, aligner.end()):
        for item in phase:
            if item[0] == "T":
                yield item[1]
                continue
            mark = item[2]
            if mark is Punctuation.FINAL_MARKER:
                if final_sent or not ports <= aligner.final_ports():
                    continue
                final_sent = True
            for s in outs:
                yield (None, None, ("P", s, mark, task, None), None)
