"""A HyperparameterTuningJob as the REST API returns it, read once into what `vtx status`,
`vtx list` and `vtx logs` show: the study's state, its trials (id, state, parameters, final
metric, duration, the CustomJob that ran it) and the best trial.

v1 has no best-trial field on HyperparameterTuningJob (``Study`` has ``optimalTrials`` through the
Vizier service, which the tuning job does not expose), so the best trial is computed here: the
SUCCEEDED trial whose ``finalMeasurement`` holds the study's metric at its best by the metric's
goal. Trial states are ``Trial.State``: REQUESTED, ACTIVE, STOPPING, SUCCEEDED, INFEASIBLE."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jobs.core.contract import LABEL_RUN_ID
from jobs.core.states import JobState, is_final
from jobs.vertex.job_records import rfc3339


@dataclass(frozen=True)
class TrialRecord:
    """One trial: ``parameters`` by parameter id, ``metric`` the final measurement's value of the
    study's metric (None until the trial reports and ends)."""

    id: str
    state: str
    parameters: dict[str, Any]
    metric: float | None
    step: int | None
    start_time: datetime | None
    end_time: datetime | None
    custom_job: str | None
    infeasible_reason: str | None

    def duration_s(self, now: datetime) -> float | None:
        if self.start_time is None:
            return None
        return ((self.end_time or now) - self.start_time).total_seconds()

    @classmethod
    def from_rest(cls, trial: dict, metric_id: str | None) -> TrialRecord:
        final = trial.get("finalMeasurement") or {}
        values = {
            m.get("metricId"): m.get("value")
            for m in final.get("metrics") or []
            if isinstance(m, dict)
        }
        metric = values.get(metric_id)
        step = final.get("stepCount")
        return cls(
            id=str(trial.get("id", "")),
            state=str(trial.get("state", "STATE_UNSPECIFIED")),
            parameters={
                str(p.get("parameterId")): p.get("value")
                for p in trial.get("parameters") or []
                if isinstance(p, dict)
            },
            metric=float(metric) if isinstance(metric, int | float) else None,
            step=int(step) if isinstance(step, int | str) and str(step).isdigit() else None,
            start_time=rfc3339(trial.get("startTime")),
            end_time=rfc3339(trial.get("endTime")),
            custom_job=trial.get("customJob") or None,
            infeasible_reason=trial.get("infeasibleReason") or None,
        )


@dataclass(frozen=True)
class StudyRecord:
    """A HyperparameterTuningJob: its study spec's metric and parameters, counts and trials."""

    name: str
    display_name: str
    state: str
    labels: dict[str, str]
    metric_id: str | None
    goal: str | None
    """MAXIMIZE or MINIMIZE."""
    algorithm: str
    parameter_ids: list[str]
    max_trials: int
    parallel_trials: int
    max_failed_trials: int
    create_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    error: str | None
    output_prefix: str | None
    trials: list[TrialRecord]
    rest: dict = field(repr=False)

    @property
    def job_id(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    @property
    def run_id(self) -> str | None:
        return self.labels.get(LABEL_RUN_ID)

    @property
    def terminal(self) -> bool:
        """Whether the study has ended (`jobs.core.states.FINAL`)."""
        return is_final(self.state)

    @property
    def best(self) -> TrialRecord | None:
        """The succeeded trial with the best final metric by the goal; None before one."""
        scored = [t for t in self.trials if t.state == "SUCCEEDED" and t.metric is not None]
        if not scored:
            return None
        pick = max if self.goal == "MAXIMIZE" else min
        return pick(scored, key=lambda t: t.metric or 0.0)

    def trial_output(self, trial: TrialRecord) -> str | None:
        """The trial's own outputs: Vertex's trial-id subfolder of the study's prefix."""
        if self.output_prefix is None:
            return None
        return f"{self.output_prefix.rstrip('/')}/{trial.id}/"

    @classmethod
    def from_rest(cls, job: dict) -> StudyRecord:
        spec = job.get("studySpec") or {}
        metrics = spec.get("metrics") or [{}]
        metric_id = metrics[0].get("metricId")
        trial_spec = job.get("trialJobSpec") or {}
        return cls(
            name=str(job.get("name", "")),
            display_name=str(job.get("displayName", "")),
            state=str(job.get("state", JobState.UNSPECIFIED)),
            labels={str(k): str(v) for k, v in (job.get("labels") or {}).items()},
            metric_id=metric_id,
            goal=metrics[0].get("goal"),
            algorithm=str(spec.get("algorithm", "ALGORITHM_UNSPECIFIED")),
            parameter_ids=[str(p.get("parameterId")) for p in spec.get("parameters") or []],
            max_trials=_int(job.get("maxTrialCount")),
            parallel_trials=_int(job.get("parallelTrialCount")),
            max_failed_trials=_int(job.get("maxFailedTrialCount")),
            create_time=rfc3339(job.get("createTime")),
            start_time=rfc3339(job.get("startTime")),
            end_time=rfc3339(job.get("endTime")),
            error=(job.get("error") or {}).get("message") or None,
            output_prefix=(trial_spec.get("baseOutputDirectory") or {}).get("outputUriPrefix"),
            trials=[TrialRecord.from_rest(t, metric_id) for t in job.get("trials") or []],
            rest=job,
        )


def _int(value: object) -> int:
    """REST JSON leaves zero values out (int32 fields travel as numbers)."""
    try:
        return int(str(value))
    except ValueError:
        return 0
