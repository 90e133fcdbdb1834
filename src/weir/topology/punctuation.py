"""Punctuation: window marks and final marks carried between tasks with the tuples (IBM Streams).

A producer task emits a mark on an output stream (``("P", stream, mark, task, None)`` beside its
``("T", ...)`` records). The batch routing hands it to **every** task of every consumer of that
stream, in its place among the producer's tuples; a consumer task receives it as an input record
``(source, stream, MarkRecord(mark, producers), source_task)``, once per upstream task.

:class:`Aligner` merges those copies into one mark per input port (the merge of IBM Streams'
parallel channels): a window mark is delivered once every upstream task of the port has sent it;
the tuples an upstream task sends after its mark wait until then, so the mark keeps its place
relative to every upstream task's tuples. A final mark is delivered once every upstream task sent
it. At the end of a micro-batch (every upstream task's stream ends there) a window mark that only
some upstream tasks sent is delivered before their held tuples; a partial final mark is not.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Aligner", "MarkRecord", "Punctuation", "is_mark"]


class Punctuation(str, enum.Enum):
    """A mark in a stream (IBM Streams' ``StreamingData.Punctuation``)."""

    #: ends a group of tuples (a window) in the stream
    WINDOW_MARKER = "window"
    #: no more tuples follow on the stream (the end of a finite source)
    FINAL_MARKER = "final"


@dataclass(frozen=True, slots=True)
class MarkRecord:
    """A mark as a consumer task receives it: the mark and how many upstream tasks send it."""

    mark: Punctuation
    #: upstream tasks feeding this consumer task on the port (each sends its own copy)
    producers: int = 1


def is_mark(values: Any) -> bool:
    """Whether the ``values`` of an input record are a mark."""
    return values.__class__ is MarkRecord


@dataclass
class _Port:
    window_from: set[int] = field(default_factory=set)  # upstream tasks whose window mark is pending
    final_from: set[int] = field(default_factory=set)
    expected: int = 1
    held: dict[int, list[tuple[Any, ...]]] = field(default_factory=dict)  # records after a pending mark
    final: bool = False


class Aligner:
    """Turns a task's input records into tuples and aligned marks (see the module docstring).

    :meth:`feed` yields ``("T", record)`` for a tuple record and ``("P", (source, stream), mark)``
    for a mark delivered on a port; :meth:`end` (the end of the batch's input) yields what is left.
    """

    def __init__(self) -> None:
        self.ports: dict[tuple[str, str], _Port] = {}

    def final_ports(self) -> set[tuple[str, str]]:
        """Ports on which a final mark was delivered."""
        return {k for k, p in self.ports.items() if p.final}

    def feed(self, records: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        """Tuples and aligned marks, in delivery order."""
        ports = self.ports
        for rec in records:
            values = rec[2]
            if values.__class__ is not MarkRecord:
                if ports:
                    port = ports.get((rec[0], rec[1]))
                    if port is not None and rec[3] in port.window_from:
                        port.held.setdefault(rec[3], []).append(rec)
                        continue
                yield ("T", rec)
                continue
            yield from self._mark(rec)

    def _mark(self, rec: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
        key = (rec[0], rec[1])
        port = self.ports.get(key)
        if port is None:
            port = self.ports[key] = _Port()
        mr: MarkRecord = rec[2]
        port.expected = max(1, mr.producers)
        src_task = rec[3]
        if src_task in port.window_from:  # this upstream task is held: its mark waits its turn
            port.held.setdefault(src_task, []).append(rec)
            return
        if mr.mark is Punctuation.FINAL_MARKER:
            if src_task in port.final_from:
                return
            port.final_from.add(src_task)
            if len(port.final_from) >= port.expected and not port.final:
                port.final = True
                yield ("P", key, Punctuation.FINAL_MARKER)
            return
        port.window_from.add(src_task)
        if len(port.window_from) >= port.expected:
            yield from self._release(key, port)

    def _release(self, key: tuple[str, str], port: _Port) -> Iterator[tuple[Any, ...]]:
        """Deliver the port's pending window mark, then the tuples (and marks) held behind it."""
        yield ("P", key, Punctuation.WINDOW_MARKER)
        port.window_from = set()
        held = [r for _t, recs in sorted(port.held.items()) for r in recs]
        port.held = {}
        yield from self.feed(held)

    def end(self) -> Iterator[tuple[Any, ...]]:
        """The batch's input ended: deliver partial window marks and what they held."""
        again = True
        while again:
            again = False
            for key, port in list(self.ports.items()):
                if port.window_from:
                    again = True
                    yield from self._release(key, port)
