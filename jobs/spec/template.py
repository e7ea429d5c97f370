"""Job templates: the YAML an ML engineer writes, validated by pydantic.

A template names an image, pools by role (chief, workers, reduction_server, evaluator),
command/args, env, secrets (env name -> Secret Manager secret *name*), scheduling and labels.
Files are read by `jobs.spec.document` (``extends:``, ``--set``); gcloud's formats become templates
in
`jobs.spec.gcloud`. Cheap to import: no aiplatform here."""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from jobs.core.contract import BUDGET_DECIMALS
from jobs.core.durations import parse_duration_s
from jobs.core.guard import ACTIONS, EXAMPLE, Guard
from jobs.core.naming import RFC1035_PATTERN
from jobs.core.problems import HintedValueError, Problem, field_path
from jobs.core.safe_yaml import (
    short_repr,
)
from jobs.core.stack import TEAM_PATTERN
from jobs.spec.field_hints import field_hint
from jobs.spec.rest_schema import integer_range, message_fields
from jobs.spec.study import STUDY_MODELS, Study

ROLES = ("chief", "workers", "reduction_server", "evaluator")
"""Pool roles in Vertex's worker pool order (positions 0..3)."""
TEMPLATE_NAME_MAX = 40
NAME_PATTERN = rf"^[a-z][a-z0-9-]{{0,{TEMPLATE_NAME_MAX - 1}}}$"
"""Template names become label values and run id prefixes: lower case, short."""
RESERVATION_NAME_KEY = "compute.googleapis.com/reservation-name"
"""The ``ReservationAffinity.key`` that targets a SPECIFIC_RESERVATION by name (v1 proto docs)."""
AFFINITIES = {
    "none": "NO_RESERVATION",
    "any": "ANY_RESERVATION",
    "specific": "SPECIFIC_RESERVATION",
}
"""Template ``reservation.affinity`` -> the API's ``reservationAffinityType``."""


class TemplateError(Exception):
    """A document could not be read as a job; ``problems`` says every reason."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def _scalar_to_str(value: Any) -> Any:
    # YAML reads `1`, `true` and `0.5` as numbers and booleans; env values are strings.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


def _check_duration(value: Any) -> Any:
    if value is None:
        return None
    seconds = parse_duration_s(value)
    if seconds is None:
        raise ValueError(f"{short_repr(value)} is not a duration: write e.g. 24h, 90m, 7d or 3600s")
    return value


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _api_integer(message: str, field: str, hint: str) -> AfterValidator:
    """The range of the proto field a template integer is sent as (replicaCount is int64,
    acceleratorCount and bootDiskSizeGb int32): what the API and the client refuse, refused
    here with the template's key path."""

    def check(value: int) -> int:
        scalar = message_fields(f"google.cloud.aiplatform.v1.{message}")[field]["scalar"]
        low, high = integer_range(scalar) or (value, value)
        if not low <= value <= high:
            raise HintedValueError(
                f"{value} is out of range: the API stores {field} as {scalar} "
                f"({low:,} to {high:,})",
                hint,
            )
        return value

    return AfterValidator(check)


EnvValue = Annotated[str, BeforeValidator(_scalar_to_str)]
Duration = Annotated[str | int | float | None, BeforeValidator(_check_duration)]


