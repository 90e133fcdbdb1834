"""The submit-time scan for emits on undeclared literal streams reads each method once, by its code object."""

from __future__ import annotations

import inspect
from typing import Any

from weir.topology import BasicBolt, Fields
from weir.topology._emits import _emits_of, literal_emit_streams


class Router(BasicBolt):
    def declare_output_fields(self, d: Any) -> None:
        d.declare(Fields("x"))

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit("left", [tup[0]])

    @staticmethod
    def helper(collector: Any) -> None:
        def inner() -> None:
            collector.emit(stream="right", values=[1])

        inner()


class SubRouter(Router):
    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup[0]])


def _line_of(func: Any, text: str) -> int:
    lines, first = inspect.getsourcelines(func)
    return first + next(i for i, ln in enumerate(lines) if text in ln)


def test_every_literal_stream_is_found_with_its_method_and_exact_line() -> None:
    found = sorted(literal_emit_streams(Router))
    assert found == [
        ("left", "execute", _line_of(Router.execute, '"left"')),
        ("right", "helper", _line_of(Router.helper, '"right"')),
    ]


def test_a_subclass_reports_its_own_and_inherited_methods() -> None:
    # SubRouter.execute emits on the default stream; Router's methods are still scanned
    assert sorted(s for s, _, _ in literal_emit_streams(SubRouter)) == ["left", "right"]


def test_a_method_is_parsed_once_per_code_object() -> None:
    _emits_of.cache_clear()
    list(literal_emit_streams(Router))
    misses = _emits_of.cache_info().misses
    for _ in range(3):
        list(literal_emit_streams(Router))
    assert _emits_of.cache_info().misses == misses
