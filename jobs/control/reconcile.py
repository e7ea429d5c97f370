"""The reconciler: pure decisions on one run. Given its record, the jobs observed for it (and
its trainer's heartbeat), the time and the prices, what to do: submit a rung, adopt a job a
crashed pass submitted, note an attempt placed, cancel a job or a study (to move on, or for the
budget), act on a progress guard's breach (`jobs.control.progress`: cancel, restart the rung,
or move on), record the outcome, or wait. The ladder's judgements are `jobs.spec.ladder`'s
and the meter is `jobs.runs.watch`'s, as in the CLI's own walk; `apply` writes the actions
into the record (the driver does what they ask of Vertex). No clock, no client, no storage
here: a table of cases tests it whole."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from jobs.control.progress import judge_progress
from jobs.control.record import Attempt, LastPass, Outcome, RunRecord
from jobs.core.catalog import Catalog
from jobs.core.contract import LABEL_ATTEMPT
from jobs.core.guard import GuardAction
from jobs.core.heartbeat import Heartbeat
from jobs.core.states import JobState, bare_name, succeeded
from jobs.runs.watch import attempts_of, budget_crossed, study_budget_crossed, trials_metered
from jobs.spec.ladder import DONE, NEXT, PLACED, STOP, Decision, after_running, judge, next_rung
from jobs.tuning.study_records import StudyRecord
from jobs.vertex.job_records import JobRecord

SUBMIT_LEASE_S = 120.0
"""How long a claimed attempt whose job no listing shows is left to the pass that claimed it
(its create may still be on its way, retries included) before another pass submits it again."""
MAX_GUARD_RESTARTS = 3
"""A guard's ``restart`` restarts a run this often; the next breach cancels it: a run that
hangs on every attempt hangs on the next one too."""
BREACHES_KEPT = 20


@dataclass(frozen=True)
class Observed:
    """What a pass saw of one run: its CustomJobs (the ``vtx-run-id`` label's; a study's trial
    jobs among them), and its study when it is one."""

    jobs: Sequence[JobRecord] = ()
    study: StudyRecord | None = None
    trial_jobs: Sequence[JobRecord] = ()
    heartbeat: Heartbeat | None = None
    """The run's newest heartbeat (read only for a guarded run with a live attempt)."""


@dataclass(frozen=True)
class Submit:
    marker: str
    rung: int
    why: str

    def say(self, record: RunRecord) -> str:
        what = "the study" if record.kind == "study" else record.rungs[self.rung].label
        return f"submit {what} as attempt {self.marker}: {self.why}"


@dataclass(frozen=True)
class Adopt:
    marker: str
    job: str

    def say(self, record: RunRecord) -> str:
        return f"adopt {self.job}: attempt {self.marker}'s marker, submitted by an earlier pass"


@dataclass(frozen=True)
class Place:
    marker: str
    job: str

    def say(self, record: RunRecord) -> str:
        return f"{self.job} has its machines (attempt {self.marker})"


@dataclass(frozen=True)
class Cancel:
    """Cancel a live job: to move on to the next rung, or (``budget``) to stop the run."""

    job: str
    reason: str
    budget: bool = False

    def say(self, record: RunRecord) -> str:
        why = "stop the run" if self.budget else "move on"
        return f"cancel {self.job} to {why}: {self.reason}"


BREACH_MEANS: dict[str, str] = {
    "cancel": "stop the run",
    "restart": "restart its rung",
    "next_rung": "move on",
}


@dataclass(frozen=True)
class Breach:
    """A progress guard's breach: cancel the attempt, then (``action``) end the run, submit
    the same rung again, or move to the next rung."""

    job: str
    reason: str
    action: GuardAction
    stalled_since: datetime | None = None
    """When the attempt stopped stepping (a ``no_progress`` breach)."""

    def say(self, record: RunRecord) -> str:
        return f"cancel {self.job} to {BREACH_MEANS[self.action]}: {self.reason}"


