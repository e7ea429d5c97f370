"""A template's ``study:``: the hyperparameter tuning study `vtx launch` submits as one Vertex
``HyperparameterTuningJob`` whose trials each run the template's job.

Names follow Vertex's ``StudySpec`` (v1 proto, ``google/cloud/aiplatform_v1/types/study.py``):
the metric's id and goal, parameters of type DOUBLE, INTEGER, DISCRETE or CATEGORICAL with a
scale, conditional parameters under a DISCRETE, INTEGER or CATEGORICAL parent, the algorithm
(Vertex's default, Vizier's Bayesian optimisation, is ``ALGORITHM_UNSPECIFIED``), the trial
counts of ``HyperparameterTuningJob`` and the early stopping Vertex offers (a decay-curve or
median rule, and which measurement of a trial counts). Vertex passes each trial's values as
``--PARAMETER_ID=VALUE`` appended to the container's args; parameter ids are the trainer's config
keys as ``--set`` takes them (``learning_rate``, ``model.lora.r``).

``TRAINER_KEYS`` is this platform's copy of the trainer's config keys (the trainer ships alone
and jobs never import it); ``tests/contracts/test_trainer_copies.py`` pins it to
``trainer.config.schema.TrainConfig``. A copy, not a ``python -m trainer`` subprocess as
``jobs.custom_jobs.training_time`` runs: `vtx validate` would pay the trainer's import (torch,
transformers: seconds) for a list of names that changes with the trainer's releases only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

ALGORITHMS = ("ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH")
"""``StudySpec.Algorithm``: left out, Vertex's default (Vizier's Bayesian optimisation)."""
PARAMETER_TYPES = ("DOUBLE", "INTEGER", "DISCRETE", "CATEGORICAL")
SCALES = {
    "linear": "UNIT_LINEAR_SCALE",
    "log": "UNIT_LOG_SCALE",
    "reverse_log": "UNIT_REVERSE_LOG_SCALE",
}
"""Template ``scale`` -> ``ParameterSpec.ScaleType``."""
EARLY_STOPPING = {
    "decay_curve": "decayCurveStoppingSpec",
    "median": "medianAutomatedStoppingSpec",
}
"""Template ``early_stopping.rule`` -> the ``StudySpec`` field of that automated stopping spec.
The third, ``convexAutomatedStoppingSpec``, is left out: Google documents it for Vizier studies
(its learning-rate and step-count settings), not for HyperparameterTuningJob."""
MEASUREMENT_SELECTION = {"best": "BEST_MEASUREMENT", "last": "LAST_MEASUREMENT"}
"""Template ``measurement_selection`` -> ``StudySpec.MeasurementSelectionType``."""
INT32_MAX = 2**31 - 1
"""The trial counts are int32 in the v1 proto: larger ones would not parse."""
MAX_DISCRETE_VALUES = 1000
"""``DiscreteValueSpec.values``: "should not contain more than 1,000 values" (v1 proto)."""
DISCRETE_MIN_GAP = 1e-10
"""``DiscreteValueSpec.values``: "in increasing order and at least 1e-10 apart" (v1 proto)."""

TRAINER_KEYS: dict[str, str] = {
    "model.name_or_path": "str",
    "model.tokenizer": "str",
    "model.lora.r": "int",
    "model.lora.alpha": "int",
    "model.lora.dropout": "float",
    "model.lora.target_modules": "other",
    "model.lora.merge_on_export": "bool",
    "model.gradient_checkpointing": "bool",
    "data.path": "str",
    "data.eval_path": "str",
    "data.format": "str",
    "data.text_field": "str",
    "data.messages_field": "str",
    "data.eval_fraction": "float",
    "data.max_seq_length": "int",
    "data.packing": "bool",
    "data.group_by_length": "bool",
    "output_dir": "str",
    "run_name": "str",
    "learning_rate": "float",
    "weight_decay": "float",
    "adam_beta1": "float",
    "adam_beta2": "float",
    "adam_epsilon": "float",
    "max_grad_norm": "float",
    "lr_scheduler_type": "str",
    "warmup_ratio": "float",
    "warmup_steps": "int",
    "per_device_train_batch_size": "int",
    "per_device_eval_batch_size": "int",
    "gradient_accumulation_steps": "int",
    "num_train_epochs": "float",
    "max_steps": "int",
    "seed": "int",
    "bf16": "bool",
    "fp16": "bool",
    "torch_compile": "bool",
    "fsdp": "bool",
    "loss_chunk_mb": "float",
    "logging_steps": "int",
    "eval_steps": "int",
    "save_steps": "int",
    "save_every_minutes": "float",
    "save_total_limit": "int",
    "async_save": "bool",
    "early_stopping_patience": "int",
    "early_stopping_threshold": "float",
    "report_to": "other",
    "disable_tqdm": "bool",
    "allow_config_change_on_resume": "bool",
    "wandb_project": "str",
    "wandb_entity": "str",
    "hypertune_metric": "str",
}
"""The trainer's config keys (dotted, as ``--set`` takes them) -> the kind of value each holds:
int, float, bool, str, or other (lists). Copy of ``trainer.config.schema.TrainConfig``'s leaves."""
TRAINER_METRICS = ("eval_loss", "train_loss")
"""What our trainer reports to a study (cloudml-hypertune's format): its eval loss, or its train
loss when it has no eval set."""
TRAINER_MODULES = ("trainer", "trainer.launch")
"""`python -m` modules that run our trainer (as `jobs.custom_jobs.training_time` recognises
them)."""
FREE_FORM_PREFIXES = ("model.config.",)
"""Keys under these are the model's own configuration (a free-form mapping): any name goes."""


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _scale(value: Any) -> Any:
    # Vertex's own names (UNIT_LOG_SCALE) are accepted beside the short ones.
    if isinstance(value, str):
        by_api = {api: short for short, api in SCALES.items()}
        return by_api.get(value.upper(), value.lower())
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Metric(_Strict):
    """``StudySpec.MetricSpec``: what each trial reports (cloudml-hypertune's file format) and
    which way is better. The trainer reports ``eval_loss`` or ``train_loss``."""

    id: str
    goal: Annotated[Literal["maximize", "minimize"], BeforeValidator(_lower)]


