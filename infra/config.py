"""The stack configuration: ``gcp:project``, ``gcp:region`` and the structured ``vtx:platform``.

Everything the program declares is decided by these values, and all of them are checked here,
before any resource exists, so that a typo fails with its key path and what to write instead
instead of half-way through ``pulumi up``. Two layers:

- per-field checks in the pydantic models (syntax, ranges, known accelerators, private CIDRs
  outside Vertex's reserved 172.16.0.0/16);
- cross-field checks in :func:`_cross_checks` (mode-specific ranges, overlaps between ranges,
  what a prod stack must have, duplicate quota requests).

This module has no pulumi import: tests and ``vtx review`` validate configs without the engine.
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import re
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from jobs.core import catalog
from jobs.core.naming import (
    RFC1035_PATTERN,
    label_key_problem,
    label_value,
    label_value_problem,
    rfc1035_pattern,
)
from jobs.core.problems import HintedValueError, Problem, field_path
from jobs.core.safe_yaml import YamlInputError, read_yaml_file, short_repr
from jobs.core.stack import (
    LABEL_TEAM,
    PROD_ENVIRONMENTS,
    PSC_CONSUMER_NAME_MAX,
    RUNS_PREFIX,
    TEAM_PATTERN,
    Guard,
    is_production,
)

QUOTA_SERVICE = "aiplatform.googleapis.com"
# Vertex AI training reserves this range for its own networking: a peered or attached range
# inside it would collide with the job's VMs. Not confirmed from a Google page: see
# docs/vertex-facts.md, "Networks and service agents".
VERTEX_RESERVED = ipaddress.IPv4Network("172.16.0.0/16")
REFERENCE = "infra/README.md (vtx:platform reference)"


class ConfigError(Exception):
    """The stack configuration is invalid; ``problems`` says where and what to write instead."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"invalid stack configuration ({len(problems)} problem(s)):\n{lines}")


# --- field types ------------------------------------------------------------------------------


def _cidr(value: str) -> str:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise HintedValueError(
            f"{value!r} is not an IPv4 CIDR range ({exc})",
            "write the network address and prefix length, e.g. 10.10.0.0/20",
        ) from exc
    if not isinstance(net, ipaddress.IPv4Network):
        raise HintedValueError(f"{value!r} is IPv6", "use an IPv4 range such as 10.10.0.0/20")
    if not net.is_private:
        raise HintedValueError(
            f"{value} is not a private (RFC 1918) range", "use a range inside 10.0.0.0/8"
        )
    if net.overlaps(VERTEX_RESERVED):
        raise HintedValueError(
            f"{value} overlaps 172.16.0.0/16, which Vertex AI training reserves",
            "pick a range outside 172.16.0.0/16, e.g. inside 10.0.0.0/8",
        )
    return str(net)


def _pattern(regex: str, what: str, example: str):
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise HintedValueError(f"{value!r} is not a valid {what}", f"e.g. {example}")
        return value

    return AfterValidator(check)


def _known_accelerator(value: str) -> str:
    known = sorted(quota_accelerators())
    if value not in known:
        raise HintedValueError(
            f"unknown accelerator {value!r}",
            f"one of {', '.join(known)} (the list lives in jobs/core/catalog/accelerators.yaml)",
        )
    return value


# GCP region names are <geography>-<direction><number> (Google's "Regions and zones" list): a
# closed grammar, so `mars-north1` or `europe-wset4` is a typo, never a region Google added.
_GCP_REGION = re.compile(
    r"(africa|asia|australia|europe|me|northamerica|southamerica|us)-"
    r"(central|east|north|northeast|northwest|south|southeast|southwest|west)[1-9][0-9]?"
)
# Cloud Storage multi-regions and predefined dual-regions (Bucket locations page).
BUCKET_MULTI_REGIONS = ("ASIA", "EU", "US", "ASIA1", "EUR4", "EUR5", "EUR7", "EUR8", "NAM4")

ENVIRONMENTS = ("dev", "staging", *sorted(PROD_ENVIRONMENTS))
"""The environments a stack may be. Production ones (jobs.core.stack.PROD_ENVIRONMENTS) get CMEK,
immutable tags, the prod-only policies and no web access; dev and staging do not."""


def _closest(value: str, known: Any) -> str:
    guess = difflib.get_close_matches(value, list(known), n=1, cutoff=0.6)
    return f"did you mean {guess[0]}? " if guess else ""


def _gcp_region(value: str) -> str:
    if not _GCP_REGION.fullmatch(value):
        raise HintedValueError(
            f"{value!r} is not a GCP region",
            f"{_closest(value, catalog.load_catalog().regions)}a region such as europe-west4",
        )
    return value


def _vertex_region(value: str) -> str:
    known = catalog.load_catalog().regions
    if value not in known:
        what = "a GCP region" if _GCP_REGION.fullmatch(value) else "not a GCP region"
        raise HintedValueError(
            f"{value!r} ({what}) is not a GCP region vtx knows for Vertex AI training",
            f"{_closest(value, known)}one of {', '.join(known)}; a region Google lists for "
            "Vertex AI training goes into jobs/core/catalog/regions.yaml first",
        )
    return value


def _bucket_location(value: str) -> str:
    if value.upper() not in BUCKET_MULTI_REGIONS and not _GCP_REGION.fullmatch(value.lower()):
        raise HintedValueError(
            f"{value!r} is not a Cloud Storage location",
            f"a region such as europe-west4, or one of {', '.join(BUCKET_MULTI_REGIONS)}",
        )
    return value


