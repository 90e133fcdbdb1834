"""Plain-text tables and human-readable numbers."""

from __future__ import annotations

import pytest

from weir.cli._table import format_table, human_count, human_duration, human_rate, human_size


def test_columns_are_aligned_numbers_right_text_left() -> None:
    text = format_table(["namespace", "txid", "keys"], [["wc-count-0", 7, 1200], ["b", None, 87]])
    assert text.splitlines() == [
        "namespace   txid  keys",
        "----------  ----  ----",
        "wc-count-0     7  1200",
        "b              -    87",
    ]


def test_numbers_with_units_are_right_aligned() -> None:
    text = format_table(["provider", "commit"], [["sqlite", "4.2 ms"], ["redis", "12.5 ms"], ["pg", "-"]])
    assert text.splitlines()[2:] == ["sqlite     4.2 ms", "redis     12.5 ms", "pg              -"]


def test_explicit_alignment_and_cut_cells() -> None:
    text = format_table(["a", "b"], [["x" * 20, 1]], align="rl", max_width=8)
    assert text.splitlines()[2] == "xxxxxxx…  1"


def test_cells_never_break_the_line() -> None:
    text = format_table(["v"], [["two\nlines"]])
    assert text.splitlines()[2] == "two lines"


def test_row_of_wrong_length_is_refused() -> None:
    with pytest.raises(ValueError, match="2 cells"):
        format_table(["a"], [[1, 2]])


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0000123, "12.3 µs"),
        (0.0042, "4.2 ms"),
        (0.9999, "1 s"),
        (12.34, "12.3 s"),
        (75, "1m 15s"),
        (3725, "1h 02m"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_human_size_count_rate() -> None:
    assert human_size(10) == "10 B"
    assert human_size(1536) == "1.5 KiB"
    assert human_size(5 * 1024**3) == "5.0 GiB"
    assert human_count(3) == "3"
    assert human_count(12345) == "12.3k"
    assert human_count(999.7) == "1k"
    assert human_count(2_500_000) == "2.5M"
    assert human_rate(150_000) == "150k/s"
