"""Checks on persistent resources (warm pools): VMs that stay up, billed by the hour whether a job
runs on them or not, and that run the team's jobs with the stack's data (docs/vertex-facts.md,
"Persistent resources"). A platform team wants four things of them:

- on the stack's own network: a resource that names neither a network nor a PSC interface runs
  its jobs in Google's tenant network, out of reach of the stack's firewall, DNS logging and
  closed egress, while the jobs still read the stack's buckets and secrets;
- a ceiling on each pool's VMs (``infra.config.MAX_WARM_POOL_REPLICAS``): jobs on a resource are
  not charged separately, so nothing else caps what an idle pool costs;
- the labels the rest of the stack carries (team, cost-center...): the billing export shows the
  resource, never its jobs, so its own labels are all a cost report can attribute it by;
- in prod, a customer-managed key, as every other Vertex resource there has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infra.config import MAX_WARM_POOL_REPLICAS
from infra.policy.labels import takes_labels
from infra.policy.rule_types import RuleContext, StackResource
from infra.policy.values import UNKNOWN, known

PERSISTENT_RESOURCE = "gcp:vertex/aiPersistentResource:AiPersistentResource"


def warm_pool_private(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    """Joined to a network the stack controls: the peered VPC (``network``) or a PSC interface
    (``pscInterfaceConfig.networkAttachment``), the two ways the stack's jobs are."""
    if resource_type != PERSISTENT_RESOURCE:
        return []
    network = props.get("network")
    psc = props.get("pscInterfaceConfig")
    attachment = psc.get("networkAttachment") if isinstance(psc, Mapping) else psc
    if network == UNKNOWN or attachment == UNKNOWN or network or attachment:
        return []
    return [
        "neither network nor pscInterfaceConfig.networkAttachment: its jobs would run in "
        "Google's network, outside the stack's firewall and egress rules"
    ]


def _pool_size(pool: Mapping[str, Any]) -> Any:
    """The most VMs a pool may hold: its autoscaling maximum, else its replica count."""
    scaling = pool.get("autoscalingSpec")
    if isinstance(scaling, Mapping) and scaling.get("maxReplicaCount") is not None:
        return scaling["maxReplicaCount"]
    return pool.get("replicaCount", 1)


def warm_pool_replica_ceiling(
    resource_type: str, props: Mapping[str, Any], _: RuleContext
) -> list[str]:
    if resource_type != PERSISTENT_RESOURCE:
        return []
    pools = props.get("resourcePools")
    if not isinstance(pools, list):
        return []
    found = []
    for index, pool in enumerate(pools):
        if not isinstance(pool, Mapping):
            continue
        size = _pool_size(pool)
        if known(size) and isinstance(size, int | float) and size > MAX_WARM_POOL_REPLICAS:
            name = pool.get("id") or f"resourcePools[{index}]"
            found.append(
                f"pool {name} may hold {int(size)} VMs, over the ceiling of "
                f"{MAX_WARM_POOL_REPLICAS}: each is billed by the hour, busy or idle"
            )
    return found


def _effective_labels(resource: StackResource, ctx: RuleContext) -> dict[str, Any] | None:
    """The labels GCP would set (the provider's defaults merged in); None when unknown."""
    labels = resource.props.get("labels")
    if labels == UNKNOWN:
        return None
    return {**ctx.default_labels, **(labels if isinstance(labels, Mapping) else {})}


def warm_pool_labels(
    resources: Sequence[StackResource], ctx: RuleContext
) -> list[tuple[str, str | None]]:
    """Each persistent resource carries every label key that all the stack's other labelled
    resources carry (and the required ones): it is billed as itself, never through its jobs."""
    warm = [r for r in resources if r.type == PERSISTENT_RESOURCE]
    if not warm:
        return []
    others = [
        labels
        for r in resources
        if r.type != PERSISTENT_RESOURCE and takes_labels(r.type)
        if (labels := _effective_labels(r, ctx)) is not None
    ]
    shared = set.intersection(*(set(labels) for labels in others)) if others else set()
    wanted = shared | set(ctx.required_labels)
    found = []
    for resource in warm:
        labels = _effective_labels(resource, ctx)
        if labels is None:
            continue
        missing = sorted(wanted - set(labels))
        if missing:
            found.append(
                (
                    f"persistent resource {resource.name} lacks the labels {', '.join(missing)} "
                    "that the rest of the stack carries: its hours, billed busy or idle, "
                    "could not be attributed",
                    resource.urn,
                )
            )
    return found


def warm_pool_cmek(resource_type: str, props: Mapping[str, Any], _: RuleContext) -> list[str]:
    if resource_type != PERSISTENT_RESOURCE:
        return []
    spec = props.get("encryptionSpec")
    if spec == UNKNOWN or (isinstance(spec, Mapping) and spec.get("kmsKeyName")):
        return []
    return ["no encryptionSpec.kmsKeyName: its VMs' disks are encrypted with Google-managed keys"]
