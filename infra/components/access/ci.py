"""CI identity: GitHub Actions impersonates the launcher through Workload Identity Federation.

No service account key exists anywhere: a workflow of the configured repository (and branch, if
set) exchanges its OIDC token for a short-lived launcher token.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"


@dataclass(frozen=True)
class CiIdentityArgs:
    project: str
    prefix: str
    github_repository: str
    branch: str | None
    launcher_account_name: pulumi.Input[str]
    apis: list[pulumi.Resource]


def attribute_condition(repository: str, branch: str | None) -> str:
    """CEL condition on the GitHub token: without one, any GitHub repository could get in."""
    condition = f"assertion.repository == '{repository}'"
    if branch is not None:
        condition += f" && assertion.ref == 'refs/heads/{branch}'"
    return condition


class CiIdentity(pulumi.ComponentResource):
    pool: gcp.iam.WorkloadIdentityPool
    provider: gcp.iam.WorkloadIdentityPoolProvider

    def __init__(self, name: str, args: CiIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("vtx:platform:CiIdentity", name, None, opts)
        self.pool = gcp.iam.WorkloadIdentityPool(
            f"{name}-pool",
            project=args.project,
            workload_identity_pool_id=f"{args.prefix}-ci",
            display_name="vtx CI",
            description="GitHub Actions workflows that launch vtx jobs",
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.apis),
        )
        self.provider = gcp.iam.WorkloadIdentityPoolProvider(
            f"{name}-github",
            project=args.project,
            workload_identity_pool_id=self.pool.workload_identity_pool_id,
            workload_identity_pool_provider_id="github",
            display_name="GitHub Actions",
            attribute_mapping={
                "google.subject": "assertion.sub",
                "attribute.repository": "assertion.repository",
                "attribute.ref": "assertion.ref",
            },
            attribute_condition=attribute_condition(args.github_repository, args.branch),
            oidc=gcp.iam.WorkloadIdentityPoolProviderOidcArgs(issuer_uri=GITHUB_ISSUER),
            opts=pulumi.ResourceOptions(parent=self),
        )
        principals = pulumi.Output.concat(
            "principalSet://iam.googleapis.com/",
            self.pool.name,
            "/attribute.repository/",
            args.github_repository,
        )
        gcp.serviceaccount.IAMMember(
            f"{name}-launcher-workload-identity-user",
            service_account_id=args.launcher_account_name,
            role="roles/iam.workloadIdentityUser",
            member=principals,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"provider": self.provider.name})
