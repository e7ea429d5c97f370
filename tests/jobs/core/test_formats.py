"""Money, durations and timestamps are written one way everywhere (jobs/core/formats.py)."""

from __future__ import annotations

from datetime import datetime

import pytest

from jobs.core.formats import duration, money, now_rfc3339, share, usd_per_h
from jobs.vertex.job_records import rfc3339


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0, "0s"), (59.9, "59s"), (200, "3m 20s"), (3900, "1h 05m"), (90000, "1d 01h")],
)
def test_durations_read_like_people_write_them(seconds: float | None, text: str) -> None:
    assert duration(seconds) == text


@pytest.mark.parametrize(
    ("usd", "text", "per_h"),
    [(None, "unknown", "unknown"), (0.0, "$0.00", "$0.00/h"), (1234.5, "$1,234.50", "$1,234.50/h")],
)
def test_money_is_dollars_to_the_cent_and_never_zero_when_unknown(
    usd: float | None, text: str, per_h: str
) -> None:
    assert money(usd) == text
    assert usd_per_h(usd) == per_h


def test_now_is_written_as_vertex_writes_times_and_reads_back() -> None:
    stamp = now_rfc3339()
    assert stamp.endswith("Z") and len(stamp) == len("2026-01-02T03:04:05.000006Z")
    assert isinstance(rfc3339(stamp), datetime)


def test_a_share_is_a_percentage_to_one_decimal_and_unknown_when_unknown() -> None:
    assert share(0.2334) == "23.3%"
    assert share(0.0) == "0.0%"
    assert share(None) == "unknown"  # the terminal and the page say the same
