"""The stack's controller: what vtx promises over time (a capacity ladder's next rung, a run's
budget, a study's budget) done in the project, with no terminal open.

The chain: ``cloudscheduler.Job`` ``<prefix>-controller`` (``controller.schedule``, every minute by
default) -> an HTTP call with an OIDC token of ``<prefix>-ctlsched``, which may invoke this one
function and nothing else -> ``cloudfunctionsv2.Function`` ``<prefix>-controller`` running
``jobs.control.cloud_function.controller_pass`` as ``<prefix>-ctl``: one pass over the stack's
live runs (``jobs.control.driver``), the same code the local platform's controller runs.

``<prefix>-ctl`` holds exactly what a pass uses: a custom role with CustomJob and study create,
get, list and cancel (``CONTROLLER_PERMISSIONS``), actAs on the trainer account alone (a rung is
submitted to run as the trainer), and the objects under ``runs/`` of the checkpoints bucket,
where each run's record lives, by an IAM condition (listing included, through the list prefix).

The function's source is built here from the repository: ``jobs/`` (without the local platform
and the templates), a two-line ``main.py`` naming the entry point, and ``requirements.txt``;
zipped by content hash into the staging bucket, so a change of the code rebuilds it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
import pulumi_gcp as gcp

from infra.components.access.identity import (
    function_account,
    function_builder_grants,
    project_role,
    sa_member,
)
from infra.config import (
    CONTROLLED_PREFIX,
    CONTROLLER_PERMISSIONS,
    CONTROLLER_ROLE_SUFFIX,
    ControllerConfig,
)

REPOSITORY = Path(__file__).resolve().parents[2]
ENTRY_POINT = "controller_pass"
MAIN = f"from jobs.control.cloud_function import {ENTRY_POINT}  # noqa: F401\n"
"""The function's main.py: Cloud Functions looks for the entry point there."""
REQUIREMENTS = (
    "google-cloud-aiplatform>=1.100,<3\n"
    "google-cloud-storage>=2.18,<4\n"
    "pydantic>=2.14,<3\n"
    "pyyaml>=6,<7\n"
    "requests>=2.31,<3\n"
)
"""What ``jobs`` imports on the controller's path (the repository's pins, pyproject.toml)."""
LEFT_OUT = ("jobs/local/", "jobs/templates/")
"""The local platform and the example templates: no pass imports or reads them."""
RUNTIME = "python312"
STACK_ENV = "VTX_STACK"
"""The stack's outputs as JSON, for the function (``jobs.control.cloud_function.STACK_ENV``)."""


def repository_files() -> dict[str, Path]:
    """The repository's files the function needs, by path in the archive: ``jobs/`` but what
    no pass reads (LEFT_OUT)."""
    files = {}
    for path in sorted((REPOSITORY / "jobs").rglob("*")):
        name = path.relative_to(REPOSITORY).as_posix()
        if path.is_file() and "__pycache__" not in name and not name.startswith(LEFT_OUT):
            files[name] = path
    return files


def source_files() -> dict[str, bytes]:
    """The function's whole source, by path in the archive."""
    generated = {"main.py": MAIN.encode(), "requirements.txt": REQUIREMENTS.encode()}
    return generated | {name: path.read_bytes() for name, path in repository_files().items()}


