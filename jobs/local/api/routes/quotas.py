"""The Cloud Quotas API's reads (v1 quotaInfos list and get) for Vertex's service, from the
capacity model."""

from __future__ import annotations

from fastapi import FastAPI, Query

from jobs.local.api.api_errors import ApiError
from jobs.local.api.job_requests import check_project
from jobs.local.custom_jobs.executor import Executor
from jobs.local.platform.capacity import QUOTA_SERVICE
from jobs.local.platform.quota_infos import quota_infos


def add_quota_routes(app: FastAPI, executor: Executor) -> None:
    """The Cloud Quotas API's reads (v1 quotaInfos list and get) for Vertex's service, from the
    capacity model; like the JobService routes they take no token (a quota client sends none
    here)."""
    base = "/v1/projects/{project}/locations/{location}/services/{service}/quotaInfos"

    def infos(project: str, location: str, service: str) -> list[dict]:
        number = check_project(project)
        if location != "global":
            raise ApiError(400, f"location {location!r}: quotaInfos live under locations/global")
        if service != QUOTA_SERVICE:
            raise ApiError(404, f"service {service!r} is not served here: only {QUOTA_SERVICE}")
        return quota_infos(executor.capacity, number)

    @app.get(base)
    def list_quota_infos(
        project: str,
        location: str,
        service: str,
        pageSize: int = Query(0, ge=0, le=2**31 - 1),
        pageToken: str = "",
    ) -> dict:
        found = infos(project, location, service)
        if pageToken and not (pageToken.isdigit() and int(pageToken) < len(found)):
            raise ApiError(400, f"invalid pageToken {pageToken!r}: pass the nextPageToken given")
        start = int(pageToken or 0)
        end = start + pageSize if pageSize else len(found)
        return {
            "quotaInfos": found[start:end],
            "nextPageToken": str(end) if end < len(found) else "",
        }

    @app.get(base + "/{quota_id}")
    def get_quota_info(project: str, location: str, service: str, quota_id: str) -> dict:
        for info in infos(project, location, service):
            if info["quotaId"] == quota_id:
                return info
        raise ApiError(404, f"QuotaInfo {quota_id!r} of {service} does not exist")
