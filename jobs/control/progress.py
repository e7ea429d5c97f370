"""A progress guard's judgement of one running attempt, pure: its heartbeat (the newest beat
the trainer's chief wrote, `jobs.core.heartbeat`), the guard (`jobs.core.guard`), since when the
attempt has been under the tokens/s floor, and the time. The reconciler acts on the verdict.

- A beat of another attempt (an earlier one's, left in the run's prefix) says nothing of this
  one: it is starting.
- Only the training phase can hang, and only after this attempt's first step: starting,
  restoring, evaluating, saving and exporting are never counted. ``no_progress`` counts from
  the later of the last step and the return to training (after an eval or a save).
- tokens/s is the beat's (over the trainer's last minute, falling when steps stop); a beat that
  stopped coming (the process is frozen) counts as 0 tokens/s once it is stale (``STALE_BEATS``
  beats and ``STALE_SLACK_S`` late), and the window counts from the pass that first sees it
  so: a late write is never taken for a slow run, at the price of a later breach.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from jobs.core.formats import duration
from jobs.core.guard import RunGuard, heartbeat_interval_s
from jobs.core.heartbeat import Heartbeat, Phase
from jobs.vertex.job_records import JobRecord

STALE_BEATS = 3
"""Beats missed before a beat counts as stopped (its rate as 0)."""
STALE_SLACK_S = 30.0
"""Beyond them: a write that took long, clocks that differ, a slow pass."""


@dataclass(frozen=True)
class Verdict:
    breach: str | None = None
    """Why the guard's action is due now; None: it is not."""
    slow_since: datetime | None = None
    """The attempt's new ``slow_since``."""
    slow: str | None = None
    """How slow, when it is under the floor (said once, when it goes under)."""
    stalled_since: datetime | None = None
    """With a ``no_progress`` breach: when the attempt stopped stepping."""


def of_attempt(beat: Heartbeat | None, job: JobRecord) -> Heartbeat | None:
    """The beat when this attempt wrote it: by its job id, else (a beat naming no job) by its
    time, after the job was created."""
    if beat is None:
        return None
    if beat.job is not None:
        return beat if beat.job == job.name.rsplit("/", 1)[-1] else None
    if job.create_time is not None and beat.time < job.create_time:
        return None
    return beat


def judge_progress(
    guard: RunGuard,
    beat: Heartbeat | None,
    job: JobRecord,
    slow_since: datetime | None,
    now: datetime,
) -> Verdict:
    """The verdict on ``job``, a running attempt, from its newest ``beat``."""
    beat = of_attempt(beat, job)
    if beat is None or beat.phase is not Phase.TRAINING or beat.stepped_at is None:
        return Verdict()
    stalled = _no_progress(guard, beat, now)
    if stalled is not None:
        since = max(beat.stepped_at, beat.phase_since)
        return Verdict(breach=stalled, slow_since=slow_since, stalled_since=since)
    return _throughput(guard, beat, slow_since, now)


def _no_progress(guard: RunGuard, beat: Heartbeat, now: datetime) -> str | None:
    if guard.no_progress_s is None or beat.stepped_at is None:
        return None
    since = max(beat.stepped_at, beat.phase_since)
    idle_s = (now - since).total_seconds()
    if idle_s <= guard.no_progress_s:
        return None
    return (
        f"guard.no_progress: no training step for {duration(idle_s)} (limit "
        f"{duration(guard.no_progress_s)}); the last was step {beat.step} at {_at(beat.stepped_at)}"
    )


def _rate(guard: RunGuard, beat: Heartbeat, now: datetime) -> float | None:
    stale_s = STALE_BEATS * heartbeat_interval_s(guard) + STALE_SLACK_S
    if (now - beat.time).total_seconds() > stale_s:
        return 0.0
    return beat.tokens_per_s


def _throughput(
    guard: RunGuard, beat: Heartbeat, slow_since: datetime | None, now: datetime
) -> Verdict:
    floor = guard.min_tokens_per_s
    rate = _rate(guard, beat, now) if floor is not None else None
    if floor is None or rate is None or rate >= floor:
        return Verdict()
    if slow_since is None:
        return Verdict(slow_since=now, slow=f"{rate:,.0f} tokens/s, under {floor:,g}")
    if now - slow_since < timedelta(seconds=guard.window_s):
        return Verdict(slow_since=slow_since)
    return Verdict(
        breach=(
            f"guard.min_tokens_per_s: {rate:,.0f} tokens/s, under {floor:,g} since "
            f"{_at(slow_since)} (window {duration(guard.window_s)})"
        ),
        slow_since=slow_since,
    )


def _at(when: datetime) -> str:
    return f"{when:%Y-%m-%d %H:%M:%S} UTC"