def _environment(value: str) -> str:
    if value not in ENVIRONMENTS:
        raise HintedValueError(
            f"unknown environment {value!r}",
            f"{_closest(value, ENVIRONMENTS)}one of {', '.join(ENVIRONMENTS)} "
            f"({' and '.join(sorted(PROD_ENVIRONMENTS))} get production treatment)",
        )
    return value


def _label_map(labels: dict[str, str]) -> dict[str, str]:
    for key, value in labels.items():
        key_problem = label_key_problem(key)
        if key_problem is not None:
            raise HintedValueError(key_problem, f"e.g. {label_value(key) or 'team'}")
        value_problem = label_value_problem(value)
        if value_problem is not None:
            raise HintedValueError(f"label {key}: {value_problem}", f"e.g. {label_value(value)}")
    return labels


Cidr = Annotated[str, AfterValidator(_cidr)]
ProjectId = Annotated[
    str, _pattern(r"[a-z][a-z0-9-]{4,28}[a-z0-9]", "GCP project id", "acme-ml-dev")
]
GcpRegion = Annotated[str, AfterValidator(_gcp_region)]
"""Any GCP region: quotas and secret replicas may be wanted where this stack runs no job."""
VertexRegion = Annotated[str, AfterValidator(_vertex_region)]
"""A region where the catalog knows what Vertex AI training offers: jobs run there."""
Environment = Annotated[str, AfterValidator(_environment)]
BucketLocation = Annotated[str, AfterValidator(_bucket_location)]
Email = Annotated[str, _pattern(r"[^@\s]+@[^@\s]+\.[a-z]{2,}", "email address", "ml@acme.com")]
# Service account ids are 6-30 chars and we append "-launcher" (9), hence ≤ 21 for the prefix.
Prefix = Annotated[
    str, _pattern(r"[a-z][a-z0-9-]{1,19}[a-z0-9]", "resource name prefix", "acme-vtx-dev")
]
SecretName = Annotated[str, _pattern(r"[A-Za-z0-9_-]{1,255}", "secret id", "hf-token")]
ResourceName = Annotated[
    str, _pattern(rfc1035_pattern(PSC_CONSUMER_NAME_MAX), "resource name", "tiny-chat")
]
"""RFC 1035, short enough that the prefix and a suffix still fit Compute Engine's 63."""
ServiceAttachment = Annotated[
    str,
    _pattern(
        r"projects/[a-z0-9-]+/regions/[a-z0-9-]+/serviceAttachments/[a-z0-9-]+",
        "service attachment",
        "projects/abc123-tp/regions/europe-west4/serviceAttachments/sa-gkedpm-123",
    ),
]
Accelerator = Annotated[str, AfterValidator(_known_accelerator)]
Labels = Annotated[dict[str, str], AfterValidator(_label_map)]


class _Model(BaseModel):
    # Unknown keys are typos until proven otherwise.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


# --- the vtx:platform object -----------------------------------------------------------------


class NetworkConfig(_Model):
    """How Vertex jobs reach the project's private network."""

    mode: Literal["psc-interface", "peering"] = "psc-interface"
    """psc-interface (recommended: a network attachment) or peering (private services access)."""
    subnet_cidr: Cidr
    """The training subnet (private Google access on)."""
    psc_subnet_cidr: Cidr | None = None
    """psc-interface only: the network attachment's subnet; /28 is enough."""
    peering_cidr: Cidr | None = None
    """peering only: the range reserved for Vertex (private services access), /16 to /24."""
    flow_logs: bool = False
    """VPC flow logs on the training subnet (cost: log volume; prod wants them for audits)."""
    flow_logs_sampling: float = Field(default=0.5, gt=0, le=1)
    """Fraction of flows logged when flow_logs is on."""
    host_project: ProjectId | None = None
    """Shared VPC host project: the network is declared there and this project attached to it."""
    egress: Literal["nat", "none"] = "nat"
    """nat: Cloud NAT lets jobs reach the internet. none: no route to the internet; jobs reach
    Google APIs, Artifact Registry and Cloud Storage only, through Private Google Access."""


class StorageConfig(_Model):
    """The four buckets (data, checkpoints, staging, models)."""

    location: BucketLocation | None = None
    """Bucket location; default: the stack's gcp:region (same region as the jobs: no egress)."""
    soft_delete_days: int = 7
    """How long deleted objects stay restorable: 0 (off) or 7..90 days."""
    noncurrent_version_days: int = Field(default=7, ge=1, le=3650)
    """Checkpoints/models keep old object versions this many days, then delete them."""
    staging_ttl_days: int = Field(default=7, ge=1, le=3650)
    """Staging objects (packages, rendered specs) expire after this many days."""


class RegistryConfig(_Model):
    """The Docker repository holding the trainer image."""

    repository: Annotated[str, _pattern(RFC1035_PATTERN, "repository id", "trainer")] = "trainer"
    """Repository id (the prefix is prepended)."""
    keep_recent: int = Field(default=10, ge=1, le=1000)
    """Cleanup keeps this many most recent versions whatever their age."""
    delete_untagged_after_days: int = Field(default=7, ge=1, le=3650)
    """Cleanup deletes untagged versions older than this."""
    immutable_tags: bool = False
    """A pushed tag cannot be moved (required in prod: a job's image cannot change under it)."""
    vulnerability_scanning: bool = True
    """Scan pushed images (enables containerscanning.googleapis.com)."""


