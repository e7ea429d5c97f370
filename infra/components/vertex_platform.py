"""``Platform``: the whole stack, wired from a validated :class:`StackConfig`.

Named ``vertex_platform`` (not ``platform``) so that it cannot shadow the stdlib module when
Pulumi runs ``infra/`` with that directory first on ``sys.path``.

Order matters only through dependencies: APIs → service agents and accounts → KMS (the agents
need the key before the buckets/registry/TensorBoard that use it) → the rest. Outputs depend on
the grants that make them usable, so a consumer of ``trainer_service_account`` never races IAM.

Further regions (``capacity_regions``) get only what is regional: a network attachment (in
``Network``) and, with CMEK, a key of their own; the output's ``regions`` names them. No
TensorBoard there: one instance per stack holds every run's logs, and a job in a further region
runs without the ``tensorboard`` field (instances are regional; a cross-region one is not
documented as accepted).
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_gcp as gcp

from infra.components.access.ci import CiIdentity, CiIdentityArgs
from infra.components.access.identity import (
    Identity,
    IdentityArgs,
    ServiceAgents,
    ServiceAgentsArgs,
)
from infra.components.access.kms import Kms, KmsArgs
from infra.components.access.secret_manager import Secrets, SecretsArgs
from infra.components.alerts import Alerts, AlertsArgs
from infra.components.apis import Apis, ApisArgs, required_services
from infra.components.capacity.persistent_resources import (
    PersistentResources,
    PersistentResourcesArgs,
)
from infra.components.capacity.quotas import Quotas, QuotasArgs, quota_target
from infra.components.controller import Controller, ControllerArgs
from infra.components.network.network import Network, NetworkArgs
from infra.components.network.perimeter import Perimeter, PerimeterArgs
from infra.components.network.shared_vpc import SharedVpc, SharedVpcArgs
from infra.components.observability import Observability, ObservabilityArgs
from infra.components.stores.registry import Registry, RegistryArgs
from infra.components.stores.storage import Storage, StorageArgs
from infra.components.team_budgets import TeamBudgets, TeamBudgetsArgs
from infra.config import StackConfig


def _after(value: pulumi.Input[Any], *resources: pulumi.Resource) -> pulumi.Output[Any]:
    """``value``, resolved only once ``resources`` exist (Fabric's 'outputs wait for IAM')."""
    ids = [r.urn for r in resources]
    return pulumi.Output.all(value, *ids).apply(lambda parts: parts[0])


class Platform(pulumi.ComponentResource):
    """Every component of a vtx stack; ``outputs`` is the ``platform`` stack output."""

    outputs: pulumi.Output[dict[str, Any]]

    def __init__(self, name: str, config: StackConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__("vtx:platform:Platform", name, None, opts)
        self._config, self._platform = config, config.platform
        self._labels = config.platform.common_labels()
        self._child = pulumi.ResourceOptions(parent=self)
        project = config.project
        self._number = gcp.organizations.get_project_output(project_id=project).number
        cancelling = any(team.cancel_at is not None for team in self._platform.teams)

        self._apis = Apis("apis", ApisArgs(project, required_services(self._platform)), self._child)
        self._agents = ServiceAgents(
            "agents",
            ServiceAgentsArgs(
                project,
                self._number,
                self._apis.on("aiplatform"),
                self._apis.on("artifactregistry") if self._platform.cmek else None,
                self._apis.on("pubsub") if self._platform.cmek and cancelling else None,
            ),
            self._child,
        )
        self._identity = Identity(
            "identity",
            IdentityArgs(
                project,
                self._platform.prefix,
                self._platform.tensorboard,
                self._apis.on("iam", "cloudresourcemanager"),
            ),
            self._child,
        )
        kms = self._kms() if self._platform.cmek else None
        self._kms_key = kms.key.id if kms else None
        self._kms_grants: list[pulumi.Resource] = list(kms.grants) if kms else []
        further_kms = {
            r.region: self._further_kms(r.region)
            for r in self._platform.capacity_regions
            if self._platform.cmek
        }

        network = self._network()
        if self._platform.vpc_sc is not None:
            self._perimeter()
        storage = self._storage()
        self._identity.grant_model_reader(storage.buckets["models"].name)
        registry = self._registry()
        self._quotas()
        secrets = self._secrets()
        observability = self._observability()
        if self._platform.teams:
            self._team_budgets(storage)
        if self._platform.ci is not None:
            self._ci()
        warm = self._persistent_resources(network, further_kms)

        identity = self._identity
        outputs = pulumi.Output.all(
            project=project,
            project_number=self._number,
            region=config.region,
            environment=self._platform.environment,
            trainer_service_account=_after(identity.trainer.email, *identity.grants),
            launcher_service_account=_after(identity.launcher.email, *identity.grants),
            serving_service_account=_after(identity.serving.email, *identity.serving_grants),
            # One wait on all grants for the whole map, not one per entry: per entry is
            # quadratic in Outputs (1000 secrets took minutes to evaluate).
            buckets=_after(
                pulumi.Output.all(**{kind: b.name for kind, b in storage.buckets.items()}),
                *storage.grants,
            ),
            artifact_registry=registry.host_path,
            network_attachment=network.attachment.id if network.attachment else None,
            network=network.vertex_network,
            reserved_ip_ranges=network.reserved_ranges,
            tensorboard=observability.tensorboard.name if observability.tensorboard else None,
            secrets=_after(
                pulumi.Output.all(**{k: s.name for k, s in secrets.secrets.items()}),
                *secrets.grants,
            ),
            kms_key=_after(self._kms_key, *self._kms_grants) if self._kms_key else None,
            labels=self._labels,
            # Absent rather than empty without capacity_regions: such stacks export as before.
            # Present for every further region, even one with nothing regional (peering without
            # CMEK): the entry itself says jobs may run there.
            **(
                {"regions": self._regions(network, further_kms)}
                if self._platform.capacity_regions
                else {}
            ),
            **(
                {"private_serving": self._private_serving(network)}
                if self._platform.serving.private
                else {}
            ),
            # Absent without persistent resources, as regions: such stacks export as before.
            **({"persistent_resources": warm.outputs} if warm else {}),
            # Absent without defaults, as regions: such stacks export as before.
            **(
                {"guard": self._platform.guard.model_dump(mode="json", exclude_none=True)}
                if self._platform.guard
                else {}
            ),
            # Absent without teams, as regions: such stacks export as before.
            **({"teams": [t.name for t in self._platform.teams]} if self._platform.teams else {}),
            # Absent for open (NAT) stacks, which export as before.
            **(
                {
                    "egress": "none",
                    "python_index": registry.python_index,
                    "docker_mirror": registry.docker_mirror,
                }
                if self._platform.network.egress == "none"
                else {}
            ),
        )
        self.outputs = (
            self._controller(outputs, storage) if self._platform.controller.enabled else outputs
        )
        self.register_outputs({"platform": self.outputs})

    def _controller(
        self, outputs: pulumi.Output[dict[str, Any]], storage: Storage
    ) -> pulumi.Output[dict[str, Any]]:
        """The controller, given the stack's outputs as it will read them; the outputs say
        ``controller: true`` once its function and schedule exist."""
        config = self._config
        controller = Controller(
            "controller",
            ControllerArgs(
                project=config.project,
                region=config.region,
                prefix=self._platform.prefix,
                labels=self._labels,
                config=self._platform.controller,
                stack_json=outputs.apply(lambda o: json.dumps(o | {"controller": True})),
                trainer_account=self._identity.trainer.name,
                checkpoints_bucket=storage.buckets["checkpoints"].name,
                source_bucket=storage.buckets["staging"].name,
                apis=self._apis.on(
                    "cloudfunctions",
                    "cloudbuild",
                    "run",
                    "cloudscheduler",
                    "iam",
                    "cloudresourcemanager",
                ),
            ),
            self._child,
        )
        if self._platform.alerts is not None:
            Alerts(
                "alerts",
                AlertsArgs(
                    project=config.project,
                    prefix=self._platform.prefix,
                    labels=self._labels,
                    config=self._platform.alerts,
                    controller=[controller.function],
                    apis=self._apis.on("logging", "monitoring"),
                ),
                self._child,
            )
        ready = _after(True, controller.function, controller.scheduler)
        return pulumi.Output.all(outputs, ready).apply(lambda p: p[0] | {"controller": p[1]})

    def _regions(self, network: Network, keys: dict[str, Kms]) -> pulumi.Output[dict[str, Any]]:
        """``regions`` of the output (jobs.core.stack.RegionOutputs per further region)."""
        regions = {}
        for entry in self._platform.capacity_regions:
            attachment = network.further_attachments.get(entry.region)
            key = keys.get(entry.region)
            regions[entry.region] = pulumi.Output.all(
                network_attachment=attachment.id if attachment else None,
                kms_key=_after(key.key.id, *key.grants) if key else None,
                tensorboard=None,
            )
        return pulumi.Output.all(**regions)

    def _persistent_resources(
        self, network: Network, keys: dict[str, Kms]
    ) -> PersistentResources | None:
        if not self._platform.persistent_resources:
            return None
        region = self._config.region
        attachments = {r: a.id for r, a in network.further_attachments.items()}
        if network.attachment is not None:
            attachments[region] = network.attachment.id
        kms_keys = {r: _after(k.key.id, *k.grants) for r, k in keys.items()}
        if self._kms_key is not None:
            kms_keys[region] = _after(self._kms_key, *self._kms_grants)
        return PersistentResources(
            "persistent-resources",
            PersistentResourcesArgs(
                project=self._config.project,
                project_number=self._number,
                region=region,
                resources=self._platform.persistent_resources,
                labels=self._labels,
                attachments=attachments,
                network=network.vertex_network,
                kms_keys=kms_keys,
                depends_on=self._apis.on("aiplatform"),
            ),
            self._child,
        )

    def _kms(self) -> Kms:
        """The key and who may use it: GCS's agent (buckets), Artifact Registry's (the image
        repository) and AI Platform's (TensorBoard)."""
        agents, config = self._agents, self._config
        assert agents.storage is not None and agents.artifactregistry is not None
        return Kms(
            "kms",
            KmsArgs(
                project=config.project,
                location=config.region,
                prefix=self._platform.prefix,
                rotation_days=self._platform.kms_rotation_days,
                labels=self._labels,
                agents={
                    "storage": agents.storage,
                    "artifactregistry": agents.artifactregistry,
                    "aiplatform": agents.aiplatform,
                    **({"pubsub": agents.pubsub} if agents.pubsub is not None else {}),
                },
                apis=self._apis.on("cloudkms"),
                agents_ready=[agents, *self._apis.on("storage")],
            ),
            self._child,
        )

    def _further_kms(self, region: str) -> Kms:
        """A key in a further region, for jobs there (Vertex takes a key in the job's region
        only). Same rotation and protection as the main key; only AI Platform's agent may use
        it: buckets and the registry live in gcp:region and keep the main key."""
        return Kms(
            f"kms-{region}",
            KmsArgs(
                project=self._config.project,
                location=region,
                prefix=f"{self._platform.prefix}-{region}",
                rotation_days=self._platform.kms_rotation_days,
                labels=self._labels,
                agents={"aiplatform": self._agents.aiplatform},
                apis=self._apis.on("cloudkms"),
                agents_ready=[self._agents],
            ),
            self._child,
        )

    def _private_serving(self, network: Network) -> pulumi.Output[dict[str, Any]]:
        """``private_serving`` of the output (jobs.core.stack.PrivateServing): how `vtx deploy`
        makes
        an endpoint private, and where the VPC reaches the PSC ones."""
        if network.peering is not None:
            return pulumi.Output.all(network=network.vertex_network).apply(
                lambda parts: {"kind": "peering", "network": parts["network"]}
            )
        # The forwarding rules live in the VPC's project: Vertex accepts them only from the
        # projects an endpoint allows.
        allowed = sorted({self._config.project, network.network_project})
        addresses = {name: c.address.address for name, c in network.psc_consumers.items()}
        return pulumi.Output.all(**addresses).apply(
            lambda ips: {"kind": "psc", "project_allowlist": allowed, "psc_consumers": dict(ips)}
        )

    def _network(self) -> Network:
        """The VPC (here or on the Shared VPC host), then the host grants, then the attachment."""
        config, settings = self._config, self._platform.network
        host = settings.host_project
        self._host_number = (
            gcp.organizations.get_project_output(project_id=host).number if host else None
        )
        network = Network(
            "network",
            NetworkArgs(
                project=config.project,
                network_project=host or config.project,
                network_project_number=self._host_number or self._number,
                region=config.region,
                prefix=self._platform.prefix,
                mode=settings.mode,
                subnet_cidr=settings.subnet_cidr,
                psc_subnet_cidr=settings.psc_subnet_cidr,
                peering_cidr=settings.peering_cidr,
                flow_logs=settings.flow_logs,
                flow_logs_sampling=settings.flow_logs_sampling,
                egress=settings.egress,
                # Inside a perimeter, the VIP that serves only what VPC Service Controls guards.
                google_apis="restricted" if self._platform.vpc_sc else "private",
                aiplatform_agent=self._agents.aiplatform,
                apis=self._apis.on("compute", "servicenetworking", "cloudresourcemanager", "dns"),
                labels=self._labels,
                psc_consumers={
                    c.name: c.service_attachment for c in self._platform.serving.psc_consumers
                },
                further_psc_subnets={
                    r.region: r.psc_subnet_cidr
                    for r in self._platform.capacity_regions
                    if r.psc_subnet_cidr is not None
                },
            ),
            self._child,
        )
        host_grants: list[pulumi.Resource] = []
        if host:
            shared = SharedVpc(
                "shared-vpc",
                SharedVpcArgs(
                    host_project=host,
                    service_project=config.project,
                    subnetworks=network.subnets,
                    # Only the AI Platform agent creates interfaces/peerings in the host network;
                    # the -cc agent runs containers and needs no network role.
                    agents=[self._agents.aiplatform],
                    apis=self._apis.on("compute", "cloudresourcemanager"),
                ),
                self._child,
            )
            host_grants = shared.grants
        network.attach_vertex(depends_on=host_grants)
        return network

    def _perimeter(self) -> Perimeter:
        vpc_sc = self._platform.vpc_sc
        assert vpc_sc is not None
        launcher = self._identity.launcher.email.apply(lambda e: f"serviceAccount:{e}")
        return Perimeter(
            "perimeter",
            PerimeterArgs(
                access_policy=vpc_sc.access_policy,
                prefix=self._platform.prefix,
                mode=vpc_sc.mode,
                project_numbers=[self._number, *([self._host_number] if self._host_number else [])],
                ingress_identities=[launcher, *vpc_sc.ingress_identities],
                depends_on=self._apis.on("accesscontextmanager"),
            ),
            self._child,
        )

    def _storage(self) -> Storage:
        settings = self._platform.storage
        return Storage(
            "storage",
            StorageArgs(
                project=self._config.project,
                prefix=self._platform.prefix,
                location=self._config.bucket_location,
                labels=self._labels,
                soft_delete_days=settings.soft_delete_days,
                noncurrent_version_days=settings.noncurrent_version_days,
                staging_ttl_days=settings.staging_ttl_days,
                trainer_member=self._identity.trainer_member,
                kms_key=self._kms_key,
                depends_on=[*self._apis.on("storage"), *self._kms_grants],
            ),
            self._child,
        )

    def _registry(self) -> Registry:
        settings, agents = self._platform.registry, self._agents
        return Registry(
            "registry",
            RegistryArgs(
                project=self._config.project,
                region=self._config.region,
                repository_id=f"{self._platform.prefix}-{settings.repository}",
                labels=self._labels,
                keep_recent=settings.keep_recent,
                delete_untagged_after_days=settings.delete_untagged_after_days,
                immutable_tags=settings.immutable_tags,
                vulnerability_scanning=settings.vulnerability_scanning,
                kms_key=self._kms_key,
                depends_on=[*self._apis.on("artifactregistry"), *self._kms_grants],
                readers={
                    "aiplatform-agent": agents.aiplatform,
                    "custom-code-agent": agents.custom_code,
                },
                # Jobs with no route to the internet install packages and pull Docker Hub
                # images through Artifact Registry.
                mirrors=self._platform.network.egress == "none",
                vpc_sc=self._platform.vpc_sc is not None,
                package_readers={"trainer": self._identity.trainer_member},
            ),
            self._child,
        )

    def _quotas(self) -> Quotas:
        return Quotas(
            "quotas",
            QuotasArgs(
                project=self._config.project,
                targets=[quota_target(q, self._config.region) for q in self._platform.quotas],
                contact_email=self._platform.quota_contact_email,
                environment=self._platform.environment,
                apis=self._apis.on("cloudquotas", "aiplatform"),
            ),
            self._child,
        )

    def _secrets(self) -> Secrets:
        return Secrets(
            "secrets",
            SecretsArgs(
                project=self._config.project,
                names=list(self._platform.secrets),
                locations=list(self._platform.secret_locations),
                labels=self._labels,
                trainer_member=self._identity.trainer_member,
                apis=self._apis.on("secretmanager"),
            ),
            self._child,
        )

    def _observability(self) -> Observability:
        budget = self._platform.budget
        return Observability(
            "observability",
            ObservabilityArgs(
                project=self._config.project,
                project_number=self._number,
                region=self._config.region,
                prefix=self._platform.prefix,
                labels=self._labels,
                tensorboard=self._platform.tensorboard,
                budget=budget,
                kms_key=self._kms_key,
                tensorboard_depends_on=[*self._apis.on("aiplatform"), *self._kms_grants],
                budget_depends_on=self._apis.on("billingbudgets") if budget else [],
            ),
            self._child,
        )

    def _team_budgets(self, storage: Storage) -> TeamBudgets:
        budget, config = self._platform.budget, self._config
        assert budget is not None  # config.py refuses teams without it
        return TeamBudgets(
            "teams",
            TeamBudgetsArgs(
                project=config.project,
                project_number=self._number,
                region=config.region,
                job_regions=[config.region, *(r.region for r in self._platform.capacity_regions)],
                prefix=self._platform.prefix,
                labels=self._labels,
                billing_account=budget.billing_account,
                currency=budget.currency,
                teams=list(self._platform.teams),
                source_bucket=storage.buckets["staging"].name,
                kms_key=self._kms_key,
                apis=[
                    *self._apis.on("billingbudgets", "iam", "cloudresourcemanager"),
                    *(
                        self._apis.on("pubsub", "cloudfunctions", "cloudbuild", "run", "eventarc")
                        if any(team.cancel_at is not None for team in self._platform.teams)
                        else []
                    ),
                ],
                depends_on=self._kms_grants,
            ),
            self._child,
        )

    def _ci(self) -> CiIdentity:
        ci = self._platform.ci
        assert ci is not None
        return CiIdentity(
            "ci",
            CiIdentityArgs(
                project=self._config.project,
                prefix=self._platform.prefix,
                github_repository=ci.github_repository,
                branch=ci.branch,
                launcher_account_name=self._identity.launcher.name,
                apis=self._apis.on("iam", "sts", "iamcredentials"),
            ),
            self._child,
        )
