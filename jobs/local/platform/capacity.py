"""What the local platform has to give: accelerators per region (on-demand and Spot, and whether
Spot is stocked out) and quota limits per metric, and what that means for a job, as pure
decisions over typed states.

Nothing set means unlimited: the platform then behaves as it always did. Rules, after Vertex
(docs/vertex-facts.md, "Quotas" and "Scheduling strategies"):
- quota: a create whose needs, added to what the region's active jobs hold, pass a metric's
  limit is refused with 429 RESOURCE_EXHAUSTED and Vertex's own sentence ("The following quota
  metrics exceed quota limits: ..."); a job holds its quota from its creation to its end;
- capacity: a job holds its accelerators from its start to its end; one whose accelerators are
  not free stays JOB_STATE_PENDING until they are;
- a Spot job in a region whose Spot capacity for its accelerator is stocked out fails with
  STOCKOUT (RESOURCE_EXHAUSTED), as a Spot job that cannot get its VMs does on Vertex;
- a FLEX_START job (Dynamic Workload Scheduler) waits PENDING for on-demand capacity (its VMs
  are not preemptible: it only queues for them) until it frees or ``maxWaitDuration`` passes
  (0: indefinitely; absent: 24 h), then fails with RESOURCE_EXHAUSTED. The exact wording of
  Vertex's error for a flex-start wait that ran out is UNCONFIRMED (Google's DWS page documents
  the field, not the message).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from jobs.core.catalog import Catalog, closest, load_catalog
from jobs.core.problems import field_path
from jobs.core.safe_yaml import YamlInputError, read_yaml_file
from jobs.custom_jobs.facts import PREEMPTIBLE_STRATEGIES, facts_from_rest_job
from jobs.local.platform.rpc_status import Code, JobError
from jobs.quota.needed import quota_needed

QUOTA_SERVICE = "aiplatform.googleapis.com"
UNLIMITED_QUOTA = -1
"""What quotaInfos says of a limit that is not set: Cloud Quotas' word for unlimited
(QuotaConfig.preferredValue: "If set to -1, it means the value is unlimited"); Vertex itself
has no unlimited GPU quota."""
QUOTA_EXCEEDED = "The following quota metrics exceed quota limits: "
"""Vertex's 429 for custom training, word for word (e.g. GoogleCloudPlatform/
stable-diffusion-on-gcp#12: ``... limits: aiplatform.googleapis.com/custom_model_training_
nvidia_l4_gpus``); the metrics follow, joined by ', '."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class AcceleratorCapacity(_Model):
    """One accelerator type in one region. A count left out is unlimited."""

    on_demand: int | None = Field(None, ge=0)
    """Accelerators (GPUs, TPU chips) that STANDARD and FLEX_START jobs may hold at once."""
    spot: int | None = Field(None, ge=0)
    """Accelerators that SPOT jobs may hold at once."""
    spot_stockout: bool = False
    """Spot capacity is gone: a Spot job fails with STOCKOUT when it would start."""


class RegionCapacity(_Model):
    accelerators: dict[str, AcceleratorCapacity] = Field(default_factory=dict)
    """Accelerator type (the catalog's names, e.g. NVIDIA_L4) -> what is there."""
    quotas: dict[str, int] = Field(default_factory=dict)
    """Quota metric (e.g. aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus) ->
    limit in this region; a metric left out is unlimited."""


class Capacity(_Model):
    """The platform's capacity model: region name -> what it has. Empty: unlimited."""

    regions: dict[str, RegionCapacity] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names_are_the_catalogs(self) -> Capacity:
        cat = load_catalog()
        metrics = known_metrics(cat)
        for region, there in self.regions.items():
            _known("a region", region, cat.regions, f"regions.{region}")
            for name in there.accelerators:
                _known("an accelerator", name, cat.accelerators, f"regions.{region}.accelerators")
            for metric in there.quotas:
                _known("a quota metric", metric, metrics, f"regions.{region}.quotas")
                if there.quotas[metric] < 0:
                    raise ValueError(f"regions.{region}.quotas.{metric}: a limit is 0 or more")
        return self


class CapacityFileError(ValueError):
    """A capacity file that cannot be read, or does not hold a capacity model."""


def describe_errors(exc: ValidationError) -> str:
    """Pydantic's errors as 'where: what; ...' (the model's own paths)."""
    parts = []
    for error in exc.errors():
        message = error["msg"].removeprefix("Value error, ")
        # The catalog check names its own place; pydantic's places are field paths.
        parts.append(f"{field_path(error['loc'])}: {message}" if error["loc"] else message)
    return "; ".join(parts)


