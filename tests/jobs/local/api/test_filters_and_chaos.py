"""Pure parts of the local platform: list filters and the seeded chaos schedule."""

from __future__ import annotations

import fnmatch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs.local.custom_jobs.job import scheduling_of
from jobs.local.custom_jobs.lifecycle import ChaosLabelError, chaos_schedule
from jobs.local.platform.filters import FilterError, glob_match, parse_filter

JOB = {"state": "JOB_STATE_RUNNING", "displayName": "lora-7b", "labels": {"team": "nlp"}}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", True),
        ('state="JOB_STATE_RUNNING"', True),
        ("state=JOB_STATE_RUNNING", True),
        ('state!="JOB_STATE_RUNNING"', False),
        ('labels.team="nlp" AND display_name="lora-7b"', True),
        ('labels.team="cv" OR displayName:"lora"', True),
        ("labels.team:*", True),
        ("labels.owner:*", False),
        ('NOT labels.team="nlp"', False),
        ('-labels.team="nlp" OR state="JOB_STATE_RUNNING"', True),
    ],
)
def test_filter_matches_like_vertex(text: str, expected: bool) -> None:
    assert parse_filter(text)(JOB) is expected


@pytest.mark.parametrize(
    "text", ['create_time>"2026"', "state=", '(state="X")', 'state="A" XOR b=1']
)
def test_unsupported_filters_are_rejected(text: str) -> None:
    with pytest.raises(FilterError):
        parse_filter(text)


@given(st.text("ab*", max_size=8), st.text("ab", max_size=10))
def test_wildcards_match_as_a_shell_glob_of_stars_does(pattern: str, text: str) -> None:
    assert glob_match(pattern, text) is fnmatch.fnmatchcase(text, pattern)


def test_wildcards_match_the_documented_example_and_whole_names_only() -> None:
    job = {**JOB, "displayName": "my_job_7"}
    assert parse_filter('display_name:"my_job_*"')(job)
    assert not parse_filter('display_name:"job_*"')(job)  # a wildcard matches the whole name
    assert parse_filter('display_name:"*_job_*"')(job)


def _schedule(job: dict, rate: float, replicas: int = 2) -> list[tuple[float, int]]:
    return chaos_schedule(scheduling_of(job), job["labels"], replicas, rate, seed=0)


def _spot(labels: dict[str, str] | None = None) -> dict:
    return {
        "jobSpec": {"scheduling": {"strategy": "SPOT", "timeout": "3600s"}},
        "labels": labels or {},
    }


def test_chaos_schedule_is_seeded_and_only_for_spot() -> None:
    first = _schedule(_spot(), rate=30.0)
    assert first == _schedule(_spot(), rate=30.0)
    assert first and all(0 < at <= 3600 and idx in (0, 1) for at, idx in first)
    assert first != _schedule(_spot({"vtx-chaos-seed": "7"}), rate=30.0)
    standard = {"jobSpec": {"scheduling": {"strategy": "STANDARD"}}, "labels": {}}
    assert _schedule(standard, rate=30.0) == []


def test_chaos_label_overrides_the_platform_rate() -> None:
    assert _schedule(_spot(), rate=0.0) == []
    assert _schedule(_spot({"vtx-chaos-per-hour": "60"}), rate=0.0)


@pytest.mark.parametrize("labels", [{"vtx-chaos-per-hour": "often"}, {"vtx-chaos-seed": "x"}])
def test_chaos_labels_that_are_not_numbers_are_refused(labels: dict[str, str]) -> None:
    with pytest.raises(ChaosLabelError, match="must be whole numbers"):
        _schedule(_spot(labels), rate=1.0)