def source_digest(files: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name, data in sorted(files.items()):
        digest.update(name.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class ControllerArgs:
    project: str
    region: str
    prefix: str
    labels: dict[str, str]
    config: ControllerConfig
    stack_json: pulumi.Input[str]
    """The stack's outputs (StackOutputs) as JSON, with ``controller`` true."""
    trainer_account: pulumi.Input[str]
    """The trainer account's resource name: the only one the controller may act as."""
    checkpoints_bucket: pulumi.Input[str]
    source_bucket: pulumi.Input[str]
    apis: list[pulumi.Resource] = field(default_factory=list)


class Controller(pulumi.ComponentResource):
    function: gcp.cloudfunctionsv2.Function
    scheduler: gcp.cloudscheduler.Job

    def __init__(self, name: str, args: ControllerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("vtx:platform:Controller", name, None, opts)
        self._name, self._args = name, args
        self._own = pulumi.ResourceOptions(parent=self, depends_on=args.apis)
        self._identities()
        self.function = self._function(self._upload_source())
        self.scheduler = self._scheduler()
        self.register_outputs({"function": self.function.name, "schedule": args.config.schedule})

    def _account(self, suffix: str, what: str) -> gcp.serviceaccount.Account:
        args = self._args
        return function_account(
            f"{self._name}-{suffix}",
            args.project,
            f"{args.prefix}-{suffix}",
            f"vtx controller: {what}",
            self._own,
        )

    def _identities(self) -> None:
        args, own = self._args, self._own
        self.runtime = self._account("ctl", "the controller runs as it")
        self.invoker = self._account("ctlsched", "Cloud Scheduler calls the controller as it")
        self.builder = self._account("ctlbuild", "Cloud Build builds the controller as it")
        self.role = project_role(
            f"{self._name}-role",
            args.project,
            f"{args.prefix.replace('-', '_')}{CONTROLLER_ROLE_SUFFIX}",
            "vtx controller",
            "Create, watch and cancel Vertex CustomJobs and HyperparameterTuningJobs",
            CONTROLLER_PERMISSIONS,
            own,
        )
        runtime = sa_member(self.runtime.email)
        runs = f"projects/_/buckets/{{bucket}}/objects/{CONTROLLED_PREFIX}"
        self.grants = [
            gcp.projects.IAMMember(
                f"{self._name}-jobs",
                project=args.project,
                role=self.role.name,
                member=runtime,
                opts=own,
            ),
            # A rung runs as the trainer: submitting it needs actAs on that account, no other.
            gcp.serviceaccount.IAMMember(
                f"{self._name}-acts-as-trainer",
                service_account_id=args.trainer_account,
                role="roles/iam.serviceAccountUser",
                member=runtime,
                opts=own,
            ),
            # The run records: objects under runs/ only; a list is held to that prefix by the
            # list request's prefix attribute.
            gcp.storage.BucketIAMMember(
                f"{self._name}-run-records",
                bucket=args.checkpoints_bucket,
                role="roles/storage.objectUser",
                member=runtime,
                condition=gcp.storage.BucketIAMMemberConditionArgs(
                    title="run-records-only",
                    expression=pulumi.Output.from_input(args.checkpoints_bucket).apply(
                        lambda bucket: (
                            f'resource.name.startsWith("{runs.format(bucket=bucket)}") || '
                            "api.getAttribute('storage.googleapis.com/objectListPrefix', '')"
                            f'.startsWith("{CONTROLLED_PREFIX}")'
                        )
                    ),
                ),
                opts=own,
            ),
            *function_builder_grants(
                f"{self._name}-ctlbuild",
                args.project,
                args.region,
                self.builder.email,
                args.source_bucket,
                own,
            ),
        ]

    def _upload_source(self) -> gcp.storage.BucketObject:
        files = source_files()
        archive = pulumi.AssetArchive(
            {
                "main.py": pulumi.StringAsset(MAIN),
                "requirements.txt": pulumi.StringAsset(REQUIREMENTS),
                **{
                    name: pulumi.FileAsset(str(path.relative_to(REPOSITORY)))
                    for name, path in repository_files().items()
                },
            }
        )
        return gcp.storage.BucketObject(
            f"{self._name}-source",
            bucket=self._args.source_bucket,
            name=f"functions/controller-{source_digest(files)}.zip",
            source=archive,
            opts=self._own,
        )

    def _function(self, source: gcp.storage.BucketObject) -> gcp.cloudfunctionsv2.Function:
        args = self._args
        storage_source = gcp.cloudfunctionsv2.FunctionBuildConfigSourceStorageSourceArgs(
            bucket=source.bucket, object=source.name
        )
        return gcp.cloudfunctionsv2.Function(
            f"{self._name}-function",
            project=args.project,
            location=args.region,
            name=f"{args.prefix}-controller",
            description="vtx controller: one pass over the stack's live runs per call",
            labels=args.labels,
            build_config=gcp.cloudfunctionsv2.FunctionBuildConfigArgs(
                runtime=RUNTIME,
                entry_point=ENTRY_POINT,
                service_account=self.builder.name,
                source=gcp.cloudfunctionsv2.FunctionBuildConfigSourceArgs(
                    storage_source=storage_source
                ),
            ),
            service_config=gcp.cloudfunctionsv2.FunctionServiceConfigArgs(
                service_account_email=self.runtime.email,
                # One pass at a time is enough; two would still be safe (conditional writes).
                max_instance_count=1,
                available_memory="512M",
                timeout_seconds=300,
                ingress_settings="ALLOW_INTERNAL_ONLY",
                all_traffic_on_latest_revision=True,
                environment_variables={STACK_ENV: args.stack_json},
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.apis, *self.grants, source]),
        )

    def _scheduler(self) -> gcp.cloudscheduler.Job:
        args = self._args
        gcp.cloudrunv2.ServiceIamMember(
            f"{self._name}-invoker",
            project=args.project,
            location=args.region,
            name=self.function.name,
            role="roles/run.invoker",
            member=sa_member(self.invoker.email),
            opts=self._own,
        )
        return gcp.cloudscheduler.Job(
            f"{self._name}-schedule",
            project=args.project,
            region=args.region,
            name=f"{args.prefix}-controller",
            description="A pass of the vtx controller over the stack's live runs",
            schedule=args.config.schedule,
            time_zone="Etc/UTC",
            # A pass that outlives the next call is not retried: the next minute's pass is.
            attempt_deadline="300s",
            retry_config=gcp.cloudscheduler.JobRetryConfigArgs(retry_count=0),
            http_target=gcp.cloudscheduler.JobHttpTargetArgs(
                uri=self.function.url,
                http_method="POST",
                oidc_token=gcp.cloudscheduler.JobHttpTargetOidcTokenArgs(
                    service_account_email=self.invoker.email,
                    audience=self.function.url,
                ),
            ),
            opts=self._own,
        )