class QuotaRequest(_Model):
    """One Vertex custom-training GPU quota to request with a Cloud Quotas QuotaPreference."""

    accelerator: Accelerator
    """Vertex accelerator type, e.g. NVIDIA_L4 (see jobs/core/catalog/accelerators.yaml)."""
    count: int = Field(ge=0, le=100_000)
    """GPUs wanted in that region."""
    spot: bool = False
    """True: the preemptible metric (SPOT and FLEX_START jobs); false: on-demand."""
    region: GcpRegion | None = None
    """Region of the quota; default: the stack's gcp:region."""
    quota_id: (
        Annotated[
            str, _pattern(r"[A-Za-z0-9-]{3,128}", "quota id", "CustomModelTrainingNvidiaL4Gpus...")
        ]
        | None
    ) = None
    """Explicit Cloud Quotas id, overriding the (unconfirmed) catalog entry."""


class BudgetConfig(_Model):
    """A monthly billing budget scoped to this project, with e-mail threshold alerts."""

    billing_account: Annotated[
        str,
        _pattern(r"[0-9A-F]{6}(-[0-9A-F]{6}){2}", "billing account id", "0A1B2C-3D4E5F-6A7B8C"),
    ]
    monthly_amount: int = Field(gt=0)
    """Whole currency units per calendar month."""
    currency: Annotated[str, _pattern(r"[A-Z]{3}", "ISO 4217 currency code", "USD")] = "USD"
    """Must be the billing account's currency."""
    thresholds: list[Annotated[float, Field(gt=0, le=10)]] = Field(
        default_factory=lambda: [0.5, 0.9, 1.0], min_length=1
    )
    """Fractions of the amount that alert on current spend."""
    forecast_threshold: float | None = Field(default=1.0, gt=0, le=10)
    """Fraction of the amount that alerts on forecasted spend; null for none."""


TeamName = Annotated[
    str,
    _pattern(
        TEAM_PATTERN,
        "team name (lower case letters, digits and '-', starting with a letter, at most 30 "
        "characters: a label value that fits the team's resource names)",
        "nlp",
    ),
]


CANCEL_PERMISSIONS = (
    "aiplatform.customJobs.cancel",
    "aiplatform.customJobs.list",
    "aiplatform.hyperparameterTuningJobs.cancel",
    "aiplatform.hyperparameterTuningJobs.list",
)
"""All a team budget's cancel function may do (its custom role; a policy holds the role to it).
Studies too: a HyperparameterTuningJob starts new trials (each a CustomJob) until it reaches its
trial count, so cancelling trials alone would not stop a team's spend; cancelling the study
stops them all. Here, not with the component, so that the policy pack reads it without Pulumi."""
CANCELER_ROLE_SUFFIX = "_budget_canceler"
"""The custom role's id is ``<prefix with '_'>`` + this."""


class TeamBudget(_Model):
    """One team's monthly billing budget over the resources labelled ``vtx-team: <name>``,
    whose updates reach a function that cancels the team's jobs past ``cancel_at``."""

    name: TeamName
    """The team, as jobs name it (``team: nlp`` in a template, the ``vtx-team`` label)."""
    monthly_amount: int = Field(gt=0)
    """Whole units of ``budget.currency`` per calendar month."""
    thresholds: list[Annotated[float, Field(gt=0, le=10)]] = Field(
        default_factory=lambda: [0.5, 0.9, 1.0], min_length=1
    )
    """Fractions of the amount that e-mail the billing account's admins on current spend."""
    cancel_at: float | None = Field(default=1.0, gt=0, le=10)
    """Fraction of the amount (current spend, never a forecast) past which the team's running
    and queued jobs are cancelled; null: alerts only. One of the thresholds or above them all."""


CONTROLLER_PERMISSIONS = (
    "aiplatform.customJobs.cancel",
    "aiplatform.customJobs.create",
    "aiplatform.customJobs.get",
    "aiplatform.customJobs.list",
    "aiplatform.hyperparameterTuningJobs.cancel",
    "aiplatform.hyperparameterTuningJobs.create",
    "aiplatform.hyperparameterTuningJobs.get",
    "aiplatform.hyperparameterTuningJobs.list",
)
"""The Vertex permissions of the controller's custom role, and no others (a policy holds the role
to them): it submits a ladder's next rung (a CustomJob, or a study's), watches and cancels. Its
other rights are on resources, not the project: actAs on the trainer account, and the run
records under ``runs/`` of the checkpoints bucket. Here, not with the component, so that the
policy pack reads it without Pulumi."""
CONTROLLER_ROLE_SUFFIX = "_controller"
"""The controller's custom role id is ``<prefix with '_'>`` + this."""
CONTROLLED_PREFIX = RUNS_PREFIX
"""The objects the controller may read and write in the checkpoints bucket: the runs' folders,
where each run's record lives."""


class ControllerConfig(_Model):
    """The stack's controller: a Cloud Function (2nd gen) that makes one pass over the stack's
    live runs (ladders walked, budgets enforced), called by Cloud Scheduler on ``schedule``."""

    enabled: bool = True
    """On by default: without it a ladder's next rung and a run's budget wait for a terminal."""
    schedule: Annotated[
        str, _pattern(r"\S+( \S+){4}", "cron schedule (five fields)", "* * * * *")
    ] = "* * * * *"
    """How often a pass runs (cron, UTC). Every minute by default: a pass over no live run
    lists nothing and ends at once."""


NotificationChannelName = Annotated[
    str,
    _pattern(
        r"projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/notificationChannels/[0-9]+",
        "Cloud Monitoring notification channel name",
        "projects/acme-vtx-prod/notificationChannels/1234567890",
    ),
]


