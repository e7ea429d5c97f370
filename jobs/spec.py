"""Job templates: the YAML an ML engineer writes, validated by pydantic.

A template names an image, pools by role (chief, workers, reduction_server, evaluator),
command/args, env, secrets (env name -> Secret Manager secret *name*), scheduling and labels.
It may ``extends:`` another template (deep merge: mappings merge, lists and scalars replace) and
takes ``--set key.path=value`` overrides. gcloud's formats (a CustomJobSpec with
``workerPoolSpecs`` at the top, or a whole CustomJob) are read too: the format is detected and
converted by `jobs.gcloud`. Cheap to import: no aiplatform here."""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from jobs.durations import parse_duration_s
from jobs.facts import ROLES
from jobs.problems import Problem
from jobs.rest_schema import integer_range, message_fields
from jobs.safe_yaml import (
    MAX_DEPTH,
    YamlInputError,
    check_text,
    load_yaml_text,
    read_yaml_file,
    short_repr,
    shown,
)

TEMPLATE = "template"
CUSTOM_JOB = "custom_job"
CUSTOM_JOB_SPEC = "custom_job_spec"
MAX_EXTENDS_DEPTH = 8
NAME_PATTERN = r"^[a-z][a-z0-9-]{0,39}$"
"""Template names become label values and run id prefixes: lower case, short."""


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


class HintedValueError(ValueError):
    """A field check failure that also says what to write instead."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


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
    model_config = ConfigDict(extra="forbid", frozen=True)


class BootDisk(_Strict):
    """Boot disk of each replica. Not durable: checkpoints go to gs:// (AIP_CHECKPOINT_DIR)."""

    type: str = "pd-ssd"
    size_gb: DiskSizeGb = 100


class Pool(_Strict):
    """One worker pool. Pool-level image/command/args/env override the template's."""

    machine: str
    accelerator: str | None = None
    """Left out on A2/A3/A4/G2/TPU machines: their built-in accelerators are filled in."""
    accelerator_count: AcceleratorCount | None = None
    replicas: Replicas = 1
    boot_disk: BootDisk = BootDisk()
    tpu_topology: str | None = None
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
    scheduling: Scheduling = Scheduling()
    labels: dict[str, str] = Field(default_factory=dict)
    web_access: bool = False
    """Interactive shell into replicas; always off in prod stacks."""

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

_NO_DISK = (
    "CustomJob has no persistent disk: write checkpoints to gs:// via AIP_CHECKPOINT_DIR "
    "(the stack sets it for every run)"
)
# Keys people bring from tutorials or from gcloud YAML, lower-cased without '_' -> what to write.
TEMPLATE_FIELD_HINTS = {
    "persistentdisksizegb": _NO_DISK,
    "persistentdisktype": _NO_DISK,
    "persistentdisk": _NO_DISK,
    "persistentdisks": _NO_DISK,
    "usespot": "use scheduling.strategy: spot",
    "spot": "use scheduling.strategy: spot",
    "preemptible": "use scheduling.strategy: spot",
    "machinetype": "write machine",
    "replicacount": "write replicas",
    "acceleratortype": "write accelerator",
    "gpus": "write accelerator: TYPE and accelerator_count: N",
    "gpu": "write accelerator: TYPE and accelerator_count: N",
    "numgpus": "write accelerator: TYPE and accelerator_count: N",
    "gpucount": "write accelerator_count",
    "imageuri": "write image",
    "containeruri": "write image",
    "timeout": "write it under scheduling: {timeout: 24h}",
    "workerpoolspecs": "gcloud YAML is camelCase (workerPoolSpecs); in a vtx template use pools:",
    "bootdisksizegb": "write boot_disk: {size_gb: N}",
    "bootdisktype": "write boot_disk: {type: pd-ssd}",
    "maxwaitduration": "write max_wait",
    "restartjobonworkerrestart": "write restart_job_on_worker_restart",
    "serviceaccount": "the job runs as the stack's trainer service account; remove it",
    "network": "the stack sets the network; remove it",
}
_KNOWN_FIELDS = sorted(
    {
        name
        for model in (JobTemplate, Pools, Pool, BootDisk, Scheduling)
        for name in model.model_fields
    }
)
_MESSAGES = {
    "missing": "is required",
    "string_pattern_mismatch": "must be lower case letters, digits and '-', starting with a "
    "letter, at most 40 characters (it becomes a label value and the run id prefix)",
}


