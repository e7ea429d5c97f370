"""Where a study's time went: each trial's goodput timeline, and the figures summed over the
study. Pure: it reads the study's record, its trials' metered CustomJobs and their log entries,
and the clock it is told.

A trial is one attempt: Vertex runs it as one CustomJob (``Trial.customJob``), so its timeline
is `jobs.runs.goodput`'s for that job alone, from the job's creation to its end, read from that
job's own lines. The study's figures are the trials' summed (seconds, dollars, steps, tokens),
over two denominators:

- **wall time from the study's creation**, times ``parallelTrialCount``: the trial slots the
  study held open (``slot_s``). Goodput over it is productive step time per slot-second, so a
  study running two trials at a time is not read as 200% busy. The slot time no trial's job
  held (``between_trials_s``: the study starting, the next trial being suggested after one
  ended, the last round's free slots) is nobody's bill and no category.
- **paid time**: every trial job's running time, as the meter prices it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from jobs.runs.goodput import CATEGORIES, CategoryFigure, Figures, Goodput, goodput_of
from jobs.runs.logs import LogEntry
from jobs.runs.watch import AttemptStatus, same_job, seconds_between
from jobs.tuning.study_records import StudyRecord, TrialRecord


@dataclass(frozen=True)
class TrialGoodput:
    trial: TrialRecord
    goodput: Goodput
    """Its CustomJob's timeline: one attempt, from the job's creation to its end."""


@dataclass(frozen=True)
class StudyGoodput(Figures):
    created: datetime
    ended: datetime
    wall_s: float
    """From the study's creation to its end (or now)."""
    slots: int
    """``parallelTrialCount``: how many trials the study runs at a time."""
    trials: list[TrialGoodput]
    """Every trial that has a CustomJob, by trial id."""
    categories: list[CategoryFigure]
    """Each category summed over the trials, in ``CATEGORIES`` order."""
    tokens: int | None
    tokens_unknown_because: str | None
    usd: float | None
    usd_unknown_because: str | None
    usd_excludes_disks: bool = False

    @property
    def slot_s(self) -> float:
        return self.wall_s * self.slots

    @property
    def trial_s(self) -> float:
        """The trials' wall times summed: what their phases tile."""
        return sum(t.goodput.wall_s for t in self.trials)

    @property
    def between_trials_s(self) -> float:
        return max(self.slot_s - self.trial_s, 0.0)

    @property
    def paid_s(self) -> float:
        return sum(t.goodput.paid_s for t in self.trials)

    @property
    def productive_s(self) -> float:
        return sum(t.goodput.productive_s for t in self.trials)

    @property
    def goodput(self) -> float | None:
        """Productive step time over the slot time since the study's creation."""
        return self.productive_s / self.slot_s if self.slot_s else None

    @property
    def steps_trained(self) -> int:
        return sum(t.goodput.steps_trained for t in self.trials)

    @property
    def unique_steps(self) -> int:
        """Each trial trains its own model: its steps are its own."""
        return sum(t.goodput.unique_steps for t in self.trials)


def _summed(trials: Sequence[TrialGoodput]) -> list[CategoryFigure]:
    """Each category's seconds and dollars over the trials; its dollars unknown (with the first
    trial that makes them so) once one trial's are."""
    figures = []
    for category in CATEGORIES:
        seconds, usd, why = 0.0, 0.0, None
        for t in trials:
            figure = t.goodput.figure(category.key)
            seconds += figure.seconds
            if figure.usd is None:
                why = why or f"trial {t.trial.id}: {figure.usd_unknown_because}"
            else:
                usd += figure.usd
        figures.append(CategoryFigure(category.key, seconds, None if why else usd, why))
    return figures


def _tokens(trials: Sequence[TrialGoodput]) -> tuple[int | None, str | None]:
    """Tokens over the trials; a trial that never ran trained none, one that ran without a
    count leaves the sum unknown (a partial sum would read as the whole)."""
    total = 0
    for t in trials:
        if t.goodput.tokens is not None:
            total += t.goodput.tokens
        elif t.goodput.paid_s:
            return None, f"trial {t.trial.id}: {t.goodput.tokens_unknown_because}"
    return total, None


def _cost(trials: Sequence[TrialGoodput]) -> tuple[float | None, str | None]:
    total = 0.0
    for t in trials:
        if t.goodput.usd is None:
            return None, f"trial {t.trial.id}: {t.goodput.usd_unknown_because}"
        total += t.goodput.usd
    return total, None


def _trial_order(trial: TrialRecord) -> tuple[int, str]:
    return (int(trial.id), "") if trial.id.isdigit() else (0, trial.id)


def study_goodput_of(
    study: StudyRecord,
    metered: Sequence[AttemptStatus],
    entries: Sequence[LogEntry],
    now: datetime,
) -> StudyGoodput:
    """The study's figures from its trials' CustomJobs, each metered as its one attempt
    (`jobs.runs.watch.trials_metered`), and every log entry of those jobs."""
    by_job = {a.job.name.rsplit("/", 1)[-1]: a for a in metered}
    trials = []
    for trial in sorted(study.trials, key=_trial_order):
        attempt = by_job.get((trial.custom_job or "").rsplit("/", 1)[-1])
        if attempt is None:
            continue  # no job yet (REQUESTED), or one that could not be read
        own = [e for e in entries if same_job(e, attempt.job.name)]
        trials.append(TrialGoodput(trial, goodput_of([attempt], own, now)))
    created = study.create_time or min((t.goodput.submitted for t in trials), default=now)
    ended = study.end_time or (
        max((t.goodput.ended for t in trials), default=created) if study.terminal else now
    )
    tokens, tokens_why = _tokens(trials)
    usd, usd_why = _cost(trials)
    return StudyGoodput(
        created=created,
        ended=ended,
        wall_s=seconds_between(created, ended) or 0.0,
        slots=max(study.parallel_trials, 1),
        trials=trials,
        categories=_summed(trials),
        tokens=tokens,
        tokens_unknown_because=tokens_why,
        usd=usd,
        usd_unknown_because=usd_why,
        usd_excludes_disks=usd is not None and any(t.goodput.usd_excludes_disks for t in trials),
    )
