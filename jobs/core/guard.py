"""Progress guards: what a run that stops making progress is held to. A template writes
``guard:`` and a platform may set defaults for every run under ``vtx:platform.guard`` (the stack
output's ``guard``); `resolve_guard` merges them key by key, the template's winning, into the
`RunGuard` a run's record carries and the controller enforces (`jobs.control.reconcile`) from
the trainer's heartbeat (`jobs.core.heartbeat`).

- ``no_progress``: no optimizer step for this long while training (counted from this attempt's
  first step: starting, restoring, evaluating and saving are not hangs).
- ``min_tokens_per_s`` and ``window``: tokens/s (the heartbeat's, over its last minute) under
  the floor for ``window`` on end.
- ``action``: ``cancel`` the run, ``restart`` the same rung (a new attempt that resumes from the
  committed checkpoints), or ``next_rung`` (cancel and move to the capacity ladder's next rung,
  as after a stockout; on the last rung it cancels).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from jobs.core.durations import exact_duration, parse_duration_s
from jobs.core.heartbeat import HEARTBEAT_DEFAULT_S
from jobs.core.problems import HintedValueError

GuardAction = Literal["cancel", "restart", "next_rung"]
ACTIONS: tuple[str, ...] = ("cancel", "restart", "next_rung")
DEFAULT_ACTION: GuardAction = "cancel"
DEFAULT_WINDOW_S = 600.0
MIN_HEARTBEAT_S = 0.5
EXAMPLE = "guard: {no_progress: 20m, min_tokens_per_s: 1000, window: 10m, action: cancel}"


def _positive_duration(value: Any) -> Any:
    if value is None:
        return None
    seconds = parse_duration_s(value)
    if seconds is None or seconds <= 0:
        raise HintedValueError(
            f"{value!r} is not a positive duration", "e.g. 20m, 90s, 2h (a number is seconds)"
        )
    return value


GuardDuration = Annotated[str | int | float | None, BeforeValidator(_positive_duration)]


class Guard(BaseModel):
    """``guard:`` as a template or a stack config writes it; every key optional."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    no_progress: GuardDuration = None
    """How long a training run may go without a step before ``action``."""
    min_tokens_per_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """The floor of the trained tokens per second."""
    window: GuardDuration = None
    """How long tokens/s may stay under ``min_tokens_per_s`` before ``action`` (10m)."""
    action: GuardAction | None = None
    """cancel (the default), restart or next_rung."""


class RunGuard(BaseModel):
    """The guard one run is held to, in seconds: what its record carries."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    no_progress_s: float | None = None
    min_tokens_per_s: float | None = None
    window_s: float = DEFAULT_WINDOW_S
    action: GuardAction = DEFAULT_ACTION
    from_stack: list[str] = Field(default_factory=list)
    """The keys the stack's defaults gave (the launch plan says so)."""

    def say(self) -> str:
        """One line: ``no step for 20m or under 1,000 tokens/s for 10m -> cancel``."""
        parts = []
        if self.no_progress_s is not None:
            parts.append(f"no step for {exact_duration(self.no_progress_s)}")
        if self.min_tokens_per_s is not None:
            parts.append(
                f"under {self.min_tokens_per_s:,g} tokens/s for {exact_duration(self.window_s)}"
            )
        said = f"{' or '.join(parts)} -> {self.action}"
        if self.from_stack:
            said += f" ({', '.join(self.from_stack)} from the stack's defaults)"
        return said


def resolve_guard(template: Guard | None, stack: Guard | None) -> RunGuard | None:
    """The template's guard over the stack's defaults, key by key; None when neither sets a
    threshold (no_progress or min_tokens_per_s): nothing to watch."""
    mine = template.model_dump(exclude_none=True) if template else {}
    theirs = stack.model_dump(exclude_none=True) if stack else {}
    merged = {**theirs, **mine}
    if "no_progress" not in merged and "min_tokens_per_s" not in merged:
        return None
    window = merged.get("window")
    return RunGuard(
        no_progress_s=parse_duration_s(merged["no_progress"]) if "no_progress" in merged else None,
        min_tokens_per_s=merged.get("min_tokens_per_s"),
        window_s=parse_duration_s(window) if window is not None else DEFAULT_WINDOW_S,
        action=merged.get("action", DEFAULT_ACTION),
        from_stack=sorted(k for k in theirs if k not in mine),
    )


def template_guard(template: Guard | None, stack: Guard | None, study: bool) -> RunGuard | None:
    """A run's guard: none for a study (its trials are the study's jobs, not attempts the
    controller walks), else `resolve_guard`'s."""
    return None if study else resolve_guard(template, stack)


def heartbeat_interval_s(guard: RunGuard) -> float:
    """How often the trainer beats under ``guard``: a fifth of its shortest span, so that a
    beat's age never passes for a hang, at most the trainer's default."""
    spans = [guard.no_progress_s] if guard.no_progress_s is not None else []
    if guard.min_tokens_per_s is not None:
        spans.append(guard.window_s)
    return max(MIN_HEARTBEAT_S, min(HEARTBEAT_DEFAULT_S, min(spans) / 5))
