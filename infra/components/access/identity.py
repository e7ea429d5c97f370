"""Identities: the service agents Vertex acts as, and our three service accounts.

Least privilege, exactly:
- ``trainer`` (the jobs' runtime account): ``roles/logging.logWriter`` on the project, and, when
  TensorBoard is on, a custom role holding only TensorBoard read/write permissions. Its bucket and
  secret roles are granted on each bucket and secret by those components, never project-wide.
- ``launcher`` (who submits jobs): ``roles/aiplatform.user`` on the project and
  ``roles/iam.serviceAccountUser`` on the trainer account only (so it can run jobs as the trainer
  and as nothing else), and on the serving account only (so ``vtx deploy`` can deploy models that
  run as it).
- ``serving`` (the runtime account of deployed models): ``roles/logging.logWriter`` on the
  project and ``roles/storage.objectViewer`` on the models bucket only (``AIP_STORAGE_URI`` is a
  copy of a model's artifacts that the container reads). No metric writer: Vertex records an
  endpoint's metrics itself, and the serving entry point (``trainer/serve.py``) writes none.
- No keys: CI reaches the launcher through Workload Identity Federation (``ci.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

# TensorBoard instances have no resource-level IAM in the provider, and the predefined role that
# can write to them (aiplatform.user) can also create jobs. So: a custom role with only this.
# Each permission is the one Google's "Vertex AI IAM permissions" table gives for a
# TensorboardService method the uploader calls (docs/vertex-facts.md, "TensorBoard uploader").
TENSORBOARD_WRITER_PERMISSIONS = (
    "aiplatform.tensorboards.get",
    "aiplatform.tensorboardExperiments.create",
    "aiplatform.tensorboardExperiments.get",
    "aiplatform.tensorboardExperiments.list",
    "aiplatform.tensorboardExperiments.update",
    "aiplatform.tensorboardExperiments.write",
    # BatchCreateTensorboardRuns: how the uploader makes a run per log subdirectory.
    "aiplatform.tensorboardRuns.batchCreate",
    "aiplatform.tensorboardRuns.create",
    "aiplatform.tensorboardRuns.get",
    "aiplatform.tensorboardRuns.list",
    "aiplatform.tensorboardRuns.update",
    "aiplatform.tensorboardRuns.write",
    # BatchCreateTensorboardTimeSeries: the uploader's first write of a run's tags.
    "aiplatform.tensorboardTimeSeries.batchCreate",
    "aiplatform.tensorboardTimeSeries.create",
    "aiplatform.tensorboardTimeSeries.get",
    "aiplatform.tensorboardTimeSeries.list",
    "aiplatform.tensorboardTimeSeries.update",
    "aiplatform.tensorboardTimeSeries.batchRead",
)


def sa_member(email: pulumi.Input[str]) -> pulumi.Output[str]:
    return pulumi.Output.concat("serviceAccount:", email)


def function_account(
    name: str, project: str, account_id: str, display_name: str, opts: pulumi.ResourceOptions
) -> gcp.serviceaccount.Account:
    """One of a deployed function's own accounts (its runtime, its caller, its builder), named
    ``name`` in the stack. Service account ids are at most 30 characters."""
    return gcp.serviceaccount.Account(
        name, project=project, account_id=account_id, display_name=display_name, opts=opts
    )


def project_role(
    name: str,
    project: str,
    role_id: str,
    title: str,
    description: str,
    permissions: tuple[str, ...],
    opts: pulumi.ResourceOptions,
) -> gcp.projects.IAMCustomRole:
    """A custom role holding exactly ``permissions``, for a function's runtime account."""
    return gcp.projects.IAMCustomRole(
        name,
        project=project,
        role_id=role_id,
        title=title,
        description=description,
        permissions=list(permissions),
        opts=opts,
    )


FUNCTION_IMAGES = "gcf-artifacts"
"""Cloud Functions (2nd gen) pushes its images to this repository of the function's region."""


