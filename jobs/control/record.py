"""A run record: a launch plan as data (its rungs with their compiled jobs, each rung's price
and SKUs, the budget, the study), the attempts submitted for it, the controller's moves and its
last decision. `vtx launch` writes it beside the run's outputs; the controller reads it,
decides, and writes it back (`jobs.control.records`) when something in it changed. Plain JSON,
so that a controller of another version, or a person, can read it."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from jobs.core.contract import budget_of
from jobs.core.guard import RunGuard
from jobs.core.stack import StackOutputs
from jobs.core.states import succeeded
from jobs.launch.plan import LaunchPlan, Rung

RECORD_NAME = "vtx-run.json"
"""The record's object name under the run's output prefix (``runs/<run id>/``)."""
RECORD_VERSION = 1
MOVES_KEPT = 200
"""A record keeps its last moves only: a run that waits for days says the same thing often."""

Kind = Literal["job", "ladder", "study"]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class RungRecord(Model):
    """One rung as planned: the CustomJob exactly as it will be sent, and what it costs."""

    number: int
    label: str
    region: str
    job: dict
    quota: dict[str, int]
    usd_per_h: float | None
    price_kind: str
    skus: list[str] = Field(default_factory=list)
    max_wait_s: float | None = None
    hopeless: str | None = None
    """Why it is skipped (over a quota limit); None: it is tried."""


class StudyPlanRecord(Model):
    """A study's HyperparameterTuningJob as it will be sent, and the quota its trials need."""

    job: dict
    quota: dict[str, int]
    region: str


class Attempt(Model):
    """One submission of a rung (or the study), claimed in the record before it is sent: its
    ``marker`` label is looked for before any submit, so a crash between the create and the
    record's write never submits twice."""

    marker: str
    rung: int
    """Index into ``RunRecord.rungs`` (0 for a study)."""
    claimed_at: datetime
    job: str | None = None
    """The created job's (or study's) resource name, once known."""
    placed: bool = False
    gave_up: str | None = None
    """Why the controller cancelled it to move on to the next rung."""
    breached: str | None = None
    """Why the controller cancelled it to restart its rung (a progress guard's ``restart``)."""
    slow_since: datetime | None = None
    """Since when its heartbeat's tokens/s is under the guard's floor; None: not under it."""
    stalled_since: datetime | None = None
    """When it stopped stepping, once a guard's ``no_progress`` acted on it (the goodput
    timeline's stall starts there)."""


class Move(Model):
    at: datetime
    what: str


class Outcome(Model):
    state: str
    """The state the run ended in, as messages show it (``SUCCEEDED``: `bare_name`)."""
    reason: str | None = None

    @property
    def succeeded(self) -> bool:
        return succeeded(f"JOB_STATE_{self.state}")


class LastPass(Model):
    """What the controller last decided for the run, and what it looks for next."""

    at: datetime
    """When a pass first decided it: a later pass that decides the same leaves the record as it
    is, so when the controller last looked is `ControllerPass.at`, not this."""
    decided: list[str]
    next: str


class ControllerPass(Model):
    """The controller's liveness: when its last pass over the stack's live runs ended. One
    object per stack's Vertex, overwritten by each pass (`jobs.control.records`), so a pass
    that changes nothing writes one object, not one per run."""

    at: datetime
    vertex: str
    """`vertex_of` the stack the pass acted on."""
    runs: int
    """Live runs the pass reconciled."""
    errors: int = 0


def vertex_of(stack: StackOutputs) -> str:
    """Which Vertex a record's jobs go to: a controller acts only on its own stack's runs (two
    local platforms may share one GCS emulator, and so one checkpoints bucket)."""
    return f"{stack.project}@{stack.vertex_endpoint or 'aiplatform.googleapis.com'}"


class RunRecord(Model):
    version: int = RECORD_VERSION
    run_id: str
    vertex: str = ""
    """`vertex_of` the stack it was launched on."""
    kind: Kind
    rungs: list[RungRecord]
    study: StudyPlanRecord | None = None
    budget_usd: float | None = None
    guard: RunGuard | None = None
    """The run's progress guard, enforced from the trainer's heartbeat."""
    earlier_attempts: int = 0
    """The run's jobs (a study's: studies) from earlier launches under its run id: this
    launch's attempts number on from them, so that each marker names one job of the run."""
    attempts: list[Attempt] = Field(default_factory=list)
    stopping: str | None = None
    """Why the controller cancelled the run (its budget, a progress guard): the outcome's
    reason once it ends."""
    breaches: list[str] = Field(default_factory=list)
    """Each progress-guard breach the controller acted on, as it said it (`vtx status`)."""
    outcome: Outcome | None = None
    moves: list[Move] = Field(default_factory=list)
    last_pass: LastPass | None = None

    @property
    def live(self) -> bool:
        return self.outcome is None

    @property
    def current(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    def next_number(self) -> int:
        """The number of the run's next attempt (from 1, counting earlier launches')."""
        return self.earlier_attempts + len(self.attempts) + 1

    def moved(self, at: datetime, what: str) -> None:
        self.moves = [*self.moves, Move(at=at, what=what)][-MOVES_KEPT:]


def _rung(rung: Rung) -> RungRecord:
    cost = rung.plan.cost
    return RungRecord(
        number=rung.number,
        label=rung.label,
        region=rung.plan.job.stack.region,
        job=rung.plan.job.rest,
        quota=dict(rung.plan.quota),
        usd_per_h=cost.usd_per_h,
        price_kind=cost.price_kind,
        skus=[f"{s.sku} {s.name}" for s in cost.skus],
        max_wait_s=rung.max_wait_s,
        hopeless=rung.hopeless,
    )


def record_of(plan: LaunchPlan, earlier_attempts: int = 0) -> RunRecord:
    """The record of a launch plan with no problems and no refusal, before anything is sent;
    ``earlier_attempts``: the run's jobs (or studies) from earlier launches."""
    rungs = [_rung(r) for r in plan.rungs]
    labels = plan.rungs[0].plan.job.rest.get("labels") or {}
    study = None
    if plan.study is not None:
        study = StudyPlanRecord(
            job=plan.study.study.rest,
            quota=dict(plan.study.quota),
            region=plan.study.study.stack.region,
        )
    kind: Kind = "study" if study else "ladder" if plan.ladder else "job"
    return RunRecord(
        run_id=plan.run_id,
        vertex=vertex_of(plan.rungs[0].plan.job.stack),
        kind=kind,
        rungs=rungs,
        study=study,
        budget_usd=budget_of(labels),
        guard=plan.guard,
        earlier_attempts=earlier_attempts,
    )