class Conditional(_Strict):
    """``ParameterSpec.ConditionalParameterSpec``: ``parameter`` is tuned only in trials where
    the parent parameter takes one of ``parent_values``."""

    parent_values: list[float | int | str]
    parameter: Parameter


class Parameter(_Strict):
    """``StudySpec.ParameterSpec``: one trainer config key and the values trials try."""

    id: str
    """The trainer config key (``learning_rate``, ``model.lora.r``), Vertex's parameterId."""
    type: Annotated[
        Literal["DOUBLE", "INTEGER", "DISCRETE", "CATEGORICAL"], BeforeValidator(_upper)
    ]
    min: float | None = None
    """DOUBLE and INTEGER: the smallest value tried."""
    max: float | None = None
    """DOUBLE and INTEGER: the largest value tried."""
    values: list[float | int | str] | None = None
    """DISCRETE: numbers in increasing order; CATEGORICAL: strings."""
    scale: Annotated[Literal["linear", "log", "reverse_log"] | None, BeforeValidator(_scale)] = None
    """How Vertex spreads trials over the range (not for CATEGORICAL); Vertex's default when
    left out."""
    conditional: list[Conditional] = Field(default_factory=list)
    """Parameters tuned only for some of this one's values (DISCRETE, INTEGER, CATEGORICAL)."""


class EarlyStopping(_Strict):
    """Vertex's automated stopping of unpromising trials (``StudySpec.automated_stopping_spec``)."""

    rule: Annotated[Literal["decay_curve", "median"], BeforeValidator(_lower)]
    """decay_curve: stop a trial whose predicted final objective is worse than the best so far;
    median: stop a trial whose running average is below the completed trials' median."""
    use_elapsed_duration: bool = False
    """Compare trials by elapsed time instead of steps (``useElapsedDuration``)."""


class Study(_Strict):
    """A hyperparameter tuning study over the template's job (one vtx run, one
    ``HyperparameterTuningJob``; each trial its own CustomJob under ``<outputs>/<trial id>/``)."""

    metric: Metric
    parameters: list[Parameter]
    algorithm: Annotated[
        Literal["ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH"], BeforeValidator(_upper)
    ] = "ALGORITHM_UNSPECIFIED"
    max_trials: int = Field(gt=0, le=INT32_MAX)
    """``maxTrialCount``: trials in the whole study."""
    parallel_trials: int = Field(1, gt=0, le=INT32_MAX)
    """``parallelTrialCount``: trials running at once."""
    max_failed_trials: int = Field(0, ge=0, le=INT32_MAX)
    """``maxFailedTrialCount``: failed trials before the study fails; 0 lets Vertex decide."""
    measurement_selection: Annotated[Literal["best", "last"] | None, BeforeValidator(_lower)] = None
    """Which of a trial's measurements counts; Vertex's default when left out."""
    early_stopping: EarlyStopping | None = None

    def all_parameters(self) -> list[tuple[str, Parameter]]:
        """Every parameter, conditional ones included, with its template path."""
        return list(_walk(self.parameters, "study.parameters"))


def _walk(params: list[Parameter], path: str) -> Iterator[tuple[str, Parameter]]:
    for i, p in enumerate(params):
        yield from _walk_one(p, f"{path}[{i}]")


def _walk_one(param: Parameter, path: str) -> Iterator[tuple[str, Parameter]]:
    yield path, param
    for j, c in enumerate(param.conditional):
        yield from _walk_one(c.parameter, f"{path}.conditional[{j}].parameter")


STUDY_MODELS = (Study, Metric, Parameter, Conditional, EarlyStopping)
"""The study's models, for the template's "did you mean" field list."""
