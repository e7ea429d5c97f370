"""Pure: the parameters of a study (StudySpec.parameters, REST form) and the suggestions of its
search algorithm, as Vertex documents them.

- GRID_SEARCH: every combination of the parameters' feasible values (INTEGER: each integer of
  [min, max]; DISCRETE and CATEGORICAL: each value), first parameter slowest, a conditional
  parameter's values combined under each parent value that activates it. Vertex requires every
  parameter to be INTEGER, DISCRETE or CATEGORICAL for it. Each point is suggested once: a
  study whose ``maxTrialCount`` exceeds the grid ends when the grid is done (the SDK's words:
  grid search is for "a quantity of trials that is greater than the number of points in the
  feasible space", where the default algorithm "may generate duplicate suggestions").
- RANDOM_SEARCH: each parameter drawn uniformly in its scale: UNIT_LINEAR_SCALE (or unset) in
  [min, max], UNIT_LOG_SCALE uniform in log space, UNIT_REVERSE_LOG_SCALE mirrored log (values
  near max spread out, as the proto says); DISCRETE and CATEGORICAL values with equal chance.
- ALGORITHM_UNSPECIFIED: Vertex's default is a Vizier study (Bayesian optimisation); this
  platform stands in Optuna's TPE sampler, fed the finished trials' final measurements of the
  first metric. A stand-in: it suggests different points than Vizier would.

Every draw is deterministic for a study: seeded from the study's resource name and the trial's
number, so a test (or a restarted control plane) sees the same suggestions.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

Value = float | int | str
Assignment = dict[str, Value]
"""parameterId -> value of one trial, in the order the parameters became active."""


class Kind(StrEnum):
    DOUBLE = "doubleValueSpec"
    INTEGER = "integerValueSpec"
    CATEGORICAL = "categoricalValueSpec"
    DISCRETE = "discreteValueSpec"


class Scale(StrEnum):
    UNSPECIFIED = "SCALE_TYPE_UNSPECIFIED"
    LINEAR = "UNIT_LINEAR_SCALE"
    LOG = "UNIT_LOG_SCALE"
    REVERSE_LOG = "UNIT_REVERSE_LOG_SCALE"


class Algorithm(StrEnum):
    DEFAULT = "ALGORITHM_UNSPECIFIED"
    GRID = "GRID_SEARCH"
    RANDOM = "RANDOM_SEARCH"


GRID_KINDS = (Kind.INTEGER, Kind.DISCRETE, Kind.CATEGORICAL)
PARENT_CONDITIONS = {
    "parentDiscreteValues": Kind.DISCRETE,
    "parentIntValues": Kind.INTEGER,
    "parentCategoricalValues": Kind.CATEGORICAL,
}
"""ConditionalParameterSpec's parent condition field -> the parent kind it applies to."""


@dataclass(frozen=True)
class Conditional:
    """A child parameter, active when its parent's value is one of ``parent_values``."""

    parent_values: tuple[Value, ...]
    param: Param


@dataclass(frozen=True)
class Param:
    id: str
    kind: Kind
    low: float = 0.0
    high: float = 0.0
    values: tuple[Value, ...] = ()
    """CATEGORICAL strings or DISCRETE numbers."""
    scale: Scale = Scale.UNSPECIFIED
    children: tuple[Conditional, ...] = ()

    def cast(self, value: Value) -> Value:
        """A value of this parameter as it is passed on: INTEGER as int, DOUBLE and DISCRETE
        as float, CATEGORICAL as str."""
        if self.kind is Kind.INTEGER:
            return int(value)
        if self.kind is Kind.CATEGORICAL:
            return str(value)
        return float(value)

    def active_children(self, value: Value) -> list[Param]:
        return [c.param for c in self.children if value in c.parent_values]


