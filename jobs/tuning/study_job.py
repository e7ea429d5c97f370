"""A template with a ``study:`` -> the v1 ``HyperparameterTuningJob`` `vtx launch` submits, and
its plan: the study's cost is its trials' (`jobs.pricing.estimates.StudyCost`).

The trial job is the template's job compiled as ever (`jobs.custom_jobs.compile`): its ``jobSpec``
becomes
``trialJobSpec`` unchanged, so every rule, policy and price of a CustomJob holds for a trial.
``baseOutputDirectory`` stays the run's prefix: Vertex sets each trial's CustomJob to the
subfolder named by the trial's id (``<outputs>/<trial id>/``, the v1 proto's note on
``CustomJobSpec.base_output_directory``), so every trial is its own sub-run with its own
checkpoints. The study carries the run's labels (``vtx-run-id``...) as a CustomJob does."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.core.contract import LABEL_RUN_ID
from jobs.core.stack import StackOutputs
from jobs.custom_jobs.compile import CompiledJob, compile_job
from jobs.pricing.estimates import StudyCost
from jobs.pricing.plan import Plan, plan_job
from jobs.spec.study import EARLY_STOPPING, MEASUREMENT_SELECTION, SCALES, Parameter, Study
from jobs.spec.template import JobTemplate
from jobs.tuning.study_rules import runs_trainer

if TYPE_CHECKING:
    from google.cloud import aiplatform_v1

VALUE_SPECS = {
    "DOUBLE": "doubleValueSpec",
    "INTEGER": "integerValueSpec",
    "DISCRETE": "discreteValueSpec",
    "CATEGORICAL": "categoricalValueSpec",
}
PARENT_CONDITIONS = {
    "DISCRETE": "parentDiscreteValues",
    "INTEGER": "parentIntValues",
    "CATEGORICAL": "parentCategoricalValues",
}


def _int64(value: float) -> str:
    # Protobuf's JSON form writes int64 as a string.
    return str(int(value))


def _bounds(low: float | str, high: float | str) -> dict[str, Any]:
    # A zero bound is proto3's default: the API's JSON leaves it out, and so does ours.
    pairs = {"minValue": low, "maxValue": high}
    return {k: v for k, v in pairs.items() if v not in (0, 0.0, "0")}


def parameter_spec(param: Parameter) -> dict[str, Any]:
    """One ``StudySpec.ParameterSpec`` in REST form (camelCase)."""
    spec: dict[str, Any] = {"parameterId": param.id}
    if param.type == "DOUBLE":
        spec["doubleValueSpec"] = _bounds(param.min or 0.0, param.max or 0.0)
    elif param.type == "INTEGER":
        spec["integerValueSpec"] = _bounds(_int64(param.min or 0), _int64(param.max or 0))
    elif param.type == "DISCRETE":
        spec["discreteValueSpec"] = {"values": [float(v) for v in param.values or []]}
    else:
        spec["categoricalValueSpec"] = {"values": [str(v) for v in param.values or []]}
    if param.scale is not None:
        spec["scaleType"] = SCALES[param.scale]
    if param.conditional:
        spec["conditionalParameterSpecs"] = [
            {
                PARENT_CONDITIONS[param.type]: {"values": _parent_values(param, c.parent_values)},
                "parameterSpec": parameter_spec(c.parameter),
            }
            for c in param.conditional
        ]
    return spec


def _parent_values(parent: Parameter, values: list) -> list:
    if parent.type == "INTEGER":
        return [_int64(v) for v in values]
    if parent.type == "DISCRETE":
        return [float(v) for v in values]
    return [str(v) for v in values]


def study_spec(study: Study) -> dict[str, Any]:
    """The ``StudySpec`` in REST form. Vertex's defaults (the algorithm, the measurement
    selection) are left out, as the API writes them back."""
    spec: dict[str, Any] = {
        "metrics": [{"metricId": study.metric.id, "goal": study.metric.goal.upper()}],
        "parameters": [parameter_spec(p) for p in study.parameters],
    }
    if study.algorithm != "ALGORITHM_UNSPECIFIED":
        spec["algorithm"] = study.algorithm
    if study.measurement_selection is not None:
        spec["measurementSelectionType"] = MEASUREMENT_SELECTION[study.measurement_selection]
    if study.early_stopping is not None:
        rule = study.early_stopping
        spec[EARLY_STOPPING[rule.rule]] = (
            {"useElapsedDuration": True} if rule.use_elapsed_duration else {}
        )
    return spec


def tuning_job_dict(study: Study, trial: dict[str, Any]) -> dict[str, Any]:
    """The ``HyperparameterTuningJob`` in REST form around a compiled trial CustomJob."""
    job: dict[str, Any] = {
        "displayName": trial["displayName"],
        "studySpec": study_spec(study),
        "maxTrialCount": study.max_trials,
        "parallelTrialCount": study.parallel_trials,
        "trialJobSpec": copy.deepcopy(trial["jobSpec"]),
        "labels": dict(trial["labels"]),
    }
    if study.max_failed_trials:
        job["maxFailedTrialCount"] = study.max_failed_trials
    if "encryptionSpec" in trial:
        job["encryptionSpec"] = dict(trial["encryptionSpec"])
    return job


def to_tuning_job(job: dict[str, Any]) -> aiplatform_v1.HyperparameterTuningJob:
    """The REST dict as a real proto; unknown fields raise (``json_format.ParseError``)."""
    from google.cloud import aiplatform_v1
    from google.protobuf import json_format

    message = aiplatform_v1.HyperparameterTuningJob.pb()()
    json_format.ParseDict(job, message, ignore_unknown_fields=False)
    return aiplatform_v1.HyperparameterTuningJob.wrap(message)


def tuning_job_rest(job: aiplatform_v1.HyperparameterTuningJob) -> dict[str, Any]:
    """The proto back as REST JSON (camelCase, enums by name, int64 as strings)."""
    from google.cloud import aiplatform_v1
    from google.protobuf import json_format

    return json_format.MessageToDict(aiplatform_v1.HyperparameterTuningJob.pb(job))


@dataclass(frozen=True)
class CompiledStudy:
    """A study compiled for a stack: its trial job (what the rules, policies and prices read)
    and the REST HyperparameterTuningJob (what is submitted)."""

    trial: CompiledJob
    rest: dict[str, Any]

    @property
    def study(self) -> Study:
        study = self.trial.template.study
        assert study is not None  # compile_study refuses a template without one
        return study

    @property
    def run_id(self) -> str:
        return self.rest["labels"][LABEL_RUN_ID]

    @property
    def template(self) -> JobTemplate:
        return self.trial.template

    @property
    def stack(self) -> StackOutputs:
        return self.trial.stack

    @property
    def output_prefix(self) -> str:
        return self.trial.output_prefix

    def to_proto(self) -> aiplatform_v1.HyperparameterTuningJob:
        return to_tuning_job(self.rest)


def study_of(trial: CompiledJob) -> CompiledStudy:
    """The study around an already compiled (and checked) trial job."""
    study = trial.template.study
    if study is None:
        raise ValueError(f"template {trial.template.name} declares no study")
    return CompiledStudy(trial, tuning_job_dict(study, trial.rest))


def compile_study(template: JobTemplate, stack: StackOutputs, run_id: str) -> CompiledStudy:
    """Raises CompileError when the stack cannot give what the template asks for."""
    return study_of(compile_job(reporting_metric(template), stack, run_id))


def reporting_metric(template: JobTemplate) -> JobTemplate:
    """The template with our trainer told which metric the study reads (``--set
    hypertune_metric=ID`` after its own args; a trial's parameters come after that). Vertex is
    not documented to set CLOUD_ML_HP_METRIC_TAG in a trial (the local platform does), and the
    trainer's own default (eval_loss when it has an eval set) need not be the study's metric."""
    if template.study is None or not runs_trainer(template):
        return template
    setting = ["--set", f"hypertune_metric={template.study.metric.id}"]
    pools = {
        role: pool.model_copy(update={"args": [*pool.args, *setting]})
        for role, pool in template.pools.by_role()
        if pool.args is not None and role != "reduction_server"
    }
    return template.model_copy(
        update={
            "args": [*template.args, *setting],
            "pools": template.pools.model_copy(update=pools),
        }
    )


@dataclass(frozen=True)
class StudyPlan:
    """A checked study with its trial's plan and the study's cost, computed once."""

    study: CompiledStudy
    trial: Plan
    cost: StudyCost

    @property
    def quota(self) -> dict[str, int]:
        """What the trials running at once need in the region."""
        return self.cost.quota


def plan_study(study: CompiledStudy) -> StudyPlan:
    trial = plan_job(study.trial)
    spec = study.study
    return StudyPlan(study, trial, StudyCost(trial.cost, spec.max_trials, spec.parallel_trials))
