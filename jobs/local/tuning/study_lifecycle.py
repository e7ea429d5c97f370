"""Pure: what a HyperparameterTuningJob's trials and study decide, in Vertex's words.

- A trial is a CustomJob. It is ACTIVE from its suggestion to its job's end, STOPPING while its
  job is cancelled with the study, then SUCCEEDED with a final measurement or INFEASIBLE:
  Trial.State's doc says the service "will set a Trial to INFEASIBLE when it's done but missing
  the final_measurement", so a job that failed, and a job that succeeded without reporting the
  metric, both end INFEASIBLE (with ``infeasibleReason``) and count as failed trials.
- Metrics come from the trial's cloudml-hypertune file (JSON lines, one report each); every
  report is a measurement, the final one is the last (LAST_MEASUREMENT, and
  MEASUREMENT_SELECTION_TYPE_UNSPECIFIED, which the proto says is treated as LAST) or the best
  of the first metric for its goal (BEST_MEASUREMENT, the SDK's default).
- The study runs ``parallelTrialCount`` trials at once until ``maxTrialCount`` were suggested
  (or a grid is done), then succeeds once they end. Locally no more at once than the platform
  can run (``--max-replicas`` over a trial's replicas): a trial is created when it can start,
  so a study never fills the queue ahead of other users' jobs. It fails once
  ``maxFailedTrialCount`` trials failed; with 0 (unset), Vertex "decides how many Trials must
  fail": its hyperparameter tuning overview says a failure of the first trial ends the job at
  once, and that later failures may end it when there are too many ("subject to change").
  Here: trial 1 failing fails the study, and so does a study whose every trial failed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from jobs.core.states import JobState


class TrialState(StrEnum):
    """Trial.State names, as the REST API gives them."""

    REQUESTED = "REQUESTED"
    ACTIVE = "ACTIVE"
    STOPPING = "STOPPING"
    SUCCEEDED = "SUCCEEDED"
    INFEASIBLE = "INFEASIBLE"

    @property
    def done(self) -> bool:
        return self in (TrialState.SUCCEEDED, TrialState.INFEASIBLE)


LAST_MEASUREMENT = "LAST_MEASUREMENT"
BEST_MEASUREMENT = "BEST_MEASUREMENT"
MINIMIZE = "MINIMIZE"
"""GoalType; GOAL_TYPE_UNSPECIFIED "will default to maximize"."""


@dataclass(frozen=True)
class Measurement:
    """One hypertune report: the step it names and the study's metrics it holds."""

    step: int
    metrics: tuple[tuple[str, float], ...]
    timestamp: float

    def value(self, metric_id: str) -> float | None:
        return dict(self.metrics).get(metric_id)

    def rest(self) -> dict:
        """Measurement in REST form (stepCount is an int64: a string)."""
        return {
            "stepCount": str(self.step),
            "metrics": [{"metricId": m, "value": v} for m, v in self.metrics],
        }


def parse_reports(text: str, metric_ids: Sequence[str]) -> list[Measurement]:
    """The measurements of a hypertune file: each JSON line with at least one of the study's
    metrics (hypertune writes values and steps as strings). Lines that are not JSON objects, or
    hold none of the metrics or an unreadable value, are skipped: a trainer writing half a line
    when the file is read is read again at the next poll."""
    found = []
    for line in text.splitlines():
        try:
            report = json.loads(line)
        except ValueError:
            continue
        if not isinstance(report, dict):
            continue
        metrics = []
        for metric_id in metric_ids:
            try:
                value = float(report[metric_id])
            except (KeyError, TypeError, ValueError):
                continue
            if math.isfinite(value):
                metrics.append((metric_id, value))
        if not metrics:
            continue
        try:
            step = int(float(report.get("global_step") or 0))
            stamp = float(report.get("timestamp") or 0.0)
        except (TypeError, ValueError):
            continue
        found.append(Measurement(step, tuple(metrics), stamp))
    return found


def new_reports(reports: Sequence[Measurement], after: float | None) -> list[Measurement]:
    """The reports written after timestamp ``after``: hypertune rewrites its whole file (its
    last 100 reports) at each report, so what was read before comes again."""
    return [r for r in reports if after is None or r.timestamp > after]


