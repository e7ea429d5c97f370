"""Pure: the checks a HyperparameterTuningJob's shape must pass before it is accepted (400
INVALID_ARGUMENT otherwise), as the v1 proto's field docs state them: a display name, at least
one metric and one parameter with unique ids without whitespace, one value spec per parameter,
bounds in order (and strictly positive under a log scale), DISCRETE values increasing,
conditional parameters under DISCRETE, INTEGER or CATEGORICAL parents with conditions among the
parent's feasible values, trial counts (at most Vizier's trials per study, limits.yaml), ids
that are flag names (a trial gets --ID=VALUE), and only INTEGER, DISCRETE and CATEGORICAL parameters
for GRID_SEARCH. The trial's CustomJobSpec is checked by the server with the customJobs rules.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence

from jobs.core.catalog import vertex_limits
from jobs.core.naming import display_name_problem
from jobs.local.tuning.suggest import GRID_KINDS, PARENT_CONDITIONS, Algorithm, Kind, Scale

LOG_SCALES = (Scale.LOG.value, Scale.REVERSE_LOG.value)
TRIALS_MAX = vertex_limits().study_trials_max
PARAMETER_ID = re.compile(vertex_limits().parameter_id_pattern)


def study_problems(job: Mapping) -> list[str]:
    """Every problem of a HyperparameterTuningJob (REST form), each 'field: what to do'."""
    problems = []
    display = display_name_problem(str(job.get("displayName", "")))
    if display is not None:
        problems.append(f"displayName: {display}")
    problems += _count_problems(job)
    if not job.get("trialJobSpec"):
        problems.append("trialJobSpec: required; the CustomJobSpec every trial runs")
    spec = job.get("studySpec") or {}
    if not spec:
        return [*problems, "studySpec: required; metrics and parameters of the study"]
    problems += _metric_problems(spec.get("metrics", []))
    params = spec.get("parameters", [])
    if not params:
        problems.append("studySpec.parameters: at least one parameter is required")
    seen: set[str] = set()
    for i, param in enumerate(params):
        problems += _param_problems(param, f"studySpec.parameters[{i}]", seen)
    if spec.get("algorithm") == Algorithm.GRID.value:
        problems += _grid_problems(params, "studySpec.parameters")
    return problems


def _count_problems(job: Mapping) -> list[str]:
    problems = []
    max_trials = int(job.get("maxTrialCount", 0))
    parallel = int(job.get("parallelTrialCount", 0))
    max_failed = int(job.get("maxFailedTrialCount", 0))
    if max_trials <= 0:
        problems.append("maxTrialCount: required and positive; how many trials to run")
    if parallel <= 0:
        problems.append("parallelTrialCount: required and positive; how many trials at once")
    for field, count in (("maxTrialCount", max_trials), ("parallelTrialCount", parallel)):
        if count > TRIALS_MAX:
            problems.append(
                f"{field}: {count} is more than a study runs ({TRIALS_MAX} trials, Vizier's "
                f"limit); write {TRIALS_MAX} or fewer"
            )
    if max_failed < 0:
        problems.append("maxFailedTrialCount: negative; 0 lets Vertex decide, or a count")
    elif max_trials > 0 and max_failed > max_trials:
        problems.append(
            f"maxFailedTrialCount: {max_failed} is more than maxTrialCount {max_trials}; "
            f"write at most {max_trials} (or 0 to let Vertex decide)"
        )
    return problems


def _check_id(value: str, where: str) -> list[str]:
    if not value:
        return [f"{where}: required"]
    if any(ch.isspace() for ch in value):
        return [f"{where}: {value!r} holds whitespace; ids must not"]
    return []


def _metric_problems(metrics: Sequence[Mapping]) -> list[str]:
    if not metrics:
        return ["studySpec.metrics: at least one metric is required (metricId and goal)"]
    problems = []
    seen: set[str] = set()
    for i, metric in enumerate(metrics):
        metric_id = metric.get("metricId", "")
        problems += _check_id(metric_id, f"studySpec.metrics[{i}].metricId")
        if metric_id in seen:
            problems.append(f"studySpec.metrics[{i}].metricId: {metric_id!r} is repeated")
        seen.add(metric_id)
    return problems


def _param_problems(param: Mapping, where: str, seen: set[str]) -> list[str]:
    param_id = param.get("parameterId", "")
    problems = _check_id(param_id, f"{where}.parameterId")
    if not problems and not PARAMETER_ID.fullmatch(param_id):
        # Each trial gets --ID=VALUE: an id that is not a flag name becomes other arguments.
        problems.append(
            f"{where}.parameterId: {param_id!r} is not a flag name (each trial gets "
            f"--{param_id}=VALUE); write letters, digits, '_', '.' or '-', starting with a "
            f"letter or '_'"
        )
    if param_id in seen:
        problems.append(f"{where}.parameterId: {param_id!r} is repeated")
    seen.add(param_id)
    kinds = [k for k in Kind if k.value in param]
    if len(kinds) != 1:
        return [
            *problems,
            f"{where}: exactly one of doubleValueSpec, integerValueSpec, categoricalValueSpec, "
            f"discreteValueSpec is required",
        ]
    kind = kinds[0]
    body = param[kind.value]
    scale = param.get("scaleType", Scale.UNSPECIFIED.value)
    if kind in (Kind.DOUBLE, Kind.INTEGER):
        low, high = float(body.get("minValue", 0)), float(body.get("maxValue", 0))
        if low > high:
            problems.append(f"{where}.{kind.value}: minValue {low:g} is above maxValue {high:g}")
        if scale in LOG_SCALES and low <= 0:
            problems.append(
                f"{where}.scaleType: {scale} needs a strictly positive range; minValue is {low:g}"
            )
    else:
        values = body.get("values", [])
        if not values:
            problems.append(f"{where}.{kind.value}.values: at least one value is required")
        if len(set(map(str, values))) != len(values):
            problems.append(f"{where}.{kind.value}.values: values are repeated")
        if kind is Kind.DISCRETE and any(b <= a for a, b in itertools.pairwise(values)):
            problems.append(f"{where}.discreteValueSpec.values: must be in increasing order")
        if kind is Kind.CATEGORICAL and scale != Scale.UNSPECIFIED.value:
            problems.append(f"{where}.scaleType: leave it unset for a CATEGORICAL parameter")
    for j, child in enumerate(param.get("conditionalParameterSpecs", [])):
        # Children of the same id are allowed under disjoint conditions: each is checked
        # against the ids above it only.
        place = f"{where}.conditionalParameterSpecs[{j}]"
        problems += _conditional_problems(param, kind, child, place, set(seen))
    return problems


def _feasible(param: Mapping, kind: Kind, value: object) -> bool:
    """Whether ``value`` (a parent condition's) is one of the parent's feasible values."""
    body = param[kind.value]
    if kind is Kind.INTEGER:  # by its bounds: a range may be long
        low, high = int(body.get("minValue", 0)), int(body.get("maxValue", 0))
        return low <= int(str(value)) <= high
    if kind is Kind.DISCRETE:
        return float(str(value)) in {float(v) for v in body.get("values", [])}
    return str(value) in {str(v) for v in body.get("values", [])}


def _conditional_problems(
    parent: Mapping, kind: Kind, child: Mapping, where: str, seen: set[str]
) -> list[str]:
    if kind is Kind.DOUBLE:
        return [f"{where}: a DOUBLE parameter cannot have conditional parameters"]
    conditions = [c for c in PARENT_CONDITIONS if c in child]
    if len(conditions) != 1 or PARENT_CONDITIONS[conditions[0]] is not kind:
        wanted = next(c for c, k in PARENT_CONDITIONS.items() if k is kind)
        return [f"{where}: the {kind.name} parent takes {wanted} as the condition"]
    values = child[conditions[0]].get("values", [])
    if not values:
        return [f"{where}.{conditions[0]}.values: at least one value is required"]
    for value in values:
        if not _feasible(parent, kind, value):
            return [f"{where}.{conditions[0]}: {value!r} is not a value of the parent parameter"]
    if "parameterSpec" not in child:
        return [f"{where}.parameterSpec: required"]
    return _param_problems(child["parameterSpec"], f"{where}.parameterSpec", seen)


def _grid_problems(params: Sequence[Mapping], where: str) -> list[str]:
    problems = []
    for i, param in enumerate(params):
        kinds = [k for k in Kind if k.value in param]
        if kinds and kinds[0] not in GRID_KINDS:
            problems.append(
                f"{where}[{i}]: GRID_SEARCH needs INTEGER, DISCRETE or CATEGORICAL parameters; "
                f"{param.get('parameterId')!r} is DOUBLE (use a discreteValueSpec)"
            )
        for j, child in enumerate(param.get("conditionalParameterSpecs", [])):
            if "parameterSpec" in child:
                problems += _grid_problems(
                    [child["parameterSpec"]], f"{where}[{i}].conditionalParameterSpecs[{j}]"
                )
    return problems
