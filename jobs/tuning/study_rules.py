"""The rules a template's ``study:`` must pass before Vertex sees it: what the API refuses (bounds,
discrete values, GRID_SEARCH's parameter types, trial counts, unique parameter ids) and what would
waste a study (a grid smaller or larger than its trials, a parameter the trainer does not take,
a capacity ladder that cannot carry a study). Each problem names the path in the template, what is
wrong and what to write instead. Pure: the template's structure was checked first
(`jobs.spec.template`)."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator

from jobs.core.catalog import vertex_limits
from jobs.core.problems import Problem
from jobs.spec.study import (
    DISCRETE_MIN_GAP,
    FREE_FORM_PREFIXES,
    MAX_DISCRETE_VALUES,
    TRAINER_KEYS,
    TRAINER_METRICS,
    TRAINER_MODULES,
    Parameter,
    Study,
)
from jobs.spec.template import JobTemplate

RANGED = ("DOUBLE", "INTEGER")
GRID_TYPES = ("INTEGER", "CATEGORICAL", "DISCRETE")
"""GRID_SEARCH: "all parameters must be INTEGER, CATEGORICAL, or DISCRETE" (StudySpec.Algorithm)."""
PARENT_TYPES = ("DISCRETE", "INTEGER", "CATEGORICAL")
"""ConditionalParameterSpec has a parent value condition for these types only."""


def study_problems(template: JobTemplate) -> list[Problem]:
    """Every problem in the template's study (none when it has no study)."""
    study = template.study
    if study is None:
        return []
    trainer = runs_trainer(template)
    problems = list(_metric(study, trainer))
    problems += _counts(study)
    problems += _machines_at_once(template, study)
    problems += _ids(study, trainer)
    for path, param in study.all_parameters():
        problems += _parameter(path, param)
    problems += _grid(study)
    problems += _ladder(template)
    return problems


def runs_trainer(template: JobTemplate) -> bool:
    """Whether the chief runs our trainer (`python -m trainer`): then its keys and metrics
    are known."""
    chief = template.pools.chief
    command = chief.command if chief.command is not None else template.command
    return any(a == "-m" and b in TRAINER_MODULES for a, b in itertools.pairwise(command))


def _metric(study: Study, trainer: bool) -> Iterator[Problem]:
    if trainer and study.metric.id.strip() and study.metric.id not in TRAINER_METRICS:
        yield Problem(
            "study.metric.id",
            f"the trainer reports {' or '.join(TRAINER_METRICS)}, not {study.metric.id!r}: "
            "no trial would report the study's metric",
            "id: eval_loss (with an eval set: data.eval_fraction or data.eval_path), or "
            "id: train_loss",
        )
    if not study.metric.id.strip():
        yield Problem(
            "study.metric.id",
            "is empty: trials report a metric by id and the study ranks them by it",
            "the metric the trainer reports, e.g. id: eval_loss (or train_loss)",
        )
    elif any(c.isspace() for c in study.metric.id):
        yield Problem("study.metric.id", "must not contain whitespace", "e.g. id: eval_loss")


def _counts(study: Study) -> Iterator[Problem]:
    limit = vertex_limits().study_trials_max
    for field, count in (
        ("max_trials", study.max_trials),
        ("parallel_trials", study.parallel_trials),
    ):
        if count > limit:
            yield Problem(
                f"study.{field}",
                f"{count} trials; a study runs at most {limit} (Vizier's limit)",
                f"{field}: {limit} or fewer",
            )
    if study.parallel_trials > study.max_trials:
        yield Problem(
            "study.parallel_trials",
            f"{study.parallel_trials} trials at once, but the study has only "
            f"{study.max_trials} (max_trials)",
            f"parallel_trials: {study.max_trials} or fewer",
        )
    if study.max_failed_trials > study.max_trials:
        yield Problem(
            "study.max_failed_trials",
            f"{study.max_failed_trials} failures allowed, more than the study's "
            f"{study.max_trials} trials: the study could never fail on failures",
            f"max_failed_trials: {study.max_trials} or fewer (0 lets Vertex decide)",
        )
    if not study.parameters:
        yield Problem(
            "study.parameters",
            "a study tunes at least one parameter",
            "parameters: [{id: learning_rate, type: DOUBLE, min: 1e-5, max: 1e-2, scale: log}]",
        )


def _machines_at_once(template: JobTemplate, study: Study) -> Iterator[Problem]:
    """Trials running at once hold their machines together, on one region's quota: bounded by
    the catalog's ``machines_max`` as one job is (a trial past it alone is the job rules')."""
    limit = vertex_limits().machines_max
    per_trial = sum(pool.replicas for _, pool in template.pools.by_role())
    if per_trial > limit or per_trial * study.parallel_trials <= limit:
        return
    yield Problem(
        "study.parallel_trials",
        f"{study.parallel_trials:,} trials at once of {per_trial:,} machines each are "
        f"{study.parallel_trials * per_trial:,} machines; vtx takes at most {limit:,} at once: "
        "each is a VM on the region's quota (limits.yaml machines_max)",
        f"parallel_trials: {limit // per_trial:,} or fewer",
    )