class AlertTargets(_Model):
    """Who an alert notifies: channels that exist (Slack, PagerDuty, ... made in the console or
    elsewhere), and e-mail addresses the stack makes an e-mail channel for."""

    notification_channels: list[NotificationChannelName] = Field(default_factory=list)
    emails: list[Email] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.notification_channels and not self.emails


class AlertsConfig(AlertTargets):
    """Alerts on the controller's own log lines (Cloud Monitoring): a progress guard's breach,
    and the controller no longer passing. ``notification_channels``/``emails`` hear of every
    breach and of the controller; ``teams`` adds, per team, who hears of its runs' breaches."""

    silent_minutes: int = Field(default=10, ge=2, le=1440)
    """Minutes without a pass of the controller before it alerts (it passes every minute by
    default: a few missed passes are a blip, not an outage)."""
    teams: dict[TeamName, AlertTargets] = Field(default_factory=dict)
    """Per team (a name of ``teams``): who hears of the breaches of runs labelled with it."""


class CiConfig(_Model):
    """A GitHub Actions identity (Workload Identity Federation) allowed to act as the launcher."""

    github_repository: Annotated[
        str, _pattern(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", "GitHub owner/repository", "acme/vtx")
    ]
    branch: Annotated[str, _pattern(r"[A-Za-z0-9_./-]+", "branch name", "main")] | None = None
    """When set, only workflows on this branch may impersonate the launcher."""


class PscConsumer(_Model):
    """A Private Service Connect endpoint in this VPC for one private Vertex endpoint: an
    internal address in the training subnet and a forwarding rule to the service attachment
    Vertex made for it (``vtx deploy`` prints the entry to add once the model is deployed)."""

    name: ResourceName
    """Names the address and forwarding rule (``<prefix>-<name>``) and the stack output entry."""
    service_attachment: ServiceAttachment
    """The endpoint's ``privateServiceConnectConfig.serviceAttachment``, in gcp:region."""


class ServingConfig(_Model):
    """Where deployed models are reached from (``vtx deploy``)."""

    private: bool = False
    """Private endpoints only: over the VPC peering in network mode peering (private services
    access; Cloud DNS is turned on, as Google's guide asks), over Private Service Connect in mode
    psc-interface. ``vtx deploy`` then creates private endpoints and refuses public ones."""
    psc_consumers: list[PscConsumer] = Field(default_factory=list)
    """psc-interface with private: the VPC's endpoints to the deployed models, one per Vertex
    endpoint (its service attachment exists only once a model is deployed to it)."""


class CapacityRegion(_Model):
    """A further region where a job may run (a capacity ladder's rung with ``region:``).

    The stack provisions what a job there needs that is regional: in psc-interface mode the
    attachment's subnet, the network attachment and Cloud NAT; with CMEK a key in the region.
    Everything global (service accounts, buckets, registry, secrets, a peered VPC) is shared."""

    region: VertexRegion
    """The region, one that jobs/core/catalog/regions.yaml knows (jobs there are validated)."""
    psc_subnet_cidr: Cidr | None = None
    """psc-interface only: the network attachment's subnet in that region; /28 is enough."""


Member = Annotated[
    str,
    _pattern(
        r"(user|group|serviceAccount):[^@\s]+@[^@\s]+\.[a-z]{2,}",
        "IAM member",
        "group:ml-team@acme.com",
    ),
]


class VpcScConfig(_Model):
    """A VPC Service Controls perimeter around the project's Vertex AI, Cloud Storage, Artifact
    Registry and Secret Manager (infra/README.md, "VPC Service Controls")."""

    mode: Literal["dry_run", "enforced"]
    """dry_run: violations are logged, nothing is refused; enforced: they are refused."""
    access_policy: Annotated[str, _pattern(r"[0-9]{1,20}", "access policy number", "123456789012")]
    """The organisation's Access Context Manager policy (``gcloud access-context-manager
    policies list --organization ORG``), where the perimeter is declared."""
    ingress_identities: list[Member] = Field(default_factory=list)
    """Who may call the perimeter's services from outside it besides the launcher account
    (people and groups who launch jobs, read results, push images)."""


MAX_WARM_POOL_REPLICAS = 16
"""The most VMs one pool of a persistent resource may hold, always-up or scaled out: its VMs are
billed by the hour whether a job runs or not, so a slipped digit (``replicas: 80``) costs a
day's budget by morning. The stack config refuses more and the policy
``persistent-resource-replica-ceiling`` holds resources declared outside it to the same; a
platform that means more raises it here, in review."""

PersistentResourceId = Annotated[
    str, _pattern(RFC1035_PATTERN, "persistent resource id", "warm-l4")
]


class WarmPoolConfig(_Model):
    """One pool of a persistent resource: identical VMs that stay up (docs/vertex-facts.md,
    "Persistent resources"). Spot, FLEX_START and reservations are not keys here: no Google page
    says they combine with a persistent resource (UNCONFIRMED, refused as unknown keys)."""

    id: PersistentResourceId
    machine: str
    """A machine type of jobs/core/catalog/machines.yaml."""
    accelerator: Accelerator | None = None
    accelerator_count: int | None = Field(default=None, ge=1)
    replicas: int = Field(default=1, ge=1, le=MAX_WARM_POOL_REPLICAS)
    """VMs always up (autoscaling: the minimum), billed busy or idle."""
    max_replicas: int | None = Field(default=None, ge=2, le=MAX_WARM_POOL_REPLICAS)
    """Autoscaling's ceiling; absent: no autoscaling."""
    boot_disk_type: Literal["pd-ssd", "pd-standard", "hyperdisk-balanced"] = "pd-ssd"
    boot_disk_size_gb: int = Field(default=100, ge=100, le=64000)


class PersistentResourceConfig(_Model):
    """A persistent resource jobs run on with ``persistent_resource: ID`` in their template."""

    id: PersistentResourceId
    region: VertexRegion | None = None
    """gcp:region (default) or one of capacity_regions."""
    pools: list[WarmPoolConfig] = Field(min_length=1)
    labels: Labels = Field(default_factory=dict)


class PlatformConfig(_Model):
    """The ``vtx:platform`` object. Secure defaults; prod rules in :func:`_cross_checks`."""

    environment: Environment
    """One of ENVIRONMENTS, exported as StackOutputs.environment and as a label."""
    prefix: Prefix
    """Prepended to every resource name (buckets are global: make it unique to your org)."""
    labels: Labels = Field(default_factory=dict)
    """Extra labels on every labelled resource (app/environment/managed-by are always set)."""
    network: NetworkConfig
    storage: StorageConfig = Field(default_factory=StorageConfig)
    registry: RegistryConfig = Field(default_factory=RegistryConfig)
    quotas: list[QuotaRequest] = Field(default_factory=list)
    quota_contact_email: Email | None = None
    """Who Google contacts about quota requests."""
    secrets: list[SecretName] = Field(default_factory=list)
    """Secret Manager secret ids to create (values are added out of band with gcloud)."""
    secret_locations: list[GcpRegion] = Field(default_factory=list)
    """Pin secret replicas to these regions; empty: automatic replication."""
    tensorboard: bool = True
    """Create a Vertex TensorBoard instance for the jobs' logs."""
    cmek: bool = False
    """Encrypt buckets, the registry and TensorBoard with a Cloud KMS key (required in prod)."""
    kms_rotation_days: int = Field(default=90, ge=1, le=36500)
    """Rotation period of the CMEK key."""
    budget: BudgetConfig | None = None
    teams: list[TeamBudget] = Field(default_factory=list)
    """Per-team budgets that cancel the team's jobs (needs ``budget.billing_account``)."""
    ci: CiConfig | None = None
    controller: ControllerConfig = Field(default_factory=ControllerConfig)
    alerts: AlertsConfig | None = None
    """Alerts on the controller's lines (guard breaches, the controller stopped); off when
    absent: an alert with no one to notify would only open incidents no one reads."""
    guard: Guard | None = None
    """Progress-guard defaults for every run (a template's ``guard:`` keys win); exported as
    the stack output's ``guard``, enforced by the controller."""
    capacity_regions: list[CapacityRegion] = Field(default_factory=list)
    """Further regions jobs may run in besides gcp:region (capacity ladder rungs)."""
    serving: ServingConfig = Field(default_factory=ServingConfig)
    vpc_sc: VpcScConfig | None = None
    """A VPC Service Controls perimeter around the project (and the Shared VPC host)."""
    persistent_resources: list[PersistentResourceConfig] = Field(default_factory=list)
    """Warm pools of VMs that stay up and take jobs at once (docs/vertex-facts.md)."""

    @property
    def is_prod(self) -> bool:
        return is_production(self.environment)

    def common_labels(self) -> dict[str, str]:
        """Labels on every labelled resource and in the stack output."""
        return {"app": "vtx", "environment": self.environment, "managed-by": "pulumi"} | dict(
            self.labels
        )


class StackConfig(_Model):
    """The whole stack configuration: provider settings plus ``vtx:platform``."""

    project: ProjectId
    region: VertexRegion
    platform: PlatformConfig

    @property
    def bucket_location(self) -> str:
        return (self.platform.storage.location or self.region).upper()


# --- the quota catalog ------------------------------------------------------------------------


@cache
def quota_accelerators() -> dict[str, catalog.Accelerator]:
    """Accelerators a quota can be requested for, with their metrics and quota ids.

    The facts live once, in the launcher's catalog (jobs/core/catalog/accelerators.yaml), which
    also prices jobs and tells `vtx cost` which quota a job needs."""
    return {
        name: accelerator
        for name, accelerator in catalog.load_catalog().accelerators.items()
        if accelerator.cloud_quota_id(preemptible=False) is not None
    }


# --- loading and error reporting ----------------------------------------------------------------

# Where each StackConfig field lives in Pulumi.<stack>.yaml.
_CONFIG_KEYS = {"project": "gcp:project", "region": "gcp:region", "platform": "vtx:platform"}


def load_stack_config(values: Mapping[str, Any], source: str) -> StackConfig:
    """Validate raw Pulumi config values (``gcp:project``, ``gcp:region``, ``vtx:platform``).

    ``source`` names the file in messages. Raises :class:`ConfigError` listing every problem.
    """
    raw = {field: values.get(key) for field, key in _CONFIG_KEYS.items() if key in values}
    try:
        config = StackConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError([_problem(err, source) for err in exc.errors()]) from None
    problems = [
        Problem(path, message, hint, source) for path, message, hint in _cross_checks(config)
    ]
    if problems:
        raise ConfigError(problems)
    return config


def read_stack_file(path: Path) -> dict[str, Any]:
    """The ``config:`` mapping of a ``Pulumi.<stack>.yaml`` file, secure values included as-is."""
    try:
        document = read_yaml_file(path) or {}
    except YamlInputError as exc:
        # Paths inside the file are written as the rest of this module writes them (no
        # leading `config.`): `vtx:platform.labels.team`.
        path_in_config = exc.problem.path.removeprefix("config.")
        raise ConfigError([dataclasses.replace(exc.problem, path=path_in_config)]) from None
    config = document.get("config") if isinstance(document, dict) else None
    if not isinstance(config, dict):
        raise ConfigError(
            [Problem("config", "missing", "a top-level `config:` mapping", str(path))]
        )
    return config


def _dotted(loc: tuple[int | str, ...]) -> str:
    """The key path as the stack file spells it (``vtx:platform.network.mode``)."""
    if not loc:
        return "(top)"
    head, *rest = loc
    return field_path([_CONFIG_KEYS.get(str(head), str(head)), *rest])


# The provider settings are not in the vtx:platform reference: say what to write right here.
_MISSING_HINTS = {
    ("project",): "add `gcp:project: your-project-id` under `config:`",
    ("region",): "add `gcp:region: europe-west4` (where the jobs run) under `config:`",
}


def _problem(err: Any, source: str) -> Problem:
    loc = tuple(err["loc"])
    error = (err.get("ctx") or {}).get("error")
    if isinstance(error, HintedValueError):
        return Problem(_dotted(loc), str(error), error.hint, source)
    if err["type"] == "extra_forbidden":
        known = ", ".join(_known_keys(loc[:-1]))
        return Problem(_dotted(loc), "unknown key", f"one of: {known} (see {REFERENCE})", source)
    if err["type"] == "missing":
        hint = _MISSING_HINTS.get(loc, f"see {REFERENCE}")
        return Problem(_dotted(loc), "required key is missing", hint, source)
    got = short_repr(err.get("input"))
    return Problem(_dotted(loc), f"{err['msg']} (got {got})", None, source)


def _known_keys(loc: tuple[int | str, ...]) -> list[str]:
    """Field names of the model found at ``loc`` (for 'unknown key' hints)."""
    model: Any = StackConfig
    for part in loc:
        if isinstance(part, int):
            continue
        annotation = model.model_fields[str(part)].annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        for candidate in candidates:
            inner = getattr(candidate, "__args__", (candidate,))
            found = [
                c for c in (candidate, *inner) if isinstance(c, type) and issubclass(c, BaseModel)
            ]
            if found:
                model = found[0]
                break
    return list(model.model_fields)


def _cross_checks(config: StackConfig) -> Iterator[tuple[str, str, str | None]]:
    """(key path, problem, hint) for rules that involve more than one field."""
    platform = config.platform
    yield from _network_checks(platform.network)
    yield from _capacity_region_checks(platform, config.region)
    yield from _serving_checks(platform, config.region)
    yield from _storage_checks(platform.storage)
    yield from _quota_checks(platform, config.region)
    yield from _team_checks(platform)
    yield from _alerts_checks(platform)
    yield from _persistent_resource_checks(platform, config.region)
    location = platform.storage.location
    if platform.cmek and location is not None and location.lower() != config.region:
        yield (
            "vtx:platform.storage.location",
            f"{location} differs from gcp:region {config.region}: the CMEK key lives in the "
            "region and Cloud Storage needs the key in the bucket's location",
            "remove storage.location (buckets follow gcp:region)",
        )
    if len(set(platform.secrets)) != len(platform.secrets):
        yield "vtx:platform.secrets", "lists a secret twice", "list each secret id once"
    if platform.is_prod:
        if not platform.cmek:
            yield (
                "vtx:platform.cmek",
                f"environment {platform.environment!r} must encrypt with customer-managed keys",
                "set cmek: true",
            )
        if not platform.registry.immutable_tags:
            yield (
                "vtx:platform.registry.immutable_tags",
                "prod images must be immutable: a job's image must not change under it",
                "set registry.immutable_tags: true",
            )


def _network_checks(network: NetworkConfig) -> Iterator[tuple[str, str, str | None]]:
    base = "vtx:platform.network"
    psc, peering = network.psc_subnet_cidr, network.peering_cidr
    if network.mode == "psc-interface":
        if psc is None:
            yield f"{base}.psc_subnet_cidr", "required in mode psc-interface", "e.g. 10.11.0.0/28"
        elif ipaddress.ip_network(psc).prefixlen > 28:
            yield f"{base}.psc_subnet_cidr", f"{psc} is smaller than /28", "use a /28 or larger"
        if peering is not None:
            yield f"{base}.peering_cidr", "only used in mode peering", "remove it"
    else:
        if peering is None:
            yield f"{base}.peering_cidr", "required in mode peering", "e.g. 10.20.0.0/16"
        elif not 16 <= ipaddress.ip_network(peering).prefixlen <= 24:
            yield f"{base}.peering_cidr", f"{peering} must be /16 to /24", "e.g. 10.20.0.0/16"
        if psc is not None:
            yield f"{base}.psc_subnet_cidr", "only used in mode psc-interface", "remove it"
    ranges = {"subnet_cidr": network.subnet_cidr, "psc_subnet_cidr": psc, "peering_cidr": peering}
    named = [(k, ipaddress.ip_network(v)) for k, v in ranges.items() if v is not None]
    for i, (name_a, net_a) in enumerate(named):
        for name_b, net_b in named[i + 1 :]:
            if net_a.overlaps(net_b):
                yield (
                    f"{base}.{name_b}",
                    f"{net_b} overlaps {name_a} ({net_a})",
                    "give each range its own block",
                )


def _capacity_region_checks(
    platform: PlatformConfig, region: str
) -> Iterator[tuple[str, str, str | None]]:
    """Each further region once, not the stack's own, with a PSC subnet exactly when the
    network mode needs one, outside every other range of the VPC (subnets of one VPC may not
    overlap, whatever their regions)."""
    network = platform.network
    taken = [
        (f"network.{name}", ipaddress.ip_network(cidr))
        for name, cidr in (
            ("subnet_cidr", network.subnet_cidr),
            ("psc_subnet_cidr", network.psc_subnet_cidr),
            ("peering_cidr", network.peering_cidr),
        )
        if cidr is not None
    ]
    seen: dict[str, int] = {}
    for index, entry in enumerate(platform.capacity_regions):
        base = f"vtx:platform.capacity_regions[{index}]"
        if entry.region == region:
            yield (
                f"{base}.region",
                f"{entry.region} is the stack's own region (gcp:region)",
                "remove this entry: jobs run in gcp:region without it",
            )
        elif entry.region in seen:
            yield (
                f"{base}.region",
                f"{entry.region} is listed already, at capacity_regions[{seen[entry.region]}]",
                "list each region once",
            )
        seen.setdefault(entry.region, index)
        cidr = entry.psc_subnet_cidr
        if network.mode == "peering":
            if cidr is not None:
                yield (
                    f"{base}.psc_subnet_cidr",
                    "only used in network mode psc-interface (a peered VPC and its range are "
                    "global: a job in any region reaches them)",
                    "remove it",
                )
            continue
        if cidr is None:
            yield (
                f"{base}.psc_subnet_cidr",
                "required in network mode psc-interface (the network attachment's subnet in "
                f"{entry.region})",
                "e.g. psc_subnet_cidr: 10.31.0.16/28",
            )
            continue
        net = ipaddress.ip_network(cidr)
        if net.prefixlen > 28:
            yield f"{base}.psc_subnet_cidr", f"{cidr} is smaller than /28", "use a /28 or larger"
        clash = next((name for name, other in taken if net.overlaps(other)), None)
        if clash is not None:
            yield (
                f"{base}.psc_subnet_cidr",
                f"{cidr} overlaps {clash} ({dict(taken)[clash]})",
                "give each range its own block",
            )
        taken.append((f"capacity_regions[{index}].psc_subnet_cidr", net))


def _serving_checks(platform: PlatformConfig, region: str) -> Iterator[tuple[str, str, str | None]]:
    """PSC consumers only where Vertex makes service attachments (private endpoints of a
    psc-interface stack), in the stack's region (a forwarding rule reaches an attachment of its
    own region), each name and attachment once."""
    serving, base = platform.serving, "vtx:platform.serving"
    if serving.psc_consumers and not serving.private:
        yield f"{base}.psc_consumers", "only used with private: true", "set serving.private: true"
    elif serving.psc_consumers and platform.network.mode != "psc-interface":
        yield (
            f"{base}.psc_consumers",
            "only used in network mode psc-interface: a peering stack reaches its private "
            "endpoints over the peering",
            "remove it",
        )
    names: dict[str, int] = {}
    attachments: dict[str, int] = {}
    for index, consumer in enumerate(serving.psc_consumers):
        at = f"{base}.psc_consumers[{index}]"
        attachment_region = consumer.service_attachment.split("/")[3]
        if attachment_region != region:
            yield (
                f"{at}.service_attachment",
                f"in {attachment_region}, not gcp:region {region}: a forwarding rule reaches "
                "service attachments of its own region only",
                f"deploy the model to an endpoint in {region}",
            )
        for key, seen, value in (
            ("name", names, consumer.name),
            ("service_attachment", attachments, consumer.service_attachment),
        ):
            if value in seen:
                yield f"{at}.{key}", f"listed already, at psc_consumers[{seen[value]}]", None
            seen.setdefault(value, index)


def _storage_checks(storage: StorageConfig) -> Iterator[tuple[str, str, str | None]]:
    days = storage.soft_delete_days
    if days != 0 and not 7 <= days <= 90:
        yield (
            "vtx:platform.storage.soft_delete_days",
            f"{days} is outside what Cloud Storage accepts",
            "0 (off) or 7..90",
        )


def _quota_checks(platform: PlatformConfig, region: str) -> Iterator[tuple[str, str, str | None]]:
    seen: dict[tuple[str, bool, str], int] = {}
    for index, request in enumerate(platform.quotas):
        key = (request.accelerator, request.spot, request.region or region)
        if key in seen:
            yield (
                f"vtx:platform.quotas[{index}]",
                f"same accelerator, spot and region as quotas[{seen[key]}]",
                "merge the two requests into one count",
            )
        seen.setdefault(key, index)
    if platform.quotas and platform.quota_contact_email is None:
        yield (
            "vtx:platform.quota_contact_email",
            "required when quotas are requested (Google contacts this address about them)",
            "e.g. ml-platform@acme.com",
        )


def _team_checks(platform: PlatformConfig) -> Iterator[tuple[str, str, str | None]]:
    """Team budgets are budgets of the stack's billing account, one per team name, cancelling at
    a fraction the e-mail alerts warn of first (one of the thresholds, or past them all)."""
    if platform.teams and platform.budget is None:
        yield (
            "vtx:platform.teams",
            "team budgets are billing budgets: they need the billing account that "
            "budget.billing_account names",
            "add budget: {billing_account: 0A1B2C-3D4E5F-6A7B8C, monthly_amount: 20000}",
        )
    seen: dict[str, int] = {}
    for index, team in enumerate(platform.teams):
        base = f"vtx:platform.teams[{index}]"
        if team.name in seen:
            yield f"{base}.name", f"listed already, at teams[{seen[team.name]}]", None
        seen.setdefault(team.name, index)
        cancel_at, highest = team.cancel_at, max(team.thresholds)
        if cancel_at is not None and cancel_at not in team.thresholds and cancel_at < highest:
            yield (
                f"{base}.cancel_at",
                f"{cancel_at:g} is below threshold {highest:g} and not one of the thresholds: "
                "the team's jobs would be cancelled before an alert said so",
                f"add {cancel_at:g} to thresholds, or cancel_at: {highest:g}",
            )
    if LABEL_TEAM in platform.labels:
        yield (
            f"vtx:platform.labels.{LABEL_TEAM}",
            "is the label each job's team is written in: a stack-wide value would bill every "
            "resource to one team",
            "remove it; a job names its team with `team:` in its template",
        )


def schedule_minutes(schedule: str) -> int | None:
    """Minutes between two passes of a cron schedule that is every N minutes (``* * * * *``,
    ``*/5 * * * *``); None for any other shape, which the checks then leave alone."""
    minute, *rest = schedule.split()
    if any(field != "*" for field in rest):
        return None
    if minute == "*":
        return 1
    step = re.fullmatch(r"\*/([0-9]+)", minute)
    return int(step.group(1)) if step and int(step.group(1)) > 0 else None


def _alerts_checks(platform: PlatformConfig) -> Iterator[tuple[str, str, str | None]]:
    """Alerts key on the controller's lines, notify someone, and name teams the stack has."""
    alerts = platform.alerts
    if alerts is None:
        return
    if not platform.controller.enabled:
        yield (
            "vtx:platform.alerts",
            "the alerts count the controller's log lines, and controller.enabled is false: "
            "they would never fire",
            "remove alerts, or controller: {enabled: true}",
        )
    if alerts.empty:
        yield (
            "vtx:platform.alerts",
            "names no one to notify of every run's breaches and of the controller stopping "
            "(teams hear of their own runs only)",
            "emails: [ml-oncall@acme.com] or notification_channels: "
            "[projects/<project>/notificationChannels/<id>]",
        )
    gap = schedule_minutes(platform.controller.schedule)
    if gap is not None and alerts.silent_minutes <= gap:
        yield (
            "vtx:platform.alerts.silent_minutes",
            f"{alerts.silent_minutes} is not above the controller's schedule (a pass every "
            f"{gap} minutes): it would alert between two passes",
            f"silent_minutes: {max(2 * gap, 2)} or more",
        )
    names = [team.name for team in platform.teams]
    for name, team in alerts.teams.items():
        where = f"vtx:platform.alerts.teams.{name}"
        if name not in names:
            known = f"one of {', '.join(names)}" if names else "a team listed under teams"
            yield where, "is not a team of this stack (vtx:platform.teams)", known
        if team.empty:
            yield where, "names no one to notify", "emails: [nlp-oncall@acme.com]"


def _warm_pool_team(
    base: str, resource: PersistentResourceConfig, teams: list[str]
) -> Iterator[tuple[str, str, str | None]]:
    """On a stack with team budgets, a persistent resource is billed to one of the teams, as
    every job is: its ``vtx-team`` label puts its hours, billed busy or idle, in that team's
    budget (which filters on the label), and none may fall outside every budget."""
    if not teams:
        return
    team = resource.labels.get(LABEL_TEAM)
    if team in teams:
        return
    said = f"names team {team!r}, which has no budget" if team else "names no team"
    yield (
        f"{base}.labels.{LABEL_TEAM}",
        f"{said}: its hours, billed busy or idle, would count in no team's budget",
        f"labels: {{{LABEL_TEAM}: {teams[0]}}} (one of {', '.join(teams)})",
    )


def _persistent_resource_checks(
    platform: PlatformConfig, region: str
) -> Iterator[tuple[str, str, str | None]]:
    """Each resource's id once, its region one the stack serves, each pool's machine known to
    the catalog with the accelerator it takes, and autoscaling above its minimum."""
    cat = catalog.load_catalog()
    regions = [region, *(r.region for r in platform.capacity_regions)]
    seen: set[str] = set()
    for i, resource in enumerate(platform.persistent_resources):
        base = f"vtx:platform.persistent_resources[{i}]"
        if resource.id in seen:
            yield (
                f"{base}.id",
                f"{resource.id!r} is declared twice",
                "give each resource its own id",
            )
        seen.add(resource.id)
        if resource.region is not None and resource.region not in regions:
            yield (
                f"{base}.region",
                f"{resource.region} is not a region of this stack ({', '.join(regions)})",
                f"add it to capacity_regions, or region: {region}",
            )
        yield from _warm_pool_team(base, resource, [t.name for t in platform.teams])
        pool_ids = [p.id for p in resource.pools]
        for j, pool in enumerate(resource.pools):
            where = f"{base}.pools[{j}]"
            if pool_ids.count(pool.id) > 1:
                yield f"{where}.id", f"{pool.id!r} is used twice", "give each pool its own id"
            if pool.machine not in cat.machines:
                yield (
                    f"{where}.machine",
                    f"{pool.machine!r} is not a training machine of the catalog",
                    f"{_closest(pool.machine, cat.machines)}a machine of machines.yaml",
                )
            if pool.max_replicas is not None and pool.max_replicas <= pool.replicas:
                yield (
                    f"{where}.max_replicas",
                    f"{pool.max_replicas} is not above replicas {pool.replicas}",
                    f"max_replicas: {pool.replicas + 1} or more, or leave it out",
                )