@dataclass(frozen=True)
class Slow:
    """An attempt's tokens/s went under the guard's floor (``since``), or back above it."""

    marker: str
    since: datetime | None
    how: str | None

    def say(self, record: RunRecord) -> str:
        if self.since is None:
            return f"attempt {self.marker} is back above the tokens/s floor"
        return f"attempt {self.marker} is under the tokens/s floor: {self.how}"


@dataclass(frozen=True)
class CancelStudy:
    study: str
    reason: str

    def say(self, record: RunRecord) -> str:
        return f"cancel study {self.study}: {self.reason}"


@dataclass(frozen=True)
class Finish:
    state: str
    reason: str | None

    def say(self, record: RunRecord) -> str:
        return f"the run ended {self.state}" + (f": {self.reason}" if self.reason else "")


@dataclass(frozen=True)
class Wait:
    """Nothing to change: what the next pass looks for."""

    why: str

    def say(self, record: RunRecord) -> str:
        return self.why


Action = Submit | Adopt | Place | Cancel | Breach | Slow | CancelStudy | Finish | Wait
MOVES = (Submit, Adopt, Place, Cancel, Breach, Slow, CancelStudy, Finish)
"""The actions that change something: each is one line of the record's moves."""


def marker(number: int) -> str:
    """The ``vtx-attempt`` label of a run's attempt ``number`` (from 1)."""
    return f"a{number}"


@dataclass
class _Pass:
    record: RunRecord
    seen: Observed
    now: datetime
    catalog: Catalog | None
    lease_s: float
    actions: list[Action] = field(default_factory=list)

    @property
    def hopeless(self) -> list[str | None]:
        return [r.hopeless for r in self.record.rungs]

    def marked(self, mark: str) -> JobRecord | None:
        return next((j for j in self.seen.jobs if j.labels.get(LABEL_ATTEMPT) == mark), None)

    def budget(self) -> str | None:
        if self.record.budget_usd is None or not self.seen.jobs:
            return None
        region = self.record.rungs[0].region
        return budget_crossed(attempts_of(self.seen.jobs, region, self.now, self.catalog))


def decide(
    record: RunRecord,
    seen: Observed,
    now: datetime,
    catalog: Catalog | None,
    lease_s: float = SUBMIT_LEASE_S,
) -> list[Action]:
    """What to do about ``record``'s run, given what was ``seen`` of it at ``now``, its jobs
    priced from ``catalog`` (the stack's)."""
    if record.outcome is not None:
        return []
    step = _Pass(record, seen, now, catalog, lease_s)
    if record.kind == "study":
        _study(step)
    else:
        _run(step)
    return step.actions


def _claimed(step: _Pass, attempt: Attempt, found: str | None) -> str | None:
    """The job of an attempt whose name the record lacks: adopted when its marker is seen,
    else submitted again once its claim is older than the lease. None: nothing to watch yet."""
    if found is not None:
        step.actions.append(Adopt(attempt.marker, found))
        return found
    waited = (step.now - attempt.claimed_at).total_seconds()
    if waited < step.lease_s:
        step.actions.append(Wait(f"attempt {attempt.marker} is being submitted"))
    else:
        why = f"claimed {waited:.0f} s ago and no job carries its marker"
        step.actions.append(Submit(attempt.marker, attempt.rung, why))
    return None


def _first(step: _Pass) -> None:
    first = next_rung(step.hopeless, 0)
    if first is None:
        reasons = "; ".join(f"rung {r.number}: {r.hopeless}" for r in step.record.rungs)
        step.actions.append(Finish(bare_name(JobState.FAILED), f"no rung may run: {reasons}"))
        return
    step.actions.append(Submit(marker(step.record.next_number()), first, "the run's first attempt"))


