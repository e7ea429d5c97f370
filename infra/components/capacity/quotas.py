"""Vertex custom-training GPU quota requests as Cloud Quotas ``QuotaPreference`` resources.

The accelerator → metric → quota id facts are data, shared with the launcher
(``jobs/core/catalog/accelerators.yaml``, see ``Accelerator.cloud_quota_id``). The quota ids are
UNCONFIRMED (they are not the metric names and Google does not document them
for Vertex GPUs; ``gcloud quotas info list --service=aiplatform.googleapis.com`` shows them):
each request may override its id with ``quota_id:`` in ``vtx:platform.quotas[]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.config import QUOTA_SERVICE, QuotaRequest, quota_accelerators


@dataclass(frozen=True)
class QuotaTarget:
    """What one request asks Cloud Quotas for."""

    service: str
    metric: str
    quota_id: str
    region: str
    preferred_value: int
    spot: bool
    accelerator: str

    @property
    def preference_id(self) -> str:
        """Stable id of the preference: one per (accelerator, spot, region)."""
        kind = "spot" if self.spot else "ondemand"
        return f"vtx-{self.accelerator.lower().replace('_', '-')}-{kind}-{self.region}"


def quota_target(request: QuotaRequest, default_region: str) -> QuotaTarget:
    """Resolve a request against the catalog; an explicit ``quota_id`` wins over the table."""
    accelerator = quota_accelerators()[request.accelerator]
    quota_id = request.quota_id or accelerator.cloud_quota_id(preemptible=request.spot)
    assert quota_id is not None  # quota_accelerators() only holds accelerators with an id
    return QuotaTarget(
        service=QUOTA_SERVICE,
        metric=accelerator.metric(preemptible=request.spot),
        quota_id=quota_id,
        region=request.region or default_region,
        preferred_value=request.count,
        spot=request.spot,
        accelerator=request.accelerator,
    )


@dataclass(frozen=True)
class QuotasArgs:
    project: str
    targets: list[QuotaTarget]
    contact_email: str | None
    environment: str
    apis: list[pulumi.Resource]


class Quotas(pulumi.ComponentResource):
    preferences: list[gcp.cloudquota.SQuotaPreference]

    def __init__(self, name: str, args: QuotasArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("vtx:platform:Quotas", name, None, opts)
        self.preferences = [
            gcp.cloudquota.SQuotaPreference(
                f"{name}-{target.preference_id}",
                parent=f"projects/{args.project}",
                name=target.preference_id,
                service=target.service,
                quota_id=target.quota_id,
                dimensions={"region": target.region},
                # The API takes the value as a string (int64 in JSON).
                quota_config=gcp.cloudquota.SQuotaPreferenceQuotaConfigArgs(
                    preferred_value=str(target.preferred_value)
                ),
                justification=(
                    f"vtx {args.environment}: Vertex AI custom training on "
                    f"{target.accelerator} ({'Spot' if target.spot else 'on-demand'}), "
                    f"metric {target.metric}"
                ),
                contact_email=args.contact_email,
                opts=pulumi.ResourceOptions(parent=self, depends_on=args.apis),
            )
            for target in args.targets
        ]
        self.register_outputs({"count": len(self.preferences)})
