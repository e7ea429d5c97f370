"""A Mermaid flowchart of the platform: key resources grouped by component, IAM grants as edges.

Mermaid because GitHub renders it inside a PR comment, where the review is read. Only resources a
reviewer reasons about get a node (networks, buckets, accounts, secrets, registry...); an edge is
drawn for each IAM grant whose target is on the diagram (or is the project), from the account
that receives it; principals that are not the stack's accounts (Google service agents, the CI
identity pool) get a node of their own in an "external principals" group.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from infra.policy.values import UNKNOWN
from infra.review.rows import IamRow
from infra.review.sources import ReviewResource

# type token -> (Mermaid shape open, close, what to call it)
_SHAPES: dict[str, tuple[str, str, str]] = {
    "gcp:compute/network:Network": ("[", "]", "VPC"),
    "gcp:compute/subnetwork:Subnetwork": ("[", "]", "subnet"),
    "gcp:compute/routerNat:RouterNat": ("[", "]", "Cloud NAT"),
    "gcp:compute/networkAttachment:NetworkAttachment": ("[", "]", "PSC network attachment"),
    "gcp:servicenetworking/connection:Connection": ("[", "]", "VPC peering"),
    "gcp:storage/bucket:Bucket": ("[(", ")]", "bucket"),
    "gcp:serviceaccount/account:Account": ("([", "])", "service account"),
    "gcp:secretmanager/secret:Secret": ("{{", "}}", "secret"),
    "gcp:artifactregistry/repository:Repository": ("[/", "/]", "registry"),
    "gcp:vertex/aiTensorboard:AiTensorboard": ("[", "]", "TensorBoard"),
    "gcp:kms/cryptoKey:CryptoKey": ("[", "]", "KMS key"),
    "gcp:billing/budget:Budget": ("[", "]", "budget"),
}
_ID_KEYS = ("name", "id", "secretId", "accountId", "email", "repositoryId", "selfLink", "bucket")
_NAME_KEYS = ("name", "accountId", "secretId", "repositoryId", "displayName")
_PROJECT_NODE = "project"
# IamRow.resource_kind (the input naming a grant's target) -> the type of that target.
_TARGET_TYPES = {
    "bucket": "gcp:storage/bucket:Bucket",
    "secretId": "gcp:secretmanager/secret:Secret",
    "serviceAccountId": "gcp:serviceaccount/account:Account",
    "cryptoKeyId": "gcp:kms/cryptoKey:CryptoKey",
    "repository": "gcp:artifactregistry/repository:Repository",
    "subnetwork": "gcp:compute/subnetwork:Subnetwork",
}


def _label(text: str) -> str:
    return '"' + text.replace('"', "#quot;") + '"'


def display_name(resource: ReviewResource) -> str:
    """The name GCP will show (the ``name``-like input), else the Pulumi logical name."""
    for key in _NAME_KEYS:
        value = resource.inputs.get(key)
        if isinstance(value, str) and value and value != UNKNOWN:
            return value
    return resource.name


def _identifiers(resource: ReviewResource) -> set[str]:
    found = {resource.name}
    for props in (resource.inputs, resource.outputs):
        for key in _ID_KEYS:
            value = props.get(key) if isinstance(props, Mapping) else None
            if isinstance(value, str) and value and value != UNKNOWN:
                found.add(value)
    return found


def _bare(value: str) -> str:
    """``serviceAccount:x@y`` and ``projects/P/serviceAccounts/x@y`` -> ``x@y``."""
    if value.startswith(("serviceAccount:", "user:", "group:")):
        value = value.split(":", 1)[1]
    return value.rsplit("/", 1)[-1]


def _matches(value: str, identifiers: set[str]) -> bool:
    bare = _bare(value)
    if bare in identifiers or any(value.endswith("/" + ident) for ident in identifiers):
        return True
    # A service account is often named by its account id before its email is known.
    return "@" in bare and bare.split("@", 1)[0] in identifiers


def external_label(principal: str) -> str:
    """A short, recognisable name for a principal outside the stack."""
    if principal.startswith("principalSet://") or principal.startswith("principal://"):
        pool = principal.split("/workloadIdentityPools/", 1)[-1].split("/", 1)[0]
        return f"workload identity pool {pool}"
    bare = _bare(principal)
    if bare.startswith("service-") and "@" in bare:
        return bare.split("@", 1)[1].split(".", 1)[0] + " service agent"
    return bare


def mermaid(resources: Sequence[ReviewResource], iam: Sequence[IamRow]) -> str:
    nodes = [r for r in resources if r.type in _SHAPES]
    ids = {r.urn: f"n{index}" for index, r in enumerate(nodes)}
    identifiers = {r.urn: _identifiers(r) for r in nodes}
    accounts = [r for r in nodes if r.type == "gcp:serviceaccount/account:Account"]
    externals: dict[str, str] = {}
    edges: dict[tuple[str, str], set[str]] = defaultdict(set)
    for row in iam:
        if row.project_wide:
            target_id = _PROJECT_NODE
        else:
            target = next(
                (
                    n
                    for n in nodes
                    if n.type == _TARGET_TYPES.get(row.resource_kind)
                    and _matches(row.resource, identifiers[n.urn])
                ),
                None,
            )
            if target is None:
                continue
            target_id = ids[target.urn]
        source = next((a for a in accounts if _matches(row.principal, identifiers[a.urn])), None)
        if source is not None:
            source_id = ids[source.urn]
        else:
            label = external_label(row.principal)
            source_id = externals.setdefault(label, f"x{len(externals)}")
        edges[(source_id, target_id)].add(row.role.removeprefix("roles/"))

    by_component: dict[str, list[ReviewResource]] = defaultdict(list)
    for r in nodes:
        by_component[r.component].append(r)
    lines = ["flowchart LR"]
    for group, (component, members) in enumerate(sorted(by_component.items())):
        lines.append(f"  subgraph g{group}[{_label(component)}]")
        for r in members:
            opening, closing, kind = _SHAPES[r.type]
            lines.append(
                f"    {ids[r.urn]}{opening}{_label(f'{kind}: {display_name(r)}')}{closing}"
            )
        lines.append("  end")
    if externals:
        lines.append(f"  subgraph gx[{_label('external principals')}]")
        lines += [f"    {node}>{_label(label)}]" for label, node in externals.items()]
        lines.append("  end")
    if any(target == _PROJECT_NODE for _, target in edges):
        lines.append(f"  {_PROJECT_NODE}[{_label('project (project-wide grants)')}]")
    for (source_id, target_id), roles in sorted(edges.items()):
        lines.append(f"  {source_id} -->|{_label(', '.join(sorted(roles)))}| {target_id}")
    return "\n".join(lines)