def final_measurement(
    measurements: Sequence[Measurement], selection: str, metric_id: str, goal: str
) -> Measurement | None:
    """The trial's final measurement: the last report, or the best of ``metric_id`` under
    BEST_MEASUREMENT (the earliest of equals)."""
    usable = [m for m in measurements if m.value(metric_id) is not None]
    if not usable:
        return None
    if selection != BEST_MEASUREMENT:
        return usable[-1]
    sign = -1.0 if goal == MINIMIZE else 1.0
    return max(usable, key=lambda m: sign * (m.value(metric_id) or 0.0))


@dataclass(frozen=True)
class TrialEnd:
    state: TrialState
    infeasible_reason: str | None = None


def trial_end(
    job_state: JobState, job_error: str | None, final: Measurement | None, stopped: bool = False
) -> TrialEnd:
    """What a trial's finished CustomJob makes of it. A trial the service stopped (STOPPING:
    the study was cancelled or failed) keeps what it measured: SUCCEEDED if it reported."""
    if stopped and final is not None:
        return TrialEnd(TrialState.SUCCEEDED)
    if job_state is JobState.SUCCEEDED:
        if final is None:
            return TrialEnd(
                TrialState.INFEASIBLE,
                "The trial's CustomJob succeeded but reported no value of the study's metric "
                "(cloudml-hypertune's report_hyperparameter_tuning_metric, to the file named "
                "by CLOUD_ML_HP_METRIC_FILE)",
            )
        return TrialEnd(TrialState.SUCCEEDED)
    return TrialEnd(
        TrialState.INFEASIBLE,
        f"The trial's CustomJob ended {job_state.value}" + (f": {job_error}" if job_error else ""),
    )


@dataclass(frozen=True)
class StudyCounts:
    """Where a study stands, from its trials."""

    max_trials: int
    parallel: int
    max_failed: int
    """0: Vertex's default rule."""
    suggested: int
    active: int
    succeeded: int
    failed: int
    first_failed: bool
    """Trial 1 ended INFEASIBLE."""
    exhausted: bool = False
    """The algorithm has nothing left to suggest (a grid is done)."""
    runnable: int | None = None
    """Trials the platform can run at once (its replicas over a trial's); None: no bound."""


class Verdict(StrEnum):
    CONTINUE = "continue"
    SUCCEED = "succeed"
    FAIL = "fail"


@dataclass(frozen=True)
class StudyDecision:
    verdict: Verdict
    start: int = 0
    """How many new trials to suggest and start now."""
    message: str | None = None
    """Why the study fails (its error message)."""


def decide(counts: StudyCounts) -> StudyDecision:
    """The study's next step: fail, succeed, or go on starting up to ``start`` trials."""
    c = counts
    if c.max_failed > 0 and c.failed >= c.max_failed:
        return StudyDecision(
            Verdict.FAIL,
            message=f"{c.failed} trials failed, reaching maxFailedTrialCount {c.max_failed}; "
            f"see the trials' infeasibleReason and their CustomJobs' logs",
        )
    if c.max_failed == 0 and c.first_failed:
        return StudyDecision(
            Verdict.FAIL,
            message="The first trial failed, so the job was stopped (Vertex's rule when "
            "maxFailedTrialCount is 0); see trial 1's infeasibleReason and its CustomJob's logs",
        )
    done_suggesting = c.suggested >= c.max_trials or c.exhausted
    if done_suggesting and c.active == 0:
        if c.succeeded == 0:
            return StudyDecision(
                Verdict.FAIL,
                message=f"All {c.failed} trials failed; see their infeasibleReason and their "
                f"CustomJobs' logs",
            )
        return StudyDecision(Verdict.SUCCEED)
    if done_suggesting:
        return StudyDecision(Verdict.CONTINUE)
    room = min(c.parallel - c.active, c.max_trials - c.suggested)
    if c.runnable is not None:
        # No more trials at once than can run: the rest would wait as queued jobs ahead of
        # everyone else's, all created at once (parallelTrialCount may be 1,000).
        room = min(room, c.runnable - c.active)
    return StudyDecision(Verdict.CONTINUE, start=max(room, 0))
