"""StackOutputs: the contract between infra/ (which exports it) and jobs/ (which reads it).

The infra program exports one stack output named ``platform``; everything the launcher needs to
render and submit a CustomJob against that stack is in it. This module is pure pydantic (no
pulumi import) so that the CLI stays fast and the contract can be tested on both sides.

Sources (the CLI's ``--stack``/``--stack-file`` pick one, see `vtx.options`):
- ``load_stack_file``: an exported JSON document (``pulumi stack output platform --json``);
- ``load_pulumi_stack``: ``pulumi stack output platform --json --stack NAME`` when the Pulumi CLI
  exists;
- the embedded local platform (``vtx local up``) writes its own (`jobs.local.platform.state`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jobs.core.guard import Guard
from jobs.core.problems import field_path
from jobs.core.user_io import UserFileError, read_user_file

PROD_ENVIRONMENTS = frozenset({"prod", "production"})
"""Environment names that get production treatment everywhere: the stack's prod-only policy
rules and CMEK defaults, and no interactive shells (web access) on its jobs."""


def is_production(environment: str | None) -> bool:
    """The one test for "is this production?"; never compare an environment with a literal.

    Case and surrounding blanks do not matter: a stack named ``Prod`` (stack names may be mixed
    case, and the policy pack falls back to the stack name) is production too."""
    return environment is not None and environment.strip().lower() in PROD_ENVIRONMENTS


RUNS_PREFIX = "runs/"
"""Where every run keeps its outputs and its record, in the checkpoints bucket: here, since the
stack's controller is granted that prefix alone (infra) and jobs write under it."""
LABEL_TEAM = "vtx-team"
"""The team a job is billed to, a label on each of its jobs (the compiler writes a template's
``team:``). A stack with team budgets filters each budget on it and its cancel function lists
a team's jobs by it. Defined here, with the stack contract, because infra/ reads it too and
may import nothing else of jobs/ (pyproject's import contracts)."""
TEAM_PATTERN = r"^[a-z](?:[a-z0-9-]{0,28}[a-z0-9])?$"
"""A team name: a label value that also fits the names of the stack's per-team resources
(``<prefix>-budget-<team>``: Cloud Functions names take no '_'), at most 30 characters."""

MAX_STACK_FILE_BYTES = 1 << 20


class StackError(Exception):
    """A stack's outputs could not be found or do not match the contract."""


class Buckets(BaseModel):
    """Bucket names (not URIs) created by the stack."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    data: str
    checkpoints: str
    staging: str
    models: str


class RegionOutputs(BaseModel):
    """What a job needs in one of the stack's further regions (``capacity_regions`` in the stack
    config: where a capacity ladder's rungs may run). Only the regional parts differ: the
    project, service accounts, buckets, registry, secrets and a peering network are the same
    for every region (a VPC and its peering range are global; buckets and images are read
    across regions)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    network_attachment: str | None = None
    """psc-interface stacks: the attachment in this region (an attachment serves its region)."""
    kms_key: str | None = None
    """CMEK stacks: a key in this region (Vertex takes a key in the resource's region only)."""
    tensorboard: str | None = None
    """A TensorBoard instance in this region, if the stack made one (instances are regional)."""


PSC_CONSUMER_NAME_MAX = 52
"""The most characters of a PSC consumer's name (``serving.psc_consumers[].name``, RFC 1035):
infra prefixes it with the stack's prefix and a dash, and Compute Engine's names stop at 63."""


class PrivateServing(BaseModel):
    """A stack whose deployed models are reached from its VPC only (``serving.private`` in the
    stack config). ``vtx deploy`` creates its endpoints accordingly."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    kind: Literal["peering", "psc"]
    """peering: endpoints on the peered VPC (``Endpoint.network``); psc: Private Service Connect
    endpoints (``Endpoint.privateServiceConnectConfig``)."""
    network: str | None = None
    """peering: ``projects/NUMBER/global/networks/NAME``, as Vertex wants it."""
    project_allowlist: list[str] = Field(default_factory=list)
    """psc: the projects whose forwarding rules may reach the endpoints."""
    psc_consumers: dict[str, str] = Field(default_factory=dict)
    """psc: the VPC's PSC endpoints made so far, name -> internal IP address."""


class WarmPool(BaseModel):
    """One resource pool of a persistent resource: identical VMs that stay up between jobs
    (``ResourcePool`` in the v1 protos). A job's worker pool runs on it when its machine,
    accelerator and boot disk type are the pool's and its replicas fit (docs/vertex-facts.md,
    "Persistent resources")."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    id: str
    machine_type: str
    accelerator_type: str | None = None
    accelerator_count: int = 0
    boot_disk_type: str = "pd-ssd"
    boot_disk_size_gb: int = 100
    replica_count: int = Field(ge=1)
    """VMs always provisioned (autoscaling: its minimum), billed busy or idle."""
    max_replica_count: int | None = None
    """Autoscaling's ceiling; None: no autoscaling, the pool has ``replica_count`` VMs."""

    @property
    def replicas_max(self) -> int:
        """The most replicas a job may ask of this pool."""
        return self.max_replica_count or self.replica_count

    @property
    def summary(self) -> str:
        """The pool in one phrase, as every message and table shows it: ``g2-standard-8, 1 x
        NVIDIA_L4, pd-ssd, 1 replica (autoscaling to 3)``."""
        accelerator = (
            f", {self.accelerator_count} x {self.accelerator_type}" if self.accelerator_type else ""
        )
        scaling = f" (autoscaling to {self.max_replica_count})" if self.max_replica_count else ""
        plural = "s" if self.replica_count != 1 else ""
        replicas = f"{self.replica_count} replica{plural}"
        return f"{self.machine_type}{accelerator}, {self.boot_disk_type}, {replicas}{scaling}"