def _ids(study: Study, trainer: bool) -> Iterator[Problem]:
    """Unique ids without whitespace; with our trainer, keys it takes, of the right kind."""
    seen: dict[str, str] = {}
    for path, param in study.all_parameters():
        where = f"{path}.id"
        if param.id in seen:
            yield Problem(
                where,
                f"{param.id!r} is already tuned at {seen[param.id]}: parameter ids are unique",
                "one entry per trainer key (conditional children included)",
            )
            continue
        seen[param.id] = path
        if not re.fullmatch(vertex_limits().parameter_id_pattern, param.id):
            yield Problem(
                where,
                f"{param.id!r} is not a flag name: each trial gets --ID=VALUE, so an id is "
                f"letters, digits, '_', '.' and '-', starting with a letter or '_'",
                "a trainer config key, e.g. learning_rate or model.lora.r",
            )
            continue
        if not trainer:
            continue  # another program's flags: not ours to know
        if not param.id.startswith(FREE_FORM_PREFIXES) and param.id not in TRAINER_KEYS:
            yield Problem(
                where,
                f"the trainer has no config key {param.id!r}: each trial gets "
                f"--{param.id}=VALUE, which it would refuse",
                "a key as `--set` takes it, e.g. learning_rate, model.lora.r, warmup_ratio",
            )
            continue
        yield from _kind(where, param)


def _kind(path: str, param: Parameter) -> Iterator[Problem]:
    """The value type a trainer key holds against the parameter's type."""
    kind = TRAINER_KEYS.get(param.id)
    if kind == "int" and param.type == "DOUBLE":
        yield Problem(
            path.removesuffix(".id") + ".type",
            f"{param.id} takes whole numbers, and a DOUBLE parameter gives fractions",
            "type: INTEGER (min/max) or DISCRETE (values)",
        )
    if kind in ("bool", "other") and param.type != "CATEGORICAL":
        yield Problem(
            path.removesuffix(".id") + ".type",
            f"{param.id} is not a number",
            "type: CATEGORICAL with values: [...] as the trainer writes them",
        )


def _parameter(path: str, param: Parameter) -> Iterator[Problem]:
    if param.type in RANGED:
        yield from _range(path, param)
    elif param.type == "DISCRETE":
        yield from _discrete(path, param)
    else:
        yield from _categorical(path, param)
    if param.conditional and param.type not in PARENT_TYPES:
        yield Problem(
            f"{path}.conditional",
            f"a {param.type} parameter cannot be a parent: Vertex conditions on the values of "
            "a DISCRETE, INTEGER or CATEGORICAL parent only",
            "make the parent DISCRETE (values: [...]) or drop conditional",
        )
    for j, child in enumerate(param.conditional):
        yield from _condition(f"{path}.conditional[{j}]", param, child.parent_values)


def _range(path: str, param: Parameter) -> Iterator[Problem]:
    example = "min: 1e-5, max: 1e-2" if param.type == "DOUBLE" else "min: 1, max: 8"
    if param.min is None or param.max is None:
        yield Problem(path, f"a {param.type} parameter needs min and max", example)
        return
    if param.values is not None:
        yield Problem(
            f"{path}.values",
            f"a {param.type} parameter takes min and max, not values",
            "type: DISCRETE for a list of numbers, or drop values",
        )
    if param.type == "INTEGER":
        for bound in ("min", "max"):
            value = getattr(param, bound)
            if not float(value).is_integer():
                yield Problem(f"{path}.{bound}", f"{value} is not a whole number", None)
    if not param.min < param.max:
        yield Problem(
            f"{path}.max",
            f"max ({param.max:g}) must be greater than min ({param.min:g})",
            "one value only? set it in the trainer's config instead of tuning it",
        )
    if param.scale in ("log", "reverse_log") and param.min <= 0:
        yield Problem(
            f"{path}.min",
            f"a {param.scale} scale needs min > 0 (got {param.min:g})",
            "e.g. min: 1e-6, or scale: linear",
        )