def function_builder_grants(
    name: str,
    project: str,
    region: str,
    builder_email: pulumi.Input[str],
    source_bucket: pulumi.Input[str],
    opts: pulumi.ResourceOptions,
) -> list[pulumi.Resource]:
    """What Cloud Build needs to build a 2nd-gen function as ``builder`` (not the Compute
    Engine default account, which is Editor on new projects): its own logs, the image in Cloud
    Functions' repository, and the zipped source. Resources are named ``<name>-logs``,
    ``<name>-images`` and ``<name>-source``."""
    builder = sa_member(builder_email)
    return [
        # The build's own logs; Cloud Build writes them at the project.
        gcp.projects.IAMMember(
            f"{name}-logs",
            project=project,
            role="roles/logging.logWriter",
            member=builder,
            opts=opts,
        ),
        # The image goes to Cloud Functions' own repository, which Google creates on the first
        # build: a project grant, held to that one repository by a condition.
        gcp.projects.IAMMember(
            f"{name}-images",
            project=project,
            role="roles/artifactregistry.writer",
            member=builder,
            condition=gcp.projects.IAMMemberConditionArgs(
                title="cloud-functions-images-only",
                expression=(
                    'resource.name.startsWith("projects/'
                    f'{project}/locations/{region}/repositories/{FUNCTION_IMAGES}")'
                ),
            ),
            opts=opts,
        ),
        gcp.storage.BucketIAMMember(
            f"{name}-source",
            bucket=source_bucket,
            role="roles/storage.objectViewer",
            member=builder,
            opts=opts,
        ),
    ]


@dataclass(frozen=True)
class ServiceAgentsArgs:
    project: str
    project_number: pulumi.Input[str]
    aiplatform_api: list[pulumi.Resource]
    """Enablement of aiplatform.googleapis.com: the agents exist only once it is on."""
    artifactregistry_api: list[pulumi.Resource] | None = None
    """Set (CMEK only) to also resolve the Artifact Registry and Cloud Storage agents."""
    pubsub_api: list[pulumi.Resource] | None = None
    """Set (CMEK with team budgets' topics) to also resolve Pub/Sub's agent."""


class ServiceAgents(pulumi.ComponentResource):
    """Vertex's two service agents, as IAM members.

    ``projects.ServiceIdentity`` creates (or returns) the primary AI Platform agent. The custom
    code agent (-cc), which runs the job containers when no service account is given, is not
    returned by that API: its address is built from the project number (docs/vertex-facts.md,
    "Networks and service agents").
    """

    aiplatform: pulumi.Output[str]
    custom_code: pulumi.Output[str]
    artifactregistry: pulumi.Output[str] | None = None
    storage: pulumi.Output[str] | None = None
    pubsub: pulumi.Output[str] | None = None

    def __init__(
        self, name: str, args: ServiceAgentsArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("vtx:platform:ServiceAgents", name, None, opts)
        identity = gcp.projects.ServiceIdentity(
            f"{name}-aiplatform",
            project=args.project,
            service="aiplatform.googleapis.com",
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.aiplatform_api),
        )
        self.identity = identity
        self.aiplatform = identity.member
        # The -cc address is computed, not returned by an API; deriving it from the identity's
        # id too makes every grant to it wait for Vertex's agents, wherever it is used.
        self.custom_code = pulumi.Output.all(args.project_number, identity.id).apply(
            lambda values: (
                f"serviceAccount:service-{values[0]}@gcp-sa-aiplatform-cc.iam.gserviceaccount.com"
            )
        )
        if args.artifactregistry_api is not None:
            registry = gcp.projects.ServiceIdentity(
                f"{name}-artifactregistry",
                project=args.project,
                service="artifactregistry.googleapis.com",
                opts=pulumi.ResourceOptions(parent=self, depends_on=args.artifactregistry_api),
            )
            self.artifactregistry = registry.member
            # Cloud Storage's agent is not a ServiceIdentity: the storage API returns it.
            self.storage = gcp.storage.get_project_service_account_output(
                project=args.project, opts=pulumi.InvokeOutputOptions(parent=self)
            ).member
        if args.pubsub_api is not None:
            # Pub/Sub encrypts a CMEK topic's messages as its agent.
            self.pubsub = gcp.projects.ServiceIdentity(
                f"{name}-pubsub",
                project=args.project,
                service="pubsub.googleapis.com",
                opts=pulumi.ResourceOptions(parent=self, depends_on=args.pubsub_api),
            ).member
        self.register_outputs({"aiplatform": self.aiplatform, "custom_code": self.custom_code})


