"""The Cloud Quotas API's read shape (v1 ``QuotaInfo``) for Vertex's training quotas, from the
local platform's capacity model, so a quota client can read limits offline.

Fields as Google's reference names them
(https://cloud.google.com/docs/quotas/reference/rest/v1/projects.locations.services.quotaInfos):
``name`` (``projects/P/locations/global/services/S/quotaInfos/ID``), ``quotaId``, ``metric``,
``service``, ``isPrecise``, ``containerType``, ``dimensions``, ``metricDisplayName``,
``quotaDisplayName``, ``metricUnit`` and ``dimensionsInfos[{dimensions, details{value},
applicableLocations}]``, where ``value`` is an int64 and so a JSON string. GPU quota ids are the
catalog's (``Accelerator.cloud_quota_id``, which infra's QuotaPreferences name too); a metric
without a catalog id (CPUs, TPUs) gets one by the same convention, from its metric name.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.core.catalog import QUOTA_PREFIX, Catalog, load_catalog
from jobs.local.platform.capacity import QUOTA_SERVICE, UNLIMITED_QUOTA, Capacity, RegionCapacity


@dataclass(frozen=True)
class Quota:
    quota_id: str
    metric: str
    display: str
    """e.g. 'Custom model training preemptible NVIDIA_L4 GPUs'."""


def _id_from_metric(metric: str) -> str:
    """``.../custom_model_training_cpus`` -> ``CustomModelTrainingCpusPerProjectPerRegion``:
    the convention ``Accelerator.cloud_quota_id`` derives GPU ids with."""
    words = [*metric.removeprefix(QUOTA_PREFIX).split("_"), "per", "project", "per", "region"]
    return "".join(word.capitalize() for word in words)


def quotas(cat: Catalog | None = None) -> list[Quota]:
    """Every Vertex training quota the catalog names, GPUs (on-demand then preemptible), TPUs
    and CPUs, one per metric."""
    cat = cat or load_catalog()
    found: dict[str, Quota] = {}
    for acc in cat.accelerators.values():
        unit = "GPUs" if acc.kind == "gpu" else "TPU chips"
        for preemptible in (False, True):
            metric = acc.metric(preemptible)
            quota_id = acc.cloud_quota_id(preemptible) or _id_from_metric(metric)
            kind = "preemptible " if preemptible else ""
            display = f"Custom model training {kind}{acc.name} {unit}"
            found.setdefault(metric, Quota(quota_id, metric, display))
    for machine in cat.machines.values():
        metric = machine.cpu_quota_metric
        cpus = Quota(_id_from_metric(metric), metric, "Custom model training CPUs")
        found.setdefault(metric, cpus)
    return list(found.values())


def quota_info(quota: Quota, capacity: Capacity, project_number: str, cat: Catalog) -> dict:
    """One QuotaInfo: a dimensionsInfo per region of the catalog, with the limit set there (or
    UNLIMITED_QUOTA)."""
    infos = []
    for region in cat.regions:
        limit = capacity.regions.get(region, RegionCapacity()).quotas.get(quota.metric)
        value = UNLIMITED_QUOTA if limit is None else limit
        infos.append(
            {
                "dimensions": {"region": region},
                "details": {"value": str(value)},
                "applicableLocations": [region],
            }
        )
    parent = f"projects/{project_number}/locations/global/services/{QUOTA_SERVICE}"
    return {
        "name": f"{parent}/quotaInfos/{quota.quota_id}",
        "quotaId": quota.quota_id,
        "metric": quota.metric,
        "service": QUOTA_SERVICE,
        "isPrecise": True,
        "containerType": "PROJECT",
        "dimensions": ["region"],
        "metricDisplayName": quota.display,
        "quotaDisplayName": f"{quota.display} per region",
        "metricUnit": "1",
        "dimensionsInfos": infos,
    }


def quota_infos(capacity: Capacity, project_number: str) -> list[dict]:
    cat = load_catalog()
    return [quota_info(q, capacity, project_number, cat) for q in quotas(cat)]
