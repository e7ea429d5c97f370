"""A duration a hint tells a user to write is exact in the template's grammar
(jobs/core/durations.py); one shown to be read is rounded (jobs/core/formats.py)."""

from __future__ import annotations

import pytest

from jobs.core.durations import exact_duration, parse_duration_s
from jobs.core.formats import duration


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (1.5, "1.5s"),
        (59, "59s"),
        (90 * 60, "90m"),
        (3601, "3601s"),
        (86400, "1d"),
        (7 * 86400, "7d"),
        (25 * 3600, "25h"),
        (1_000_001, "1000001s"),
        (315_576_000_000, "3652500d"),
    ],
)
def test_a_duration_to_write_reads_back_to_the_same_seconds(seconds: float, text: str) -> None:
    assert exact_duration(seconds) == text
    assert parse_duration_s(exact_duration(seconds)) == seconds


def test_a_duration_to_read_is_rounded_to_two_units_and_is_not_the_templates() -> None:
    assert duration(3723) == "1h 02m"
    assert exact_duration(3723) == "3723s"