@dataclass(frozen=True)
class IdentityArgs:
    project: str
    prefix: str
    tensorboard: bool
    iam_apis: list[pulumi.Resource]
    """IAM (service accounts, roles) and Resource Manager (project bindings) enablement."""


class Identity(pulumi.ComponentResource):
    """The ``trainer``, ``launcher`` and ``serving`` service accounts and their grants; the
    serving account's bucket grant is added by :meth:`grant_model_reader` once the models bucket
    exists."""

    trainer: gcp.serviceaccount.Account
    launcher: gcp.serviceaccount.Account
    serving: gcp.serviceaccount.Account
    grants: list[pulumi.Resource]
    serving_grants: list[pulumi.Resource]

    def __init__(self, name: str, args: IdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("vtx:platform:Identity", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=args.iam_apis)
        self.trainer = gcp.serviceaccount.Account(
            f"{name}-trainer",
            project=args.project,
            account_id=f"{args.prefix}-trainer",
            display_name="vtx trainer: runtime identity of Vertex training jobs",
            opts=child,
        )
        self.launcher = gcp.serviceaccount.Account(
            f"{name}-launcher",
            project=args.project,
            account_id=f"{args.prefix}-launcher",
            display_name="vtx launcher: submits training jobs that run as the trainer",
            opts=child,
        )
        self.serving = gcp.serviceaccount.Account(
            f"{name}-serving",
            project=args.project,
            account_id=f"{args.prefix}-serving",
            display_name="vtx serving: runtime identity of deployed models",
            opts=child,
        )
        trainer = sa_member(self.trainer.email)
        launcher = sa_member(self.launcher.email)
        own = pulumi.ResourceOptions(parent=self)
        self._name, self._own = name, own
        self.grants = [
            gcp.projects.IAMMember(
                f"{name}-trainer-log-writer",
                project=args.project,
                role="roles/logging.logWriter",
                member=trainer,
                opts=own,
            ),
            gcp.projects.IAMMember(
                f"{name}-launcher-aiplatform-user",
                project=args.project,
                role="roles/aiplatform.user",
                member=launcher,
                opts=own,
            ),
            gcp.serviceaccount.IAMMember(
                f"{name}-launcher-acts-as-trainer",
                service_account_id=self.trainer.name,
                role="roles/iam.serviceAccountUser",
                member=launcher,
                opts=own,
            ),
        ]
        self.serving_grants = [
            gcp.projects.IAMMember(
                f"{name}-serving-log-writer",
                project=args.project,
                role="roles/logging.logWriter",
                member=sa_member(self.serving.email),
                opts=own,
            ),
            gcp.serviceaccount.IAMMember(
                f"{name}-launcher-acts-as-serving",
                service_account_id=self.serving.name,
                role="roles/iam.serviceAccountUser",
                member=launcher,
                opts=own,
            ),
        ]
        if args.tensorboard:
            role = gcp.projects.IAMCustomRole(
                f"{name}-tensorboard-writer",
                project=args.project,
                role_id=f"{args.prefix.replace('-', '_')}_tensorboard_writer",
                title="vtx TensorBoard writer",
                description="Write experiments, runs and time series to Vertex TensorBoard",
                permissions=list(TENSORBOARD_WRITER_PERMISSIONS),
                # Custom roles are created through iam.googleapis.com: wait for it to be on.
                opts=child,
            )
            self.grants.append(
                gcp.projects.IAMMember(
                    f"{name}-trainer-tensorboard-writer",
                    project=args.project,
                    role=role.name,
                    member=trainer,
                    opts=own,
                )
            )
        self.register_outputs(
            {
                "trainer": self.trainer.email,
                "launcher": self.launcher.email,
                "serving": self.serving.email,
            }
        )

    def grant_model_reader(self, models_bucket: pulumi.Input[str]) -> None:
        """The serving account reads the models bucket (objects only, this bucket only)."""
        self.serving_grants.append(
            gcp.storage.BucketIAMMember(
                f"{self._name}-serving-models-reader",
                bucket=models_bucket,
                role="roles/storage.objectViewer",
                member=sa_member(self.serving.email),
                opts=self._own,
            )
        )

    @property
    def trainer_member(self) -> pulumi.Output[str]:
        return sa_member(self.trainer.email)