def _run(step: _Pass) -> None:
    record, current = step.record, step.record.current
    if current is None:
        _first(step)
        return
    name = current.job
    if name is None:
        found = step.marked(current.marker)
        name = _claimed(step, current, found.name if found else None)
        if name is None:
            return
    job = next((j for j in step.seen.jobs if j.name == name), None)
    if job is None:
        step.actions.append(Wait(f"{name} is not listed yet"))
        return
    following = next_rung(step.hopeless, current.rung + 1)
    if not job.terminal:
        _live(step, current, job, following)
        return
    if record.stopping is not None:
        step.actions.append(Finish(bare_name(job.state), record.stopping))
        return
    if current.breached is not None and not succeeded(job.state):
        _restart(step, current)
        return
    code = (job.rest.get("error") or {}).get("code")
    code = code if isinstance(code, int) else None
    if current.gave_up is not None:
        decision = Decision(NEXT, current.gave_up)
    elif current.placed or job.start_time is not None:
        # startTime: it reached RUNNING (v1 CustomJob.start_time), though maybe between passes
        decision = after_running(job.state, job.error, code)
    else:
        decision = judge(job.state, job.error, 0.0, None, last=following is None, code=code)
    _ended(step, job, decision, following)


def _live(step: _Pass, current: Attempt, job: JobRecord, following: int | None) -> None:
    cancelling = step.record.stopping or current.gave_up or current.breached
    if cancelling is not None:
        step.actions.append(Wait(f"{job.name} is being cancelled"))
        return
    over = step.budget()
    if over is not None:
        step.actions.append(Cancel(job.name, over, budget=True))
        return
    if current.placed:
        if not _guarded(step, current, job, following):
            step.actions.append(Wait(f"watch {job.name} ({bare_name(job.state)})"))
        return
    rung = step.record.rungs[current.rung]
    waited = (step.now - (job.create_time or current.claimed_at)).total_seconds()
    decision = judge(job.state, job.error, waited, rung.max_wait_s, last=following is None)
    if decision.action == PLACED:
        step.actions.append(Place(current.marker, job.name))
    elif decision.action == NEXT:
        step.actions.append(Cancel(job.name, decision.reason or "no capacity"))
    else:
        step.actions.append(Wait(f"watch {job.name} ({bare_name(job.state)})"))


def _guarded(step: _Pass, current: Attempt, job: JobRecord, following: int | None) -> bool:
    """The run's progress guard on its running attempt: True when it acted (a breach)."""
    guard = step.record.guard
    if guard is None:
        return False
    verdict = judge_progress(guard, step.seen.heartbeat, job, current.slow_since, step.now)
    if verdict.slow_since != current.slow_since:
        step.actions.append(Slow(current.marker, verdict.slow_since, verdict.slow))
    if verdict.breach is None:
        return False
    action, reason = guard.action, verdict.breach
    restarts = sum(a.breached is not None for a in step.record.attempts)
    if action == "restart" and restarts >= MAX_GUARD_RESTARTS:
        action, reason = "cancel", f"{reason}; restarted {restarts} times already"
    elif action == "next_rung" and following is None:
        action, reason = "cancel", f"{reason}; no rung left to move to"
    step.actions.append(Breach(job.name, reason, action, verdict.stalled_since))
    return True


def _restart(step: _Pass, current: Attempt) -> None:
    """A rung whose attempt a guard cancelled, submitted again: the new attempt resumes from
    the run's committed checkpoints (one output prefix for every attempt)."""
    over = step.budget()
    if over is not None:  # no further attempt once the meter is over: it would be cancelled
        step.actions.append(Finish(bare_name(JobState.CANCELLED), over))
        return
    why = f"restart after {current.breached}"
    step.actions.append(Submit(marker(step.record.next_number()), current.rung, why))


def _ended(step: _Pass, job: JobRecord, decision: Decision, following: int | None) -> None:
    if decision.action == DONE:
        step.actions.append(Finish(bare_name(job.state), None))
        return
    if decision.action == STOP or decision.action not in (NEXT, PLACED):
        step.actions.append(Finish(bare_name(job.state), decision.reason))
        return
    if following is None:
        why = decision.reason or "no capacity"
        step.actions.append(Finish(bare_name(JobState.FAILED), f"no rung got capacity: {why}"))
        return
    over = step.budget()
    if over is not None:  # no further attempt once the meter is over: it would be cancelled
        step.actions.append(Finish(bare_name(JobState.CANCELLED), over))
        return
    why = f"{step.record.rungs[step.record.attempts[-1].rung].label}: {decision.reason}"
    step.actions.append(Submit(marker(step.record.next_number()), following, why))


