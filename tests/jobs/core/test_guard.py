"""Progress guards as written and resolved: the template's keys over the stack's defaults, the
seconds a run's record carries, and how often the trainer then beats."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from jobs.core.guard import Guard, RunGuard, heartbeat_interval_s, resolve_guard, template_guard


def test_the_templates_keys_win_over_the_stacks_key_by_key() -> None:
    stack = Guard(no_progress="30m", action="restart", min_tokens_per_s=100)
    mine = Guard(no_progress="20m", window="5m")
    guard = resolve_guard(mine, stack)
    assert guard == RunGuard(
        no_progress_s=1200.0,
        min_tokens_per_s=100,
        window_s=300.0,
        action="restart",
        from_stack=["action", "min_tokens_per_s"],
    )
    assert guard.say() == (
        "no step for 20m or under 100 tokens/s for 5m -> restart "
        "(action, min_tokens_per_s from the stack's defaults)"
    )


def test_defaults_and_nothing_to_watch() -> None:
    assert resolve_guard(None, None) is None
    assert resolve_guard(Guard(action="restart"), None) is None  # no threshold: unguarded
    guard = resolve_guard(Guard(no_progress=90), None)
    assert guard is not None and guard.action == "cancel" and guard.window_s == 600.0
    assert resolve_guard(None, Guard(no_progress="1h")) == RunGuard(
        no_progress_s=3600.0, from_stack=["no_progress"]
    )
    assert template_guard(None, Guard(no_progress="1h"), study=True) is None


@pytest.mark.parametrize(
    ("guard", "every_s"),
    [
        (RunGuard(no_progress_s=3.0), 0.6),
        (RunGuard(no_progress_s=1200.0), 30.0),
        (RunGuard(no_progress_s=1200.0, min_tokens_per_s=10, window_s=50.0), 10.0),
        (RunGuard(min_tokens_per_s=10, window_s=1.0), 0.5),
    ],
)
def test_the_trainer_beats_a_fifth_of_the_shortest_span(guard: RunGuard, every_s: float) -> None:
    assert heartbeat_interval_s(guard) == pytest.approx(every_s)


@pytest.mark.parametrize(
    "bad",
    [
        {"no_progress": "soon"},
        {"no_progress": 0},
        {"window": "-5m"},
        {"min_tokens_per_s": 0},
        {"action": "reboot"},
        {"no_progres": "20m"},
    ],
)
def test_a_bad_guard_is_refused(bad: dict) -> None:
    with pytest.raises(ValidationError):
        Guard.model_validate(bad)