def load_capacity(path: Path) -> Capacity:
    """A capacity YAML file (the format is in jobs/local/README.md, "Capacity")."""
    try:
        return Capacity.model_validate(read_yaml_file(path) or {})
    except YamlInputError as exc:
        raise CapacityFileError(str(exc)) from None
    except ValidationError as exc:
        raise CapacityFileError(f"{path}: {describe_errors(exc)}") from None


def _known(what: str, name: str, choices: Iterable[str], where: str) -> None:
    names = list(choices)
    if name not in names:
        hint = closest(name, names)
        instead = f"; did you mean {hint}?" if hint else ""
        raise ValueError(f"{where}: {name!r} is not {what} the catalog knows{instead}")


def known_metrics(cat: Catalog) -> list[str]:
    """Every Vertex training quota metric the catalog names: each accelerator's on-demand and
    preemptible metric, and the machines' CPU metrics."""
    metrics = {acc.metric(p) for acc in cat.accelerators.values() for p in (False, True)}
    metrics |= {machine.cpu_quota_metric for machine in cat.machines.values()}
    return sorted(metrics)


# -- what a job needs ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Need:
    """What one job asks of its region."""

    region: str
    strategy: str
    """STANDARD, SPOT or FLEX_START (unspecified reads as STANDARD, as on Vertex)."""
    quota: Mapping[str, int]
    """Quota metric -> units (jobs/quota/needed.py: every pool at full size)."""
    accelerators: Mapping[str, int] = field(default_factory=dict)
    """Accelerator type -> count over every pool and replica."""
    max_wait_s: float | None = None
    """FLEX_START's maxWaitDuration; None: absent (24 h), 0: indefinitely."""

    @property
    def spot(self) -> bool:
        return self.strategy == "SPOT"


def need_of(job: dict, region: str, catalog: Catalog | None = None) -> Need:
    """A CustomJob's needs (REST form, already validated) in ``region``. A job on a persistent
    resource needs nothing of the region: the resource holds its machines and their quota."""
    cat = catalog or load_catalog()
    facts = facts_from_rest_job(job)
    strategy = facts.strategy or "STANDARD"
    if (job.get("jobSpec") or {}).get("persistentResourceId"):
        return Need(region, strategy, {})
    quota = quota_needed(facts, cat)
    preemptible = strategy in PREEMPTIBLE_STRATEGIES
    # quota_needed already counted each accelerator (built-in or named) under its metric.
    accelerators = {
        acc.name: quota[acc.metric(preemptible)]
        for acc in cat.accelerators.values()
        if quota.get(acc.metric(preemptible))
    }
    return Need(region, strategy, quota, accelerators, facts.max_wait_s)


# -- quota: at create ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Shortfall:
    metric: str
    limit: int
    in_use: int
    needed: int


def quota_shortfalls(capacity: Capacity, need: Need, in_use: Mapping[str, int]) -> list[Shortfall]:
    """The metrics whose limit in the job's region the job would pass, beside what the region's
    active jobs already hold (``in_use``: metric -> units)."""
    limits = capacity.regions.get(need.region, RegionCapacity()).quotas
    return [
        Shortfall(metric, limits[metric], in_use.get(metric, 0), units)
        for metric, units in sorted(need.quota.items())
        if metric in limits and in_use.get(metric, 0) + units > limits[metric]
    ]


def quota_message(shortfalls: list[Shortfall], region: str) -> str:
    """Vertex's sentence, then what the local platform knows besides: limit, use and need."""
    said = QUOTA_EXCEEDED + ", ".join(s.metric for s in shortfalls)
    detail = "; ".join(
        f"{s.metric}: limit {s.limit} in region {region}, {s.in_use} in use, this job needs "
        f"{s.needed}"
        for s in shortfalls
    )
    return f"{said}. ({detail}; `vtx local capacity set FILE` changes the limits)"


def quota_in_use(needs: Iterable[Need], region: str) -> dict[str, int]:
    used: Counter[str] = Counter()
    for need in needs:
        if need.region == region:
            used.update(need.quota)
    return dict(used)


# -- capacity: at start --------------------------------------------------------------------------


class Admission(Enum):
    START = "the accelerators are free (or none are needed): start the job"
    WAIT = "stay PENDING until the accelerators free up"
    FAIL = "fail the job (a Spot stockout, or FLEX_START waited past maxWaitDuration)"


@dataclass(frozen=True)
class AdmissionDecision:
    admission: Admission
    error: JobError | None = None
    note: str | None = None
    """Why the job waits or fails, for the job's service log."""


def pool_of(spot: bool) -> str:
    return "spot" if spot else "on_demand"


