"""A VPC Service Controls perimeter around the stack's project (``vtx:platform.vpc_sc``).

Restricted services: Vertex AI, Cloud Storage, Artifact Registry and Secret Manager, the four a
job and its launcher use; the perimeter holds the project and, under Shared VPC, the host project
whose network the jobs join. Google's "VPC Service Controls with Vertex AI" page asks for
``aiplatform.googleapis.com`` as a protected service and warns that Vertex then cannot reach
anything outside the perimeter (docs/vertex-facts.md, "Closed egress").

What custom training needs across the boundary:

- ingress: the launcher account (and ``ingress_identities``: people, groups) calls Vertex AI,
  Cloud Storage and Artifact Registry from outside (a laptop, CI): to create jobs, upload
  staging files, push images and read results. From any source: the identities are the gate.
- egress: none. Everything a job reads and writes is inside (the stack's buckets, registry,
  secrets). Artifact Registry's remote repositories reach PyPI and Docker Hub through their own
  switch (``artifactregistry.VpcscConfig`` ALLOW, declared with the mirrors), not an egress rule.

``dry_run`` declares the rules as the perimeter's dry-run spec (``use_explicit_dry_run_spec``):
violations are logged, nothing is refused; ``enforced`` declares them as its status.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pulumi
import pulumi_gcp as gcp

RESTRICTED_SERVICES = (
    "aiplatform.googleapis.com",
    "storage.googleapis.com",
    "artifactregistry.googleapis.com",
    "secretmanager.googleapis.com",
)
# Who launches from outside calls these; Secret Manager values are added with gcloud from
# inside an admin's session, which `ingress_identities` covers too.
INGRESS_SERVICES = RESTRICTED_SERVICES


@dataclass(frozen=True)
class PerimeterArgs:
    access_policy: str
    prefix: str
    mode: Literal["dry_run", "enforced"]
    project_numbers: list[pulumi.Input[str]]
    """The stack's project, then the Shared VPC host's when there is one."""
    ingress_identities: list[pulumi.Input[str]]
    """IAM members (``serviceAccount:...``, ``group:...``) allowed in from outside."""
    depends_on: list[pulumi.Resource]


def perimeter_name(prefix: str) -> str:
    """Perimeter names take letters, digits and underscores only."""
    return prefix.replace("-", "_")


class Perimeter(pulumi.ComponentResource):
    perimeter: gcp.accesscontextmanager.ServicePerimeter

    def __init__(self, name: str, args: PerimeterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("vtx:platform:Perimeter", name, None, opts)
        policy = f"accessPolicies/{args.access_policy}"
        rules = pulumi.Output.all(*args.project_numbers, *args.ingress_identities).apply(
            lambda values: _rules(
                values[: len(args.project_numbers)], values[len(args.project_numbers) :]
            )
        )
        dry_run = args.mode == "dry_run"
        self.perimeter = gcp.accesscontextmanager.ServicePerimeter(
            f"{name}-perimeter",
            parent=policy,
            name=f"{policy}/servicePerimeters/{perimeter_name(args.prefix)}",
            title=args.prefix,
            description="vtx: Vertex AI training, its buckets, registry and secrets",
            perimeter_type="PERIMETER_TYPE_REGULAR",
            status=None if dry_run else rules,
            spec=rules if dry_run else None,
            use_explicit_dry_run_spec=True if dry_run else None,
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
        )
        self.register_outputs({"perimeter": self.perimeter.name})


def _rules(project_numbers: list[str], identities: list[str]) -> dict[str, Any]:
    """The perimeter's contents, as the status (enforced) or the dry-run spec both take them."""
    return {
        "resources": [f"projects/{number}" for number in project_numbers],
        "restricted_services": list(RESTRICTED_SERVICES),
        "ingress_policies": [
            {
                "title": "launch from outside",
                "ingress_from": {
                    "identities": sorted(set(identities)),
                    "sources": [{"access_level": "*"}],
                },
                "ingress_to": {
                    "resources": ["*"],
                    "operations": [
                        {"service_name": service, "method_selectors": [{"method": "*"}]}
                        for service in INGRESS_SERVICES
                    ],
                },
            }
        ],
    }
