"""``Platform``: the whole stack, wired from a validated :class:`StackConfig`.

Named ``vertex_platform`` (not ``platform``) so that it cannot shadow the stdlib module when
Pulumi runs ``infra/`` with that directory first on ``sys.path``.

Order matters only through dependencies: APIs → service agents and accounts → KMS (the agents
need the key before the buckets/registry/TensorBoard that use it) → the rest. Outputs depend on
the grants that make them usable, so a consumer of ``trainer_service_account`` never races IAM.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp

from infra.apis import Apis, ApisArgs, required_services
from infra.ci import CiIdentity, CiIdentityArgs
from infra.config import StackConfig
from infra.identity import Identity, IdentityArgs, ServiceAgents, ServiceAgentsArgs
from infra.kms import Kms, KmsArgs
from infra.network import Network, NetworkArgs
from infra.observability import Observability, ObservabilityArgs
from infra.quotas import Quotas, QuotasArgs, quota_target
from infra.registry import Registry, RegistryArgs
from infra.secret_manager import Secrets, SecretsArgs
from infra.shared_vpc import SharedVpc, SharedVpcArgs
from infra.storage import Storage, StorageArgs


def _after(value: pulumi.Input[Any], *resources: pulumi.Resource) -> pulumi.Output[Any]:
    """``value``, resolved only once ``resources`` exist (Fabric's 'outputs wait for IAM')."""
    ids = [r.urn for r in resources]
    return pulumi.Output.all(value, *ids).apply(lambda parts: parts[0])


class Platform(pulumi.ComponentResource):
    """Every component of a vtx stack; ``outputs`` is the ``platform`` stack output."""

    outputs: pulumi.Output[dict[str, Any]]

    def __init__(self, name: str, config: StackConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__("vtx:platform:Platform", name, None, opts)
        platform, project, region = config.platform, config.project, config.region
        prefix, labels = platform.prefix, platform.common_labels()
        child = pulumi.ResourceOptions(parent=self)
        number = gcp.organizations.get_project_output(project_id=project).number

        apis = Apis("apis", ApisArgs(project, required_services(platform)), child)
        agents = ServiceAgents(
            "agents",
            ServiceAgentsArgs(
                project,
                number,
                apis.on("aiplatform"),
                apis.on("artifactregistry") if platform.cmek else None,
            ),
            child,
        )
        identity = Identity(
            "identity", IdentityArgs(project, prefix, platform.tensorboard, apis.on("iam")), child
        )
        kms = self._kms(config, apis, agents) if platform.cmek else None
        kms_key = kms.key.id if kms else None
        kms_grants: list[pulumi.Resource] = list(kms.grants) if kms else []

        network_project = platform.network.host_project or project
        network_number = (
            number
            if network_project == project
            else gcp.organizations.get_project_output(project_id=network_project).number
        )
        network = Network(
            "network",
            NetworkArgs(
                project=project,
                network_project=network_project,
                network_project_number=network_number,
                region=region,
                prefix=prefix,
                mode=platform.network.mode,
                subnet_cidr=platform.network.subnet_cidr,
                psc_subnet_cidr=platform.network.psc_subnet_cidr,
                peering_cidr=platform.network.peering_cidr,
                flow_logs=platform.network.flow_logs,
                flow_logs_sampling=platform.network.flow_logs_sampling,
                aiplatform_agent=agents.aiplatform,
                apis=apis.on("compute", "servicenetworking"),
            ),
            child,
        )
        shared_grants: list[pulumi.Resource] = []
        if platform.network.host_project:
            shared = SharedVpc(
                "shared-vpc",
                SharedVpcArgs(
                    host_project=platform.network.host_project,
                    service_project=project,
                    region=region,
                    subnetworks=network.subnets,
                    # Only the AI Platform agent creates interfaces/peerings in the host network;
                    # the -cc agent runs containers and needs no network role.
                    agents=[agents.aiplatform],
                    apis=apis.on("compute"),
                ),
                child,
            )
            shared_grants = shared.grants
        network.attach_vertex(depends_on=shared_grants)

        storage = Storage(
            "storage",
            StorageArgs(
                project=project,
                prefix=prefix,
                location=config.bucket_location,
                labels=labels,
                soft_delete_days=platform.storage.soft_delete_days,
                noncurrent_version_days=platform.storage.noncurrent_version_days,
                staging_ttl_days=platform.storage.staging_ttl_days,
                trainer_member=identity.trainer_member,
                kms_key=kms_key,
                depends_on=[*apis.on("storage"), *kms_grants],
            ),
            child,
        )
        registry = Registry(
            "registry",
            RegistryArgs(
                project=project,
                region=region,
                repository_id=f"{prefix}-{platform.registry.repository}",
                labels=labels,
                keep_recent=platform.registry.keep_recent,
                delete_untagged_after_days=platform.registry.delete_untagged_after_days,
                immutable_tags=platform.registry.immutable_tags,
                vulnerability_scanning=platform.registry.vulnerability_scanning,
                kms_key=kms_key,
                depends_on=[*apis.on("artifactregistry"), *kms_grants],
                readers={
                    "aiplatform-agent": agents.aiplatform,
                    "custom-code-agent": agents.custom_code,
                },
                # The -cc address is computed, not returned by an API: wait for the agents.
                readers_depend_on=[agents],
            ),
            child,
        )
        Quotas(
            "quotas",
            QuotasArgs(
                project=project,
                targets=[quota_target(q, region) for q in platform.quotas],
                contact_email=platform.quota_contact_email,
                environment=platform.environment,
                apis=apis.on("cloudquotas", "aiplatform"),
            ),
            child,
        )
        secrets = Secrets(
            "secrets",
            SecretsArgs(
                project=project,
                names=list(platform.secrets),
                locations=list(platform.secret_locations),
                labels=labels,
                trainer_member=identity.trainer_member,
                apis=apis.on("secretmanager"),
            ),
            child,
        )
        observability = Observability(
            "observability",
            ObservabilityArgs(
                project=project,
                project_number=number,
                region=region,
                prefix=prefix,
                labels=labels,
                tensorboard=platform.tensorboard,
                budget=platform.budget,
                kms_key=kms_key,
                tensorboard_depends_on=[*apis.on("aiplatform"), *kms_grants],
                budget_depends_on=apis.on("billingbudgets") if platform.budget else [],
            ),
            child,
        )
        if platform.ci is not None:
            CiIdentity(
                "ci",
                CiIdentityArgs(
                    project=project,
                    prefix=prefix,
                    github_repository=platform.ci.github_repository,
                    branch=platform.ci.branch,
                    launcher_account_name=identity.launcher.name,
                    apis=apis.on("iam", "sts", "iamcredentials"),
                ),
                child,
            )

        self.outputs = pulumi.Output.all(
            project=project,
            project_number=number,
            region=region,
            environment=platform.environment,
            trainer_service_account=_after(identity.trainer.email, *identity.grants),
            launcher_service_account=_after(identity.launcher.email, *identity.grants),
            buckets=pulumi.Output.all(
                **{kind: _after(b.name, *storage.grants) for kind, b in storage.buckets.items()}
            ),
            artifact_registry=registry.host_path,
            network_attachment=network.attachment.id if network.attachment else None,
            network=network.vertex_network,
            reserved_ip_ranges=network.reserved_ranges,
            tensorboard=observability.tensorboard.name if observability.tensorboard else None,
            secrets=pulumi.Output.all(
                **{k: _after(s.name, *secrets.grants) for k, s in secrets.secrets.items()}
            ),
            kms_key=_after(kms_key, *kms_grants) if kms_key is not None else None,
            labels=labels,
        )
        self.register_outputs({"platform": self.outputs})

    def _kms(self, config: StackConfig, apis: Apis, agents: ServiceAgents) -> Kms:
        """The key and who may use it: GCS's agent (buckets), Artifact Registry's (the image
        repository) and AI Platform's (TensorBoard)."""
        assert agents.storage is not None and agents.artifactregistry is not None
        return Kms(
            "kms",
            KmsArgs(
                project=config.project,
                location=config.region,
                prefix=config.platform.prefix,
                rotation_days=config.platform.kms_rotation_days,
                labels=config.platform.common_labels(),
                agents={
                    "storage": agents.storage,
                    "artifactregistry": agents.artifactregistry,
                    "aiplatform": agents.aiplatform,
                },
                apis=apis.on("cloudkms"),
                agents_ready=[agents, *apis.on("storage")],
            ),
            pulumi.ResourceOptions(parent=self),
        )