class PersistentResourceOutputs(BaseModel):
    """A persistent resource the stack provisions (``persistent_resources`` in the stack
    config): jobs that name it (``persistent_resource:`` in a template) run on its pools."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    name: str
    """``projects/NUMBER/locations/REGION/persistentResources/ID``."""
    region: str
    pools: list[WarmPool]
    labels: dict[str, str] = Field(default_factory=dict)


class StackOutputs(BaseModel):
    """What a provisioned stack offers to jobs. Field names are the exported JSON keys."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    project: str
    project_number: str
    region: str
    environment: str
    trainer_service_account: str
    launcher_service_account: str
    serving_service_account: str | None = None
    """The account deployed models run as (reads the models bucket, writes logs)."""
    buckets: Buckets
    artifact_registry: str = Field(
        description="Docker repository host path, e.g. europe-west4-docker.pkg.dev/PROJECT/REPO"
    )
    network_attachment: str | None = None
    network: str | None = None
    reserved_ip_ranges: list[str] = Field(default_factory=list)
    tensorboard: str | None = None
    secrets: dict[str, str] = Field(default_factory=dict)
    kms_key: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    regions: dict[str, RegionOutputs] = Field(default_factory=dict)
    """Further regions jobs may run in (capacity ladder rungs), not ``region`` itself."""
    private_serving: PrivateServing | None = None
    """Set when deployed models must be private; None: public endpoints."""
    teams: list[str] = Field(default_factory=list)
    """The teams with a budget (``teams`` in the stack config); when not empty every job must
    name one of them (``team:``), so that its cost counts toward that team's budget."""
    egress: Literal["nat", "none"] = "nat"
    """none: jobs have no route to the internet (``network.egress: none``); only Google APIs
    and the registries, through Private Google Access."""
    python_index: str | None = None
    """egress none: the stack's PyPI remote repository as pip's index URL
    (``https://REGION-python.pkg.dev/PROJECT/REPO/simple/``)."""
    docker_mirror: str | None = None
    """egress none: a virtual Docker repository, the stack's images then Docker Hub's."""
    persistent_resources: dict[str, PersistentResourceOutputs] = Field(default_factory=dict)
    """Persistent resources by id (their warm pools), in the stack's regions."""
    controller: bool = False
    """A controller walks this stack's capacity ladders and enforces its runs' and studies'
    budgets (`jobs.control`): `vtx launch` writes the run's record and returns. False: the CLI
    walks a ladder and holds a budget only while it follows the run."""
    guard: Guard | None = None
    """The platform's progress-guard defaults (``vtx:platform.guard``): every run's ``guard:``
    is merged over them key by key (`jobs.core.guard.resolve_guard`). Absent: no defaults."""
    # Set only by the local platform; None means Google's public endpoints.
    vertex_endpoint: str | None = None
    gcs_endpoint: str | None = None
    local_token: str | None = Field(default=None, repr=False, exclude=True)
    """The local platform's token for its vtx-only endpoints; never exported."""

    @property
    def is_local(self) -> bool:
        return self.vertex_endpoint is not None

    @property
    def job_regions(self) -> list[str]:
        """Every region a job of this stack may run in, its own first."""
        return [self.region, *(r for r in self.regions if r != self.region)]

    def in_region(self, region: str) -> StackOutputs:
        """This stack as a job in ``region`` sees it: the region's own attachment, key and
        TensorBoard. KeyError for a region the stack was not given."""
        if region == self.region:
            return self
        regional = self.regions[region]
        return self.model_copy(
            update={
                "region": region,
                "network_attachment": regional.network_attachment,
                "kms_key": regional.kms_key,
                "tensorboard": regional.tensorboard,
                "regions": {},
            }
        )


def parse_stack_outputs(data: object, source: str) -> StackOutputs:
    """Validate a decoded ``platform`` output, naming the source in any error."""
    try:
        return StackOutputs.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{field_path(e['loc'])}: {e['msg']}" for e in exc.errors())
        raise StackError(f"{source} is not a vtx stack output: {problems}") from exc


def load_stack_file(path: Path) -> StackOutputs:
    try:
        raw = read_user_file(path, MAX_STACK_FILE_BYTES, too_big="a stack output is a few KiB")
    except UserFileError as exc:  # missing, a directory, a FIFO or device, too big
        raise StackError(f"stack file {exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise StackError(f"stack file {path} is not JSON: {exc}") from exc
    except UnicodeDecodeError as exc:  # binary data
        raise StackError(f"cannot read stack file {path}: {exc}") from exc
    except (RecursionError, ValueError) as exc:  # nesting past the parser, 5,000-digit numbers
        raise StackError(f"stack file {path} is not a stack output: {str(exc)[:200]}") from exc
    # Accept both the bare output and `pulumi stack output --json` of all outputs.
    if isinstance(data, dict) and "platform" in data and "project" not in data:
        data = data["platform"]
    return parse_stack_outputs(data, str(path))


def load_pulumi_stack(stack: str) -> StackOutputs:
    pulumi = shutil.which("pulumi")
    if pulumi is None:
        raise StackError(
            f"cannot read stack {stack!r}: the Pulumi CLI is not installed. Export the outputs "
            f"where it is (`pulumi stack output platform --json --stack {stack} > {stack}.json`) "
            f"and pass --stack-file {stack}.json, or use --stack local."
        )
    proc = subprocess.run(
        [pulumi, "stack", "output", "platform", "--json", "--stack", stack],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise StackError(f"`pulumi stack output platform --stack {stack}` failed: {proc.stderr}")
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise StackError(
            f"`pulumi stack output platform --stack {stack}` did not print JSON: {exc}"
        ) from exc
    return parse_stack_outputs(data, f"pulumi stack {stack!r}")