def summed(needs: Iterable[Need], region: str) -> Need:
    """Several needs as one (a persistent resource's pools), on-demand (STANDARD)."""
    quota: Counter[str] = Counter()
    accelerators: Counter[str] = Counter()
    for need in needs:
        quota.update(need.quota)
        accelerators.update(need.accelerators)
    return Need(region, "STANDARD", dict(quota), dict(accelerators))


def held(needs: Iterable[Need], region: str) -> dict[tuple[str, str], int]:
    """(accelerator, 'spot'|'on_demand') -> count the started jobs of ``region`` hold."""
    used: Counter[tuple[str, str]] = Counter()
    for need in needs:
        if need.region == region:
            for name, count in need.accelerators.items():
                used[(name, pool_of(need.spot))] += count
    return dict(used)


def _short(need: Need, capacity: Capacity, in_use: Mapping[tuple[str, str], int]) -> list[str]:
    """'4 x NVIDIA_L4 on_demand (2 of 2 in use)' for every accelerator the job cannot get."""
    there = capacity.regions.get(need.region, RegionCapacity()).accelerators
    kind = pool_of(need.spot)
    short = []
    for name, count in sorted(need.accelerators.items()):
        limit = getattr(there.get(name, AcceleratorCapacity()), kind)
        used = in_use.get((name, kind), 0)
        if limit is not None and used + count > limit:
            short.append(f"{count} x {name} {kind} ({used} of {limit} in use)")
    return short


def _stocked_out(need: Need, capacity: Capacity) -> list[str]:
    there = capacity.regions.get(need.region, RegionCapacity()).accelerators
    none = AcceleratorCapacity()
    return [n for n in sorted(need.accelerators) if there.get(n, none).spot_stockout]


def stockout_error(accelerators: list[str], region: str) -> JobError:
    """How a Spot job that cannot get its VMs fails: Vertex's STOCKOUT, with its regional
    "Resources are insufficient" sentence."""
    message = (
        f"STOCKOUT: Spot capacity for {', '.join(accelerators)} is exhausted. Resources are "
        f"insufficient in region: {region}. Please try a different region, another "
        f"accelerator, or scheduling.strategy STANDARD or FLEX_START."
    )
    return JobError(Code.RESOURCE_EXHAUSTED, message)


def lost_to_stockout(capacity: Capacity, need: Need) -> JobError | None:
    """Why a Spot job whose VM was preempted cannot get one back: Spot is stocked out in its
    region now. Vertex retries a preempted Spot job's stockout a few times (3 to 6, by its pages)
    and then fails it with STOCKOUT; here no capacity comes back while the model says so, so
    the job fails at once."""
    out = _stocked_out(need, capacity) if need.spot else []
    return stockout_error(out, need.region) if out else None


def max_wait_error(max_wait_s: float, short: list[str], region: str) -> JobError:
    message = (
        f"The job waited its maxWaitDuration of {max_wait_s:g} s for resources (FLEX_START) and "
        f"they were not provisioned: {', '.join(short)} in region {region}. Resources are "
        f"insufficient in region: {region}."
    )
    return JobError(Code.RESOURCE_EXHAUSTED, message)


def default_max_wait_s() -> float:
    """FLEX_START's wait when maxWaitDuration is absent (24 h; limits.yaml, from the protos)."""
    return float(load_catalog().limits.max_wait_s.default or 0)


def admit(
    capacity: Capacity,
    need: Need,
    in_use: Mapping[tuple[str, str], int],
    *,
    waited_s: float,
    default_max_wait_s: float,
) -> AdmissionDecision:
    """Whether a job may start now: its accelerators beside those the started jobs of its region
    hold (``in_use``, see ``held``); ``waited_s``: how long it has waited for them so far."""
    if need.spot:
        out = _stocked_out(need, capacity)
        if out:
            error = stockout_error(out, need.region)
            return AdmissionDecision(Admission.FAIL, error, error.message)
    short = _short(need, capacity, in_use)
    if not short:
        return AdmissionDecision(Admission.START)
    if need.strategy == "FLEX_START":
        max_wait_s = default_max_wait_s if need.max_wait_s is None else need.max_wait_s
        if max_wait_s > 0 and waited_s >= max_wait_s:
            error = max_wait_error(max_wait_s, short, need.region)
            return AdmissionDecision(Admission.FAIL, error, error.message)
        until = f"up to {max_wait_s:g} s (maxWaitDuration)" if max_wait_s > 0 else "indefinitely"
        note = f"waiting for resources {until}: {', '.join(short)} in region {need.region}"
        return AdmissionDecision(Admission.WAIT, note=note)
    note = (
        f"waiting for resources: {', '.join(short)} in region {need.region}; the job stays "
        f"JOB_STATE_PENDING until they are free"
    )
    return AdmissionDecision(Admission.WAIT, note=note)
