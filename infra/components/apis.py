"""API enablement: every other component depends on the services it uses being on."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.config import PlatformConfig

# Needed whatever the configuration, in the order a reader expects.
BASE_SERVICES = (
    "aiplatform.googleapis.com",
    "compute.googleapis.com",
    "storage.googleapis.com",
    "artifactregistry.googleapis.com",
    "secretmanager.googleapis.com",
    "cloudquotas.googleapis.com",
    "servicenetworking.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "iam.googleapis.com",
    # The VPC's DNS server policy logs its queries (CIS GCP 2.12); Google's private endpoint
    # guide turns Cloud DNS on too. Under Shared VPC the policy lives in the host project, whose
    # APIs (compute, dns) its owner turns on.
    "dns.googleapis.com",
    # Project-level IAM bindings are read and written through Resource Manager; projects
    # created through the API do not always have it on, and the first binding then fails.
    "cloudresourcemanager.googleapis.com",
)


def required_services(platform: PlatformConfig) -> list[str]:
    """The services this configuration uses, beyond the base set only when a feature needs it."""
    services = list(BASE_SERVICES)
    if platform.cmek:
        services.append("cloudkms.googleapis.com")
    if platform.registry.vulnerability_scanning:
        services.append("containerscanning.googleapis.com")
    if platform.budget is not None:
        services.append("billingbudgets.googleapis.com")
    if any(team.cancel_at is not None for team in platform.teams):
        # The team budgets' cancel functions: topics, the function (built by Cloud Build, run
        # on Cloud Run) and its Eventarc trigger.
        services += [
            "pubsub.googleapis.com",
            "cloudfunctions.googleapis.com",
            "cloudbuild.googleapis.com",
            "run.googleapis.com",
            "eventarc.googleapis.com",
        ]
    if platform.controller.enabled:
        # The controller: a function (built by Cloud Build, run on Cloud Run) that Cloud
        # Scheduler calls.
        services += [
            "cloudfunctions.googleapis.com",
            "cloudbuild.googleapis.com",
            "run.googleapis.com",
            "cloudscheduler.googleapis.com",
        ]
    if platform.vpc_sc is not None:
        # The perimeter is written through Access Context Manager, billed to this project.
        services.append("accesscontextmanager.googleapis.com")
    if platform.ci is not None:
        # Federation exchanges a GitHub token at STS, then mints the launcher's token.
        services += ["sts.googleapis.com", "iamcredentials.googleapis.com"]
    return list(dict.fromkeys(services))  # the controller and team budgets share some


@dataclass(frozen=True)
class ApisArgs:
    project: str
    services: list[str]


class Apis(pulumi.ComponentResource):
    """One ``projects.Service`` per API; ``disable_on_destroy=False`` because turning an API off
    on ``pulumi destroy`` would break anything else in the project that uses it."""

    services: dict[str, gcp.projects.Service]

    def __init__(self, name: str, args: ApisArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("vtx:platform:Apis", name, None, opts)
        self.services = {
            service: gcp.projects.Service(
                f"{name}-{service.split('.')[0]}",
                project=args.project,
                service=service,
                disable_on_destroy=False,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for service in args.services
        }
        self.register_outputs({"services": list(self.services)})

    def on(self, *services: str) -> list[pulumi.Resource]:
        """The enablement resources to depend on, by API name without the domain."""
        return [self.services[f"{service}.googleapis.com"] for service in services]