def parse_param(spec: Mapping) -> Param:
    """One StudySpec.ParameterSpec (REST form, already through the proto) as a ``Param``. The
    shape is checked by ``study_problems`` first; this only reads it."""
    kind = next(k for k in Kind if k.value in spec)
    body = spec[kind.value]
    low = high = 0.0
    values: tuple[Value, ...] = ()
    if kind in (Kind.DOUBLE, Kind.INTEGER):
        low, high = float(body.get("minValue", 0)), float(body.get("maxValue", 0))
    elif kind is Kind.DISCRETE:
        values = tuple(float(v) for v in body.get("values", []))
    else:
        values = tuple(str(v) for v in body.get("values", []))
    children = []
    for child in spec.get("conditionalParameterSpecs", []):
        condition = next(c for c in PARENT_CONDITIONS if c in child)
        parent_values = tuple(
            Param(spec.get("parameterId", ""), kind).cast(v)
            for v in child[condition].get("values", [])
        )
        children.append(Conditional(parent_values, parse_param(child["parameterSpec"])))
    return Param(
        id=spec.get("parameterId", ""),
        kind=kind,
        low=low,
        high=high,
        values=values,
        scale=Scale(spec.get("scaleType", Scale.UNSPECIFIED.value)),
        children=tuple(children),
    )


def parse_params(specs: Sequence[Mapping]) -> list[Param]:
    return [parse_param(spec) for spec in specs]


def study_seed(study_name: str) -> int:
    """A seed from the study's resource name: the same study draws the same trials."""
    return int.from_bytes(hashlib.sha256(study_name.encode()).digest()[:8], "big")


# -- grid ----------------------------------------------------------------------------------------


def _grid_value(param: Param, index: int) -> Value:
    """The ``index``-th feasible value of a grid parameter (INTEGER: from ``minValue`` up)."""
    if param.kind is Kind.INTEGER:
        return int(param.low) + index
    return param.values[index]


def _value_count(param: Param) -> int:
    if param.kind is Kind.INTEGER:
        return int(param.high) - int(param.low) + 1
    return len(param.values)


def _size(param: Param) -> int:
    """Points of one parameter's sub-grid: each value, times its active children's grids."""
    if not param.children:
        return _value_count(param)
    return sum(
        _product_size(param.active_children(_grid_value(param, i)))
        for i in range(_value_count(param))
    )


def _product_size(params: Sequence[Param]) -> int:
    return math.prod(_size(p) for p in params)


def _nth_of(param: Param, index: int) -> Assignment:
    if not param.children:  # the common case, without walking the values: ranges may be long
        return {param.id: param.cast(_grid_value(param, index))}
    for i in range(_value_count(param)):
        value = _grid_value(param, i)
        children = param.active_children(value)
        size = _product_size(children)
        if index < size:
            return {param.id: param.cast(value), **_nth_of_product(children, index)}
        index -= size
    raise IndexError(index)


