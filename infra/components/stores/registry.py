"""The Artifact Registry Docker repository for the trainer image, and, for stacks whose jobs have
no route to the internet, the mirrors they pull through instead.

Mirrors (``RegistryArgs.mirrors``, on with ``network.egress: none``): a PyPI remote repository
(``<repo>-pypi``, Python), a Docker Hub remote repository (``<repo>-dockerhub``) and a virtual
Docker repository (``<repo>-all``) in front of the trainer repository and the Docker Hub remote,
the trainer repository first. Artifact Registry fetches from PyPI and Docker Hub itself, from
Google's network, so a job reaches them at ``REGION-python.pkg.dev`` / ``REGION-docker.pkg.dev``
through Private Google Access. A virtual repository holds one format: the PyPI remote is the
Python index itself (its ``/simple/`` URL is the stack's ``python_index``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    mirrors: bool = False
    """Declare the PyPI and Docker Hub remotes and the virtual Docker repository."""
    package_readers: dict[str, pulumi.Input[str]] = field(default_factory=dict)
    """IAM members that install Python packages from the PyPI remote (the jobs' account)."""
    vpc_sc: bool = False
    """Inside a perimeter: let the remotes reach their upstreams (``VpcscConfig`` ALLOW)."""


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
        self.pypi: gcp.artifactregistry.Repository | None = None
        self.virtual: gcp.artifactregistry.Repository | None = None
        if args.mirrors:
            self._mirrors(name, args)
        self.register_outputs({"repository": self.repository.id})

    def _mirror_repository(
        self, name: str, args: RegistryArgs, kind: str, config: dict
    ) -> gcp.artifactregistry.Repository:
        return gcp.artifactregistry.Repository(
            f"{name}-{kind}",
            project=args.project,
            location=args.region,
            repository_id=f"{args.repository_id}-{kind}",
            description=f"vtx: {kind} through Artifact Registry, for jobs with no internet",
            labels=args.labels,
            kms_key_name=args.kms_key,
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
            **config,
        )

    def _mirrors(self, name: str, args: RegistryArgs) -> None:
        ar = gcp.artifactregistry
        remote = ar.RepositoryRemoteRepositoryConfigArgs
        self.pypi = self._mirror_repository(
            name,
            args,
            "pypi",
            {
                "format": "PYTHON",
                "mode": "REMOTE_REPOSITORY",
                "remote_repository_config": remote(
                    description="PyPI",
                    python_repository=ar.RepositoryRemoteRepositoryConfigPythonRepositoryArgs(
                        public_repository="PYPI"
                    ),
                ),
            },
        )
        dockerhub = self._mirror_repository(
            name,
            args,
            "dockerhub",
            {
                "format": "DOCKER",
                "mode": "REMOTE_REPOSITORY",
                "remote_repository_config": remote(
                    description="Docker Hub",
                    docker_repository=ar.RepositoryRemoteRepositoryConfigDockerRepositoryArgs(
                        public_repository="DOCKER_HUB"
                    ),
                ),
            },
        )
        upstream = ar.RepositoryVirtualRepositoryConfigUpstreamPolicyArgs
        # A greater priority is pulled first: the stack's own images shadow Docker Hub's.
        self.virtual = self._mirror_repository(
            name,
            args,
            "all",
            {
                "format": "DOCKER",
                "mode": "VIRTUAL_REPOSITORY",
                "virtual_repository_config": ar.RepositoryVirtualRepositoryConfigArgs(
                    upstream_policies=[
                        upstream(id="trainer", repository=self.repository.id, priority=100),
                        upstream(id="dockerhub", repository=dockerhub.id, priority=10),
                    ]
                ),
            },
        )
        if args.vpc_sc:
            # Remote repositories inside a perimeter are refused their upstreams unless the
            # location allows it (`gcloud artifacts vpcsc-config allow`).
            ar.VpcscConfig(
                f"{name}-vpcsc-allow-upstreams",
                project=args.project,
                location=args.region,
                vpcsc_policy="ALLOW",
                opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
            )
        pulls = {"all": self.virtual, "dockerhub": dockerhub}
        self.grants += [
            ar.RepositoryIamMember(
                f"{name}-{repo}-{reader}-reader",
                project=args.project,
                location=args.region,
                repository=repository.name,
                role="roles/artifactregistry.reader",
                member=member,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for repo, repository in pulls.items()
            for reader, member in args.readers.items()
        ]
        self.grants += [
            ar.RepositoryIamMember(
                f"{name}-pypi-{reader}-reader",
                project=args.project,
                location=args.region,
                repository=self.pypi.name,
                role="roles/artifactregistry.reader",
                member=member,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for reader, member in args.package_readers.items()
        ]

    @property
    def python_index(self) -> pulumi.Output[str] | None:
        """The PyPI remote as pip's ``--index-url``: ``https://REGION-python.pkg.dev/P/R/simple/``."""
        if self.pypi is None:
            return None
        repo = self.pypi
        return pulumi.Output.all(repo.location, repo.project, repo.repository_id).apply(
            lambda p: f"https://{p[0]}-python.pkg.dev/{p[1]}/{p[2]}/simple/"
        )

    @property
    def docker_mirror(self) -> pulumi.Output[str] | None:
        """The virtual repository's host path: the stack's images, then Docker Hub's."""
        if self.virtual is None:
            return None
        repo = self.virtual
        return pulumi.Output.all(repo.location, repo.project, repo.repository_id).apply(
            lambda p: f"{p[0]}-docker.pkg.dev/{p[1]}/{p[2]}"
        )

    @property
    def host_path(self) -> pulumi.Output[str]:
        """``REGION-docker.pkg.dev/PROJECT/REPO``, what image URIs start with."""
        repo = self.repository
        return pulumi.Output.all(repo.location, repo.project, repo.repository_id).apply(
            lambda p: f"{p[0]}-docker.pkg.dev/{p[1]}/{p[2]}"
        )