def _discrete(path: str, param: Parameter) -> Iterator[Problem]:
    values = param.values or []
    if param.min is not None or param.max is not None:
        yield Problem(path, "a DISCRETE parameter takes values, not min and max", None)
    if not values:
        yield Problem(f"{path}.values", "a DISCRETE parameter needs values", "values: [4, 8, 16]")
        return
    if any(isinstance(v, str) for v in values):
        yield Problem(
            f"{path}.values",
            "DISCRETE values are numbers",
            "type: CATEGORICAL for strings",
        )
        return
    numbers = [float(v) for v in values]
    if any(b - a < DISCRETE_MIN_GAP for a, b in itertools.pairwise(numbers)):
        shown = ", ".join(f"{v:g}" for v in sorted(set(numbers)))
        yield Problem(
            f"{path}.values",
            "Vertex takes DISCRETE values in increasing order, each unique (at least 1e-10 apart)",
            f"values: [{shown}]",
        )
    if len(numbers) > MAX_DISCRETE_VALUES:
        yield Problem(
            f"{path}.values",
            f"{len(numbers)} values; Vertex takes at most {MAX_DISCRETE_VALUES}",
            "fewer values, or a DOUBLE/INTEGER range",
        )
    if param.scale in ("log", "reverse_log") and numbers[0] <= 0:
        yield Problem(f"{path}.scale", f"a {param.scale} scale needs values > 0", None)


def _categorical(path: str, param: Parameter) -> Iterator[Problem]:
    values = param.values or []
    if param.min is not None or param.max is not None:
        yield Problem(path, "a CATEGORICAL parameter takes values, not min and max", None)
    if not values:
        yield Problem(f"{path}.values", "a CATEGORICAL parameter needs values", "values: [a, b]")
    elif not all(isinstance(v, str) for v in values):
        quoted = ", ".join(f'"{v}"' for v in values)
        yield Problem(
            f"{path}.values",
            "CATEGORICAL values are strings",
            f"values: [{quoted}], or type: DISCRETE for numbers",
        )
    elif len(set(values)) != len(values):
        yield Problem(f"{path}.values", "CATEGORICAL values must be unique", None)
    if param.scale is not None:
        yield Problem(f"{path}.scale", "Vertex takes no scale for a CATEGORICAL parameter", None)


def _condition(path: str, parent: Parameter, wanted: list) -> Iterator[Problem]:
    """Every parent value a condition names must be one the parent can take."""
    where = f"{path}.parent_values"
    if not wanted:
        yield Problem(where, "names no value of the parent", f"parent_values: [...] of {parent.id}")
        return
    if parent.type == "CATEGORICAL":
        missing = [v for v in wanted if v not in (parent.values or [])]
    elif parent.type == "DISCRETE":
        options = [float(v) for v in parent.values or [] if not isinstance(v, str)]
        missing = [
            v
            for v in wanted
            if isinstance(v, str) or not any(abs(float(v) - o) <= DISCRETE_MIN_GAP for o in options)
        ]
    elif parent.type == "INTEGER" and parent.min is not None and parent.max is not None:
        missing = [
            v
            for v in wanted
            if isinstance(v, str)
            or not float(v).is_integer()
            or not parent.min <= float(v) <= parent.max
        ]
    else:
        return
    if missing:
        yield Problem(
            where,
            f"{', '.join(map(str, missing))}: not a value {parent.id} takes",
            f"values of {parent.id} ({_values_text(parent)})",
        )


def _values_text(param: Parameter) -> str:
    if param.values is not None:
        return ", ".join(map(str, param.values))
    return f"{param.min:g} to {param.max:g}"


def grid_size(study: Study) -> int | None:
    """The points of a grid over the study's top-level parameters; None when one is not
    finite (a DOUBLE) or not yet valid."""
    size = 1
    for param in study.parameters:
        if param.type == "INTEGER" and param.min is not None and param.max is not None:
            size *= max(0, math.floor(param.max) - math.ceil(param.min) + 1)
        elif param.type in ("DISCRETE", "CATEGORICAL") and param.values:
            size *= len(param.values)
        else:
            return None
    return size


def _grid(study: Study) -> Iterator[Problem]:
    if study.algorithm != "GRID_SEARCH":
        return
    for path, param in study.all_parameters():
        if param.type not in GRID_TYPES:
            yield Problem(
                f"{path}.type",
                f"GRID_SEARCH takes INTEGER, CATEGORICAL or DISCRETE parameters, not {param.type}",
                "type: DISCRETE with values: [...], or algorithm: RANDOM_SEARCH",
            )
    size = grid_size(study)
    if size is None or any(p.conditional for p in study.parameters):
        return  # conditional children change the grid's size per branch: not judged here
    if study.max_trials > size:
        yield Problem(
            "study.max_trials",
            f"the grid has {size} points: {study.max_trials - size} of the {study.max_trials} "
            "trials would have nothing new to try",
            f"max_trials: {size}",
        )


def _ladder(template: JobTemplate) -> Iterator[Problem]:
    if template.capacity is not None and template.capacity.ladder:
        yield Problem(
            "capacity.ladder",
            "a study cannot walk a capacity ladder: Vertex runs every trial on the one "
            "trialJobSpec, and vtx cannot move a running study's trials to another rung",
            "drop capacity.ladder and pick the rung's machine and strategy in the template "
            "(scheduling.strategy: flex_start waits for capacity), or launch the study once per "
            "rung with --set",
        )
