"""Pure parts of the local platform: list filters and the seeded chaos schedule."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.local.executor import Executor
from jobs.local.filters import FilterError, parse_filter
from jobs.local.settings import LocalSettings
from jobs.local.store import Store

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


def _executor(tmp_path: Path, rate: float) -> Executor:
    store = Store(tmp_path / "db.sqlite")
    settings = LocalSettings(data_dir=tmp_path, cwd=tmp_path, gcs_port=1, chaos_per_hour=rate)
    return Executor(store, settings)


def _spot(labels: dict[str, str] | None = None) -> dict:
    return {
        "jobSpec": {"scheduling": {"strategy": "SPOT", "timeout": "3600s"}},
        "labels": labels or {},
    }


def test_chaos_schedule_is_seeded_and_only_for_spot(tmp_path: Path) -> None:
    executor = _executor(tmp_path, rate=30.0)
    first = executor._chaos_schedule(_spot(), replicas=2)
    assert first == executor._chaos_schedule(_spot(), replicas=2)
    assert first and all(0 < at <= 3600 and idx in (0, 1) for at, idx in first)
    assert first != executor._chaos_schedule(_spot({"vtx-chaos-seed": "7"}), replicas=2)
    standard = {"jobSpec": {"scheduling": {"strategy": "STANDARD"}}, "labels": {}}
    assert executor._chaos_schedule(standard, replicas=2) == []


def test_chaos_label_overrides_the_platform_rate(tmp_path: Path) -> None:
    executor = _executor(tmp_path, rate=0.0)
    assert executor._chaos_schedule(_spot(), replicas=2) == []
    assert executor._chaos_schedule(_spot({"vtx-chaos-per-hour": "60"}), replicas=2)
