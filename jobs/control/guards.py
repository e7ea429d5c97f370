"""A run's and a study's budget held by whoever watches it, and "cancel this job or study"
through the one cancel act (`jobs.control.cancels`, which the team budget's function carries
too). The controller's driver cancels through `cancel`; on a stack without a controller, `vtx
launch --follow` holds the budget with `RunBudgetGuard` and `StudyBudgetGuard` while it follows
(only a follower can there). The meter is `jobs.runs.watch`'s, priced from the stack's catalog,
as `vtx status` shows it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from jobs.control import cancels
from jobs.core.catalog import load_catalog
from jobs.core.contract import LABEL_BUDGET, budget_of
from jobs.runs.warm_pools import metering_catalog
from jobs.runs.watch import (
    AttemptStatus,
    attempts_of,
    budget_crossed,
    study_budget_crossed,
    trials_metered,
)
from jobs.tuning.study_records import StudyRecord
from jobs.vertex.errors import explain_status
from jobs.vertex.job_records import JobRecord
from jobs.vertex.rest import VertexRest


def cancel(rest: VertexRest, name: str) -> None:
    """Cancel the CustomJob or study ``name`` (Vertex cancels a study's running trials with
    it); one that ended first is what was wanted. Any other refusal, explained."""
    try:
        cancels.cancel(rest.cancel_answer, name)
    except cancels.CancelError as exc:
        raise explain_status(exc.status, exc.said, rest.stack) from exc


def trial_jobs(study: StudyRecord) -> list[tuple[str, int]]:
    """The study's trial CustomJobs, each with its trial number."""
    return [(t.custom_job, _number(t.id)) for t in study.trials if t.custom_job]


def _number(trial_id: str) -> int:
    return int(trial_id) if trial_id.isdigit() else 0


def metered_trials(
    rest: VertexRest,
    study: StudyRecord,
    now: datetime,
    known: dict[str, JobRecord] | None = None,
) -> list[AttemptStatus]:
    """The study's trials' CustomJobs, each at its price from the stack's catalog (its meter);
    ``known``: jobs already read (by name), not asked for again."""
    known = known or {}
    jobs = [known.get(name) or rest.get(name) for name, _ in trial_jobs(study)]
    catalog = load_catalog().for_stack(rest.stack)
    return trials_metered(jobs, rest.stack.region, now, catalog)


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class RunBudgetGuard:
    """Once a run's meter (every attempt at its price) crosses the budget its jobs carry, its
    running attempt is cancelled, once."""

    rest: VertexRest
    cancelled: str | None = None

    def check(self, attempts: list[JobRecord]) -> str | None:
        """``attempts``: the run's, newest first (as ``VertexRest.list`` gives them). Why the
        newest was cancelled, when this check cancelled it."""
        newest = attempts[0]
        if self.cancelled or newest.terminal or newest.labels.get(LABEL_BUDGET) is None:
            return None
        catalog = metering_catalog(self.rest, attempts)
        why = budget_crossed(attempts_of(attempts, self.rest.stack.region, utc_now(), catalog))
        if why is None:
            return None
        cancel(self.rest, newest.name)
        self.cancelled = why
        return why


@dataclass
class StudyBudgetGuard:
    """Once a study's meter (every trial's job at its price) crosses the budget the study
    carries, the study is cancelled, once."""

    rest: VertexRest
    cancelled: str | None = None

    def check(self, study: StudyRecord) -> str | None:
        """Why ``study`` was cancelled, when this check cancelled it."""
        if self.cancelled or study.terminal or budget_of(study.labels) is None:
            return None
        why = study_budget_crossed(study.labels, metered_trials(self.rest, study, utc_now()))
        if why is None:
            return None
        cancel(self.rest, study.name)
        self.cancelled = why
        return why