def _loc_path(loc: Sequence[Any]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path = f"{path}[{part}]"
        elif part == "" or "." in str(part):
            path = f"{path}[{part!r}]"  # keep the path readable for odd keys
        else:
            path = f"{path}.{part}" if path else str(part)
    return path or "(top)"


def _field_hint(key: str) -> str | None:
    norm = key.replace("_", "").replace("-", "").lower()
    if norm in TEMPLATE_FIELD_HINTS:
        return TEMPLATE_FIELD_HINTS[norm]
    guess = difflib.get_close_matches(key, _KNOWN_FIELDS, n=1, cutoff=0.7)
    return f"did you mean {guess[0]}?" if guess else None


def _pydantic_problems(exc: ValidationError, source: str | None = None) -> list[Problem]:
    problems = []
    for error in exc.errors():
        loc = error["loc"]
        path = _loc_path(loc)
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


# ---- reading documents --------------------------------------------------------------------


def detect_format(doc: Any) -> str:
    """``template``, ``custom_job_spec`` (gcloud --config) or ``custom_job`` (whole job)."""
    if isinstance(doc, dict):
        keys = {str(k) for k in doc}
        if keys & {"workerPoolSpecs", "worker_pool_specs"}:
            return CUSTOM_JOB_SPEC
        if keys & {"jobSpec", "job_spec", "displayName", "display_name"}:
            return CUSTOM_JOB
    return TEMPLATE


@dataclass
class Document:
    """A job document as read from disk, after ``extends`` and ``--set``."""

    source: str
    kind: str
    doc: Any
    problems: list[Problem] = field(default_factory=list)
    """Problems found while reading (YAML syntax, extends, overrides)."""


def read_yaml(path: Path) -> tuple[Any, list[Problem]]:
    """The document in ``path``, or the problem that stops it being read (see jobs.safe_yaml:
    size, UTF-8, depth and value limits, duplicate keys)."""
    try:
        return read_yaml_file(path), []
    except YamlInputError as exc:
        return None, [exc.problem]


def deep_merge(base: Any, override: Any) -> Any:
    """Mappings merge key by key; anything else in ``override`` replaces ``base``."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = deep_merge(base.get(key), value) if key in base else value
        return merged
    return copy.deepcopy(override)


def resolve_extends(
    doc: Any, path: Path, chain: tuple[Path, ...] = ()
) -> tuple[Any, list[Problem]]:
    """Merge the template ``doc`` (read from ``path``) over the one it ``extends:``."""
    if not isinstance(doc, dict) or "extends" not in doc:
        return doc, []
    doc = dict(doc)
    parent_name = doc.pop("extends")
    source = str(path)
    if not isinstance(parent_name, str) or not parent_name:
        return doc, [
            Problem("extends", "extends names another template file", "extends: base.yaml", source)
        ]
    parent_path = (path.parent / parent_name).resolve()
    if parent_path in chain or parent_path == path.resolve():
        cycle = " -> ".join(p.name for p in (*chain, path.resolve(), parent_path))
        return doc, [Problem("extends", f"extends cycle: {cycle}", "remove one extends", source)]
    if len(chain) >= MAX_EXTENDS_DEPTH:
        return doc, [
            Problem("extends", f"more than {MAX_EXTENDS_DEPTH} levels of extends", None, source)
        ]
    parent, problems = read_yaml(parent_path)
    if problems:
        return doc, [Problem("extends", p.message, p.hint, source) for p in problems]
    if not isinstance(parent, dict):
        return doc, [Problem("extends", f"{parent_name} is not a template mapping", None, source)]
    parent, problems = resolve_extends(parent, parent_path, (*chain, path.resolve()))
    return deep_merge(parent, doc), problems


def parse_override(text: str) -> tuple[list[str | int], Any]:
    """``pools.chief.replicas=2`` -> (["pools", "chief", "replicas"], 2); values are YAML, read
    within the same limits as a file; text that is not YAML is kept as a string."""
    try:
        check_text(text)
    except YamlInputError as exc:
        raise ValueError(exc.problem.message) from None
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--set {text!r}: write key.path=value")
    parts: list[str | int] = [int(p) if p.isdigit() else p for p in key.strip().split(".")]
    if any(p == "" for p in parts):
        raise ValueError(f"--set {text!r}: empty key in path")
    if len(parts) > MAX_DEPTH:
        raise ValueError(f"the key path is more than {MAX_DEPTH} levels deep")
    try:
        value = load_yaml_text(raw) if raw.strip() else ""
    except YamlInputError as exc:
        if not exc.problem.message.startswith("invalid YAML"):
            raise ValueError(exc.problem.message) from None
        value = raw  # `--set args=[a` is the text "[a"
    return parts, value


def apply_override(doc: Any, parts: list[str | int], value: Any) -> Any:
    """A copy of ``doc`` with ``value`` at ``parts`` (mappings are created as needed)."""
    if not parts:
        return copy.deepcopy(value)
    head, rest = parts[0], parts[1:]
    if isinstance(doc, list) and isinstance(head, int):
        if head >= len(doc):
            raise ValueError(f"index {head} is past the end of a list of {len(doc)}")
        out = list(doc)
        out[head] = apply_override(doc[head], rest, value)
        return out
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ValueError(f"cannot set {head!r} inside a {type(doc).__name__}")
    out = dict(doc)
    out[str(head)] = apply_override(doc.get(str(head)), rest, value)
    return out


def apply_overrides(doc: Any, overrides: Iterable[str], source: str) -> tuple[Any, list[Problem]]:
    problems = []
    for text in overrides:
        try:
            parts, value = parse_override(text)
            doc = apply_override(doc, parts, value)
        except ValueError as exc:
            where = f"--set {text if len(text) <= 80 else text[:80] + '…'}"
            problems.append(Problem(shown(where), str(exc), "--set key.path=value", source))
    return doc, problems


def normalise_gcloud_spec(spec: Any) -> Any:
    """gcloud's --config accepts one pool written as a mapping (Google's own examples do);
    the API wants a list."""
    if isinstance(spec, dict) and isinstance(spec.get("workerPoolSpecs"), dict):
        return {**spec, "workerPoolSpecs": [spec["workerPoolSpecs"]]}
    return spec


def load_document(path: Path, overrides: Iterable[str] = ()) -> Document:
    """Read a job file in any supported format; problems are collected, never raised."""
    source = str(path)
    doc, problems = read_yaml(path)
    if problems:
        return Document(source, TEMPLATE, None, problems)
    kind = detect_format(doc)
    if kind == TEMPLATE:
        doc, problems = resolve_extends(doc, path)
    elif kind == CUSTOM_JOB_SPEC:
        doc = normalise_gcloud_spec(doc)
    doc, override_problems = apply_overrides(doc, overrides, source)
    return Document(source, kind, doc, problems + override_problems)


def load_template(path: Path, overrides: Iterable[str] = ()) -> JobTemplate:
    """The JobTemplate in ``path`` (any format, auto-detected), with ``--set`` overrides applied.

    Raises TemplateError with every structural problem; run ``validate_template`` for the rules."""
    document = load_document(path, overrides)
    if document.problems:
        raise TemplateError(document.problems)
    return template_from_document(document)


def template_from_document(document: Document) -> JobTemplate:
    if document.kind == TEMPLATE:
        return JobTemplate.from_document(document.doc, document.source)
    from jobs.gcloud import template_from_gcloud

    return template_from_gcloud(document.doc, document.kind, document.source)