Replicas = Annotated[
    int, _api_integer("WorkerPoolSpec", "replicaCount", "replicas: machines in the pool, e.g. 2")
]
AcceleratorCount = Annotated[
    int,
    _api_integer(
        "MachineSpec",
        "acceleratorCount",
        "accelerator_count: accelerators per machine, e.g. 1, 2, 4 or 8",
    ),
]
DiskSizeGb = Annotated[
    int,
    _api_integer(
        "DiskSpec",
        "bootDiskSizeGb",
        "size_gb: the boot disk in GB, e.g. 100; data and checkpoints belong on gs://",
    ),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class BootDisk(_Strict):
    """Boot disk of each replica. Not durable: checkpoints go to gs:// (AIP_CHECKPOINT_DIR)."""

    type: str | None = None
    """None: the machine's default (pd-ssd; hyperdisk-balanced on A3 Ultra and A4, which take
    only Hyperdisk: the catalog's ``boot_disk_types``)."""
    size_gb: DiskSizeGb = 100


class Reservation(_Strict):
    """The Compute Engine reservation the pool's VMs consume (machineSpec.reservationAffinity).
    A VM on a reservation is billed the reservation's Compute Engine price plus Vertex's training
    fee, not Vertex's on-demand price; Spot and FLEX_START jobs cannot consume one."""

    affinity: Annotated[Literal["none", "any", "specific"], BeforeValidator(_lower)]
    """none: on-demand only; any: a matching reservation if there is one, else on-demand;
    specific: only the reservation(s) named in ``values``."""
    key: str | None = None
    """specific only: the reservation label key; left out, the key that targets a reservation
    by name (``compute.googleapis.com/reservation-name``)."""
    values: list[str] = Field(default_factory=list)
    """specific only: full resource names, ``projects/P/zones/Z/reservations/NAME``."""

    @property
    def api_key(self) -> str | None:
        """The key sent: the by-name key when a specific reservation leaves it out."""
        if self.key is None and self.affinity == "specific":
            return RESERVATION_NAME_KEY
        return self.key


class Pool(_Strict):
    """One worker pool. Pool-level image/command/args/env override the template's."""

    machine: str
    accelerator: str | None = None
    """Left out on A2/A3/A4/G2/TPU machines: their built-in accelerators are filled in."""
    accelerator_count: AcceleratorCount | None = None
    replicas: Replicas = 1
    boot_disk: BootDisk = Field(default_factory=BootDisk)
    tpu_topology: str | None = None
    reservation: Reservation | None = None
    """Left out: Vertex's default (no reservation affinity is sent)."""
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: dict[str, EnvValue] = Field(default_factory=dict)


class Pools(_Strict):
    """Pools by role, compiled to Vertex's positions 0 (chief) .. 3 (evaluator)."""

    chief: Pool
    workers: Pool | None = None
    reduction_server: Pool | None = None
    evaluator: Pool | None = None

    def by_role(self) -> list[tuple[str, Pool]]:
        return [(role, p) for role in ROLES if (p := getattr(self, role)) is not None]


class Scheduling(_Strict):
    strategy: Annotated[Literal["standard", "spot", "flex_start"], BeforeValidator(_lower)] = (
        "standard"
    )
    timeout: Duration = None
    """Longest run of one attempt; Vertex's default (7 days) when left out."""
    restart_job_on_worker_restart: bool = False
    max_wait: Duration = None
    """FLEX_START only: how long to wait for capacity."""
    disable_retries: bool = False

    @property
    def timeout_s(self) -> float | None:
        return parse_duration_s(self.timeout) if self.timeout is not None else None

    @property
    def max_wait_s(self) -> float | None:
        return parse_duration_s(self.max_wait) if self.max_wait is not None else None


PERSISTENT_RESOURCE_PATTERN = rf"^{RFC1035_PATTERN}$"
"""A persistent resource id (CreatePersistentResourceRequest.persistent_resource_id's rule)."""


class Rung(_Strict):
    """One alternative of a capacity ladder: the base template with these changes, tried when
    the rungs before it could not get capacity."""

    region: str | None = None
    """Shorthand for ``set: {region: ...}``."""
    persistent_resource: str | None = Field(default=None, pattern=PERSISTENT_RESOURCE_PATTERN)
    """Shorthand for ``set: {persistent_resource: ...}``: this rung runs on the stack's warm
    pool. A resource is a rung's own capacity choice: the base's is not carried to the rungs
    after it (jobs.spec.ladder)."""
    set: dict[str, Any] = Field(default_factory=dict)
    """``key.path: value`` overrides of the base template, as ``--set key.path=value``."""
    max_wait: Duration = None
    """How long this rung may wait QUEUED/PENDING before the next is tried; the ladder's own
    ``max_wait`` when left out."""

    @property
    def max_wait_s(self) -> float | None:
        return parse_duration_s(self.max_wait) if self.max_wait is not None else None


class Capacity(_Strict):
    """Where else to get capacity: the base template is rung 1, ``ladder`` lists the rungs
    after it, each a whole job that `vtx launch` validates, prices and tries in order."""

    ladder: list[Rung] = Field(default_factory=list)
    max_wait: Duration = None
    """How long any rung (the base included) may wait QUEUED/PENDING before the next is tried;
    left out, a rung waits as long as Vertex lets it. The last rung waits as long as Vertex lets
    it: there is nothing to move on to."""

    @property
    def max_wait_s(self) -> float | None:
        return parse_duration_s(self.max_wait) if self.max_wait is not None else None


class Budget(_Strict):
    """What one run may cost: the local platform and `vtx launch --follow` cancel it once its
    meter (every attempt at the price it pays) crosses ``max_cost_usd``."""

    max_cost_usd: float = Field(gt=0, allow_inf_nan=False)
    """In US dollars, at the catalog's prices (`vtx cost`); a positive number."""

    @field_validator("max_cost_usd")
    @classmethod
    def _to_the_micro_dollar(cls, value: float) -> float:
        # It travels as a label value to the micro-dollar (`jobs.core.contract.budget_label`).
        if round(value, BUDGET_DECIMALS) <= 0:
            raise ValueError(f"must be at least 0.{'0' * (BUDGET_DECIMALS - 1)}1 dollars")
        return round(value, BUDGET_DECIMALS)


class JobTemplate(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    description: str | None = None
    region: str | None = None
    """Defaults to the stack's region; a different one is an error at compile time."""
    image: str | None = None
    """A name in the stack's Artifact Registry (``trainer``, ``trainer:v3``) or a full URI."""
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    env: dict[str, EnvValue] = Field(default_factory=dict)
    secrets: dict[str, str] = Field(default_factory=dict)
    """Env var name -> Secret Manager secret name; the trainer resolves values at run time."""
    pools: Pools
    scheduling: Scheduling = Field(default_factory=Scheduling)
    labels: dict[str, str] = Field(default_factory=dict)
    web_access: bool = False
    """Interactive shell into replicas; always off in prod stacks."""
    capacity: Capacity | None = None
    """A capacity ladder: the alternatives `vtx launch` tries when this job gets no capacity."""
    study: Study | None = None
    """A hyperparameter tuning study: every trial runs this job with its parameters appended."""
    budget: Budget | None = None
    """The most this run may cost; cancelled once its meter crosses it."""
    persistent_resource: str | None = Field(default=None, pattern=PERSISTENT_RESOURCE_PATTERN)
    """The id of a persistent resource of the stack (``persistent_resources`` in its config):
    the job runs on its warm pools (``jobSpec.persistentResourceId``), billed to the resource."""
    guard: Guard | None = None
    """Progress guards (`jobs.core.guard`): what the controller does about a run that stops
    stepping or trains too slowly; merged over the stack's defaults."""
    team: str | None = Field(default=None, pattern=TEAM_PATTERN)
    """The team the run is billed to: the ``vtx-team`` label on its jobs, which a stack's team
    budget counts and whose cancel function stops; required on a stack that declares teams."""

    def to_document(self) -> dict[str, Any]:
        """The template as a plain document (what validation and ``--set`` work on)."""
        return self.model_dump(mode="json", exclude_none=True)

    @classmethod
    def from_document(cls, doc: Any, source: str | None = None) -> JobTemplate:
        try:
            return cls.model_validate(doc)
        except ValidationError as exc:
            raise TemplateError(_pydantic_problems(exc, source)) from exc


# ---- structural problems ------------------------------------------------------------------

_KNOWN_FIELDS = sorted(
    {
        name
        for model in (
            JobTemplate,
            Pools,
            Pool,
            BootDisk,
            Scheduling,
            Reservation,
            Capacity,
            Rung,
            Budget,
            Guard,
            *STUDY_MODELS,
        )
        for name in model.model_fields
    }
)
_MESSAGES = {
    "missing": "is required",
    "string_pattern_mismatch": "must be lower case letters, digits and '-', starting with a "
    "letter, at most 40 characters (it becomes a label value and the run id prefix)",
}


def _field_hint(key: str) -> str | None:
    hint = field_hint(key, rest=False)
    if hint is not None:
        return hint
    guess = difflib.get_close_matches(key, _KNOWN_FIELDS, n=1, cutoff=0.7)
    return f"did you mean {guess[0]}?" if guess else None


def _pydantic_problems(exc: ValidationError, source: str | None = None) -> list[Problem]:
    problems = []
    for error in exc.errors():
        loc = error["loc"]
        path = field_path(loc)
        if error["type"] == "extra_forbidden":
            key = str(loc[-1]) if loc else "?"
            problems.append(Problem(path, f"unknown field {key!r}", _field_hint(key), source))
            continue
        message = _MESSAGES.get(error["type"], error["msg"])
        if error["type"] == "value_error":
            message = str(error.get("ctx", {}).get("error", error["msg"]))
        hint = getattr(error.get("ctx", {}).get("error"), "hint", None)
        if path == "pools.chief" and error["type"] == "missing":
            hint = "pools: {chief: {machine: n1-standard-4, replicas: 1}}"
        elif path.startswith("scheduling.strategy"):
            hint = "one of standard, spot, flex_start"
        elif path.startswith("budget"):
            hint = "a positive number of US dollars: budget: {max_cost_usd: 25}"
        elif path == "guard.action":
            hint = f"one of {', '.join(ACTIONS)}"
        elif path.startswith("guard") and hint is None:
            hint = EXAMPLE
        elif path == "team":
            message = "must be lower case letters, digits and '-', starting with a letter"
            hint = "at most 30 characters, a team the stack declares: team: nlp"
        elif path.endswith("persistent_resource") and error["type"] == "string_pattern_mismatch":
            message = (
                "must be a persistent resource id: lower case letters, digits and '-', starting "
                "with a letter, at most 63 characters"
            )
            hint = "an id of the stack's vtx:platform.persistent_resources: warm-l4"
        elif path.endswith("reservation.affinity"):
            hint = f"one of {', '.join(AFFINITIES)}"
        problems.append(Problem(path, message, hint, source))
    return problems


def template_structure_problems(doc: Any) -> list[Problem]:
    if not isinstance(doc, dict):
        return [Problem("(top)", f"a template is a mapping, got {type(doc).__name__}")]
    try:
        JobTemplate.model_validate(doc)
    except ValidationError as exc:
        return _pydantic_problems(exc)
    return []