def _nth_of_product(params: Sequence[Param], index: int) -> Assignment:
    """The ``index``-th point of the product of ``params``' grids, the first slowest."""
    point: Assignment = {}
    for i, param in enumerate(params):
        below = _product_size(params[i + 1 :])
        point.update(_nth_of(param, index // below))
        index %= below
    return point


def grid_size(params: Sequence[Param]) -> int:
    """How many points the grid has."""
    return _product_size(params)


def grid_point(params: Sequence[Param], index: int) -> Assignment | None:
    """The ``index``-th point (from 0) in the order the grid is suggested: the first parameter
    changes slowest. Computed, not listed: an INTEGER range may hold millions of values.
    None past the grid's end."""
    if index >= grid_size(params):
        return None
    return _nth_of_product(params, index)


def grid_points(params: Sequence[Param]) -> list[Assignment]:
    """Every point of the grid, in order (for small grids: tests and tables)."""
    return [_nth_of_product(params, n) for n in range(grid_size(params))]


# -- random --------------------------------------------------------------------------------------


def _draw_number(rng: random.Random, low: float, high: float, scale: Scale) -> float:
    if scale is Scale.LOG:
        return math.exp(rng.uniform(math.log(low), math.log(high)))
    if scale is Scale.REVERSE_LOG:
        # Mirror of the log scale: dense near max, sparse near min.
        return low + high - math.exp(rng.uniform(math.log(low), math.log(high)))
    return rng.uniform(low, high)


def _draw(rng: random.Random, param: Param, point: Assignment) -> None:
    if param.kind is Kind.DOUBLE:
        value: Value = _draw_number(rng, param.low, param.high, param.scale)
        value = min(max(value, param.low), param.high)
    elif param.kind is Kind.INTEGER:
        if param.scale in (Scale.LOG, Scale.REVERSE_LOG):
            drawn = _draw_number(rng, param.low, param.high + 1, param.scale)
            value = min(math.floor(drawn), int(param.high))
        else:
            value = rng.randint(int(param.low), int(param.high))
    else:
        value = param.values[rng.randrange(len(param.values))]
    point[param.id] = param.cast(value)
    for child in param.active_children(value):
        _draw(rng, child, point)


def random_point(params: Sequence[Param], seed: int, trial_number: int) -> Assignment:
    """The ``trial_number``-th (from 0) random point of a study seeded ``seed``."""
    rng = random.Random(f"{seed}:{trial_number}")
    point: Assignment = {}
    for param in params:
        _draw(rng, param, point)
    return point


# -- the default algorithm's stand-in ------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    """A finished trial: its parameters and its final value of the study's first metric."""

    point: Assignment
    value: float


def _distribution(param: Param):
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    log = param.scale is Scale.LOG  # Optuna has no reverse log: those are searched linearly
    if param.kind is Kind.DOUBLE:
        return FloatDistribution(param.low, param.high, log=log)
    if param.kind is Kind.INTEGER:
        return IntDistribution(int(param.low), int(param.high), log=log)
    return CategoricalDistribution(list(param.values))


def _walk(params: Sequence[Param], point: Mapping[str, Value], prefix: str = "") -> list:
    """(optuna name, param) of each parameter active in ``point``; a child's name carries its
    parent's, so children of the same id under different parents keep their own ranges."""
    active = []
    for param in params:
        if param.id not in point:
            continue
        name = f"{prefix}{param.id}"
        active.append((name, param))
        children = param.active_children(point[param.id])
        active += _walk(children, point, f"{name}/")
    return active


def tpe_point(
    params: Sequence[Param],
    history: Sequence[Observation],
    maximize: bool,
    seed: int,
    trial_number: int,
) -> Assignment:
    """The next point Optuna's TPE sampler proposes after ``history``. A fresh in-memory
    study each time, replayed from the trials, so the control plane keeps no sampler state."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=(seed + trial_number) % 2**32)
    study = optuna.create_study(direction="maximize" if maximize else "minimize", sampler=sampler)
    for seen in history:
        active = _walk(params, seen.point)
        study.add_trial(
            optuna.trial.create_trial(
                params={name: seen.point[p.id] for name, p in active},
                distributions={name: _distribution(p) for name, p in active},
                value=seen.value,
            )
        )
    trial = study.ask()
    point: Assignment = {}

    def ask(param: Param, prefix: str) -> None:
        name = f"{prefix}{param.id}"
        log = param.scale is Scale.LOG
        if param.kind is Kind.DOUBLE:
            value: Value = trial.suggest_float(name, param.low, param.high, log=log)
        elif param.kind is Kind.INTEGER:
            value = trial.suggest_int(name, int(param.low), int(param.high), log=log)
        else:
            value = trial.suggest_categorical(name, list(param.values))
        point[param.id] = param.cast(value)
        for child in param.active_children(value):
            ask(child, f"{name}/")

    for param in params:
        ask(param, "")
    return point


def suggest(
    algorithm: Algorithm,
    params: Sequence[Param],
    trial_number: int,
    seed: int,
    history: Sequence[Observation] = (),
    maximize: bool = True,
) -> Assignment | None:
    """The parameters of the ``trial_number``-th trial (from 0); None once a grid is done."""
    if algorithm is Algorithm.GRID:
        return grid_point(params, trial_number)
    if algorithm is Algorithm.RANDOM:
        return random_point(params, seed, trial_number)
    return tpe_point(params, history, maximize, seed, trial_number)


def format_value(value: Value) -> str:
    """A value as a trial's command line carries it: integers without a fraction (an INTEGER
    parameter, or a DISCRETE value such as 16), other numbers in Python's shortest repr."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def trial_args(point: Mapping[str, Value]) -> list[str]:
    """``--PARAMETER_ID=VALUE`` for each parameter: what Vertex appends to a trial's args."""
    return [f"--{name}={format_value(value)}" for name, value in point.items()]


def rest_parameters(point: Mapping[str, Value]) -> list[dict]:
    """Trial.parameters in REST form: numbers as JSON numbers, categories as strings."""
    return [{"parameterId": name, "value": value} for name, value in point.items()]
