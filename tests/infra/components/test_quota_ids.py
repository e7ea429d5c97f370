"""The launch preflight (jobs/quota/cloud_quotas.py) and infra's quota preferences
(infra/components/capacity/quotas.py) name the same things: the stanza the preflight tells a user
to add to ``vtx:platform.quotas`` makes infra create the very preference, metric and quota id the
preflight named."""

from __future__ import annotations

import pytest
import yaml

from infra.components.capacity.quotas import quota_target
from infra.config import QuotaRequest, quota_accelerators
from jobs.core.catalog import load_catalog
from jobs.quota.cloud_quotas import QuotaLimit, catalog_quota_ids, compare

CASES = [
    (accelerator, spot, region)
    for accelerator in sorted(quota_accelerators())
    for spot in (False, True)
    for region in ("us-central1", "europe-west4")
]


@pytest.mark.parametrize(("accelerator", "spot", "region"), CASES)
def test_the_preflights_preference_is_the_one_infra_creates(
    accelerator: str, spot: bool, region: str
) -> None:
    cat = load_catalog()
    metric = cat.accelerators[accelerator].metric(preemptible=spot)
    expected_id = catalog_quota_ids(cat)[metric]
    limits = {metric: QuotaLimit(metric, expected_id, region, 0)}
    (over,) = compare({metric: 4}, limits, {}, region, cat).over_limit
    assert over.preference is not None
    request = QuotaRequest.model_validate(yaml.safe_load(over.preference.stanza))
    target = quota_target(request, default_region="asia-southeast1")
    assert target.preference_id == over.preference.preference_id
    assert (target.metric, target.quota_id, target.region) == (metric, expected_id, region)
    assert (target.spot, target.preferred_value) == (spot, 4)


def test_a_quota_id_the_api_reports_otherwise_reaches_infra_through_the_stanza() -> None:
    cat = load_catalog()
    metric = cat.accelerators["NVIDIA_L4"].metric(preemptible=True)
    limits = {metric: QuotaLimit(metric, "CustomModelTrainingPreemptibleL4Gpus", "us-east4", 2)}
    (over,) = compare({metric: 3}, limits, {}, "us-east4", cat).over_limit
    assert over.preference is not None
    target = quota_target(
        QuotaRequest.model_validate(yaml.safe_load(over.preference.stanza)), "us-central1"
    )
    assert target.quota_id == "CustomModelTrainingPreemptibleL4Gpus"
    assert target.preference_id == over.preference.preference_id == "vtx-nvidia-l4-spot-us-east4"