def _study(step: _Pass) -> None:
    record, current, study = step.record, step.record.current, step.seen.study
    if current is None:
        step.actions.append(Submit(marker(record.next_number()), 0, "the study"))
        return
    if current.job is None:
        found = study if study and study.labels.get(LABEL_ATTEMPT) == current.marker else None
        if _claimed(step, current, found.name if found else None) is None:
            return
    if study is None:
        step.actions.append(Wait("the study is not listed yet"))
        return
    if study.terminal:
        step.actions.append(Finish(bare_name(study.state), record.stopping or study.error))
        return
    if record.stopping is not None:
        step.actions.append(Wait(f"study {study.name} is being cancelled"))
        return
    region = record.study.region if record.study else record.rungs[0].region
    metered = trials_metered(step.seen.trial_jobs, region, step.now, step.catalog)
    over = study_budget_crossed(study.labels, metered)
    if over is not None:
        step.actions.append(CancelStudy(study.name, over))
        return
    step.actions.append(Wait(f"watch study {study.name} ({bare_name(study.state)})"))


def _breached(record: RunRecord, breach: Breach) -> None:
    record.breaches = [*record.breaches, f"{breach.action}: {breach.reason}"][-BREACHES_KEPT:]
    if record.current is not None and breach.stalled_since is not None:
        record.current.stalled_since = breach.stalled_since
    if breach.action == "cancel":
        record.stopping = breach.reason
    elif record.current is not None and breach.action == "next_rung":
        record.current.gave_up = breach.reason
    elif record.current is not None:
        record.current.breached = breach.reason


def apply(record: RunRecord, actions: Sequence[Action], now: datetime) -> RunRecord:
    """The record after ``actions`` (a copy): claims, adoptions, placements, why it was
    cancelled, its outcome, each a move; and the pass's decision (what, what next, and when it
    was first decided: a pass that decides what the last one did returns an equal record)."""
    new = record.model_copy(deep=True)
    for action in actions:
        if isinstance(action, Submit):
            claim = Attempt(marker=action.marker, rung=action.rung, claimed_at=now)
            same = [i for i, a in enumerate(new.attempts) if a.marker == action.marker]
            if same:
                new.attempts[same[0]] = claim
            else:
                new.attempts.append(claim)
        elif isinstance(action, Adopt | Place):
            for attempt in new.attempts:
                if attempt.marker == action.marker:
                    attempt.job = action.job
                    attempt.placed = attempt.placed or isinstance(action, Place)
        elif isinstance(action, Cancel):
            if action.budget:
                new.stopping = action.reason
            elif new.current is not None:
                new.current.gave_up = action.reason
        elif isinstance(action, Breach):
            _breached(new, action)
        elif isinstance(action, Slow):
            for attempt in new.attempts:
                if attempt.marker == action.marker:
                    attempt.slow_since = action.since
        elif isinstance(action, CancelStudy):
            new.stopping = action.reason
        elif isinstance(action, Finish):
            new.outcome = Outcome(state=action.state, reason=action.reason)
        if isinstance(action, MOVES):
            new.moved(now, action.say(record))
    said = [a.say(record) for a in actions]
    waits = [a.why for a in actions if isinstance(a, Wait)]
    following = (
        waits[-1] if waits else "nothing: the run has ended" if new.outcome else "look again"
    )
    last = record.last_pass
    same = last is not None and (last.decided, last.next) == (said, following)
    # The same decision again changes nothing: the record is not rewritten for it.
    new.last_pass = last if same else LastPass(at=now, decided=said, next=following)
    return new
