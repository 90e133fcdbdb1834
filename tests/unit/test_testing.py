from __future__ import annotations

import pytest

from weir.demo import SplitSentence, WordCount
from weir.errors import TopologyError
from weir.testing import BoltTester


def test_bolt_tester_counts_checkpoints_and_rolls_back() -> None:
    t = BoltTester(WordCount(), inputs={"split": ["word"]}, topology="wc", component="count")
    t.execute("split", ["hello"])
    t.execute("split", ["hello"])
    assert t.emitted() == [("default", ("hello", 1)), ("default", ("hello", 2))]
    assert t.committed() == {}
    assert t.checkpoint() == 1
    assert t.committed() == {"hello": 2}
    t.execute("split", ["world"])
    t.rollback()
    assert t.committed() == {"hello": 2}
    t.restart()
    t.execute("split", ["hello"])
    assert t.emitted() == [("default", ("hello", 3))]


def test_bolt_tester_basic_bolt_and_unknown_input() -> None:
    t = BoltTester(SplitSentence(), inputs={"lines": ["line"]})
    t.execute("lines", ["a b"])
    assert t.emitted() == [("default", ("a",)), ("default", ("b",))]
    with pytest.raises(TopologyError, match="no input declared"):
        t.execute("other", ["x"])
