"""The Artifact Registry Docker repository for the trainer image."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

SECONDS_PER_DAY = 86_400


@dataclass(frozen=True)
class RegistryArgs:
    project: str
    region: str
    repository_id: str
    labels: dict[str, str]
    keep_recent: int
    delete_untagged_after_days: int
    immutable_tags: bool
    vulnerability_scanning: bool
    kms_key: pulumi.Input[str] | None
    depends_on: list[pulumi.Resource]
    readers: dict[str, pulumi.Input[str]]
    """IAM members that pull images, by short name (Vertex's service agents)."""


class Registry(pulumi.ComponentResource):
    """Cleanup policies (keep the N most recent, delete untagged after D days), scanning, and
    immutable tags when asked (prod: a job's image cannot change under it)."""

    repository: gcp.artifactregistry.Repository

    def __init__(self, name: str, args: RegistryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("vtx:platform:Registry", name, None, opts)
        self.repository = gcp.artifactregistry.Repository(
            f"{name}-docker",
            project=args.project,
            location=args.region,
            repository_id=args.repository_id,
            format="DOCKER",
            description="vtx trainer images",
            labels=args.labels,
            docker_config=gcp.artifactregistry.RepositoryDockerConfigArgs(
                immutable_tags=args.immutable_tags
            ),
            cleanup_policy_dry_run=False,
            cleanup_policies=[
                gcp.artifactregistry.RepositoryCleanupPolicyArgs(
                    id="keep-recent",
                    action="KEEP",
                    most_recent_versions=gcp.artifactregistry.RepositoryCleanupPolicyMostRecentVersionsArgs(
                        keep_count=args.keep_recent
                    ),
                ),
                gcp.artifactregistry.RepositoryCleanupPolicyArgs(
                    id="delete-untagged",
                    action="DELETE",
                    condition=gcp.artifactregistry.RepositoryCleanupPolicyConditionArgs(
                        tag_state="UNTAGGED",
                        older_than=f"{args.delete_untagged_after_days * SECONDS_PER_DAY}s",
                    ),
                ),
            ],
            vulnerability_scanning_config=gcp.artifactregistry.RepositoryVulnerabilityScanningConfigArgs(
                enablement_config="INHERITED" if args.vulnerability_scanning else "DISABLED"
            ),
            kms_key_name=args.kms_key,
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
        )
        # Vertex pulls the image with its own agents, not the job's account. Their default
        # project-wide role covers same-project pulls; a repository-level grant keeps pulls
        # working where org policy trims default agent roles, and shows up in reviews.
        self.grants = [
            gcp.artifactregistry.RepositoryIamMember(
                f"{name}-{reader}-reader",
                project=args.project,
                location=args.region,
                repository=self.repository.name,
                role="roles/artifactregistry.reader",
                member=member,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for reader, member in args.readers.items()
        ]
        self.register_outputs({"repository": self.repository.id})

    @property
    def host_path(self) -> pulumi.Output[str]:
        """``REGION-docker.pkg.dev/PROJECT/REPO``, what image URIs start with."""
        repo = self.repository
        return pulumi.Output.all(repo.location, repo.project, repo.repository_id).apply(
            lambda p: f"{p[0]}-docker.pkg.dev/{p[1]}/{p[2]}"
        )
